"""cuda_repo: the exact version asked for, fabric manager at the same version, no other branch, held."""
import os

import pytest

# The stand-in mirror on the port of this Molecule lane (tests/mirror/serve.yml, tools/run.sh).
MIRROR = "127.0.0.1:%s" % (os.environ.get("GPUFLEET_MIRROR_PORT") or "18535")

VERSION = "535.161.08-1"


@pytest.mark.parametrize("name", ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535"])
def test_exact_version_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["cuda-drivers", "cuda-drivers-550", "nvidia-utils-550", "nvidia-driver-pinning-595"])
def test_other_branches_not_installed(host, name):
    assert not host.package(name).is_installed


def test_newer_branch_blocked_by_preferences(host):
    policy = host.check_output("apt-cache policy cuda-drivers-550 cuda-drivers")
    assert "Candidate: (none)" in policy


def test_one_signed_source(host):
    source = host.file("/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-cuda.gpg" in source
    assert "URIs: http://%s/cuda/ubuntu2204/x86_64/" % MIRROR in source
    listing = host.check_output("grep -rl %s /etc/apt/sources.list.d" % MIRROR)
    assert listing.splitlines() == ["/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"]
    assert host.file("/etc/apt/keyrings/gpufleet-nvidia-cuda.gpg").mode == 0o644


def test_hold_survives_upgrade_even_without_the_pin(host):
    """A newer 535 build is in the mirror; only the hold keeps apt upgrade from taking it."""
    prefs = "/etc/apt/preferences.d/gpufleet-nvidia-driver"
    host.run_expect([0], "mv %s /root/prefs.away" % prefs)
    try:
        host.run_expect([0], "apt-get -q update && DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade")
        assert host.package("cuda-drivers-535").version == VERSION
        assert host.package("nvidia-fabricmanager-535").version == VERSION
    finally:
        host.run_expect([0], "mv /root/prefs.away %s && apt-get -q update" % prefs)
