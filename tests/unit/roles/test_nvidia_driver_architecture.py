"""gpufleet.node.nvidia_driver's choice of kernel modules from the GPUs' architecture, and fabric manager with NVLSM
for 4th-generation NVSwitch, rendered as the role renders them.

The PCI scan is the role's own command (preflight's find over /sys/bus/pci/devices) run over the PCI tree the
emulator lays out for a profile (tests/emulator/profiles: hgx-b200-8gpu, gb200-tray-4gpu, hgx-h100-8gpu), so the
device ids are those of the real GPUs (NVIDIA/open-gpu-kernel-modules README, "Compatible GPUs"). The GPU facts of
the driver-answers cases are gpu_facts' shape (architecture and name as nvidia-smi's product_architecture and
product_name print them, e.g. NVIDIA/k8s-test-infra's real qx-b200.xml capture: "NVIDIA B200", "Blackwell")."""
import subprocess
import sys

import pytest

from .platform import ROOT, facts_for, failures_that_fire, find_task, render, task_fires, task_message

sys.path.insert(0, str(ROOT / "tests" / "emulator"))
import emulator_profile  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order

PREFLIGHT = "preflight.yml"
MODULE_CHECK = ("Check that the GPUs can run the kernel modules chosen (open from Grace Hopper and Blackwell on, "
                "proprietary before Turing)")
UNCHECKED = "Warn about GPUs whose kernel modules the role cannot tell"
NVLSM_CHECK = "Check that NVLSM can be installed where 4th-generation NVSwitches need it"
SETTINGS_CHECK = "Check the settings (source, branch, version, flavour and MIG)"
SCAN = "Read the NVIDIA GPUs' PCI device ids (their architecture, known before any driver)"


UBUNTU_22 = dict(facts_for("Ubuntu", "22.04"), kernel="5.15.0-204-generic")


def pci_scan(tmp_path, functions):
    """What the role's scan prints over a PCI tree of {address: (vendor, device, class)}: the task's own argv,
    pointed at the tree."""
    for address, values in functions.items():
        (tmp_path / address).mkdir()
        for name, value in zip(("vendor", "device", "class"), values):
            (tmp_path / address / name).write_text(value + "\n", encoding="ascii")
    argv = [str(tmp_path) if word == "{{ __nvidia_driver_pci_devices }}" else word
            for word in find_task("nvidia_driver", PREFLIGHT, SCAN)["ansible.builtin.command"]["argv"]]
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {"rc": result.returncode, "stdout_lines": result.stdout.splitlines()}


def profile_scan(tmp_path, name):
    """The scan over the PCI tree the emulator lays out for a profile (its GPUs and any NVSwitch with a PCI function)."""
    emulator_profile.lay_out_pci(emulator_profile.load_profile(name), str(tmp_path))
    argv = [str(tmp_path) if word == "{{ __nvidia_driver_pci_devices }}" else word
            for word in find_task("nvidia_driver", PREFLIGHT, SCAN)["ansible.builtin.command"]["argv"]]
    result = subprocess.run(argv, capture_output=True, text=True, check=True)
    return {"rc": result.returncode, "stdout_lines": result.stdout.splitlines()}


def gpu_facts(devices=(), nvswitches=0, fabric=False):
    """ansible_facts.gpu as gpu_facts returns it, reduced to what the role reads here."""
    return {"state": "ok" if devices else "driver_not_loaded",
            "devices": [dict(index=index, **device) for index, device in enumerate(devices)],
            "pci": {"nvidia_gpus": len(devices), "nvswitches": nvswitches},
            "topology": {"nvswitch": fabric or bool(nvswitches)}}


def facts(gpu=None, **extra):
    return dict(UBUNTU_22, gpu=gpu if gpu is not None else gpu_facts(), **extra)


def driver(node_facts, expression, **settings):
    return render("nvidia_driver", node_facts, "{{ %s }}" % expression, **settings)


def refusals(node_facts, **settings):
    """The fail tasks of preflight that fire (the running kernel's headers are there)."""
    settings.setdefault("__nvidia_driver_headers", {"stat": {"exists": True}})
    return failures_that_fire("nvidia_driver", PREFLIGHT, node_facts, **settings)


# --- The scan ------------------------------------------------------------------------------------------------


