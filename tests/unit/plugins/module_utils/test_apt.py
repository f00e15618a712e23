"""module_utils/apt: the parsers, Debian version comparison and the plan, over real apt 2.6 / dpkg 1.21 output.

The captures in fixtures/apt (see its README.md) are what ``apt-cache policy`` and ``dpkg-query`` printed on
Debian 12 for:

* NVIDIA's CUDA repository, https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64 (a flat
  repository), with the nvidia_driver role's preferences (branch 535 pinned at 1001, ``cuda-drivers`` and the
  550 branch at -1): ``cuda-drivers-535`` 535.161.08-1 installed and held, 535.183.01-1 the candidate,
  ``cuda-drivers`` 550.54.15-1 pinned at -1. apt read tests/mirror's stand-in of the repository, which has
  NVIDIA's names and version strings; the URL in the text was replaced by NVIDIA's.
* Debian's own driver in bookworm / bookworm-security (contrib, non-free): ``nvidia-smi`` 535.261.03-1
  installed and held, 535.309.01-0+deb12u1 the candidate, ``libnvidia-ml1`` (Multi-Arch: same),
  ``nvidia-persistenced`` 535.171.04-1~deb12u1 removed with its conffile left (``rc``).

The inline POLICY/DPKG texts are those the tests of the former ``apt_plan`` filter used (the same format).
"""
import pathlib
import shutil
import subprocess

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.node.plugins.module_utils.apt import (
    AptParseError,
    AptPlanError,
    apt_messages,
    matches,
    parse_dpkg,
    parse_policy,
    parse_show,
    parse_spec,
    plan_packages,
    version_compare,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "apt"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


CUDA_POLICY = fixture("cuda-debian12.policy.txt")
CUDA_DPKG = fixture("cuda-debian12.dpkg.txt")
CUDA_POLICY_UNREADABLE_PREFERENCES = fixture("cuda-debian12.policy-unreadable-preferences.txt")
DEBIAN_POLICY = fixture("debian12-nvidia-smi.policy.txt")
DEBIAN_DPKG = fixture("debian12-nvidia-smi.dpkg.txt")
DEBIAN_DPKG_PACKAGE = fixture("debian12-nvidia-smi.dpkg-package.txt")
NVIDIA_URL = "https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64"


def plan(policy, dpkg, packages, hold=None, arch=None):
    installed, held = parse_dpkg(dpkg)
    return plan_packages(parse_policy(policy), installed, held, packages, hold, arch=arch)


# --- ported from tests/unit/plugins/filter/test_apt.py (the apt_plan filter) -------------------------------

POLICY = """libnccl2:
  Installed: 2.17.1-1+cuda12.1
  Candidate: 2.18.3-1+cuda12.1
  Version table:
     2.19.3-1+cuda12.2 -1
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
     2.18.3-1+cuda12.1 1001
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
 *** 2.17.1-1+cuda12.1 1001
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
        100 /var/lib/dpkg/status
cuda-toolkit-12-1:
  Installed: (none)
  Candidate: 12.1.1-1
  Version table:
     12.1.1-1 500
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
cuda:
  Installed: (none)
  Candidate: (none)
  Version table:
     12.2.2-1 -1
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
gnupg:
  Installed: 2.2.40-1.1
  Candidate: 2.2.40-1.1+deb12u1
  Version table:
     2.2.40-1.1+deb12u1 500
        500 http://deb.debian.org/debian bookworm-updates/main amd64 Packages
 *** 2.2.40-1.1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
"""
DPKG = ("libnccl2 hi  2.17.1-1+cuda12.1\n"
        "gnupg ii  2.2.40-1.1\n"
        "cuda-toolkit-12-1 un  \n")        # dpkg knows it, not installed: no version


def test_parse_policy():
    packages = parse_policy(POLICY)
    assert packages["libnccl2"]["candidate"] == "2.18.3-1+cuda12.1"
    assert packages["libnccl2"]["versions"] == ["2.19.3-1+cuda12.2", "2.18.3-1+cuda12.1", "2.17.1-1+cuda12.1"]
    assert packages["libnccl2"]["priorities"] == {
        "2.19.3-1+cuda12.2": -1, "2.18.3-1+cuda12.1": 1001, "2.17.1-1+cuda12.1": 1001}
    assert packages["cuda"]["candidate"] is None and packages["cuda-toolkit-12-1"]["installed"] is None


def test_candidate_upgrade_install_and_any_version():
    result = plan(POLICY, DPKG, ["libnccl2", "cuda-toolkit-12-1", "gnupg=*"])
    assert result["install"] == ["libnccl2=2.18.3-1+cuda12.1", "cuda-toolkit-12-1=12.1.1-1"]
    assert result["wanted"]["gnupg"] == "2.2.40-1.1"           # installed is enough: no upgrade behind the user's back
    assert dict((name, entry["installed"]) for name, entry in result["packages"].items()) == {
        "libnccl2": "2.17.1-1+cuda12.1", "cuda-toolkit-12-1": None, "gnupg": "2.2.40-1.1"}
    assert [result["packages"][name]["action"] for name in ("libnccl2", "cuda-toolkit-12-1", "gnupg")] == [
        "upgrade", "install", "keep"]
    assert result["missing"] == []


def test_nothing_to_do_when_dpkg_has_the_versions():
    dpkg = "libnccl2 hi  2.18.3-1+cuda12.1\ncuda-toolkit-12-1 ii  12.1.1-1\n"
    assert plan(POLICY, dpkg, ["libnccl2", "cuda-toolkit-12-1"])["install"] == []


def test_exact_versions_and_what_apt_cannot_give():
    result = plan(POLICY, DPKG, ["libnccl2=2.17.1-1+cuda12.1", "cuda-toolkit-12-1=12.1.0-1", "cuda", "absent"])
    assert result["install"] == []                      # the filter listed an unavailable version; the module does not
    assert result["packages"]["libnccl2"]["action"] == "keep"
    assert result["missing"] == ["cuda-toolkit-12-1", "cuda", "absent"]
    assert result["wanted"] == {"libnccl2": "2.17.1-1+cuda12.1", "cuda-toolkit-12-1": None, "cuda": None,
                                "absent": None}
    assert result["packages"]["cuda-toolkit-12-1"]["reason"] == (
        "apt has no cuda-toolkit-12-1=12.1.0-1 to install (apt offers 12.1.1-1).")
    assert result["packages"]["cuda"]["reason"] == "apt has no candidate for cuda (apt offers 12.2.2-1)."
    assert result["packages"]["absent"]["reason"] == "apt has no candidate for absent (apt offers no version of it)."


@pytest.mark.parametrize("packages", [[{"name": "x"}], ["=1.0"], "libnccl2"])
def test_bad_package_items(packages):
    with pytest.raises(AptPlanError):
        plan(POLICY, DPKG, packages)


def test_holds_are_set_only_where_they_differ():
    dpkg = "libnccl2 hi  2.18.3-1+cuda12.1\ngnupg ii  2.2.40-1.1\n"
    policy = POLICY.replace("Installed: 2.17.1-1+cuda12.1", "Installed: 2.18.3-1+cuda12.1")
    result = plan(policy, dpkg, ["libnccl2", "cuda-toolkit-12-1", "gnupg=*"], True)
    assert dict((name, entry["held"]) for name, entry in result["packages"].items()) == {
        "libnccl2": True, "cuda-toolkit-12-1": False, "gnupg": False}
    assert result["hold"] == ["cuda-toolkit-12-1", "gnupg"]            # libnccl2 is held already
    assert result["release"] == []
    released = plan(policy, dpkg, ["libnccl2"], False)
    assert (released["hold"], released["release"]) == ([], ["libnccl2"])
    untouched = plan(policy, dpkg, ["libnccl2"])
    assert (untouched["hold"], untouched["release"]) == ([], [])


# --- the parsers over the captures -------------------------------------------------------------------------

def test_parse_policy_nvidia_repository_with_pins():
    packages = parse_policy(CUDA_POLICY)
    assert list(packages) == ["cuda-drivers-535", "cuda-drivers", "cuda-drivers-550", "nvidia-utils-535",
                              "libnccl2", "cuda-toolkit-12-1", "cuda"]
    assert packages["cuda-drivers-535"] == {
        "installed": "535.161.08-1",
        "candidate": "535.183.01-1",
        "versions": ["535.183.01-1", "535.161.08-1"],
        "priorities": {"535.183.01-1": 1001, "535.161.08-1": 1001},
        "downloadable": ["535.183.01-1", "535.161.08-1"],
    }
    assert packages["cuda-drivers"] == {
        "installed": None, "candidate": None, "versions": ["550.54.15-1"], "priorities": {"550.54.15-1": -1},
        "downloadable": ["550.54.15-1"]}
    assert packages["libnccl2"]["versions"] == ["2.19.3-1+cuda12.2", "2.18.3-1+cuda12.1", "2.17.1-1+cuda12.1"]
    assert NVIDIA_URL in CUDA_POLICY


def test_parse_policy_debian_archive():
    packages = parse_policy(DEBIAN_POLICY)
    # apt prints the native architecture bare: libnvidia-ml1:amd64 was asked for.
    assert list(packages) == ["nvidia-smi", "libnvidia-ml1", "nvidia-alternative", "nvidia-persistenced",
                              "nvidia-driver"]
    assert packages["nvidia-smi"]["installed"] == "535.261.03-1"
    assert packages["nvidia-smi"]["candidate"] == "535.309.01-0+deb12u1"
    # rc: apt's Installed is (none) although dpkg's status file still lists the version.
    assert packages["nvidia-persistenced"]["installed"] is None
    assert packages["nvidia-persistenced"]["downloadable"] == ["535.171.04-1~deb12u1"]


def test_parse_policy_skips_apt_messages_and_keeps_the_answer():
    """apt's warning comes last, on stderr; the capture holds both streams, as a shell probe's 2>&1 gives."""
    packages = parse_policy(CUDA_POLICY_UNREADABLE_PREFERENCES)
    assert len(packages) == 7
    assert packages["cuda-drivers"]["candidate"] == "550.54.15-1"        # without the pins apt could not read
    assert packages["cuda-drivers"]["priorities"] == {"550.54.15-1": 500}
    assert apt_messages(CUDA_POLICY_UNREADABLE_PREFERENCES) == [
        "W: Unable to read /etc/apt/preferences.d/gpufleet-nvidia-driver - open (13: Permission denied)"]
    assert apt_messages(CUDA_POLICY) == []


def test_parse_policy_messages_first_and_in_between():
    noisy = ("W: Target Packages (Packages) is configured multiple times in /etc/apt/sources.list.d/cuda.list:1 "
             "and /etc/apt/sources.list.d/gpufleet-cuda.sources:1\n"
             + CUDA_POLICY.replace("libnccl2:\n", "N: Ignoring file 'cuda.list.old' in directory "
                                   "'/etc/apt/sources.list.d/' as it has an invalid filename extension\nlibnccl2:\n"))
    assert parse_policy(noisy) == parse_policy(CUDA_POLICY)
    assert [line[:2] for line in apt_messages(noisy)] == ["W:", "N:"]


@pytest.mark.parametrize("text", ["", "\n", "W: Unable to read /etc/apt/preferences - open (13: Permission denied)\n"])
def test_parse_policy_nothing_known(text):
    assert parse_policy(text) == {}


@pytest.mark.parametrize("text", ["Package: libnccl2\nVersion: 2.18.3-1+cuda12.1\n", "libnccl2 ii  2.18.3-1\n",
                                  None])
def test_parse_policy_rejects_other_text(text):
    with pytest.raises(AptParseError):
        parse_policy(text)


def test_parse_policy_empty_version_table():
    """A name apt knows only from other packages' relations: a header and (none), no versions."""
    packages = parse_policy("nvidia-smi:\n  Installed: (none)\n  Candidate: (none)\n  Version table:\n")
    assert packages == {"nvidia-smi": {"installed": None, "candidate": None, "versions": [], "priorities": {},
                                       "downloadable": []}}


def test_parse_dpkg_binary_package_format():
    installed, held = parse_dpkg(DEBIAN_DPKG)
    assert installed == {"libnvidia-ml1:amd64": "535.261.03-1", "nvidia-alternative": "535.261.03-1",
                         "nvidia-smi": "535.261.03-1"}
    assert held == {"libnvidia-ml1:amd64": True, "nvidia-alternative": False, "nvidia-driver": False,
                    "nvidia-persistenced": False, "nvidia-smi": True}


def test_parse_dpkg_package_format():
    installed, held = parse_dpkg(DEBIAN_DPKG_PACKAGE)
    assert installed["libnvidia-ml1"] == "535.261.03-1"
    assert "nvidia-persistenced" not in installed and held["nvidia-persistenced"] is False


def test_parse_dpkg_states():
    text = ("a ii  1.0\nb hi  1.0\nc rc  1.0\nd iU  1.0\ne iF  1.0\nf iiR 1.0\ng ri  1.0\nh un  \n"
            "i hc  1.0\nj pn  \n")
    installed, held = parse_dpkg(text)
    assert installed == {"a": "1.0", "b": "1.0"}
    assert sorted(name for name, is_held in held.items() if is_held) == ["b", "i"]
    assert len(held) == 10


@pytest.mark.parametrize("text", ["dpkg-query: no packages found matching cuda\n", "libnccl2\n",
                                  "libnccl2 installed 2.18.3-1\n", None])
def test_parse_dpkg_rejects_other_text(text):
    with pytest.raises(AptParseError):
        parse_dpkg(text)


# --- the plan over the captures ------------------------------------------------------------------------------

def test_branch_prefix_upgrades_the_held_driver_and_holds():
    result = plan(CUDA_POLICY, CUDA_DPKG, ["cuda-drivers-535=535.*", "nvidia-utils-535=535.*"], hold=True)
    driver = result["packages"]["cuda-drivers-535"]
    assert driver == {
        "wanted": "535.183.01-1", "installed": "535.161.08-1", "candidate": "535.183.01-1", "held": True,
        "action": "upgrade",
        "reason": "Installed 535.161.08-1 is older than the wanted version 535.183.01-1, apt's candidate, which "
                  "matches 535.*. dpkg holds it at 535.161.08-1.",
    }
    assert result["install"] == ["cuda-drivers-535=535.183.01-1", "nvidia-utils-535=535.183.01-1"]
    assert result["hold"] == ["cuda-drivers-535", "nvidia-utils-535"]     # being installed: hold again
    assert result["missing"] == [] and result["release"] == []


def test_held_at_the_wrong_exact_version_is_downgraded_and_released():
    result = plan(CUDA_POLICY.replace("Installed: 535.161.08-1", "Installed: 535.183.01-1", 1),
                  CUDA_DPKG.replace("cuda-drivers-535 hi  535.161.08-1", "cuda-drivers-535 hi  535.183.01-1"),
                  ["cuda-drivers-535=535.161.08-1"], hold=False)
    driver = result["packages"]["cuda-drivers-535"]
    assert (driver["action"], driver["held"], driver["wanted"]) == ("downgrade", True, "535.161.08-1")
    assert driver["reason"].startswith("Installed 535.183.01-1 is newer than the wanted version 535.161.08-1, "
                                       "the version asked for.")
    assert result["install"] == ["cuda-drivers-535=535.161.08-1"]
    assert result["release"] == ["cuda-drivers-535"]


def test_pattern_keeps_the_installed_build_when_the_candidate_does_not_match():
    result = plan(CUDA_POLICY, CUDA_DPKG, ["libnccl2=*+cuda12.1"], hold=True)
    nccl = result["packages"]["libnccl2"]
    assert (nccl["action"], nccl["wanted"], nccl["candidate"]) == ("keep", "2.17.1-1+cuda12.1", "2.19.3-1+cuda12.2")
    assert nccl["reason"] == ("Installed 2.17.1-1+cuda12.1 is kept: it matches *+cuda12.1 "
                              "(apt's candidate 2.19.3-1+cuda12.2 does not).")
    assert result["install"] == [] and result["hold"] == []               # held already


def test_pattern_takes_the_newest_matching_when_not_installed():
    policy = CUDA_POLICY.replace("Installed: 2.17.1-1+cuda12.1", "Installed: (none)")
    result = plan(policy, "", ["libnccl2=*+cuda12.1", "libnccl2-doc=2.*"])
    assert result["wanted"] == {"libnccl2": "2.18.3-1+cuda12.1", "libnccl2-doc": None}
    assert result["packages"]["libnccl2"]["reason"] == (
        "Not installed; the wanted version 2.18.3-1+cuda12.1 is the newest version apt offers that matches "
        "*+cuda12.1 (apt's candidate 2.19.3-1+cuda12.2 does not).")
    assert result["packages"]["libnccl2-doc"]["reason"] == (
        "apt has no version of libnccl2-doc that matches 2.* (apt offers no version of it).")


def test_unpacked_but_not_configured_is_installed_again():
    result = plan(CUDA_POLICY, "libnccl2 iU  2.17.1-1+cuda12.1\n", ["libnccl2=*+cuda12.1"])
    assert result["install"] == ["libnccl2=2.18.3-1+cuda12.1"]
    assert result["packages"]["libnccl2"]["reason"].endswith(
        "dpkg has 2.17.1-1+cuda12.1 only partly installed.")


def test_negative_pins_hold_back_patterns_not_exact_versions():
    result = plan(CUDA_POLICY, CUDA_DPKG, ["cuda-drivers=550.*", "cuda-drivers-550=550.54.15-1"])
    assert result["missing"] == ["cuda-drivers"]
    assert result["packages"]["cuda-drivers"]["reason"] == (
        "The host's apt preferences pin every version of cuda-drivers that matches 550.* below 0 "
        "(550.54.15-1 at -1); ask for one by its exact version to override the pin.")
    # apt-get install NAME=VERSION installs a version pinned at -1: asking for it is the override.
    assert result["install"] == ["cuda-drivers-550=550.54.15-1"]


def test_none_candidate():
    result = plan(CUDA_POLICY, CUDA_DPKG, ["cuda-drivers", "cuda-drivers-550=*"], hold=True)
    assert result["missing"] == ["cuda-drivers", "cuda-drivers-550"]
    assert result["wanted"] == {"cuda-drivers": None, "cuda-drivers-550": None}
    assert result["packages"]["cuda-drivers"]["candidate"] is None
    assert result["packages"]["cuda-drivers"]["reason"] == (
        "apt has no candidate for cuda-drivers (apt offers 550.54.15-1).")
    assert result["packages"]["cuda-drivers-550"]["reason"] == (
        "cuda-drivers-550 is not installed and apt has no candidate for it (apt offers 550.54.15-1).")
    assert result["install"] == [] and result["hold"] == []


def test_without_its_pins_apt_offers_the_wrong_branch():
    """What a plan looks like when apt could not read the preferences: the warning is the only sign."""
    result = plan(CUDA_POLICY_UNREADABLE_PREFERENCES, CUDA_DPKG, ["cuda-drivers"])
    assert result["install"] == ["cuda-drivers=550.54.15-1"]


def test_removed_package_with_config_left_is_installed_again():
    result = plan(DEBIAN_POLICY, DEBIAN_DPKG, ["nvidia-persistenced", "nvidia-driver=*"], hold=True)
    persistenced = result["packages"]["nvidia-persistenced"]
    assert (persistenced["installed"], persistenced["action"], persistenced["held"]) == (None, "install", False)
    assert persistenced["reason"] == "Not installed; the wanted version 535.171.04-1~deb12u1 is apt's candidate."
    assert result["install"] == ["nvidia-persistenced=535.171.04-1~deb12u1", "nvidia-driver=535.309.01-0+deb12u1"]
    assert result["hold"] == ["nvidia-persistenced", "nvidia-driver"]


@pytest.mark.parametrize("name,arch", [("libnvidia-ml1:amd64", None), ("libnvidia-ml1:amd64", "amd64"),
                                       ("libnvidia-ml1", None), ("libnvidia-ml1", "amd64")])
def test_multiarch_names(name, arch):
    """apt-cache policy prints libnvidia-ml1:amd64 bare (native); dpkg prints it qualified (Multi-Arch: same)."""
    result = plan(DEBIAN_POLICY, DEBIAN_DPKG, [name + "=535.*"], hold=False, arch=arch)
    entry = result["packages"][name]
    assert (entry["installed"], entry["held"], entry["wanted"], entry["action"]) == (
        "535.261.03-1", True, "535.309.01-0+deb12u1", "upgrade")
    assert result["install"] == [name + "=535.309.01-0+deb12u1"]
    assert result["release"] == [name]


def test_multiarch_foreign_architecture():
    policy = DEBIAN_POLICY + ("libnvidia-ml1:i386:\n  Installed: (none)\n  Candidate: 535.309.01-0+deb12u1\n"
                              "  Version table:\n     535.309.01-0+deb12u1 500\n        500 "
                              "http://deb.debian.org/debian-security bookworm-security/non-free i386 Packages\n")
    result = plan(policy, DEBIAN_DPKG, ["libnvidia-ml1:i386", "libnvidia-ml1:amd64=*"], arch="amd64")
    assert result["packages"]["libnvidia-ml1:i386"]["installed"] is None
    assert result["install"] == ["libnvidia-ml1:i386=535.309.01-0+deb12u1"]
    assert result["packages"]["libnvidia-ml1:amd64"]["action"] == "keep"


def test_bare_name_is_not_taken_for_another_architecture():
    """Only libfoo:i386 is installed; apt's (native) answer for libfoo says not installed."""
    policy = ("libfoo:\n  Installed: (none)\n  Candidate: 1.2-1\n  Version table:\n     1.2-1 500\n"
              "        500 http://deb.debian.org/debian bookworm/main amd64 Packages\n")
    result = plan(policy, "libfoo:i386 ii  1.1-1\n", ["libfoo"])
    assert result["packages"]["libfoo"]["installed"] is None
    assert result["install"] == ["libfoo=1.2-1"]
    assert plan(policy, "libfoo:i386 ii  1.1-1\n", ["libfoo"], arch="amd64")["install"] == ["libfoo=1.2-1"]


def test_every_action():
    result = plan(DEBIAN_POLICY, DEBIAN_DPKG, ["nvidia-smi", "nvidia-alternative=*", "nvidia-driver",
                                               "libnvidia-ml1=535.261.03-1", "nvidia-legacy-check"])
    actions = dict((name, entry["action"]) for name, entry in result["packages"].items())
    assert actions == {"nvidia-smi": "upgrade", "nvidia-alternative": "keep", "nvidia-driver": "install",
                       "libnvidia-ml1": "keep", "nvidia-legacy-check": "missing"}
    assert list(result["wanted"]) == ["nvidia-smi", "nvidia-alternative", "nvidia-driver", "libnvidia-ml1",
                                      "nvidia-legacy-check"]
    assert all(entry["reason"].endswith(".") for entry in result["packages"].values())


def test_a_name_twice_is_an_error():
    with pytest.raises(AptPlanError, match="asked for twice"):
        plan(POLICY, DPKG, ["libnccl2", "libnccl2=2.18.*"])


def test_hold_must_be_a_boolean_or_none():
    with pytest.raises(AptPlanError):
        plan(POLICY, DPKG, ["libnccl2"], hold="yes")


# --- package items -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("item,expected", [
    ("libnccl2", ("libnccl2", "candidate", None)),
    ("libnccl2=2.18.3-1+cuda12.1", ("libnccl2", "exact", "2.18.3-1+cuda12.1")),
    ("gnupg=*", ("gnupg", "any", None)),
    ("cuda-drivers-535=535.*", ("cuda-drivers-535", "glob", "535.*")),
    ("libnccl2=*+cuda12.1", ("libnccl2", "glob", "*+cuda12.1")),
    ("libnccl2=*cuda12*", ("libnccl2", "glob", "*cuda12*")),
    ("libfoo:amd64=1:2.0-1", ("libfoo:amd64", "exact", "1:2.0-1")),
    ("g++-12", ("g++-12", "candidate", None)),
])
def test_parse_spec(item, expected):
    assert parse_spec(item) == expected


