"""nvidia_driver_plan (plugins/filter/nvidia_driver.py) and its evidence readers (module_utils/nvidia_driver_plan.py):
each decision of the nvidia_driver role on its own, then the whole plan from one evidence dict.

The data are the role's own, abridged: the GPU table's entries from NVIDIA/open-gpu-kernel-modules' README
("Compatible GPUs", as vars/main.yml cites it), the package names of Ubuntu 22.04's archive and of NVIDIA's
repository (vars/Ubuntu.yml), and gpu_facts' shape. The PCI scan lines are what preflight's
``find -L /sys/bus/pci/devices ... -exec grep -H . {} +`` prints; dpkg-query's lines are its
``${db:Status-Abbrev} ${binary:Package}`` format. The role-level tests (tests/unit/roles/test_nvidia_driver_*.py)
render the same plan from the role's full data."""
import base64
import copy
import json
import re

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter import nvidia_driver as plan_filter
from ansible_collections.gpufleet.node.plugins.filter.nvidia_driver import FilterModule
from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_driver_plan as readers

FILTERS = FilterModule().filters()
nvidia_driver_plan = FILTERS["nvidia_driver_plan"]
preferences_differ = FILTERS["nvidia_driver_preferences_differ"]

TABLE = {
    "open_only_ids": {"0x2342": "NVIDIA GH200 120GB / NVIDIA GH200 480GB", "0x2901": "NVIDIA B200",
                      "0x2941": "NVIDIA GB200", "0x2bb5": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                      "0x3182": "NVIDIA B300 SXM6 AC", "0x31c2": "NVIDIA GB300"},
    "open_lowest_id": "0x1e02",
    "open_unclassified_from": "0x2900",
    "open_only_architectures": ["Blackwell"],
    "open_only_names": "GH200",
    "proprietary_only_architectures": ["Kepler", "Maxwell", "Pascal", "Volta"],
    "nvswitch_gen4_ids": {"0x2901": "NVIDIA B200", "0x3182": "NVIDIA B300 SXM6 AC"},
    "switch_tray_ids": {"0x2941": "NVIDIA GB200", "0x31c2": "NVIDIA GB300"},
    "switch_tray_names": r"\bGB[23]00\b",
}
LIFECYCLE = {"535": {"end_of_life": "June 2026"}, "550": {"end_of_life": "ended"},
             "570": {"end_of_life": "February 2026"}, "580": {"end_of_life": "June 2028"},
             "590": {"end_of_life": "none published (short-lived)"}, "595": {"end_of_life": "March 2027"}}
# Ubuntu 22.04's archive (vars/Ubuntu.yml's distro entry, the branch-named list abridged).
DISTRO = {
    "branches": ["535", "580", "595"],
    "flavours": {"server": ["nvidia-headless-{branch}-server", "nvidia-utils-{branch}-server"],
                 "desktop": ["nvidia-driver-{branch}"],
                 "open": ["nvidia-headless-{branch}-server-open", "nvidia-utils-{branch}-server"],
                 "signed": ["linux-modules-nvidia-{branch}-server-{kernel}", "nvidia-headless-no-dkms-{branch}-server",
                            "nvidia-utils-{branch}-server"]},
    "open_variants": {"desktop": ["nvidia-driver-{branch}-open"],
                      "signed": ["linux-modules-nvidia-{branch}-server-open-{kernel}",
                                 "nvidia-headless-no-dkms-{branch}-server-open", "nvidia-utils-{branch}-server"]},
    "main": "nvidia-utils-{branch}-server",
    "fabricmanager": ["nvidia-fabricmanager-{branch}", "libnvidia-nscq-{branch}"],
    "pinned_with": ["libnvidia-compute-{branch}-server", "nvidia-dkms-{branch}-server"],
    "unversioned": [],
    "components": ["main", "restricted", "multiverse"],
}
# NVIDIA's repository from 590 on: unversioned names and a pinning package ({pinning}).
CUDA_595 = {
    "branches": ["580", "590", "595"],
    "flavours": {"server": ["{pinning}", "libnvidia-compute", "cuda-drivers"],
                 "open": ["{pinning}", "libnvidia-compute", "nvidia-open"]},
    "main": "libnvidia-compute",
    "fabricmanager": ["nvidia-fabricmanager", "libnvidia-nscq"],
    "pinned_with": ["cuda-drivers-{branch}", "nvidia-driver-pinning-{branch}"],
    "unversioned": [],
    "components": [],
}
SETTINGS = {"source": "distro", "branch": "580", "version": "", "flavour": "server", "kernel_modules": "auto",
            "kernel_flavour": "", "fabricmanager": "auto", "verify": "auto"}