def test_the_scan_reads_nvidia_gpus_only(tmp_path):
    """An NVIDIA GPU is vendor 0x10de with class 0x0300 or 0x0302; its audio function (0x0403), an NVSwitch (0x0680)
    and another vendor's device with the same device id are not GPUs."""
    scan = pci_scan(tmp_path, {
        "0000:17:00.0": ("0x10de", "0x2901", "0x030200"),      # B200
        "0000:17:00.1": ("0x10de", "0x22ba", "0x040300"),      # an NVIDIA audio function
        "0000:10:00.0": ("0x10de", "0x22a3", "0x068000"),      # an NVSwitch of the H100 generation
        "0000:00:00.0": ("0x8086", "0x2901", "0x060000"),      # another vendor's 0x2901
        "0000:3b:00.0": ("0x10de", "0x1DB1", "0x030200"),      # V100 SXM2, upper-case as some trees print it
    })
    assert driver(facts(), "__nvidia_driver_plan.pci_gpus", __nvidia_driver_pci_scan=scan) == {
        "0000:17:00.0": "0x2901", "0000:3b:00.0": "0x1db1"}


def test_an_unreadable_tree_gives_no_gpus():
    """No scan output (no sysfs, the command failed): nothing is known and nothing is refused."""
    scan = {"rc": 1, "stdout_lines": []}
    assert driver(facts(), "__nvidia_driver_plan.pci_gpus", __nvidia_driver_pci_scan=scan) == {}
    assert refusals(facts(), __nvidia_driver_pci_scan=scan, nvidia_driver_kernel_modules="proprietary") == []


# --- Which modules, before any driver ------------------------------------------------------------------------


@pytest.mark.parametrize("profile, modules, first_package", [
    ("hgx-b200-8gpu", "open", "nvidia-headless-580-server-open"),
    ("gb200-tray-4gpu", "open", "nvidia-headless-580-server-open"),
    ("hgx-h100-8gpu", "proprietary", "nvidia-headless-580-server"),
    ("hgx-a100-8gpu", "proprietary", "nvidia-headless-580-server"),
])
def test_the_default_installs_the_modules_the_gpus_take(tmp_path, profile, modules, first_package):
    """Before any driver exists (no GPU facts), the default flavour server with kernel modules auto: the open modules
    on Blackwell (B200 0x2901, GB200 0x2941), as before elsewhere. The old role installed the proprietary
    nvidia-headless-580-server on every node. (On HGX B200 the default source is refused for want of NVLSM:
    test_nvlsm_from_a_source_without_it_is_refused.)"""
    scan = profile_scan(tmp_path, profile)
    assert driver(facts(), "__nvidia_driver_plan.kernel_modules", __nvidia_driver_pci_scan=scan) == modules
    assert driver(facts(), "__nvidia_driver_plan.packages", __nvidia_driver_pci_scan=scan)[0] == first_package
    assert refusals(facts(), __nvidia_driver_pci_scan=scan, nvidia_driver_fabricmanager="never") == []


@pytest.mark.parametrize("device, name", [
    ("0x2342", "NVIDIA GH200 120GB / NVIDIA GH200 480GB"), ("0x2348", "NVIDIA GH200 144G HBM3e"),
    ("0x2901", "NVIDIA B200"), ("0x3182", "NVIDIA B300 SXM6 AC"), ("0x2941", "NVIDIA GB200"),
    ("0x31c2", "NVIDIA GB300"), ("0x2bb5", "NVIDIA RTX PRO 6000 Blackwell Server Edition"),
])
def test_grace_hopper_and_blackwell_require_the_open_modules(tmp_path, device, name):
    scan = pci_scan(tmp_path, {"0000:17:00.0": ("0x10de", device, "0x030200")})
    assert driver(facts(), "__nvidia_driver_plan.open_only_gpus", __nvidia_driver_pci_scan=scan) == {"0000:17:00.0": name}


