"""Ubuntu 22.04 with NVIDIA's repository's ubuntu2204 path (stand-in mirror) and Ubuntu's archive (real)."""
import json
import re

import pytest


def upstream(version):
    return version.split("-", 1)[0]


@pytest.mark.parametrize("name", ["cuda-drivers-580", "nvidia-utils-580", "libnvidia-compute-580",
                                  "nvidia-fabricmanager", "libnvidia-nscq"])
def test_branch_580_from_nvidia_repository_held(host, name):
    package = host.package(name)
    assert package.is_installed and package.version.startswith("580.")
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_fabric_manager_and_nscq_at_the_driver_upstream_version(host):
    driver = upstream(host.package("cuda-drivers-580").version)
    assert upstream(host.package("nvidia-fabricmanager").version) == driver
    assert upstream(host.package("libnvidia-nscq").version) == driver
    assert host.service("nvidia-fabricmanager").is_enabled


def test_preferences_keep_the_archive_builds_out(host):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: release o=Ubuntu" in prefs and "Pin: version 580.*" in prefs
    policy = host.check_output("apt-cache policy nvidia-utils-580")
    assert re.search(r"\*\*\* 580\.65\.06\S* 1001", policy), policy
    # Any build of the archive the node's sources list (Canonical's 580.x in jammy-updates, where the mirror
    # carries it; the snapshot holds only the packages the tests install) is pinned out.
    others = re.findall(r"^\s+(?:\*\*\* )?(\S+) (-?\d+)$", policy, re.MULTILINE)
    assert all(priority == "-1" for version, priority in others if not version.startswith("580.65.06")), policy


def test_cuda_12_1_and_nccl_for_it(host):
    assert "V12.1.105" in host.check_output("/usr/local/cuda-12.1/bin/nvcc --version")
    assert host.package("libnccl2").version.endswith("+cuda12.1")


def test_persistence_mode_on_with_nvidia_packages(host):
    exec_start = host.check_output("systemctl show -p ExecStart nvidia-persistenced.service")
    assert "--no-persistence-mode" not in exec_start


def test_pytorch_on_python_3_11(host):
    out = host.check_output("/opt/gpufleet/pytorch/bin/python -c 'import sys, torch; print(sys.version_info[:2], torch.__version__)'")
    assert out.startswith("(3, 11)") and "2.13.0" in out
    assert host.package("python3.11-venv").is_installed


def test_record(host):
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["source"] == "cuda_repo" and record["branch"] == "580"
