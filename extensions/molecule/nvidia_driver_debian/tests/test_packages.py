"""The real Debian 12 driver packages of branch 535 are installed, pinned and held."""
import re

import pytest

PACKAGES = ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]


@pytest.mark.parametrize("name", PACKAGES)
def test_installed_on_the_branch_and_held(host, name):
    package = host.package(name)
    assert package.is_installed
    assert package.version.startswith("535.")
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_nvidia_smi_is_the_real_binary(host):
    path = host.check_output("readlink -f /usr/bin/nvidia-smi")
    assert host.check_output("head -c 4 %s | od -An -c" % path).split() == ["177", "E", "L", "F"]


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
    # Debian 12 as installed: one-line sources.list with "main non-free-firmware" (prepare.yml); contrib and
    # non-free are added as whole words (the old regular expression took non-free-firmware for non-free).
    sources = host.file("/etc/apt/sources.list").content_string
    entries = [line.split() for line in sources.splitlines() if line.startswith("deb ")]
    assert entries and all({"main", "contrib", "non-free", "non-free-firmware"} <= set(entry[3:]) for entry in entries)
    assert not host.file("/etc/apt/sources.list.d/debian.sources").exists
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    patterns = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    for name in PACKAGES:
        assert any(re.match(pattern, name) for pattern in patterns), name
    assert not any(re.match(pattern, "nvidia-smi-extra") for pattern in patterns if "smi" in pattern)
    assert "blacklist nouveau" in host.file("/etc/modprobe.d/gpufleet-blacklist-nouveau.conf").content_string
