"""Ubuntu 22.04's real branch-580 packages (jammy-updates restricted; fabric manager from multiverse), installed
by the role: held as a whole branch, persistence mode on through a drop-in for Ubuntu's real unit."""
import json
import re

import pytest

NAMED = ["nvidia-headless-580-server", "nvidia-utils-580-server", "nvidia-fabricmanager-580", "libnvidia-nscq-580"]
# Pulled in by the metapackages, named for the branch: held too (only the named ones were before). (The
# firmware package carries the upstream version in its name, nvidia-firmware-580-server-580.178.04: the
# kernel-common package depends on exactly that one.)
DEPENDENCIES = ["libnvidia-compute-580-server", "nvidia-kernel-common-580-server", "nvidia-dkms-580-server",
                "nvidia-compute-utils-580-server", "nvidia-headless-no-dkms-580-server",
                "nvidia-kernel-source-580-server"]


def upstream(version):
    return version.split("-", 1)[0]


@pytest.mark.parametrize("name", NAMED + DEPENDENCIES)
def test_installed_on_the_branch_and_held(host, name):
    package = host.package(name)
    assert package.is_installed
    assert package.version.startswith("580.")
    assert "ubuntu" in package.version  # Canonical's build, not NVIDIA's
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_fabric_manager_at_the_driver_upstream_version(host):
    """Ubuntu builds it from its own source package (fabric-manager-580): compare upstream versions."""
    source = host.check_output("dpkg-query -W -f '${source:Package}' nvidia-fabricmanager-580")
    assert source == "fabric-manager-580"
    assert upstream(host.package("nvidia-fabricmanager-580").version) == upstream(host.package("nvidia-utils-580-server").version)


def test_nvidia_smi_is_the_real_binary(host):
    path = host.check_output("readlink -f /usr/bin/nvidia-smi")
    assert host.check_output("head -c 4 %s | od -An -c" % path).split() == ["177", "E", "L", "F"]


def test_ubuntu_unit_disables_persistence_and_the_drop_in_turns_it_on(host):
    packaged = host.file("/lib/systemd/system/nvidia-persistenced.service").content_string
    # The real unit as Ubuntu ships it: the reason for the drop-in.
    assert "--no-persistence-mode" in packaged and "StopWhenUnneeded=true" in packaged
    assert "[Install]" not in packaged
    exec_start = host.check_output("systemctl show -p ExecStart nvidia-persistenced.service")
    assert "/usr/bin/nvidia-persistenced" in exec_start and "--user nvidia-persistenced" in exec_start
    assert "--no-persistence-mode" not in exec_start
    assert host.check_output("systemctl show -p StopWhenUnneeded --value nvidia-persistenced.service") == "no"
    packaged_path = host.check_output("systemctl show -p FragmentPath --value nvidia-persistenced.service")
    assert packaged_path in ("/lib/systemd/system/nvidia-persistenced.service",
                             "/usr/lib/systemd/system/nvidia-persistenced.service")  # merged /usr
    wants = "/etc/systemd/system/multi-user.target.wants/nvidia-persistenced.service"
    assert host.file(wants).is_symlink and host.check_output("readlink %s" % wants) == packaged_path
    assert "multi-user.target" in host.check_output("systemctl show -p WantedBy --value nvidia-persistenced.service")


def test_preferences_pin_branch_and_origin(host):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: version 580.*" in prefs
    assert "Pin: release l=NVIDIA CUDA" in prefs
    assert "nvidia-headless-535-server" in prefs  # other branches forbidden
    policy = host.check_output("apt-cache policy nvidia-utils-580-server")
    assert re.search(r"\*\*\* 580\.\S+ 1001", policy)


def test_holds_survive_apt_upgrade(host):
    before = host.package("nvidia-utils-580-server").version
    host.run_expect([0], "DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade")
    assert host.package("nvidia-utils-580-server").version == before
    held = host.check_output("apt-mark showhold").split()
    assert set(NAMED + DEPENDENCIES) <= set(held)


def test_record(host):
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["source"] == "distro" and record["branch"] == "580"
    assert record["version"].startswith("580.") and "ubuntu" in record["version"]
    assert set(DEPENDENCIES) <= set(record["held"])


def test_gpu_facts_in_a_container(host):
    gpu = host.ansible("gpufleet.node.gpu_facts", check=False)["ansible_facts"]["gpu"]
    assert gpu["state"] == "driver_not_loaded", gpu["message"]
