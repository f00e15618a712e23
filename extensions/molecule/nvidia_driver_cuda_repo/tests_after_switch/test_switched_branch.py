"""Switching branch is a supported transition, here across NVIDIA's renaming: from 535's branch-named packages
to 595's names without the branch (NVIDIA Driver Installation Guide, "Ubuntu 590 and later packages"), locked to
the branch by NVIDIA's pinning package nvidia-driver-pinning-595 ("Version locking packages for Ubuntu / Debian")
and by the role's pin; the old packages and holds go.

The second verify of the scenario (molecule.yml's test_sequence: `verify tests_after_switch`), after the
side_effect switch-branch.yml applied the role again with branch 595.
"""
import pytest

NEWEST_595 = "595.91.07-1ubuntu1"   # the mirror also serves 595.71.05 and 590.48.01 (tests/mirror/packages.json)


@pytest.mark.parametrize("name", ["libnvidia-compute", "cuda-drivers", "nvidia-utils", "nvidia-fabricmanager",
                                  "libnvidia-nscq"])
def test_new_branch_installed_by_its_unversioned_names_and_held(host, name):
    assert host.package(name).version == NEWEST_595
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_the_pinning_package_of_the_branch_is_installed_and_held(host):
    assert host.package("nvidia-driver-pinning-595").is_installed
    assert host.check_output("dpkg-query -W -f '${Status}' nvidia-driver-pinning-595").startswith("hold ")
    assert host.file("/etc/apt/preferences.d/nvidia-driver-pinning-595").exists


@pytest.mark.parametrize("name", ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535",
                                  "nvidia-utils-535", "libnvidia-compute-535",
                                  # pulled in by 535's metapackages, named for the branch: the change removes them
                                  "nvidia-dkms-535", "nvidia-kernel-common-535", "nvidia-kernel-source-535"])
def test_old_branch_removed(host, name):
    assert not host.package(name).is_installed


def test_pin_follows_the_branch(host):
    prefs = host.file("/etc/apt/preferences.d/gpufleet-nvidia-driver").content_string
    assert "Pin: version 595.*" in prefs
    assert "Candidate: (none)" in host.check_output("apt-cache policy cuda-drivers-535")


def test_apt_cannot_move_to_another_branch(host):
    """The candidate stays in the branch, another branch's pinning package cannot be installed, and an upgrade
    with the holds released still moves nothing (the pins alone keep the branch)."""
    policy = host.check_output("apt-cache policy cuda-drivers")
    assert "Candidate: %s" % NEWEST_595 in policy
    refused = host.run("apt-get -s install nvidia-driver-pinning-590")
    assert refused.rc != 0 and "nvidia-driver-pinning-590" in refused.stderr + refused.stdout
    held = host.check_output("apt-mark showhold").split()
    host.run_expect([0], "apt-mark unhold %s" % " ".join(held))
    try:
        upgrade = host.check_output("apt-get -s dist-upgrade")
        moved = [line for line in upgrade.splitlines()
                 if line.startswith(("Inst ", "Remv ")) and ("nvidia" in line.split()[1] or "cuda" in line.split()[1])]
        assert not moved, upgrade
    finally:
        host.run_expect([0], "apt-mark hold %s" % " ".join(held))


def test_record_follows_the_branch(host):
    record = host.file("/etc/gpufleet/nvidia-driver.json").content_string
    assert '"branch": "595"' in record and '"version": "%s"' % NEWEST_595 in record