@pytest.mark.parametrize("item", ["", "=1.0", "libnccl2=", "libnccl2=2.*.3", "libnccl2=**", "lib nccl2",
                                  "libnccl2=1.0 beta", "-libnccl2", "libnccl2=a=b", 42, None, {"name": "x"}])
def test_parse_spec_rejects(item):
    with pytest.raises(AptPlanError):
        parse_spec(item)


@pytest.mark.parametrize("pattern,version,expected", [
    ("535.*", "535.183.01-1", True), ("535.*", "1:535.183.01-1", False), ("535.*", "550.54.15-1", False),
    ("*+cuda12.1", "2.18.3-1+cuda12.1", True), ("*+cuda12.1", "2.19.3-1+cuda12.2", False),
    ("*deb12*", "535.309.01-0+deb12u1", True), ("*", "anything", True), ("1.0", "1.0", True), ("1.0", "1.0-1", False),
])
def test_matches(pattern, version, expected):
    assert matches(pattern, version) is expected


# --- Debian versions ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("older_or_newer,other,expected", [
    ("535.183.01-1", "535.183.06-1", -1),
    ("1.0~rc1", "1.0", -1),
    ("1:0.1", "2.0", 1),
    ("2.18.3-1+cuda12.1", "2.19.3-1+cuda12.2", -1),
    ("2.18.3-1+cuda12.2", "2.18.3-1+cuda12.1", 1),
    ("535.309.01-0+deb12u1", "535.261.03-1", 1),
    ("535.171.04-1~deb12u1", "535.171.04-1", -1),
    ("1.0", "1.0-0", 0),
    ("0:1.0", "1.0", 0),
    ("1.0~~", "1.0~", -1),
    ("1.0~", "1.0", -1),
    ("1.0a", "1.0+", -1),
    ("1.0-1", "1.0.1", -1),
    ("1.2.3", "1.2.3.0", -1),
    ("2.36-9+deb12u14", "2.36-9+deb12u7", 1),
    ("10", "9", 1),
    ("1.001", "1.1", 0),
    ("1.0-1-2", "1.0-1-10", -1),
])
def test_version_compare_known_pairs(older_or_newer, other, expected):
    assert version_compare(older_or_newer, other) == expected
    assert version_compare(other, older_or_newer) == -expected


