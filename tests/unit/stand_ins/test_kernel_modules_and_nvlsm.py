"""The stand-in kernel module packages of the branch-named drivers, and NVLSM, against the real artifacts.

Real artifacts and sources:

* Kernel module packages (every branch-named release, 535 to 580): Canonical's packaging, which NVIDIA's Ubuntu
  packages follow, declares them in debian/templates/control.in (github.com/canonical/nvidia-graphics-drivers):
  nvidia-driver-<branch> "Depends: ... nvidia-dkms-<branch> (<= <upstream>-1), nvidia-dkms-<branch> (>= <upstream>),
  nvidia-kernel-common-<branch> (<= ...), (>= ...), nvidia-kernel-source-<branch> (= ${binary:Version})", the same
  with -open for nvidia-driver-<branch>-open; nvidia-dkms-<branch>[-open] "Provides/Conflicts/Replaces:
  nvidia-dkms-kernel", nvidia-kernel-source-<branch>[-open] the same with nvidia-kernel-source,
  nvidia-kernel-common-<branch> with nvidia-kernel-common. packages.ubuntu.com shows the versions filled in
  (nvidia-dkms-580 580.178.04-0ubuntu1: "nvidia-kernel-common-580 (<= 580.178.04-1)", "(>= 580.178.04)"). The
  stand-in leaves out dkms and the firmware package (nothing is built in a container).
* nvidia-kernel-open-<branch>: NVIDIA's CUDA installation guide installs it before cuda-drivers-<branch> for the
  open kernel module flavour; public install notes do so from NVIDIA's ubuntu2204 repository for 545, 555 and 570.
  Unconfirmed (packages.json says so): that the 580 one is on the ubuntu2204 path, and its Depends.
* cuda-drivers-550 "Depends: nvidia-driver-550 (>= 550.90.12) | nvidia-driver-550-open (>= 550.90.12) |
  nvidia-driver-550-server (>= 550.90.12) | nvidia-driver-550-server-open (>= 550.90.12)" (apt's message quoted in
  github.com/nvidia-holoscan/holoscan-docs pull 7); cuda-drivers-535 on nvidia-driver-535 alone (dstack pull 2355).
* nvlsm: one package named without a branch, versioned by date (nvlsm 2025.10.12-1 and nvlink5-580's "Depends: ...
  nvlsm (>= 2025.10.12)" in a May 2026 apt-cache capture of NVIDIA's repository), whose configuration fabric
  manager's start script is given as --nvlsm-config-file /usr/share/nvidia/nvlsm/nvlsm.conf
  (NVIDIA/gpu-driver-container, ubuntu22.04). It depends on libibumad3; infiniband-diags comes from Ubuntu.
"""
import pytest

from .conftest import load_builder

SPEC = load_builder().load_spec()
NAMED = [d for d in SPEC["drivers"] if "ubuntu2204" in d["distributions"] and int(d["branch"]) < 590]


@pytest.mark.parametrize("driver", NAMED, ids=[d["version"] for d in NAMED])
def test_kernel_module_packages_as_control_in_declares_them(repositories, driver):
    repo = repositories["ubuntu2204"]
    branch, upstream = driver["branch"], driver["version"]
    own = upstream + "-0ubuntu1"
    for flavour in ("", "-open"):
        depends = repo.field("nvidia-driver-%s%s" % (branch, flavour), own, "Depends").split(", ")
        assert "nvidia-dkms-%s%s (<= %s-1)" % (branch, flavour, upstream) in depends
        assert "nvidia-dkms-%s%s (>= %s)" % (branch, flavour, upstream) in depends
        assert "nvidia-kernel-source-%s%s (= %s)" % (branch, flavour, own) in depends
        assert "nvidia-kernel-common-%s (>= %s)" % (branch, upstream) in depends
        dkms = "nvidia-dkms-%s%s" % (branch, flavour)
        assert repo.field(dkms, own, "Provides") == repo.field(dkms, own, "Conflicts") == "nvidia-dkms-kernel"
        source = "nvidia-kernel-source-%s%s" % (branch, flavour)
        assert repo.field(source, own, "Conflicts") == "nvidia-kernel-source"
        assert "%s (>= %s)" % (source, upstream) in repo.field(dkms, own, "Depends")
    assert repo.field("nvidia-kernel-common-" + branch, own, "Provides") == "nvidia-kernel-common"
    assert own in repo.versions("nvidia-kernel-open-" + branch)


def test_cuda_drivers_takes_any_driver_flavour_from_550(repositories):
    repo = repositories["ubuntu2204"]
    assert repo.field("cuda-drivers-550", "550.54.15-1", "Depends").endswith(
        "nvidia-driver-550 (>= 550.54.15) | nvidia-driver-550-open (>= 550.54.15) | "
        "nvidia-driver-550-server (>= 550.54.15) | nvidia-driver-550-server-open (>= 550.54.15)")
    assert repo.field("cuda-drivers-535", "535.183.01-1", "Depends").endswith("nvidia-driver-535 (>= 535.183.01)")


def test_nvlsm_versioned_by_date_with_its_configuration(repositories, tmp_path):
    repo = repositories["ubuntu2204"]
    assert repo.versions("nvlsm") == ["2025.10.12-1"]
    assert repo.field("nvlsm", "2025.10.12-1", "Depends") == "libibumad3"
    root = repo.unpack("nvlsm", "2025.10.12-1", tmp_path)
    assert (root / "usr/share/nvidia/nvlsm/nvlsm.conf").is_file()
    assert "nvlsm" not in repositories["debian12"].packages