def scan_lines(functions):
    """What the PCI scan prints for {address: (vendor, device, class)}."""
    lines = []
    for address, values in functions.items():
        for name, value in zip(("vendor", "device", "class"), values):
            lines.append("/sys/bus/pci/devices/%s/%s:%s" % (address, name, value))
    return lines


def gpu_facts(devices=(), nvswitches=0, fabric=False, **extra):
    facts = {"state": "ok" if devices else "driver_not_loaded",
             "devices": [dict(index=index, **device) for index, device in enumerate(devices)],
             "pci": {"nvidia_gpus": len(devices), "nvswitches": nvswitches},
             "topology": {"nvswitch": fabric or bool(nvswitches)}}
    facts.update(extra)
    return facts


def slurped(text):
    return {"content": base64.b64encode(text.encode("utf-8")).decode("ascii"), "encoding": "base64"}


def evidence(settings=None, source=None, gpu=None, results=None, **host):
    host_facts = {"kernel": "5.15.0-204-generic", "distribution": "Ubuntu", "release": "jammy", "gpu": gpu, "container": False,
                  "check_mode": False, "reboot_required": False, "month": "2026-12"}
    host_facts.update(host)
    return {"settings": dict(SETTINGS, **(settings or {})),
            "platform": {"source": copy.deepcopy(DISTRO if source is None else source), "pinning": "",
                         "lifecycle": LIFECYCLE, "family_sources": ["^nvidia-graphics-drivers(-|$)"],
                         "gpu_table": TABLE},
            "host": host_facts,
            "results": results or {}}


# --- The evidence readers -------------------------------------------------------------------------------------


def test_the_scan_keeps_nvidia_gpus_only():
    lines = scan_lines({
        "0000:17:00.0": ("0x10de", "0x2901", "0x030200"),   # B200, a 3D controller
        "0000:17:00.1": ("0x10de", "0x22ba", "0x040300"),   # its audio function
        "0000:10:00.0": ("0x10de", "0x22a3", "0x068000"),   # an NVSwitch of the H100 generation
        "0000:00:00.0": ("0x8086", "0x2901", "0x060000"),   # another vendor's 0x2901
        "0000:3b:00.0": ("0x10de", "0x1DB1", "0x030000"),   # V100, a VGA controller, upper case
    }) + ["grep: /sys/bus/pci/devices/0000:99:00.0/device: No such device", ""]
    assert readers.pci_gpus(lines) == {"0000:17:00.0": "0x2901", "0000:3b:00.0": "0x1db1"}
    assert readers.pci_gpus(None) == {} and readers.pci_gpus([]) == {}


def test_fact_gpus_use_the_address_sysfs_writes():
    gpu = gpu_facts([{"name": "NVIDIA B200", "architecture": "Blackwell", "pci_bus_id": "00000000:8F:00.0"},
                     {"name": None, "architecture": None, "pci_bus_id": None}])
    assert readers.fact_gpus(gpu) == [("0000:8f:00.0", "NVIDIA B200", "Blackwell"), ("", "GPU", "")]
    assert readers.fact_gpus(None) == [] and readers.fact_gpus({"state": "driver_not_loaded"}) == []


def test_half_installed_reads_states_between_installed_and_not():
    lines = ["ii  libc6:amd64", "iU  nvidia-utils-580-server", "hF  libnvidia-compute-580-server",
             "iHR nvidia-dkms-580-server", "rc  nvidia-utils-535-server", "iW  nvidia-kernel-common-580-server",
             "it  initramfs-tools", "hi  nvidia-headless-580-server", "iiR libfoo"]
    assert readers.half_installed(lines) == ["nvidia-utils-580-server", "libnvidia-compute-580-server",
                                             "nvidia-dkms-580-server", "nvidia-kernel-common-580-server",
                                             "initramfs-tools", "libfoo"]
    assert readers.half_installed(None) == []


def test_the_record_of_an_earlier_run():
    record = {"source": "distro", "branch": "580", "packages": ["nvidia-headless-580-server"]}
    assert readers.read_record(slurped(json.dumps(record))) == record
    assert readers.read_record({"failed": True, "msg": "file not found"}) == {}
    assert readers.read_record(None) == {}
    with pytest.raises(ValueError):
        readers.read_record(slurped("[1, 2]"))


