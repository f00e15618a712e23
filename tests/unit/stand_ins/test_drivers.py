"""The stand-in driver packages against NVIDIA's Ubuntu repository (ubuntu2204), and what the debian12 path keeps.

From branch 590 on NVIDIA's Ubuntu packages drop the branch from their names and a branch is locked by a pinning
package: test_590_and_later_without_the_branch_in_the_names and test_pinning_packages_lock_a_branch_or_a_release
name their sources.

Real artifacts and sources:

* Branch 535/550 on ubuntu2204: cuda-drivers-535 535.183.01-1 "Depends: libnvidia-common-535 (>= 535.183.01),
  libnvidia-compute-535 (>= 535.183.01), ..., nvidia-driver-535 (>= 535.183.01)" (github.com/dstackai/dstack
  pull 2355); the driver packages themselves at <version>-0ubuntu1 (nvidia-driver-535=535.183.01-0ubuntu1,
  nvidia-compute-utils-535, nvidia-utils-535, libnvidia-compute-535 ... in public install scripts; the dpkg
  listing of nvidia-driver-local-repo-ubuntu2204-550.54.15: cuda-drivers-550_550.54.15-1,
  nvidia-fabricmanager-550_550.54.15-1, libnvidia-nscq-550_550.54.15-1, the rest -0ubuntu1, and
  nvidia-driver-550's "Depends: ... (= 550.54.15-0ubuntu1)" on each package of the branch). Provides/Conflicts
  of the branch packages: Canonical's debian/templates/control.in (github.com/canonical/nvidia-graphics-drivers).
* Fabric manager up to 575: nvidia-fabricmanager-<branch> "Provides/Replaces/Conflicts: nvidia-fabricmanager"
  (github.com/NVIDIA/apt-packaging-fabric-manager, debian/templates/control.in), unit in /lib/systemd/system.
* Branch 580: "Package nvidia-fabricmanager-580 is a virtual package provided by: nvidia-fabricmanager
  580.65.06-1" (github.com/NVIDIA/gpu-driver-container pull 451, ubuntu22.04/precompiled/nvidia-driver, which
  from 580 installs nvidia-fabricmanager and libnvidia-nscq without the branch). Unconfirmed: that
  libnvidia-nscq provides libnvidia-nscq-580 (by analogy), and the revisions of cuda-drivers-580 and the 580
  driver packages (-0ubuntu1, as NVIDIA's 580 pin "Pin: version 580.65.06-0ubuntu1" for src:cuda-drivers in its
  documentation and an ubuntu2404 listing of cuda-drivers-580_580.65.06-0ubuntu1 suggest).
* debian12: NVIDIA's debian12 path names its driver packages as Debian does (nvidia-driver, nvidia-smi,
  libcuda1, ... at <version>-1, e.g. libnvidia-encode1_550.54.15-1 there) besides the branch-named
  cuda-drivers-<branch> (cuda-drivers-570_570.124.06-1) and nvidia-fabricmanager-<branch>
  (nvidia-fabricmanager-550_550.90.07-1), and its `nvidia-driver` starts at 545.23.06-1 (apt-cache policy in
  github.com/elFarto/nvidia-vaapi-driver/issues/312): branch 535 is probably not there. The mirror's debian12 path
  nevertheless keeps the Ubuntu-built 535, 550 and 580 packages, which the Debian scenarios (nvidia_driver_cuda_repo,
  cuda_nccl, fleet) and gpufleet.node.nvidia_driver's cuda_repo data need; packages.json and this test say so.
"""
import pytest

from .conftest import load_builder

SPEC = load_builder().load_spec()
UBUNTU = [d for d in SPEC["drivers"] if "ubuntu2204" in d["distributions"] and int(d["branch"]) < 590]


