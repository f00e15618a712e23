"""NVIDIA's four container toolkit packages at the pinned release (1.17.8-1, not the newer 1.17.9-1 the mirror
also has), held and kept from unattended-upgrades, from one deb822 source of the flat libnvidia-container path."""
import pytest

VERSION = "1.17.8-1"


@pytest.mark.parametrize("name", [
    "nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools", "libnvidia-container1"])
def test_pinned_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_newer_release_is_offered_but_not_installed(host):
    assert "1.17.9-1" in host.check_output("apt-cache policy nvidia-container-toolkit")


def test_one_signed_flat_source(host):
    source = host.file("/etc/apt/sources.list.d/gpufleet-nvidia-container-toolkit.sources").content_string
    assert "URIs: file:///srv/gpufleet-mirror/libnvidia-container/stable/deb/amd64/" in source
    assert "Suites: /" in source
    assert "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-container-toolkit.gpg" in source


def test_nvidias_own_list_line_gave_way_to_the_role_entry(host):
    # prepare.yml planted NVIDIA's guide's list line (its URI with apt's $(ARCH), another signed-by): the role found
    # it as the same repository and removed it, so apt has one entry and works.
    assert not host.file("/etc/apt/sources.list.d/nvidia-container-toolkit.list").exists
    policy = host.run("apt-cache policy nvidia-container-toolkit")
    assert policy.rc == 0 and "Conflicting values" not in policy.stderr, policy.stderr


def test_upgrade_guard(host):
    guard = host.file("/etc/apt/apt.conf.d/52gpufleet-nvidia-container-toolkit").content_string
    assert '"^nvidia\\-container\\-toolkit$";' in guard


def test_nvidia_ctk_reports_the_release(host):
    out = host.check_output("nvidia-ctk --version")
    assert out.splitlines()[0] == "NVIDIA Container Toolkit CLI version 1.17.8"
    assert out.splitlines()[1] == "commit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d"
