"""Switching branch is a supported transition: the old packages and holds go, the new branch is pinned and held.

The second verify of the scenario (molecule.yml's test_sequence: `verify tests_after_switch`), after the
side_effect switch-branch.yml applied the role again with branch 550.
"""
import pytest


@pytest.mark.parametrize("name", ["cuda-drivers-550", "nvidia-fabricmanager-550", "libnvidia-nscq-550"])
def test_new_branch_installed_and_held(host, name):
    assert host.package(name).version == "550.54.15-1"
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535", "nvidia-utils-535"])
def test_old_branch_removed(host, name):
    assert not host.package(name).is_installed


def test_pin_follows_the_branch(host):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: version 550.*" in prefs
    assert "Candidate: (none)" in host.check_output("apt-cache policy cuda-drivers-535")


def test_record_follows_the_branch(host):
    assert '"branch": "550"' in host.file("/etc/gpufleet/nvidia-driver.json").content_string
