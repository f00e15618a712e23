"""Switching branch is a supported transition: the old packages and holds go, the new branch is pinned and held.

Runs last (file name) because it changes the node: it applies the role again with branch 550 through
switch-branch.yml, on the inventory Molecule made.
"""
import os
import pathlib
import subprocess

import pytest

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "switch-branch.yml"


@pytest.fixture(scope="module")
def switched():
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK)],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    return result


@pytest.mark.parametrize("name", ["cuda-drivers-550", "nvidia-fabricmanager-550", "libnvidia-nscq-550"])
def test_new_branch_installed_and_held(host, switched, name):
    assert host.package(name).version == "550.54.15-1"
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535", "nvidia-utils-535"])
def test_old_branch_removed(host, switched, name):
    assert not host.package(name).is_installed


def test_pin_follows_the_branch(host, switched):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: version 550.*" in prefs
    assert "Candidate: (none)" in host.check_output("apt-cache policy cuda-drivers-535")


def test_record_follows_the_branch(host, switched):
    assert '"branch": "550"' in host.file("/etc/gpufleet/nvidia-driver.json").content_string