def test_registered_results_as_ansible_tests_read_them():
    assert readers.skipped({"skipped": True}) and not readers.skipped({"changed": False}) and not readers.skipped(None)
    assert readers.changed({"changed": True}) and not readers.changed({"changed": False})
    assert readers.changed({"results": [{"changed": False}, {"changed": True}]})
    assert not readers.changed(None) and not readers.changed({"skipped": True})


# --- The branch's lifecycle ------------------------------------------------------------------------------------


@pytest.mark.parametrize("branch, month, ended", [
    ("535", "2026-06", False),     # its last month
    ("535", "2026-07", True),
    ("550", "2020-01", True),      # ended, no date
    ("590", "2099-01", False),     # no end of life published
    ("580", "2026-12", False),
    ("999", "2026-12", False),     # not in the table
])
def test_a_branch_ends_after_its_last_month(branch, month, ended):
    assert plan_filter.branch_lifecycle(LIFECYCLE, branch, month)[1] is ended


def test_a_lifecycle_month_that_is_no_month_is_an_error():
    with pytest.raises(AnsibleFilterError, match="not a month and a year"):
        plan_filter.branch_lifecycle({"535": {"end_of_life": "Junr 2026"}}, "535", "2026-12")


# --- The GPUs and their kernel modules -------------------------------------------------------------------------


def test_open_only_by_device_id_architecture_and_name():
    pci = {"0000:17:00.0": "0x2901", "0000:18:00.0": "0x2330"}           # B200, H100 SXM
    devices = [("0000:19:00.0", "NVIDIA RTX 6000D", "Blackwell"), ("0000:1a:00.0", "NVIDIA GH200 480GB", "Hopper"),
               ("0000:18:00.0", "NVIDIA H100 80GB HBM3", "Hopper")]
    gpus = plan_filter.classify_gpus(pci, devices, TABLE)
    assert gpus["open_only"] == {"0000:17:00.0": "NVIDIA B200", "0000:19:00.0": "NVIDIA RTX 6000D",
                                 "0000:1a:00.0": "NVIDIA GH200 480GB"}
    assert gpus["pre_turing"] == {} and gpus["unclassified"] == {}


def test_pre_turing_by_device_id_and_architecture():
    gpus = plan_filter.classify_gpus({"0000:3b:00.0": "0x1db1", "0000:3c:00.0": "0x1e02"},
                                     [("0000:5e:00.0", "Tesla P100-PCIE-16GB", "Pascal")], TABLE)
    assert gpus["pre_turing"] == {"0000:3b:00.0": "PCI device 10de:1db1", "0000:5e:00.0": "Tesla P100-PCIE-16GB"}
    assert gpus["open_only"] == {}


def test_unclassified_until_the_driver_names_the_architecture():
    pci = {"0000:17:00.0": "0x3301", "0000:18:00.0": "0x2bb9", "0000:19:00.0": "0x2901"}
    assert plan_filter.classify_gpus(pci, [], TABLE)["unclassified"] == {
        "0000:17:00.0": "PCI device 10de:3301", "0000:18:00.0": "PCI device 10de:2bb9"}
    answered = [("0000:18:00.0", "NVIDIA RTX 6000D", "Blackwell"), ("0000:17:00.0", "NVIDIA GPU", "")]
    assert plan_filter.classify_gpus(pci, answered, TABLE)["unclassified"] == {"0000:17:00.0": "PCI device 10de:3301"}


@pytest.mark.parametrize("setting, flavour, open_only, modules", [
    ("auto", "server", {"0000:17:00.0": "NVIDIA B200"}, "open"),
    ("auto", "server", {}, "proprietary"),
    ("auto", "open", {}, "open"),
    ("open", "server", {}, "open"),
    ("proprietary", "server", {"0000:17:00.0": "NVIDIA B200"}, "proprietary"),   # then preflight refuses
    ("proprietary", "open", {}, "open"),                                          # a contradiction preflight refuses
])
def test_kernel_modules(setting, flavour, open_only, modules):
    assert plan_filter.kernel_modules(setting, flavour, open_only) == modules


B200 = {"0000:17:00.0": "NVIDIA B200"}
V100 = {"0000:3b:00.0": "Tesla V100-SXM2-32GB"}