@pytest.mark.parametrize("version", ["", "a b", "x:1.0", None])
def test_version_compare_rejects(version):
    with pytest.raises(AptPlanError):
        version_compare(version, "1.0")


_PART = st.text(alphabet="0123456789.+~ab", min_size=1, max_size=6)
_VERSIONS = st.builds(
    lambda epoch, upstream, revision: "%s%s%s" % (("%d:" % epoch) if epoch is not None else "", "1" + upstream,
                                                  ("-" + revision) if revision else ""),
    st.one_of(st.none(), st.integers(0, 3)), _PART, st.one_of(st.none(), _PART.filter(lambda r: r[0] != "~")))


@settings(max_examples=300, deadline=None)
@given(_VERSIONS, _VERSIONS, _VERSIONS)
def test_version_compare_is_a_total_order(a, b, c):
    assert version_compare(a, a) == 0
    assert version_compare(a, b) == -version_compare(b, a)
    if version_compare(a, b) <= 0 and version_compare(b, c) <= 0:
        assert version_compare(a, c) <= 0


DPKG_BIN = shutil.which("dpkg")


@pytest.mark.skipif(DPKG_BIN is None, reason="dpkg is not installed here")
@settings(max_examples=150, deadline=None)
@given(_VERSIONS, _VERSIONS)
def test_version_compare_agrees_with_dpkg(a, b):
    def dpkg_says(operator):
        return subprocess.run([DPKG_BIN, "--compare-versions", a, operator, b],
                              stderr=subprocess.DEVNULL, check=False).returncode == 0
    expected = 0 if dpkg_says("eq") else (1 if dpkg_says("gt") else -1)
    assert version_compare(a, b) == expected