@pytest.mark.parametrize("device", ["0x2330", "0x2335", "0x20b2", "0x26b9", "0x1eb8", "0x1e02"])
def test_turing_to_hopper_take_either(tmp_path, device):
    """H100, H200, A100, L40S, T4 and TITAN RTX (the open modules' lowest id): neither required nor refused."""
    scan = pci_scan(tmp_path, {"0000:17:00.0": ("0x10de", device, "0x030200")})
    for expression in ("__nvidia_driver_plan.open_only_gpus", "__nvidia_driver_plan.pre_turing_gpus",
                       "__nvidia_driver_plan.unclassified_gpus"):
        assert driver(facts(), expression, __nvidia_driver_pci_scan=scan) == {}
    for modules in ("open", "proprietary", "auto"):
        assert refusals(facts(), __nvidia_driver_pci_scan=scan, nvidia_driver_kernel_modules=modules) == []


# --- Refusals before anything changes ------------------------------------------------------------------------


def test_proprietary_forced_on_blackwell_is_refused_naming_the_gpus(tmp_path):
    scan = profile_scan(tmp_path, "hgx-b200-8gpu")
    settings = {"__nvidia_driver_pci_scan": scan, "nvidia_driver_kernel_modules": "proprietary",
                "nvidia_driver_source": "cuda_repo"}
    assert refusals(facts(), **settings) == [MODULE_CHECK]
    message = task_message("nvidia_driver", PREFLIGHT, MODULE_CHECK, facts(), **settings)
    assert "require the open GPU kernel modules" in message
    assert "0000:8f:00.0 (NVIDIA B200)" in message and "0000:cc:00.0 (NVIDIA B200)" in message
    assert "nvidia_driver_kernel_modules: auto or open" in message


@pytest.mark.parametrize("settings", [
    {"nvidia_driver_kernel_modules": "open"},
    {"nvidia_driver_flavour": "open"},
])
def test_open_on_volta_is_refused(tmp_path, settings):
    """Maxwell, Pascal and Volta have no open modules (V100 SXM2 10de:1db1 below the README's lowest id 1e02)."""
    scan = pci_scan(tmp_path, {"0000:3b:00.0": ("0x10de", "0x1db1", "0x030200")})
    assert refusals(facts(), __nvidia_driver_pci_scan=scan, **settings) == [MODULE_CHECK]
    message = task_message("nvidia_driver", PREFLIGHT, MODULE_CHECK, facts(), __nvidia_driver_pci_scan=scan, **settings)
    assert "Turing and later GPUs only" in message and "0000:3b:00.0 (PCI device 10de:1db1)" in message


def test_volta_keeps_the_proprietary_modules_by_default(tmp_path):
    scan = pci_scan(tmp_path, {"0000:3b:00.0": ("0x10de", "0x1db1", "0x030200")})
    assert driver(facts(), "__nvidia_driver_plan.kernel_modules", __nvidia_driver_pci_scan=scan) == "proprietary"
    assert refusals(facts(), __nvidia_driver_pci_scan=scan) == []


def test_open_flavour_with_proprietary_modules_is_a_contradiction():
    assert SETTINGS_CHECK in refusals(facts(), nvidia_driver_flavour="open", nvidia_driver_kernel_modules="proprietary")
    assert SETTINGS_CHECK not in refusals(facts(), nvidia_driver_flavour="open", nvidia_driver_kernel_modules="open")


def test_a_flavour_without_open_modules_is_refused_where_they_are_needed(tmp_path):
    """The PPA has no signed flavour; Debian's archive has server and open only: on Blackwell, Debian's server
    flavour installs nvidia-open-kernel-dkms, and a flavour without an open variant is refused by name."""
    scan = profile_scan(tmp_path, "hgx-b200-8gpu")
    debian = dict(facts_for("Debian", "12"), gpu=gpu_facts())
    assert driver(debian, "__nvidia_driver_plan.packages", __nvidia_driver_pci_scan=scan,
                  nvidia_driver_branch="535")[0] == "nvidia-open-kernel-dkms"
    settings = {"__nvidia_driver_pci_scan": scan, "nvidia_driver_source": "ppa", "nvidia_driver_flavour": "desktop",
                "nvidia_driver_fabricmanager": "never"}    # the PPA has neither fabric manager nor NVLSM
    assert driver(facts(), "__nvidia_driver_plan.packages", **settings) == ["nvidia-driver-580-open"]
    assert refusals(facts(), **settings) == []