def module_errors(modules, flavour="server", open_only=None, pre_turing=None, variants=("server", "open")):
    gpus = {"open_only": open_only or {}, "pre_turing": pre_turing or {}, "unclassified": {}}
    lists = dict((kind, plan_filter.gpu_list(found)) for kind, found in gpus.items())
    return plan_filter.module_errors({"source": "distro", "flavour": flavour}, "Ubuntu", gpus, lists, modules,
                                     dict((name, []) for name in variants))


def test_no_module_errors_where_the_gpus_take_the_modules():
    assert module_errors("open", open_only=B200) == [] and module_errors("proprietary", pre_turing=V100) == []


def test_blackwell_with_the_proprietary_modules_is_refused_naming_the_gpus():
    errors = module_errors("proprietary", open_only=B200)
    assert len(errors) == 1 and "require the open GPU kernel modules" in errors[0]
    assert plan_filter.gpu_list(B200) in errors[0] and "nvidia_driver_kernel_modules: auto or open" in errors[0]


def test_volta_with_the_open_modules_is_refused():
    errors = module_errors("open", pre_turing=V100)
    assert len(errors) == 1 and errors[0].startswith("The open GPU kernel modules support Turing and later GPUs only")


@pytest.mark.parametrize("open_only, why", [(B200, "the GPUs require them: "), ({}, "nvidia_driver_kernel_modules: open")])
def test_a_flavour_without_open_modules_is_refused_naming_the_ones_with(open_only, why):
    errors = module_errors("open", flavour="desktop", open_only=open_only, variants=("server", "open"))
    assert errors == ["Source distro offers no open kernel modules for flavour desktop on Ubuntu (%s%s); choose open "
                      "or server." % (why, plan_filter.gpu_list(open_only) if open_only else "")]


def test_the_plan_carries_the_module_errors():
    plan = plan_filter.nvidia_driver_plan(evidence(settings={"kernel_modules": "proprietary"},
                                                   results={"pci_scan": {"stdout_lines": [
                                                       "/sys/bus/pci/devices/0000:17:00.0/vendor:0x10de",
                                                       "/sys/bus/pci/devices/0000:17:00.0/device:0x2901",
                                                       "/sys/bus/pci/devices/0000:17:00.0/class:0x030200"]}}))
    assert len(plan["module_errors"]) == 1 and "NVIDIA B200" in plan["module_errors"][0]


def test_gpu_lists_for_the_messages():
    assert plan_filter.gpu_list({"0000:8f:00.0": "NVIDIA B200", "0000:cc:00.0": "NVIDIA B200"}) == (
        "0000:8f:00.0 (NVIDIA B200), 0000:cc:00.0 (NVIDIA B200)")
    assert plan_filter.gpu_list({}) == ""


# --- Fabric manager and NVLSM ----------------------------------------------------------------------------------

B200_PCI = {"0000:%02x:00.0" % bus: "0x2901" for bus in (0x1b, 0x43, 0x52, 0x61, 0x9d, 0xc3, 0xd1, 0xdf)}


@pytest.mark.parametrize("name, setting, gpu, pci, devices, expected", [
    # HGX B200 before any driver: its device ids tell the 4th generation.
    ("hgx-b200", "auto", None, B200_PCI, [], (False, True, True, True)),
    ("hgx-b200 answering", "auto", gpu_facts(fabric=True), {}, [("0000:8f:00.0", "NVIDIA B200", "Blackwell")],
     (False, True, True, True)),
    # A GB200 compute tray: by device id, or by name where the bus told nothing.
    ("gb200 tray", "auto", gpu_facts(fabric=True), {"0000:29:00.0": "0x2941"}, [], (True, False, False, False)),
    ("gb200 tray by name", "auto", gpu_facts(fabric=True), {}, [("0000:29:00.0", "NVIDIA GB200", "Blackwell")],
     (True, False, False, False)),
    ("gb200 tray, always", "always", gpu_facts(fabric=True), {"0000:29:00.0": "0x2941"}, [],
     (True, False, True, False)),
    # HGX H100: NVSwitches on the bus (3rd generation): fabric manager, no NVLSM.
    ("hgx-h100", "auto", gpu_facts(nvswitches=4), {"0000:18:00.0": "0x2330"}, [], (False, False, True, False)),
    ("pcie", "auto", gpu_facts(), {"0000:18:00.0": "0x26b9"}, [], (False, False, False, False)),
    ("hgx-b200, never", "never", None, B200_PCI, [], (False, True, False, False)),
])
def test_fabric_manager_and_nvlsm(name, setting, gpu, pci, devices, expected):
    found = plan_filter.fabric(setting, gpu, pci, devices, TABLE)
    assert (found["switch_trays"], found["nvswitch_gen4"], found["fabricmanager"], found["nvlsm"]) == expected, name