# --- apt-cache show ---------------------------------------------------------------------------------------

UBUNTU_SHOW = fixture("ubuntu2204-nvidia-headless.show.txt")


def test_parse_show_reads_summary_and_depends_of_the_real_transitional_package():
    records = parse_show(UBUNTU_SHOW)
    assert records["nvidia-headless-535-server"] == {"535.309.01-0ubuntu0.22.04.2": {
        "summary": "NVIDIA headless metapackage (transitional package)",
        "depends": ["nvidia-headless-580-server"]}}
    assert records["nvidia-headless-580-server"]["580.178.04-0ubuntu0.22.04.1"]["depends"] == [
        "nvidia-headless-no-dkms-580-server", "nvidia-dkms-580-server"]


def test_parse_show_lists_each_name_once_without_constraints():
    depends = parse_show(UBUNTU_SHOW)["nvidia-headless-no-dkms-580-server"]["580.178.04-0ubuntu0.22.04.1"]["depends"]
    assert depends == ["nvidia-kernel-common-580-server", "nvidia-kernel-source-580-server",
                       "libnvidia-compute-580-server", "nvidia-compute-utils-580-server", "libnvidia-cfg1-580-server"]


def test_parse_show_alternatives_pre_depends_and_continuations():
    text = ("Package: foo\nVersion: 1.0-1\nPre-Depends: dpkg (>= 1.17)\nDepends: bar:any | baz (>= 2), dpkg\n"
            "Description: first line\n second line\n\nPackage: foo\nVersion: 1.0-1\nDescription: duplicate\n")
    assert parse_show(text) == {"foo": {"1.0-1": {"summary": "first line", "depends": ["dpkg", "bar", "baz"]}}}


@pytest.mark.parametrize("text", ["Reading package lists...\nnot a stanza\n", "Foo: bar\n"])
def test_parse_show_refuses_other_text(text):
    with pytest.raises(AptParseError):
        parse_show(text)


def test_parse_show_of_nothing_is_empty():
    assert parse_show("") == {}
    assert parse_show("N: Unable to locate package foo\n") == {}