def test_gpus_the_table_does_not_know_are_said_not_checked(tmp_path):
    """A device id above the README's Blackwell entries (or one of its unnamed ones) is not guessed at."""
    scan = pci_scan(tmp_path, {"0000:17:00.0": ("0x10de", "0x3301", "0x030200"),
                               "0000:18:00.0": ("0x10de", "0x2bb9", "0x030200")})
    assert driver(facts(), "__nvidia_driver_plan.unclassified_gpus", __nvidia_driver_pci_scan=scan) == {
        "0000:17:00.0": "PCI device 10de:3301", "0000:18:00.0": "PCI device 10de:2bb9"}
    assert task_fires("nvidia_driver", PREFLIGHT, UNCHECKED, facts(), __nvidia_driver_pci_scan=scan)
    assert "not checked" in task_message("nvidia_driver", PREFLIGHT, UNCHECKED, facts(), __nvidia_driver_pci_scan=scan)
    assert refusals(facts(), __nvidia_driver_pci_scan=scan) == []
    # where the driver answers, its architecture classifies them
    answered = facts(gpu_facts([{"name": "NVIDIA RTX 6000D", "architecture": "Blackwell", "pci_bus_id": "00000000:18:00.0"},
                                {"name": "NVIDIA GPU", "architecture": None, "pci_bus_id": "00000000:17:00.0"}]))
    assert driver(answered, "__nvidia_driver_plan.unclassified_gpus", __nvidia_driver_pci_scan=scan) == {
        "0000:17:00.0": "PCI device 10de:3301"}
    assert driver(answered, "__nvidia_driver_plan.open_only_gpus", __nvidia_driver_pci_scan=scan) == {
        "0000:18:00.0": "NVIDIA RTX 6000D"}


# --- Where the driver answers --------------------------------------------------------------------------------


@pytest.mark.parametrize("device, modules", [
    ({"name": "NVIDIA B200", "architecture": "Blackwell"}, "open"),
    ({"name": "NVIDIA GH200 480GB", "architecture": "Hopper"}, "open"),
    ({"name": "NVIDIA H100 80GB HBM3", "architecture": "Hopper"}, "proprietary"),
])
def test_the_drivers_answer_tells_the_architecture(device, modules):
    """No PCI scan output (a container without the host's tree): gpu_facts' architecture and name decide."""
    node = facts(gpu_facts([dict(device, pci_bus_id="00000000:8F:00.0")]))
    scan = {"rc": 0, "stdout_lines": []}
    assert driver(node, "__nvidia_driver_plan.kernel_modules", __nvidia_driver_pci_scan=scan) == modules


def test_a_volta_the_driver_names_is_refused_the_open_modules():
    node = facts(gpu_facts([{"name": "Tesla V100-SXM2-16GB", "architecture": "Volta", "pci_bus_id": "00000000:3B:00.0"}]))
    scan = {"rc": 0, "stdout_lines": []}
    assert refusals(node, __nvidia_driver_pci_scan=scan, nvidia_driver_kernel_modules="open") == [MODULE_CHECK]


# --- Fabric manager and NVLSM ----------------------------------------------------------------------------------


def test_hgx_b200_gets_fabric_manager_and_nvlsm_before_any_driver(tmp_path):
    """No driver yet, no NVSwitch on the PCI bus (4th generation): the B200's device id tells it. The old role saw no
    NVSwitch (gpu_facts' topology.nvswitch is false without a driver) and skipped fabric manager."""
    scan = profile_scan(tmp_path, "hgx-b200-8gpu")
    settings = {"__nvidia_driver_pci_scan": scan, "nvidia_driver_source": "cuda_repo"}
    assert driver(facts(), "__nvidia_driver_plan.fabricmanager", **settings) is True
    assert driver(facts(), "__nvidia_driver_plan.nvlsm", **settings) is True
    assert driver(facts(), "__nvidia_driver_nvlsm_packages", **settings) == ["nvlsm", "infiniband-diags"]
    assert driver(facts(), "__nvidia_driver_nvlsm_modules_text", **settings) == (
        "# gpufleet.node.nvidia_driver: NVLSM (the NVLink subnet manager) reaches the NVSwitches through these.\n"
        "mlx5_ib\nib_umad\n")
    assert refusals(facts(), **settings) == []