# --- Packages and pins -----------------------------------------------------------------------------------------


def choice(source=None, modules="proprietary", fabricmanager=False, pinning="", **settings):
    return plan_filter.package_choice(copy.deepcopy(DISTRO if source is None else source), dict(SETTINGS, **settings),
                                      "5.15.0-204-generic", pinning, modules, fabricmanager)


@pytest.mark.parametrize("flavour, modules, packages", [
    ("server", "proprietary", ["nvidia-headless-580-server", "nvidia-utils-580-server"]),
    ("server", "open", ["nvidia-headless-580-server-open", "nvidia-utils-580-server"]),
    ("desktop", "open", ["nvidia-driver-580-open"]),
    ("signed", "proprietary", ["linux-modules-nvidia-580-server-5.15.0-204-generic",
                               "nvidia-headless-no-dkms-580-server", "nvidia-utils-580-server"]),
    ("signed", "open", ["linux-modules-nvidia-580-server-open-5.15.0-204-generic",
                        "nvidia-headless-no-dkms-580-server-open", "nvidia-utils-580-server"]),
    ("nonesuch", "open", []),
])
def test_the_flavours_packages(flavour, modules, packages):
    assert choice(flavour=flavour, modules=modules)["packages"] == packages


def test_fabric_manager_is_installed_only_where_needed():
    assert choice()["install"] == ["nvidia-headless-580-server", "nvidia-utils-580-server"]
    assert choice(fabricmanager=True)["install"][-2:] == ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    # pinned either way, so that a later install cannot take another branch's
    assert {"nvidia-fabricmanager-580", "libnvidia-nscq-580"} <= set(choice()["pin"])


def test_pins_and_forbidden_names():
    found = choice()
    assert found["pin"] == ["nvidia-headless-580-server", "nvidia-utils-580-server", "nvidia-fabricmanager-580",
                            "libnvidia-nscq-580", "libnvidia-compute-580-server", "nvidia-dkms-580-server"]
    assert found["forbid"] == sorted(found["forbid"])
    assert "nvidia-utils-535-server" in found["forbid"]
    assert "linux-modules-nvidia-595-server-open-5.15.0-204-generic" in found["forbid"]
    assert not [name for name in found["forbid"] if "580" in name or "{" in name]
    assert found["open_variants"]["server"] == found["open_variants"]["open"] == DISTRO["flavours"]["open"]


def test_590_and_later_install_unversioned_names_through_the_pinning_package():
    found = choice(source=CUDA_595, branch="595", pinning="nvidia-driver-pinning-595", version="595.91.07",
                   fabricmanager=True)
    assert found["packages"] == ["nvidia-driver-pinning-595", "libnvidia-compute", "cuda-drivers"]
    assert found["main"] == "libnvidia-compute"
    assert found["resolve"] == ["libnvidia-compute=595.91.07-*", "nvidia-driver-pinning-595", "cuda-drivers",
                                "nvidia-fabricmanager", "libnvidia-nscq"]
    assert found["forbid"] == ["cuda-drivers-580", "cuda-drivers-590", "nvidia-driver-pinning-580",
                               "nvidia-driver-pinning-590"]


def test_the_version_apt_resolves():
    assert choice()["version_glob"] == "580.*"
    assert choice(version="580.95.05")["resolve"][0] == "nvidia-utils-580-server=580.95.05-*"
    assert choice()["resolve"] == ["nvidia-utils-580-server=580.*", "nvidia-headless-580-server"]


def test_an_unknown_source_chooses_nothing():
    found = choice(source={})
    assert (found["packages"], found["main"], found["pin"], found["forbid"]) == ([], "", [], [])


# --- What an earlier run left and what this one did -------------------------------------------------------------

RESOLVED = {"changed": False, "missing": [], "wanted": {"nvidia-utils-580-server": "580.95.05-0ubuntu0.22.04.1"},
            "packages": {"nvidia-utils-580-server": {"wanted": "580.95.05-0ubuntu0.22.04.1", "summary": "NVIDIA utils",
                                                     "depends": ["libnvidia-compute-580-server"]},
                         "nvidia-headless-580-server": {"wanted": "580.95.05-0ubuntu0.22.04.1",
                                                        "depends": ["nvidia-headless-no-dkms-580-server"]}}}


