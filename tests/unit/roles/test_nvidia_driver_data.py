"""What gpufleet.node.nvidia_driver installs for each source, flavour and platform: its platform data rendered as
the role renders it (Ubuntu's archives cannot be installed from here, so this is where Ubuntu's names are checked).
Package names from Canonical's and NVIDIA's archives as listed in the project's reference notes."""
import pytest
import yaml

from .platform import ROLES, facts_for, render

UBUNTU_22 = dict(facts_for("Ubuntu", "22.04"), kernel="5.15.0-204-generic")
DEBIAN_12 = facts_for("Debian", "12")


def driver(facts, expression, **settings):
    settings.setdefault("nvidia_driver_branch", "535")
    return render("nvidia_driver", facts, "{{ %s }}" % expression, **settings)


@pytest.mark.parametrize("source, flavour, packages, main, fabricmanager", [
    ("distro", "server", ["nvidia-headless-535-server", "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("distro", "open", ["nvidia-headless-535-server-open", "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("distro", "signed", ["linux-modules-nvidia-535-server-5.15.0-204-generic", "nvidia-headless-no-dkms-535-server",
                          "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("ppa", "server", ["nvidia-headless-535", "nvidia-utils-535"], "nvidia-utils-535", []),
    ("cuda_repo", "server", ["cuda-drivers-535"], "cuda-drivers-535", ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("cuda_repo", "open", ["nvidia-kernel-open-535", "cuda-drivers-535"], "cuda-drivers-535",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
])
def test_ubuntu_2204(source, flavour, packages, main, fabricmanager):
    settings = {"nvidia_driver_source": source, "nvidia_driver_flavour": flavour}
    assert driver(UBUNTU_22, "__nvidia_driver_plan.packages", **settings) == packages
    assert driver(UBUNTU_22, "__nvidia_driver_plan.main", **settings) == main
    assert driver(UBUNTU_22, "__nvidia_driver_plan.fabricmanager_packages", **settings) == fabricmanager


def test_signed_modules_are_those_of_the_running_kernel():
    """Canonical's linux-modules-nvidia-<br>-server-generic follows the GA kernel and pulls its newest linux-image
    (jammy-updates: Depends linux-modules-nvidia-580-server-5.15.0-204-generic); on an HWE kernel (6.8 on 22.04)
    the GPUs would have no module after the reboot. The default is the running kernel's package."""
    hwe = dict(UBUNTU_22, kernel="6.8.0-149-generic")
    packages = driver(hwe, "__nvidia_driver_plan.packages", nvidia_driver_flavour="signed", nvidia_driver_branch="580")
    assert packages[0] == "linux-modules-nvidia-580-server-6.8.0-149-generic"


def test_signed_modules_may_follow_a_kernel_flavour():
    packages = driver(UBUNTU_22, "__nvidia_driver_plan.packages", nvidia_driver_flavour="signed",
                      nvidia_driver_kernel_flavour="generic-hwe-22.04", nvidia_driver_branch="580")
    assert packages[0] == "linux-modules-nvidia-580-server-generic-hwe-22.04"


def test_debian_12_headless_compute_set():
    assert driver(DEBIAN_12, "__nvidia_driver_plan.packages") == [
        "nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]
    assert driver(DEBIAN_12, "__nvidia_driver_plan.main") == "nvidia-smi"
    assert driver(DEBIAN_12, "__nvidia_driver_plan.fabricmanager_packages") == []  # Debian does not package it
    assert driver(DEBIAN_12, "__nvidia_driver_source.components") == ["main", "contrib", "non-free", "non-free-firmware"]


@pytest.mark.parametrize("facts", [UBUNTU_22, DEBIAN_12], ids=["ubuntu22", "debian12"])
def test_never_an_unversioned_metapackage(facts):
    sources = driver(facts, "__nvidia_driver_sources")
    for source, data in sources.items():
        if source == "distro" and facts["distribution"] == "Debian":
            continue  # Debian names its driver packages without the branch (pinned by version instead)
        for flavour in data["flavours"]:
            for name in driver(facts, "__nvidia_driver_plan.packages", nvidia_driver_source=source,
                               nvidia_driver_flavour=flavour):
                assert "535" in name, (source, flavour, name)


def test_pins_are_names_never_patterns():
    """apt matches a regex or glob pin against every package on every call (seconds each with Debian's full
    lists); exact names cost a lookup. The branch is pinned by name, other branches are forbidden by name."""
    settings = {"nvidia_driver_source": "cuda_repo"}
    pin = driver(DEBIAN_12, "__nvidia_driver_plan.pin", **settings)
    forbid = driver(DEBIAN_12, "__nvidia_driver_plan.forbid", **settings)
    assert pin[:3] == ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535"]
    assert {"nvidia-utils-535", "nvidia-persistenced-535", "libnvidia-compute-535"} <= set(pin)
    assert {"cuda-drivers", "cuda-drivers-550", "nvidia-utils-550", "nvidia-fabricmanager-570"} <= set(forbid)
    assert not any(set(name) & set("*?/{}[]^$") for name in pin + forbid)
    assert not any("535" in name for name in forbid)


def test_every_offered_branch_but_the_chosen_one_is_forbidden():
    """A branch missing from the platform data cannot be chosen (preflight), so no branch goes unpinned."""
    forbid = driver(UBUNTU_22, "__nvidia_driver_plan.forbid", nvidia_driver_branch="550")
    offered = driver(UBUNTU_22, "__nvidia_driver_source.branches", nvidia_driver_branch="550")
    for branch in offered:
        named = [name for name in forbid if name.endswith("-" + branch) or ("-%s-" % branch) in name]
        assert bool(named) == (branch != "550"), branch


def test_ubuntu_2404_has_no_branch_535():
    """NVIDIA's support matrix: branch 535 is not supported on Ubuntu 24.04; 550 to 595 are."""
    noble = facts_for("Ubuntu", "24.04")
    for source in ("ppa", "cuda_repo"):
        branches = driver(noble, "__nvidia_driver_sources[%r].branches" % source)
        assert branches == ["550", "570", "580", "590", "595"], source
    # Canonical's archive (noble-updates and noble-security restricted, read 2026-12-05) has no 550-server; its
    # 535-server is transitional, and so is its 590-server (to 595), which the role refuses from the package itself.
    assert driver(noble, "__nvidia_driver_sources['distro'].branches") == ["570", "580", "590", "595"]
    assert "535" in driver(UBUNTU_22, "__nvidia_driver_sources['distro'].branches")


def test_ubuntu_2004_archive_stops_at_570():
    """focal-updates/-security restricted: nvidia-headless-535-server 535.247.01 (a real driver), 550, 570; no 580."""
    focal = facts_for("Ubuntu", "20.04")
    assert driver(focal, "__nvidia_driver_sources['distro'].branches") == ["535", "550", "570"]
    assert "580" in driver(focal, "__nvidia_driver_sources['cuda_repo'].branches")


def test_exact_version_glob_and_branch_glob():
    assert driver(DEBIAN_12, "__nvidia_driver_plan.version_glob") == "535.*"
    assert driver(DEBIAN_12, "__nvidia_driver_plan.version_glob", nvidia_driver_version="535.161.08") == "535.161.08-*"


def test_an_unknown_platform_offers_no_source():
    assert driver(facts_for("Rocky", "9.4"), "__nvidia_driver_sources") == {}


def test_preferences_keep_each_source_to_its_origin():
    """NVIDIA's cuda-<distro>.pin pins its repository by the label "NVIDIA CUDA"; Canonical builds the same
    names (nvidia-fabricmanager-535 535.309.01-0ubuntu0.22.04.2 sorts above NVIDIA's 535.x-1)."""
    assert driver(UBUNTU_22, "__nvidia_driver_foreign_release", nvidia_driver_source="distro") == "l=NVIDIA CUDA"
    assert driver(UBUNTU_22, "__nvidia_driver_foreign_release", nvidia_driver_source="cuda_repo") == "o=Ubuntu"
    assert driver(DEBIAN_12, "__nvidia_driver_foreign_release", nvidia_driver_source="cuda_repo") == "o=Debian"


def test_every_branch_offered_has_a_lifecycle():
    lifecycle = driver(UBUNTU_22, "__nvidia_driver_branch_lifecycle")
    for facts in (UBUNTU_22, DEBIAN_12, facts_for("Ubuntu", "24.04")):
        for source, data in driver(facts, "__nvidia_driver_sources").items():
            assert set(data["branches"]) <= set(lifecycle), (facts["distribution_version"], source)
    # NVIDIA's "Supported Drivers and CUDA Toolkit Versions" (data center drivers, editions 615 and 620).
    assert {branch: lifecycle[branch]["end_of_life"] for branch in ("535", "580", "595")} == {
        "535": "June 2026", "580": "June 2028", "595": "March 2027"}
    assert driver(UBUNTU_22, "__nvidia_driver_current_branch") in lifecycle


@pytest.mark.parametrize("branch, ended", [("535", True), ("550", True), ("570", True), ("580", False),
                                           ("590", False), ("595", False), ("999", False)])
def test_a_branch_past_its_end_of_life_is_told_by_the_controllers_clock(branch, ended):
    """Read on 2026-12-05 or later (535 ended June 2026); 595 ends March 2027, 580 June 2028: this test will
    need the data read again in 2027, as the role's warnings will."""
    assert driver(UBUNTU_22, "__nvidia_driver_plan.branch_ended", nvidia_driver_branch=branch) is ended


def test_the_default_branch_is_the_current_long_term_support_branch():
    defaults = yaml.safe_load((ROLES / "nvidia_driver" / "defaults" / "main.yml").read_text())
    assert defaults["nvidia_driver_branch"] == driver(UBUNTU_22, "__nvidia_driver_current_branch") == "580"
    assert driver(UBUNTU_22, "__nvidia_driver_plan.branch_ended", nvidia_driver_branch=defaults["nvidia_driver_branch"]) is False


# Ubuntu's unit, from nvidia-compute-utils-580-server 580.178.04-0ubuntu0.22.04.1 (jammy-updates restricted),
# /lib/systemd/system/nvidia-persistenced.service.
UBUNTU_PERSISTENCED = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target
StopWhenUnneeded=true
Before=systemd-backlight@backlight:nvidia_0.service

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced
"""
# NVIDIA's template (github.com/NVIDIA/nvidia-persistenced, init/systemd/nvidia-persistenced.service.template).
NVIDIA_PERSISTENCED = """[Unit]
Description=NVIDIA Persistence Daemon
Wants=syslog.target

[Service]
Type=forking
ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced
ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced

[Install]
WantedBy=multi-user.target
"""


def _persistenced(unit_text, expression):
    return driver(UBUNTU_22, expression, __nvidia_driver_persistenced_fragment={"stdout": "FragmentPath=/lib/systemd/system/nvidia-persistenced.service"},
                  __nvidia_driver_persistenced_packaged={"content": __import__("base64").b64encode(unit_text.encode()).decode()})


def test_ubuntu_unit_gets_a_drop_in_and_a_wants_link():
    assert _persistenced(UBUNTU_PERSISTENCED, "__nvidia_driver_plan.persistenced.exec") == (
        "/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose")
    assert _persistenced(UBUNTU_PERSISTENCED, "__nvidia_driver_plan.persistenced.needs_dropin") is True
    assert _persistenced(UBUNTU_PERSISTENCED, "__nvidia_driver_plan.persistenced.static") is True


def test_nvidia_unit_needs_neither():
    assert _persistenced(NVIDIA_PERSISTENCED, "__nvidia_driver_plan.persistenced.needs_dropin") is False
    assert _persistenced(NVIDIA_PERSISTENCED, "__nvidia_driver_plan.persistenced.static") is False


def test_nvidia_repository_names_fabric_manager_without_the_branch_from_580():
    """NVIDIA's ubuntu2204 repository: nvidia-fabricmanager-535 (Provides/Conflicts nvidia-fabricmanager) up to
    575; from 580 the package is nvidia-fabricmanager 580.65.06-1 (providing nvidia-fabricmanager-580), and
    `apt-get install nvidia-fabricmanager-580=580.65.06-1` fails (NVIDIA/gpu-driver-container#451)."""
    repo = {"nvidia_driver_source": "cuda_repo"}
    assert driver(UBUNTU_22, "__nvidia_driver_plan.fabricmanager_packages", nvidia_driver_branch="580", **repo) == [
        "nvidia-fabricmanager", "libnvidia-nscq"]
    assert driver(UBUNTU_22, "__nvidia_driver_plan.fabricmanager_packages", nvidia_driver_branch="535", **repo) == [
        "nvidia-fabricmanager-535", "libnvidia-nscq-535"]
    # Choosing 535, the unversioned (580+) names are never installed; choosing 580, the 535 names are not.
    assert {"nvidia-fabricmanager", "libnvidia-nscq"} <= set(driver(UBUNTU_22, "__nvidia_driver_plan.forbid", **repo))
    forbid_580 = driver(UBUNTU_22, "__nvidia_driver_plan.forbid", nvidia_driver_branch="580", **repo)
    assert "nvidia-fabricmanager-535" in forbid_580 and "nvidia-fabricmanager" not in forbid_580
    assert "nvidia-fabricmanager" in driver(UBUNTU_22, "__nvidia_driver_plan.pin", nvidia_driver_branch="580", **repo)


# NVIDIA's repository from 590 on (Driver Installation Guide, "Ubuntu 590 and later packages" and "Version locking
# packages for Ubuntu / Debian"; NVIDIA/gpu-driver-container ubuntu26.04/install.sh): the branch is gone from the
# package names, and a pinning package locks the branch or an exact version.
CUDA_REPO = {"nvidia_driver_source": "cuda_repo"}


@pytest.mark.parametrize("flavour, metapackage", [("server", "cuda-drivers"), ("open", "nvidia-open")])
def test_nvidia_repository_from_590_installs_unversioned_names_through_the_pinning_package(flavour, metapackage):
    settings = dict(CUDA_REPO, nvidia_driver_branch="595", nvidia_driver_flavour=flavour)
    assert driver(UBUNTU_22, "__nvidia_driver_plan.packages", **settings) == [
        "nvidia-driver-pinning-595", "libnvidia-compute", metapackage]
    assert driver(UBUNTU_22, "__nvidia_driver_plan.main", **settings) == "libnvidia-compute"
    assert driver(UBUNTU_22, "__nvidia_driver_plan.fabricmanager_packages", **settings) == [
        "nvidia-fabricmanager", "libnvidia-nscq"]
    # An exact version is locked by the pinning package of that version.
    assert driver(UBUNTU_22, "__nvidia_driver_plan.packages", nvidia_driver_version="595.91.07", **settings)[0] == (
        "nvidia-driver-pinning-595.91.07")


def test_590_and_later_never_forbid_their_own_names():
    """Up to 580 the unversioned cuda-drivers follows the newest branch and is never installed; from 590 it is the
    branch's own metapackage, kept to the branch by the pin (1001) and the pinning package."""
    forbid = driver(UBUNTU_22, "__nvidia_driver_plan.forbid", nvidia_driver_branch="595", **CUDA_REPO)
    pin = driver(UBUNTU_22, "__nvidia_driver_plan.pin", nvidia_driver_branch="595", **CUDA_REPO)
    own = {"cuda-drivers", "nvidia-open", "libnvidia-compute", "nvidia-utils", "nvidia-compute-utils",
           "nvidia-dkms-open", "nvidia-kernel-common", "nvidia-fabricmanager", "libnvidia-nscq",
           "nvidia-driver-pinning-595"}
    assert own <= set(pin)
    assert not own & set(forbid)
    # Other branches stay out: their branch-named packages and their pinning packages.
    assert {"cuda-drivers-580", "nvidia-utils-580", "nvidia-fabricmanager-535", "nvidia-driver-pinning-580",
            "nvidia-driver-pinning-590"} <= set(forbid)
    assert not any(set(name) & set("*?/{}[]^$") for name in pin + forbid)


def test_up_to_580_the_names_carry_the_branch_as_before():
    for branch in ("535", "580"):
        settings = dict(CUDA_REPO, nvidia_driver_branch=branch)
        assert driver(UBUNTU_22, "__nvidia_driver_plan.packages", **settings) == ["cuda-drivers-" + branch]
        assert driver(UBUNTU_22, "__nvidia_driver_pinning", **settings) == ""
        forbid = driver(UBUNTU_22, "__nvidia_driver_plan.forbid", **settings)
        assert {"cuda-drivers", "nvidia-open", "nvidia-driver-pinning-595"} <= set(forbid)


def test_preferences_pin_the_590_names_to_the_branch():
    settings = dict(CUDA_REPO, nvidia_driver_branch="595", nvidia_driver_flavour="server", nvidia_driver_version="")
    text = render("nvidia_driver", UBUNTU_22, (ROLES / "nvidia_driver" / "templates" / "preferences.j2").read_text(),
                  ansible_managed="managed", **settings)
    blocks = [block for block in text.split("\n\n") if "Pin-Priority: 1001" in block]
    assert len(blocks) == 1
    names = next(line for line in blocks[0].splitlines() if line.startswith("Package: ")).split()[1:]
    assert {"cuda-drivers", "libnvidia-compute", "nvidia-fabricmanager"} <= set(names)
    assert "Pin: version 595.*" in blocks[0]
    forbidden = next(block for block in text.split("\n\n") if "Pin: version *" in block)
    forbidden_names = next(line for line in forbidden.splitlines() if line.startswith("Package: ")).split()[1:]
    assert "cuda-drivers" not in forbidden_names and "nvidia-driver-pinning-580" in forbidden_names


def test_debian_12_offers_no_590_from_nvidias_repository():
    """NVIDIA's debian12 path names its driver packages as Debian does (nvidia-driver, nvidia-kernel-open-dkms):
    the Ubuntu names above are not there, so cuda_repo on Debian stops at 580."""
    assert driver(DEBIAN_12, "__nvidia_driver_sources['cuda_repo'].branches") == ["535", "550", "570", "580"]
    assert driver(UBUNTU_22, "__nvidia_driver_sources['cuda_repo'].branches")[-2:] == ["590", "595"]