def test_hgx_b200_with_a_driver_answering():
    """Fabric state Completed, no NVSwitch PCI function: generation 4 from the driver's answer too."""
    node = facts(gpu_facts([{"name": "NVIDIA B200", "architecture": "Blackwell", "pci_bus_id": "00000000:8F:00.0"}],
                           fabric=True))
    settings = {"__nvidia_driver_pci_scan": {"rc": 0, "stdout_lines": []}, "nvidia_driver_source": "cuda_repo"}
    assert driver(node, "__nvidia_driver_plan.nvlsm", **settings) is True


def test_nvlsm_from_a_source_without_it_is_refused(tmp_path):
    """Canonical's archive has nvidia-fabricmanager-580 but no nvlsm (jammy and noble, every component, December
    2026): the run stops before anything changes and says to use NVIDIA's repository."""
    scan = profile_scan(tmp_path, "hgx-b200-8gpu")
    assert refusals(facts(), __nvidia_driver_pci_scan=scan) == [NVLSM_CHECK]
    message = task_message("nvidia_driver", PREFLIGHT, NVLSM_CHECK, facts(), __nvidia_driver_pci_scan=scan)
    assert "nvidia_driver_source: cuda_repo" in message and "NVLSM" in message
    assert refusals(facts(), __nvidia_driver_pci_scan=scan, nvidia_driver_fabricmanager="never") == []


def test_a_gb200_compute_tray_runs_no_fabric_manager(tmp_path):
    """Its GPUs report a fabric (the NVLink switch trays' NVOS runs fabric manager and NVLSM), and the old role
    installed fabric manager on it from that evidence."""
    scan = profile_scan(tmp_path, "gb200-tray-4gpu")
    node = facts(gpu_facts([{"name": "NVIDIA GB200", "architecture": "Blackwell", "pci_bus_id": "00000000:29:00.0"}],
                           fabric=True))
    for node_facts in (facts(), node):
        assert driver(node_facts, "__nvidia_driver_plan.switch_trays", __nvidia_driver_pci_scan=scan) is True
        assert driver(node_facts, "__nvidia_driver_plan.fabricmanager", __nvidia_driver_pci_scan=scan) is False
        assert driver(node_facts, "__nvidia_driver_plan.nvlsm", __nvidia_driver_pci_scan=scan) is False
    assert driver(node, "__nvidia_driver_plan.fabricmanager", __nvidia_driver_pci_scan=scan,
                  nvidia_driver_fabricmanager="always") is True


def test_hgx_h100_keeps_fabric_manager_without_nvlsm(tmp_path):
    scan = profile_scan(tmp_path, "hgx-h100-8gpu")
    node = facts(gpu_facts([{"name": "NVIDIA H100 80GB HBM3", "architecture": "Hopper", "pci_bus_id": "00000000:53:00.0"}],
                           nvswitches=4, fabric=True))
    for node_facts in (facts(gpu_facts(nvswitches=4)), node):
        assert driver(node_facts, "__nvidia_driver_plan.fabricmanager", __nvidia_driver_pci_scan=scan) is True
        assert driver(node_facts, "__nvidia_driver_plan.nvlsm", __nvidia_driver_pci_scan=scan) is False


def test_a_pcie_node_gets_neither(tmp_path):
    scan = profile_scan(tmp_path, "pcie-4gpu")
    assert driver(facts(), "__nvidia_driver_plan.fabricmanager", __nvidia_driver_pci_scan=scan) is False
    assert driver(facts(), "__nvidia_driver_plan.nvlsm", __nvidia_driver_pci_scan=scan) is False


def test_gen4_profiles_have_no_nvswitch_on_the_pci_bus():
    """HGX B200's and GB200's NVSwitches sit behind the GPUs' NVLink only; the GPUs' links still end at switches."""
    for name in ("hgx-b200-8gpu", "gb200-tray-4gpu"):
        profile = emulator_profile.load_profile(name)
        devices = emulator_profile.pci_devices(profile)
        assert sorted(device for device, _class in devices.values()) == [profile["gpu"]["pci_device_id"]] * len(profile["bus_ids"])
        topology = emulator_profile.read_topology((ROOT / "tests/emulator/profiles" / profile["topology"]).read_text())
        ends = emulator_profile.nvlink_ends(profile, topology)
        assert all(len(links) == 18 and {kind for kind, _bus, _id in links} == {emulator_profile.NVLINK_REMOTE_SWITCH}
                   for links in ends)