@pytest.mark.parametrize("resolution, previous, expected", [
    (RESOLVED, {}, (True, True, "580.95.05-0ubuntu0.22.04.1")),
    (dict(RESOLVED, missing=["nvidia-utils-580-server"]), {"version": "580.82.07-1"}, (True, False, "580.82.07-1")),
    # the install part did not run (tags): an earlier run of the same source and branch
    (None, {"source": "distro", "branch": "580", "version": "580.82.07-1"}, (False, True, "580.82.07-1")),
    ({"skipped": True}, {"source": "distro", "branch": "535", "version": "535.1-1"}, (False, False, "535.1-1")),
    (None, {}, (False, False, "")),
    # an earlier include of the role in the same play resolved branch 535: not this run's resolution
    ({"changed": False, "missing": [], "wanted": {"nvidia-utils-535-server": "535.309.01-0ubuntu0.22.04.2"},
      "packages": {"nvidia-utils-535-server": {"wanted": "535.309.01-0ubuntu0.22.04.2"}}}, {}, (False, False, "")),
])
def test_ready_and_version(resolution, previous, expected):
    state = plan_filter.installed_state(resolution, previous, SETTINGS, "nvidia-utils-580-server")
    assert (state["resolved_here"], state["ready"], state["version"]) == expected


def test_a_resolution_without_the_main_version_is_an_error():
    with pytest.raises(AnsibleFilterError, match="no version for nvidia-utils-580-server"):
        plan_filter.installed_state(dict(RESOLVED, wanted={}), {}, SETTINGS, "nvidia-utils-580-server")


@pytest.mark.parametrize("pkg_plan, written, changed", [
    ({"change": {"transaction": ["nvidia-utils-580-server=580.95.05-1"]}}, {"changed": False}, True),
    ({"change": {"transaction": []}, "install": ["x=1"]}, {"changed": False}, False),    # the change's word wins
    ({"install": ["nvidia-utils-580-server=580.95.05-1"]}, {"changed": False}, True),
    ({"change": {"transaction": []}}, {"changed": True}, True),                          # the record changed
    (None, None, False),
])
def test_change_detection(pkg_plan, written, changed):
    state = {"resolved_here": True, "ready": True}
    assert plan_filter.driver_changed(state, pkg_plan, written) is changed
    assert plan_filter.driver_changed(dict(state, ready=False), pkg_plan, written) is False


def test_leftovers_are_the_earlier_top_packages_nothing_needs():
    previous = {"packages": ["nvidia-headless-580-server", "nvidia-utils-580-server",
                             "nvidia-headless-no-dkms-580-server", "nvidia-fabricmanager-580"]}
    install = ["nvidia-headless-580-server-open", "nvidia-utils-580-server"]
    records = {"nvidia-headless-580-server-open": {"depends": ["nvidia-headless-no-dkms-580-server-open"]},
               "nvidia-utils-580-server": {"depends": None}, "x": None}
    assert plan_filter.leftovers(previous, install, records) == [
        "nvidia-headless-580-server", "nvidia-headless-no-dkms-580-server", "nvidia-fabricmanager-580"]
    records["nvidia-headless-580-server-open"]["depends"].append("nvidia-headless-no-dkms-580-server")
    assert "nvidia-headless-no-dkms-580-server" not in plan_filter.leftovers(previous, install, records)


def test_the_change_set():
    change = plan_filter.change_set({"packages": ["a", "b"]}, ["b", "c"], ["a"], "1:580.95.05-0ubuntu0.22.04.1",
                                    ["nvidia-utils-535-server", "libnvidia+nscq"], dict(SETTINGS, branch="595"),
                                    LIFECYCLE, ["^cuda-drivers"])
    assert change["names"] == ["b", "c", "a"] and change["remove"] == ["a"] and change["sources"] == ["^cuda-drivers"]
    assert change["version"] == "580.95.05"
    obsolete = [re.compile(pattern) for pattern in change["obsolete"]]

    def other(name):
        return any(pattern.search(name) for pattern in obsolete)
    # the forbidden names exactly, escaped
    assert other("libnvidia+nscq") and not other("libnvidia+nscq-dev") and not other("libnvidiaaanscq")
    assert other("nvidia-utils-535-server")
    assert other("nvidia-kernel-source-580-server") and other("nvidia-firmware-580-server-580.178.04")
    assert not other("linux-modules-nvidia-595-server-5.15.0-204-generic")   # 204 is a kernel ABI, 595 is chosen
    assert not other("nvidia-firmware-595-server-595.1.2")


