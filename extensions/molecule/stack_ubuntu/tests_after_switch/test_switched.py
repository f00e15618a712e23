"""After the switch from 580 to 535 (NVIDIA's repository): the new branch installed first, fabric manager named
for the branch again (nvidia-fabricmanager-535 conflicts with the unversioned nvidia-fabricmanager: both
provide and conflict with nvidia-fabricmanager, NVIDIA/apt-packaging-fabric-manager), holds moved."""
import json

import pytest


@pytest.mark.parametrize("name", ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535"])
def test_branch_535_installed_and_held(host, name):
    assert host.package(name).is_installed and host.package(name).version.startswith("535.")
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["cuda-drivers-580", "nvidia-fabricmanager", "libnvidia-nscq", "nvidia-utils-580"])
def test_branch_580_gone(host, name):
    assert not host.package(name).is_installed


def test_no_hold_left_on_removed_packages(host):
    held = host.check_output("apt-mark showhold").split()
    assert not [name for name in held if "580" in name or name in ("nvidia-fabricmanager", "libnvidia-nscq")]


def test_record(host):
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["branch"] == "535" and record["source"] == "cuda_repo"
