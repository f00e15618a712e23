"""module_utils/apt_change: a driver change planned from apt-get's simulation, over real apt 2.4 / dpkg 1.21
output of an Ubuntu 22.04 node with Ubuntu's 580-server packages (fixtures/apt-change/README.md)."""
import pathlib

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils.apt_change import (
    obsolete_packages,
    parse_family,
    parse_simulation,
    parse_sources,
    problem_packages,
    release_holds,
    set_after,
    simulation_problems,
    transaction,
    upstream,
)

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "apt-change"
SOURCES = ["^nvidia-graphics-drivers(-|$)", "^fabric-manager-", "^libnvidia-nscq"]
OLD, NEW = "580.178.04-0ubuntu0.22.04.1", "580.196.07-0ubuntu0.22.04.1+repack1"


def read(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


def test_the_family_is_every_installed_package_of_the_driver_sources():
    family = parse_family(read("jammy-dpkg-query-family.txt"), SOURCES)
    assert sorted(family) == [
        "libnvidia-cfg1-580-server", "libnvidia-compute-580-server", "libnvidia-nscq-580",
        "nvidia-compute-utils-580-server", "nvidia-dkms-580-server", "nvidia-fabricmanager-580",
        "nvidia-firmware-580-server-580.196.07", "nvidia-headless-580-server", "nvidia-headless-no-dkms-580-server",
        "nvidia-kernel-common-580-server", "nvidia-kernel-source-580-server", "nvidia-utils-580-server"]
    assert all(entry["held"] and entry["state"] == "i" and entry["version"] == NEW for entry in family.values())
    assert family["nvidia-fabricmanager-580"]["source"] == "fabric-manager-580"


def test_names_join_the_family_and_removed_packages_do_not():
    text = ("dkms\tdkms\t2.8.7-2ubuntu2.2\tii \n"
            "cuda-drivers-535\t\t535.161.08-1\thi \n"
            "nvidia-utils-535\t\t535.161.08-1\trc \n"
            "nvidia-dkms-535\t\t535.161.08-1\tiU \n")
    family = parse_family(text, SOURCES, ["cuda-drivers-535", "nvidia-utils-535", "nvidia-dkms-535"])
    assert sorted(family) == ["cuda-drivers-535", "nvidia-dkms-535"]   # config files only: not installed
    assert family["cuda-drivers-535"] == {"version": "535.161.08-1", "source": "cuda-drivers-535", "state": "i", "held": True}
    assert family["nvidia-dkms-535"]["state"] == "U" and not family["nvidia-dkms-535"]["held"]


def test_text_that_is_not_dpkg_query_output_is_refused():
    with pytest.raises(ValueError):
        parse_family("nvidia-utils-580-server 580.178.04 hi\n", SOURCES)


def test_release_holds_changes_only_the_named_stanzas():
    status = ("Package: a\nStatus: hold ok installed\nVersion: 1\n\n"
              "Package: b\nStatus: hold ok installed\nVersion: 1\n\n"
              "Package: c\nStatus: install ok installed\nVersion: 1\n")
    lifted = release_holds(status, ["a", "c"])
    assert lifted == status.replace("Package: a\nStatus: hold", "Package: a\nStatus: install")


def test_a_flavour_change_and_rollback_simulated():
    simulated = parse_simulation(read("jammy-580-flavour-open-rollback.txt"))
    assert simulated["remove"] == {"nvidia-headless-580-server": NEW, "nvidia-dkms-580-server": NEW,
                                   "nvidia-headless-no-dkms-580-server": NEW, "nvidia-kernel-source-580-server": NEW}
    assert simulated["install"]["nvidia-firmware-580-server-580.178.04"] == {"from": None, "to": OLD}
    assert simulated["install"]["libnvidia-compute-580-server"] == {"from": NEW, "to": OLD}
    assert simulated["install"]["nvidia-headless-580-server-open"] == {"from": None, "to": OLD}
    assert simulation_problems(read("jammy-580-flavour-open-rollback.txt")) == []


def test_the_firmware_named_for_the_other_release_is_obsolete():
    """apt leaves nvidia-firmware-580-server-580.196.07 installed (nothing conflicts with it): the change removes
    it because its name carries a release that is not kept."""
    family = parse_family(read("jammy-dpkg-query-family.txt"), SOURCES)
    simulated = parse_simulation(read("jammy-580-flavour-open-rollback.txt"))
    touched = set(simulated["install"]) | set(simulated["remove"])
    assert obsolete_packages(family, touched, {"580.178.04"}) == ["nvidia-firmware-580-server-580.196.07"]
    assert obsolete_packages(family, touched, {"580.178.04", "580.196.07"}) == []


def test_other_branches_by_pattern():
    family = {"nvidia-utils-580-server": {"version": "580.178.04-0ubuntu0.22.04.1"},
              "nvidia-utils-595-server": {"version": "595.112.07-0ubuntu0.22.04.1"},
              "nvidia-driver-pinning-595.91.07": {"version": "595.91.07-1"},
              "linux-modules-nvidia-595-server-5.15.0-580-generic": {"version": "5.15.0-580.1"}}
    # the role's known branches but the chosen one, as a word not after a version (the kernel ABI 580 is not)
    pattern = "(^|(?<![0-9.])-)(535|550|570|580|590)(-|$)"
    # another branch's name, and NVIDIA's locking package of another release of the branch
    assert obsolete_packages(family, set(), {"595.112.07"}, [pattern]) == [
        "nvidia-driver-pinning-595.91.07", "nvidia-utils-580-server"]
    assert obsolete_packages(family, {"nvidia-driver-pinning-595.91.07"}, {"595.112.07"}, [pattern]) == [
        "nvidia-utils-580-server"]


def test_the_transaction_names_the_family_and_leaves_new_dependencies_to_apt():
    family = parse_family(read("jammy-dpkg-query-family.txt"), SOURCES)
    simulated = parse_simulation(read("jammy-580-flavour-open-rollback.txt"))
    simulated["remove"]["nvidia-firmware-580-server-580.196.07"] = NEW
    wanted = {"nvidia-headless-580-server-open": OLD, "nvidia-utils-580-server": OLD}
    arguments = transaction(wanted, simulated, family)
    assert "nvidia-headless-580-server-open=%s" % OLD in arguments
    assert "libnvidia-compute-580-server=%s" % OLD in arguments          # held before: named at its version
    assert not any(item.startswith("nvidia-dkms-580-server-open=") for item in arguments)   # new: apt's to pull
    assert arguments[-5:] == ["nvidia-dkms-580-server-", "nvidia-firmware-580-server-580.196.07-",
                              "nvidia-headless-580-server-", "nvidia-headless-no-dkms-580-server-",
                              "nvidia-kernel-source-580-server-"]


@pytest.mark.parametrize("name, kind, packages", [
    ("jammy-580-unmet-without-pin.txt", "Depends", ["libnvidia-nscq-580", "nvidia-fabricmanager-580", "nvidia-utils-580-server"]),
    ("jammy-580-held-broken.txt", "Conflicts", ["nvidia-dkms-580-server", "nvidia-dkms-580-server-open",
                                                "nvidia-headless-580-server", "nvidia-headless-580-server-open",
                                                "nvidia-kernel-source-580-server", "nvidia-kernel-source-580-server-open"]),
])
def test_apt_refusals_are_problems_naming_the_packages(name, kind, packages):
    problems = simulation_problems(read(name))
    assert problems[-1].startswith("E: ")
    assert all(": %s: " % kind in line for line in problems[:-1]), problems
    assert problem_packages(problems) == packages
    assert parse_simulation(read(name)) == {"install": {}, "remove": {}}


def test_foreign_architectures_keep_their_qualifier():
    text = ("libnvidia-compute-580-server:amd64\tnvidia-graphics-drivers-580-server\t%s\thi \n"
            "libnvidia-compute-580-server:i386\tnvidia-graphics-drivers-580-server\t%s\thi \n" % (OLD, OLD))
    assert sorted(parse_family(text, SOURCES, native="amd64")) == [
        "libnvidia-compute-580-server", "libnvidia-compute-580-server:i386"]
    simulated = parse_simulation("Remv libnvidia-compute-580-server:i386 [%s]\n" % OLD)
    assert transaction({}, simulated) == ["libnvidia-compute-580-server:i386-"]


def test_a_version_counts_only_as_a_word_of_the_name():
    """Branch 58 would be a substring of libnvidia-nscq-580; only -58 ending the name counts."""
    family = {"libnvidia-nscq-580": {"version": "58-1"}, "nvidia-firmware-58": {"version": "58-1"}}
    assert obsolete_packages(family, set(), {"59"}) == ["nvidia-firmware-58"]


@pytest.mark.parametrize("version, expected", [
    ("580.178.04-0ubuntu0.22.04.1", "580.178.04"), ("1:580.178.04-1", "580.178.04"),
    ("580.196.07-0ubuntu0.22.04.1+repack1", "580.196.07"), ("595.91.07", "595.91.07"), ("2:1.0-2-3", "1.0-2")])
def test_upstream(version, expected):
    assert upstream(version) == expected


def test_the_set_after_the_change_takes_the_new_packages_of_its_sources():
    """apt-cache show's Source field (with or without a version in parentheses) decides which new packages join."""
    family = parse_family(read("jammy-dpkg-query-family.txt"), SOURCES)
    simulated = parse_simulation(read("jammy-580-flavour-open-rollback.txt"))
    simulated["install"]["dkms"] = {"from": None, "to": "2.8.7-2ubuntu2.2"}
    shown = ("Package: nvidia-headless-580-server-open\nSource: nvidia-graphics-drivers-580-server\nVersion: %s\n\n"
             "Package: nvidia-firmware-580-server-580.178.04\nSource: nvidia-graphics-drivers-580-server (580.178.04-0ubuntu0.22.04.1)\n\n"
             "Package: dkms\nVersion: 2.8.7-2ubuntu2.2\n" % OLD)
    sources = parse_sources(shown)
    assert sources["nvidia-firmware-580-server-580.178.04"] == "nvidia-graphics-drivers-580-server"
    after = set_after(family, simulated, sources, SOURCES)
    assert "dkms" not in after and "nvidia-headless-580-server-open" in after
    assert "nvidia-firmware-580-server-580.178.04" in after and "nvidia-headless-580-server" not in after