# --- After the install -----------------------------------------------------------------------------------------

UBUNTU_UNIT = ("[Unit]\nDescription=NVIDIA Persistence Daemon\nStopWhenUnneeded=true\n\n[Service]\nType=forking\n"
               "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose\n")
NVIDIA_UNIT = ("[Unit]\nDescription=NVIDIA Persistence Daemon\n\n[Service]\nType=forking\n"
               "ExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n\n"
               "[Install]\nWantedBy=multi-user.target\n")


def test_the_persistence_daemons_unit():
    fragment = {"stdout": "FragmentPath=/lib/systemd/system/nvidia-persistenced.service"}
    ubuntu = plan_filter.persistenced(fragment, slurped(UBUNTU_UNIT))
    assert ubuntu == {"path": "/lib/systemd/system/nvidia-persistenced.service", "text": UBUNTU_UNIT,
                      "exec": "/usr/bin/nvidia-persistenced --user nvidia-persistenced --no-persistence-mode --verbose",
                      "needs_dropin": True, "static": True}
    nvidia = plan_filter.persistenced(fragment, slurped(NVIDIA_UNIT))
    assert (nvidia["needs_dropin"], nvidia["static"]) == (False, False)
    stopping = NVIDIA_UNIT.replace("[Unit]\n", "[Unit]\nStopWhenUnneeded=yes\n")
    stops = plan_filter.persistenced(fragment, slurped(stopping))
    assert stops["needs_dropin"] is True
    assert plan_filter.persistenced({"skipped": True}, {"skipped": True}) == {
        "path": "", "text": "", "exec": "", "needs_dropin": False, "static": False}
    assert plan_filter.persistenced({"stdout": "FragmentPath="}, None)["path"] == ""


def test_archive_entries_count_the_releases_entries_with_main():
    files = {"results": [slurped("deb http://archive.ubuntu.com/ubuntu jammy main restricted\n"
                                 "deb http://archive.ubuntu.com/ubuntu jammy-updates main\n"
                                 "deb http://example.com/repo stable main\n"),
                         {"failed": True, "item": "/etc/apt/sources.list.d/ubuntu.sources"}]}
    assert plan_filter.archive_entries(files, "jammy", ["main", "restricted"]) == 2
    assert plan_filter.archive_entries({"skipped": True}, "jammy", []) == 0
    assert plan_filter.archive_entries(None, "jammy", []) == 0


# --- The whole plan --------------------------------------------------------------------------------------------


def test_hgx_b200_before_any_driver():
    """No GPU facts from a driver, the B200s on the bus: open modules, fabric manager and NVLSM."""
    lines = scan_lines({address: ("0x10de", "0x2901", "0x030200") for address in B200_PCI})
    plan = nvidia_driver_plan(evidence(gpu=gpu_facts(), results={"pci_scan": {"rc": 0, "stdout_lines": lines}}))
    assert plan["kernel_modules"] == "open"
    assert plan["packages"] == ["nvidia-headless-580-server-open", "nvidia-utils-580-server"]
    assert (plan["fabricmanager"], plan["nvlsm"]) == (True, True)
    assert plan["install"][-2:] == ["nvidia-fabricmanager-580", "libnvidia-nscq-580"]
    assert plan["gpu_list"]["open_only"].startswith("0000:1b:00.0 (NVIDIA B200), 0000:43:00.0 (NVIDIA B200)")
    # nothing resolved, no earlier run: not ready, no version, nothing changed, no reboot, no verify
    assert (plan["ready"], plan["version"], plan["changed"], plan["reboot_reason"], plan["verify"]) == (
        False, "", False, "", False)


def test_a_refused_combination_is_planned_as_asked():
    """Proprietary modules forced on Blackwell: the plan keeps the setting and names the GPUs; preflight refuses."""
    lines = scan_lines({"0000:8f:00.0": ("0x10de", "0x2901", "0x030200")})
    plan = nvidia_driver_plan(evidence({"kernel_modules": "proprietary"},
                                       results={"pci_scan": {"stdout_lines": lines}}))
    assert plan["kernel_modules"] == "proprietary" and plan["open_only_gpus"] == {"0000:8f:00.0": "NVIDIA B200"}
    assert plan["gpu_list"]["open_only"] == "0000:8f:00.0 (NVIDIA B200)"


