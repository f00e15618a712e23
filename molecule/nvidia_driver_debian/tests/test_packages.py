"""The real Debian 12 driver packages of branch 535 are installed, pinned and held."""
import pytest

PACKAGES = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]


@pytest.mark.parametrize("name", PACKAGES)
def test_installed_on_the_branch_and_held(host, name):
    package = host.package(name)
    assert package.is_installed
    assert package.version.startswith("535.")
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_nvidia_smi_is_the_real_one(host):
    assert "NVIDIA System Management Interface" in host.check_output("dpkg-query -W -f '${Description}' nvidia-smi") \
        or host.package("nvidia-smi").version.startswith("535.")
    assert host.file("/usr/bin/nvidia-smi").exists


def test_no_x_driver(host):
    assert not host.package("xserver-xorg-video-nvidia").is_installed


def test_branch_pinned(host):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: version 535.*" in prefs
    policy = host.check_output("apt-cache policy nvidia-smi")
    assert "1001" in policy


def test_held_package_survives_upgrade(host):
    before = host.package("nvidia-smi").version
    host.run_expect([0], "DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade")
    assert host.package("nvidia-smi").version == before


def test_sources_and_guard(host):
    assert "non-free" in host.file("/etc/apt/sources.list.d/debian.sources").content_string
    guard = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    assert '"^nvidia\\-smi$"' in guard or '"^nvidia\\\\-smi$"' in guard or "nvidia" in guard
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").content_string
