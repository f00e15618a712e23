"""nccl: the newest build for CUDA 12.4 (not the older 2.20.5 one, nor the newer +cuda12.6 build), held;
/etc/nccl.conf; the repository shared with cuda as one signed entry; nccl-tests built from the stand-in of
GitHub's tag tarball (which unpacks into nccl-tests-2.13.9/) in a directory named after the tarball."""
import os

import pytest

# The stand-in mirror on the port of this Molecule lane (tests/mirror/serve.yml, tools/run.sh).
MIRROR = "127.0.0.1:%s" % (os.environ.get("GPUFLEET_MIRROR_PORT") or "18535")

VERSION = "2.21.5-1+cuda12.4"


@pytest.mark.parametrize("name", ["libnccl2", "libnccl-dev"])
def test_newest_build_for_12_4_and_held(host, name):
    assert host.package(name).version == VERSION
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_header_matches(host):
    header = host.file("/usr/include/nccl.h").content_string
    assert "#define NCCL_MINOR 21" in header and "#define NCCL_PATCH 5" in header


def test_builds_for_other_cuda_are_pinned_away(host):
    policy = host.check_output("apt-cache policy libnccl2")
    assert "2.22.3-1+cuda12.6 -1" in policy
    assert "Candidate: %s" % VERSION in policy


def test_nccl_conf(host):
    conf = host.file("/etc/nccl.conf")
    assert conf.mode == 0o644
    lines = [line for line in conf.content_string.splitlines() if not line.startswith("#")]
    assert lines == ["NCCL_IB_DISABLE=1", "NCCL_NVLS_ENABLE=0", "NCCL_SOCKET_IFNAME==lo"]


def test_one_signed_entry_for_the_repository(host):
    listing = host.check_output("grep -rl %s /etc/apt/sources.list.d" % MIRROR)
    assert listing.splitlines() == ["/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources"]
    source = host.file("/etc/apt/sources.list.d/gpufleet-nvidia-cuda.sources").content_string
    assert "Signed-By: /etc/apt/keyrings/gpufleet-nvidia-cuda.gpg" in source


def test_nccl_tests_built(host):
    assert host.file("/opt/gpufleet/nccl-tests/v2.13.9/Makefile").is_file
    assert not host.file("/opt/gpufleet/nccl-tests/nccl-tests-2.13.9").exists
    binary = host.file("/opt/gpufleet/nccl-tests/v2.13.9/build/all_reduce_perf")
    assert binary.is_file and binary.mode & 0o111
    assert "# Avg bus bandwidth" in host.check_output(binary.path + " -b 1M -e 1M -g 2")


def test_hold_survives_upgrade_even_without_the_pin(host):
    """Without the pin, 2.22.3+cuda12.6 is the newest libnccl2; only the hold keeps apt upgrade from taking it."""
    prefs = "/etc/apt/preferences.d/gpufleet-nccl"
    host.run_expect([0], "mv %s /root/nccl-prefs.away" % prefs)
    try:
        assert "Candidate: 2.22.3-1+cuda12.6" in host.check_output("apt-cache policy libnccl2")
        host.run_expect([0], "DEBIAN_FRONTEND=noninteractive apt-get -y -q upgrade")
        assert host.package("libnccl2").version == VERSION
        assert host.package("cuda-toolkit-12-4").version == "12.4.1-1"
    finally:
        host.run_expect([0], "mv /root/nccl-prefs.away %s" % prefs)