def installed_evidence(gpu, **host):
    return evidence(gpu=gpu, results={
        "record": slurped(json.dumps({"source": "distro", "branch": "580", "version": "580.82.07-0ubuntu0.22.04.1",
                                      "packages": ["nvidia-headless-580-server", "nvidia-utils-580-server"],
                                      "held": ["nvidia-utils-580-server"]})),
        "resolution": RESOLVED,
        "pkg_plan": {"change": {"transaction": ["nvidia-utils-580-server=580.95.05-0ubuntu0.22.04.1"]}},
        "record_written": {"changed": True},
        "dpkg_states": {"stdout_lines": ["ii  libc6:amd64", "iU  nvidia-utils-580-server"]},
        "branch_packages": {"packages": {"nvidia-utils-580-server": {"installed": "580.95.05", "held": True},
                                         "libnvidia-compute-580-server": {"installed": "580.95.05", "held": False},
                                         "nvidia-dkms-580-server": {"installed": None, "held": False}}}}, **host)


def test_an_update_that_needs_a_reboot():
    plan = nvidia_driver_plan(installed_evidence(gpu_facts([{"name": "NVIDIA H100", "architecture": "Hopper"}],
                                                           loaded_module_version="580.82.07")))
    assert (plan["resolved_here"], plan["ready"], plan["changed"]) == (True, True, True)
    assert plan["version"] == "580.95.05-0ubuntu0.22.04.1"
    assert plan["reboot_reason"] == "the loaded kernel module is 580.82.07, the installed driver 580.95.05"
    assert plan["previous_held"] == plan["half_installed"] == ["nvidia-utils-580-server"]
    assert plan["change"]["names"] == ["nvidia-utils-580-server", "nvidia-headless-580-server"]
    assert plan["branch_installed"] == ["nvidia-utils-580-server", "libnvidia-compute-580-server"]
    assert plan["branch_held"] == ["nvidia-utils-580-server"]
    assert plan["verify"] is True     # the reboot decision (nvidia_driver_reboot_required) is not made yet


@pytest.mark.parametrize("host, setting, verify", [
    ({}, "auto", True),
    ({"reboot_required": True}, "auto", False),
    ({"container": True}, "auto", False),
    ({"container": True}, "always", True),
    ({"check_mode": True}, "always", False),
    ({}, "never", False),
])
def test_verify(host, setting, verify):
    facts = installed_evidence(gpu_facts(loaded_module_version="580.95.05"), **host)
    facts["settings"]["verify"] = setting
    assert nvidia_driver_plan(facts)["verify"] is verify


def test_a_container_never_reboots_and_the_running_driver_needs_no_reboot():
    assert nvidia_driver_plan(installed_evidence(gpu_facts(loaded_module_version="580.82.07"), container=True))[
        "reboot_reason"] == ""
    assert nvidia_driver_plan(installed_evidence(gpu_facts(loaded_module_version="580.95.05")))["reboot_reason"] == ""
    assert nvidia_driver_plan(installed_evidence(None))["reboot_reason"] == ""


def test_evidence_that_is_not_there_is_an_error_naming_it():
    with pytest.raises(AnsibleFilterError, match="evidence's whole as a dict"):
        nvidia_driver_plan(["not", "evidence"])
    broken = evidence()
    del broken["settings"]["branch"], broken["host"]["month"]
    with pytest.raises(AnsibleFilterError, match="settings lacks branch"):
        nvidia_driver_plan(broken)
    broken = evidence(results={"record": slurped("not json")})
    with pytest.raises(AnsibleFilterError, match="record of an earlier run cannot be read"):
        nvidia_driver_plan(broken)


# --- The preferences in place ----------------------------------------------------------------------------------

PREFERENCES = "# managed\nPackage: cuda-drivers-580\nPin: version 580.*\nPin-Priority: 1001\n"


def test_preferences_differ_aside_from_comments():
    assert preferences_differ(slurped(PREFERENCES.replace("# managed", "# another header")), PREFERENCES) is False
    assert preferences_differ(slurped(PREFERENCES.replace("580.*", "535.*")), PREFERENCES) is True
    assert preferences_differ({"failed": True, "msg": "file not found"}, PREFERENCES) is True
    assert preferences_differ(None, "# nothing but comments\n") is False
    with pytest.raises(AnsibleFilterError):
        preferences_differ(None, None)