@pytest.mark.parametrize("driver", UBUNTU, ids=[d["version"] for d in UBUNTU])
def test_branch_packages_as_nvidia_builds_them_for_ubuntu(repositories, driver):
    repo = repositories["ubuntu2204"]
    branch, upstream = driver["branch"], driver["version"]
    own = upstream + "-0ubuntu1"
    for name in ("nvidia-driver", "nvidia-utils", "nvidia-compute-utils", "libnvidia-compute"):
        assert own in repo.versions("%s-%s" % (name, branch)), name
    depends = repo.field("nvidia-driver-" + branch, own, "Depends").split(", ")
    assert "nvidia-utils-%s (= %s)" % (branch, own) in depends
    assert "nvidia-compute-utils-%s (= %s)" % (branch, own) in depends
    meta = [v for v in repo.versions("cuda-drivers-" + branch) if v.startswith(upstream + "-")]
    assert meta == [upstream + ("-1" if int(branch) < 580 else "-0ubuntu1")]
    assert "nvidia-driver-%s (>= %s)" % (branch, upstream) in repo.field("cuda-drivers-" + branch, meta[0], "Depends")
    assert repo.field("nvidia-utils-" + branch, own, "Conflicts") == "nvidia-utils, nvidia-smi"


def test_fabric_manager_named_per_branch_until_580(repositories):
    repo = repositories["ubuntu2204"]
    for version in ("535.161.08-1", "535.183.01-1"):
        assert repo.field("nvidia-fabricmanager-535", version, "Provides") == "nvidia-fabricmanager"
        assert repo.field("nvidia-fabricmanager-535", version, "Conflicts") == "nvidia-fabricmanager"
        assert version in repo.versions("libnvidia-nscq-535")
    assert "nvidia-fabricmanager-580" not in repo.packages       # a virtual package from 580 on
    assert repo.versions("nvidia-fabricmanager")[0] == "580.65.06-1"       # then 590+, -1ubuntu1
    assert repo.field("nvidia-fabricmanager", "580.65.06-1", "Provides") == "nvidia-fabricmanager-580"
    assert repo.versions("libnvidia-nscq")[0] == "580.65.06-1"
    assert "libnvidia-nscq-580" not in repo.packages


def test_fabric_manager_files(repositories, tmp_path):
    root = repositories["ubuntu2204"].unpack("nvidia-fabricmanager-535", "535.183.01-1", tmp_path)
    assert (root / "lib/systemd/system/nvidia-fabricmanager.service").is_file()
    assert (root / "usr/share/nvidia/nvswitch/fabricmanager.cfg").is_file()
    assert (root / "usr/bin/nv-fabricmanager").is_file()


def test_cuda_drivers_follows_the_newest_branch_of_the_path(repositories):
    """Up to 580 the unversioned cuda-drivers depends on the newest cuda-drivers-<branch>; from 590 it is each
    release's own metapackage ("cuda-drivers: no change" in NVIDIA's 590 rename table)."""
    assert repositories["ubuntu2204"].versions("cuda-drivers") == [
        "580.65.06-0ubuntu1", "590.48.01-1ubuntu1", "595.71.05-1ubuntu1", "595.91.07-1ubuntu1"]
    assert repositories["ubuntu2204"].field("cuda-drivers", "580.65.06-0ubuntu1", "Depends") == (
        "cuda-drivers-580 (= 580.65.06-0ubuntu1)")
    assert repositories["debian12"].versions("cuda-drivers") == ["580.65.06-1"]


def test_debian12_keeps_the_packages_the_debian_scenarios_need(repositories):
    """A documented deviation (module docstring): Ubuntu-built 535, 550 and 580 on the debian12 path, with
    cuda-drivers-580 at NVIDIA's Debian revision (cuda-drivers-580 580.105.08-1 on NVIDIA's Debian path: NVIDIA
    developer forums, "Debian cuda-drivers-580 package 580.105.08-1 improperly pulls in v590 components"); none of
    the Ubuntu 590+ names."""
    repo = repositories["debian12"]
    assert repo.versions("cuda-drivers-535") == ["535.161.08-1", "535.183.01-1"]
    assert repo.versions("cuda-drivers-550") == ["550.54.15-1"]
    assert repo.versions("nvidia-fabricmanager-550") == ["550.54.15-1"]
    assert repo.versions("cuda-drivers-580") == ["580.65.06-1"]
    assert repo.versions("nvidia-fabricmanager") == ["580.65.06-1"]
    assert not [name for name in repo.packages if name.startswith("nvidia-driver-pinning")]
    assert "libnvidia-compute" not in repo.packages and "nvidia-open" not in repo.packages


UNVERSIONED = [d for d in SPEC["drivers"] if int(d["branch"]) >= 590]


@pytest.mark.parametrize("driver", UNVERSIONED, ids=[d["version"] for d in UNVERSIONED])
def test_590_and_later_without_the_branch_in_the_names(repositories, driver):
    """NVIDIA Driver Installation Guide, "Ubuntu 590 and later packages": libnvidia-compute-580 -> libnvidia-compute,
    nvidia-dkms-580-open -> nvidia-dkms-open, cuda-drivers-580 removed, cuda-drivers and libnvidia-nscq unchanged;
    NVIDIA/gpu-driver-container ubuntu26.04 installs nvidia-open or cuda-drivers, libnvidia-compute,
    nvidia-fabricmanager and libnvidia-nscq by these names; the revision is NVIDIA's -1ubuntu1
    (gpu-driver-container#899: nvidia-fabricmanager and libnvidia-nscq 595.71.05-1ubuntu1). Unconfirmed: the
    Depends of cuda-drivers and nvidia-open (modelled on cuda-drivers-<branch>: the user space at >= the release)."""
    repo = repositories["ubuntu2204"]
    branch, upstream = driver["branch"], driver["version"]
    own = upstream + "-1ubuntu1"
    for name in ("libnvidia-compute", "nvidia-utils", "nvidia-compute-utils", "nvidia-driver", "nvidia-driver-open",
                 "cuda-drivers", "nvidia-open", "nvidia-fabricmanager", "libnvidia-nscq"):
        assert own in repo.versions(name), name
    for name in ("cuda-drivers-", "nvidia-utils-", "libnvidia-compute-", "nvidia-fabricmanager-"):
        assert name + branch not in repo.packages
    assert "nvidia-driver (>= %s)" % upstream in repo.field("cuda-drivers", own, "Depends")
    assert "nvidia-driver-open (>= %s)" % upstream in repo.field("nvidia-open", own, "Depends")
    assert "nvidia-utils (= %s)" % own in repo.field("nvidia-driver", own, "Depends")
    # The 580 packages provide and conflict with the new names, so apt replaces them in one transaction.
    assert "libnvidia-compute" in repo.field("libnvidia-compute-580", "580.65.06-0ubuntu1", "Conflicts")


def test_pinning_packages_lock_a_branch_or_a_release(repositories, tmp_path):
    """Version locking packages: nvidia-driver-pinning-<branch> and nvidia-driver-pinning-<version> (NVIDIA's
    driver container: `apt-get install -y --no-install-recommends nvidia-driver-pinning-${DRIVER_VERSION}`, which
    "pins the whole driver tree to DRIVER_VERSION"; the Driver Installation Guide: "track specific driver branches
    and versions"). Unconfirmed (from a listing of the real control file in a public notes repository, not from
    NVIDIA): "Section: NVIDIA", "Provides/Conflicts/Replaces: nvidia-driver-pinning" (one at a time), the pin at
    priority 1000; the version strings and the preferences file's name and package list are the stand-in's."""
    repo = repositories["ubuntu2204"]
    assert sorted(name for name in repo.packages if name.startswith("nvidia-driver-pinning")) == [
        "nvidia-driver-pinning-590", "nvidia-driver-pinning-590.48.01", "nvidia-driver-pinning-595",
        "nvidia-driver-pinning-595.71.05", "nvidia-driver-pinning-595.91.07"]
    for name in ("nvidia-driver-pinning-595", "nvidia-driver-pinning-595.91.07"):
        (version,) = repo.versions(name)
        for field in ("Provides", "Conflicts", "Replaces"):
            assert repo.field(name, version, field) == "nvidia-driver-pinning"
        assert repo.field(name, version, "Architecture") == "all"
    branch = (repo.unpack("nvidia-driver-pinning-595", "595-1ubuntu1", tmp_path / "branch")
              / "etc/apt/preferences.d/nvidia-driver-pinning-595").read_text()
    assert "Pin: version 595.*\nPin-Priority: 1000" in branch
    assert {"cuda-drivers", "nvidia-open", "libnvidia-compute", "nvidia-fabricmanager"} <= set(
        next(line for line in branch.splitlines() if line.startswith("Package: ")).split()[1:])
    release = (repo.unpack("nvidia-driver-pinning-595.91.07", "595.91.07-1ubuntu1", tmp_path / "release")
               / "etc/apt/preferences.d/nvidia-driver-pinning-595.91.07").read_text()
    assert "Pin: version 595.91.07-*\n" in release
