"""The fake libnvidia-ml.so.1 of the emulated GPUs (tests/emulator/fake_nvml), called through ctypes.

Real artifact mimicked: NVIDIA's libnvidia-ml.so.1 of the 535 driver branch, as its header nvml.h declares it
(NVML 12.2.140: github.com/NVIDIA/go-nvml, gen/nvml/nvml.h at commit 075f45f; the field ids 226/227/230 and
nvmlDeviceGetNumaNodeId from the same file at 2f9e261, NVML 13.3.29). The structures below are written from that
header, not taken from the library under test, so a layout slip on either side fails here.

The library is built with gcc into a temporary directory, fed an nvml.conf rendered by
tests/emulator/emulator_profile.py for each profile, and its answers are compared with the profile, the profile's
real ``topo -m`` capture, and the nvidia-smi emulator's identities (both renderers of one profile agree).
"""
import ast
import ctypes
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import uuid as uuid_module

import pytest

from .conftest import ROOT

EMULATOR = ROOT / "tests" / "emulator"
SOURCE = EMULATOR / "fake_nvml" / "fake_nvml.c"
PROFILES = EMULATOR / "profiles"
sys.path.insert(0, str(EMULATOR))
import emulator_profile  # noqa: E402  pylint: disable=wrong-import-position,import-error

HEALTHY = sorted(path.stem for path in PROFILES.glob("*.json") if "bus_ids" in json.loads(path.read_text()))

# nvmlReturn_t
SUCCESS, UNINITIALIZED, INVALID_ARGUMENT, NOT_SUPPORTED = 0, 1, 2, 3
NOT_FOUND, INSUFFICIENT_SIZE, DRIVER_NOT_LOADED, FUNCTION_NOT_FOUND, GPU_IS_LOST = 6, 7, 9, 13, 15
LIB_RM_VERSION_MISMATCH = 18

# The NVML functions of the shared contract (plugins/module_utils/nvml_bindings.py's FUNCTIONS adds to them).
CONTRACT_FUNCTIONS = (
    "nvmlInit_v2 nvmlShutdown nvmlErrorString nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion "
    "nvmlSystemGetCudaDriverVersion_v2 nvmlDeviceGetCount_v2 nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetName "
    "nvmlDeviceGetUUID nvmlDeviceGetSerial nvmlDeviceGetPciInfo_v3 nvmlDeviceGetMinorNumber nvmlDeviceGetModuleId "
    "nvmlDeviceGetArchitecture nvmlDeviceGetCudaComputeCapability nvmlDeviceGetVbiosVersion nvmlDeviceGetMemoryInfo "
    "nvmlDeviceGetPersistenceMode nvmlDeviceGetComputeMode nvmlDeviceGetMigMode nvmlDeviceGetEccMode "
    "nvmlDeviceGetMemoryErrorCounter nvmlDeviceGetTotalEccErrors nvmlDeviceGetRetiredPagesPendingStatus "
    "nvmlDeviceGetRetiredPages nvmlDeviceGetRemappedRows nvmlDeviceGetCurrPcieLinkGeneration "
    "nvmlDeviceGetMaxPcieLinkGeneration nvmlDeviceGetCurrPcieLinkWidth nvmlDeviceGetMaxPcieLinkWidth "
    "nvmlDeviceGetPcieReplayCounter nvmlDeviceGetEnforcedPowerLimit nvmlDeviceGetPowerUsage nvmlDeviceGetTemperature "
    "nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetCurrentClocksThrottleReasons nvmlDeviceGetUtilizationRates "
    "nvmlDeviceGetNvLinkState nvmlDeviceGetNvLinkRemotePciInfo_v2 nvmlDeviceGetNvLinkRemoteDeviceType "
    "nvmlDeviceGetTopologyCommonAncestor nvmlDeviceGetP2PStatus nvmlDeviceGetCpuAffinity nvmlDeviceGetNumaNodeId "
    "nvmlDeviceGetGpuFabricInfo nvmlDeviceGetFieldValues nvmlDeviceGetMaxMigDeviceCount "
    "nvmlDeviceGetMigDeviceHandleByIndex nvmlDeviceGetGpuInstanceId nvmlDeviceGetComputeInstanceId"
).split()


class PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (v3 fields)."""
    _fields_ = [("busIdLegacy", ctypes.c_char * 16), ("domain", ctypes.c_uint), ("bus", ctypes.c_uint),
                ("device", ctypes.c_uint), ("pciDeviceId", ctypes.c_uint), ("pciSubSystemId", ctypes.c_uint),
                ("busId", ctypes.c_char * 32)]


class Memory(ctypes.Structure):
    """nvmlMemory_t."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class Utilization(ctypes.Structure):
    """nvmlUtilization_t."""
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class Value(ctypes.Union):
    """nvmlValue_t."""
    _fields_ = [("dVal", ctypes.c_double), ("siVal", ctypes.c_int), ("uiVal", ctypes.c_uint),
                ("ulVal", ctypes.c_ulong), ("ullVal", ctypes.c_ulonglong), ("sllVal", ctypes.c_longlong)]


class FieldValue(ctypes.Structure):
    """nvmlFieldValue_t."""
    _fields_ = [("fieldId", ctypes.c_uint), ("scopeId", ctypes.c_uint), ("timestamp", ctypes.c_longlong),
                ("latencyUsec", ctypes.c_longlong), ("valueType", ctypes.c_int), ("nvmlReturn", ctypes.c_int),
                ("value", Value)]


class FabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t."""
    _fields_ = [("clusterUuid", ctypes.c_char * 16), ("status", ctypes.c_int), ("partitionId", ctypes.c_uint),
                ("state", ctypes.c_ubyte)]


def build(directory):
    """Compiles the library as tools/fake-nvml.sh does; returns its path."""
    if not shutil.which("gcc"):
        pytest.skip("building the fake libnvidia-ml.so.1 needs gcc (tools/host-deps.sh)")
    target = directory / "libnvidia-ml.so.1"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O2", "-Wall", "-Werror", "-fvisibility=hidden",
                    "-Wl,-soname,libnvidia-ml.so.1", "-o", str(target), str(SOURCE)], check=True)
    return target


@pytest.fixture(scope="session")
def library_path(tmp_path_factory):
    return build(tmp_path_factory.mktemp("fake-nvml"))


class Nvml:
    """The loaded library with the conf it reads; shut down (every reference) after each test."""

    def __init__(self, path, conf_dir):
        self.lib = ctypes.CDLL(str(path))
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self.conf_dir = conf_dir

    def __getattr__(self, name):
        return getattr(self.lib, name)

    def use(self, text):
        """Writes nvml.conf (the library reads it at the next first nvmlInit_v2)."""
        (self.conf_dir / "nvml.conf").write_text(text)

    def use_profile(self, name, faults=None, profile=None):
        self.use(emulator_profile.render_nvml_conf(profile or emulator_profile.load_profile(name), name, faults))

    def handle(self, index, expect=SUCCESS):
        device = ctypes.c_void_p()
        assert self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(index), ctypes.byref(device)) == expect
        return device

    def uint(self, name, *args):
        value = ctypes.c_uint()
        code = getattr(self.lib, name)(*(args + (ctypes.byref(value),)))
        return value.value if code == SUCCESS else ("error", code)

    def ulonglong(self, name, *args):
        value = ctypes.c_ulonglong()
        code = getattr(self.lib, name)(*(args + (ctypes.byref(value),)))
        return value.value if code == SUCCESS else ("error", code)

    def text(self, name, *args, size=96):
        buffer = ctypes.create_string_buffer(size)
        code = getattr(self.lib, name)(*(args + (buffer, ctypes.c_uint(size))))
        return buffer.value.decode() if code == SUCCESS else ("error", code)

    def fields(self, device, wanted):
        values = (FieldValue * len(wanted))()
        for slot, (field_id, scope_id) in zip(values, wanted):
            slot.fieldId, slot.scopeId = field_id, scope_id
        assert self.lib.nvmlDeviceGetFieldValues(device, ctypes.c_int(len(wanted)), values) == SUCCESS
        return [(slot.nvmlReturn, slot.valueType, slot.value.uiVal) for slot in values]


@pytest.fixture
def nvml(library_path, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUFLEET_NVML_CONF", str(tmp_path / "nvml.conf"))
    monkeypatch.setenv("GPUFLEET_NVML_PROC", str(tmp_path / "proc"))    # no persistence daemon unless a test adds one
    monkeypatch.delenv("GPUFLEET_EMULATOR_DELAY_MS", raising=False)
    loaded = Nvml(library_path, tmp_path)
    yield loaded
    while loaded.lib.nvmlShutdown() == SUCCESS:
        pass


def smi_emulator_gpus(name):
    """The nvidia-smi emulator's GPUs of a profile (no faults): the identities both renderers must share."""
    spec = importlib.util.spec_from_file_location("nvidia_smi_emulator", EMULATOR / "nvidia_smi_emulator.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    profile = dict(emulator_profile.load_profile(name), name=name)
    return module.gpus(profile, {"inactive_links": set(), "all_links_inactive": set(), "lost_gpus": set(), "gpus": {}})


def child_call(library_path, conf, body, timeout):
    """Runs body (Python using `lib`) in a child process against conf; returns the CompletedProcess, or None when
    the timeout killed it."""
    code = "import ctypes, sys\nlib = ctypes.CDLL(%r)\n%s" % (str(library_path), textwrap.dedent(body))
    env = dict(os.environ, GPUFLEET_NVML_CONF=str(conf))
    try:
        return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=timeout,
                              check=False)
    except subprocess.TimeoutExpired:
        return None


# ------------------------------------------------------------------------------------------------ the build


def test_exports_every_function_the_binding_calls(library_path):
    tree = ast.parse((ROOT / "plugins" / "module_utils" / "nvml_bindings.py").read_text())
    binding = [ast.literal_eval(node.value) for node in ast.walk(tree) if isinstance(node, ast.Assign)
               and any(getattr(target, "id", None) == "FUNCTIONS" for target in node.targets)]
    assert binding, "plugins/module_utils/nvml_bindings.py has no FUNCTIONS tuple"
    printed = subprocess.run(["objdump", "-T", str(library_path)], check=True, capture_output=True, text=True).stdout
    exported = {line.split()[-1] for line in printed.splitlines() if " .text" in line}
    missing = sorted((set(CONTRACT_FUNCTIONS) | set(binding[0])) - exported)
    assert not missing
    assert all(name.startswith("nvml") for name in exported)     # nothing of its own leaks out


def test_loads_on_ubuntu_2004_glibc(library_path):
    """Needs no GLIBC symbol version newer than 2.31 (Ubuntu 20.04, the oldest node OS)."""
    printed = subprocess.run(["objdump", "-T", str(library_path)], check=True, capture_output=True, text=True).stdout
    versions = {tuple(int(part) for part in found.split(".")) for found in re.findall(r"GLIBC_(\d+(?:\.\d+)*)", printed)}
    assert versions and max(versions) <= (2, 31)


# ------------------------------------------------------------------------------------------------ profiles


@pytest.mark.parametrize("name", HEALTHY)
def test_values_equal_the_profile(nvml, name):
    profile = emulator_profile.load_profile(name)
    nvml.use_profile(name)
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.text("nvmlSystemGetDriverVersion", size=80) == profile["driver_version"]
    # NVML's version is the CUDA major of the driver and its version (12.535.183.01; 13.580.105.08 with CUDA 13.0)
    assert nvml.text("nvmlSystemGetNVMLVersion", size=80) == "%s.%s" % (
        profile["cuda_version"].split(".")[0], profile["driver_version"])
    cuda = ctypes.c_int()
    assert nvml.nvmlSystemGetCudaDriverVersion_v2(ctypes.byref(cuda)) == SUCCESS
    major, minor = profile["cuda_version"].split(".")
    assert cuda.value == int(major) * 1000 + int(minor) * 10
    assert nvml.uint("nvmlDeviceGetCount_v2") == len(profile["bus_ids"])
    smi = smi_emulator_gpus(name)
    for index, bus in enumerate(profile["bus_ids"]):
        gpu = dict(emulator_profile.GPU_DEFAULTS, **profile["gpu"])
        gpu.update(profile.get("per_gpu", {}).get(str(index), {}))
        device = nvml.handle(index)
        assert nvml.text("nvmlDeviceGetName", device) == gpu["name"] == smi[index]["name"]
        assert nvml.text("nvmlDeviceGetUUID", device) == smi[index]["uuid"]
        assert nvml.text("nvmlDeviceGetSerial", device, size=30) == smi[index]["serial"]
        assert nvml.text("nvmlDeviceGetVbiosVersion", device, size=32) == gpu["vbios_version"]
        pci = PciInfo()
        assert nvml.nvmlDeviceGetPciInfo_v3(device, ctypes.byref(pci)) == SUCCESS
        assert pci.busId.decode() == "00000000:" + bus.upper() == smi[index]["bus_id"].upper()
        assert pci.busIdLegacy.decode() == "0000:" + bus.upper()
        assert (pci.domain, pci.bus, pci.device) == (0, int(bus[:2], 16), int(bus[3:5], 16))
        assert pci.pciDeviceId == (int(gpu.get("pci_device_id", "0x20b2"), 16) << 16) | 0x10de
        assert nvml.uint("nvmlDeviceGetMinorNumber", device) == index
        assert nvml.uint("nvmlDeviceGetModuleId", device) == (
            gpu["module_id"] if gpu["module_id"] is not None else ("error", NOT_SUPPORTED))
        assert nvml.uint("nvmlDeviceGetArchitecture", device) == {"Ampere": 7, "Ada Lovelace": 8, "Hopper": 9, "Blackwell": 10}[gpu["architecture"]]
        cc_major, cc_minor = ctypes.c_int(), ctypes.c_int()
        assert nvml.nvmlDeviceGetCudaComputeCapability(device, ctypes.byref(cc_major), ctypes.byref(cc_minor)) == 0
        assert "%d.%d" % (cc_major.value, cc_minor.value) == gpu["compute_capability"]
        memory = Memory()
        assert nvml.nvmlDeviceGetMemoryInfo(device, ctypes.byref(memory)) == SUCCESS
        assert memory.total == gpu["memory_total_mib"] * 1024 * 1024
        assert memory.used == 512 * 1024 * 1024 and memory.free == memory.total - memory.used
        assert nvml.uint("nvmlDeviceGetPersistenceMode", device) == 0      # no daemon runs
        assert nvml.uint("nvmlDeviceGetComputeMode", device) == 0
        current, pending = ctypes.c_uint(9), ctypes.c_uint(9)
        assert nvml.nvmlDeviceGetMigMode(device, ctypes.byref(current), ctypes.byref(pending)) == SUCCESS
        assert (current.value, pending.value) == (0, 0)
        assert nvml.nvmlDeviceGetEccMode(device, ctypes.byref(current), ctypes.byref(pending)) == SUCCESS
        assert (current.value, pending.value) == (1, 1)
        for error_type in (0, 1):
            for counter in (0, 1):
                assert nvml.ulonglong("nvmlDeviceGetTotalEccErrors", device, error_type, counter) == 0
        assert nvml.uint("nvmlDeviceGetRetiredPagesPendingStatus", device) == 0
        assert [nvml.uint(call, device) for call in (
            "nvmlDeviceGetCurrPcieLinkGeneration", "nvmlDeviceGetMaxPcieLinkGeneration",
            "nvmlDeviceGetCurrPcieLinkWidth", "nvmlDeviceGetMaxPcieLinkWidth", "nvmlDeviceGetPcieReplayCounter")] \
            == [gpu["pcie_gen"], gpu["pcie_gen"], gpu["pcie_width"], gpu["pcie_width"], 0]
        assert nvml.uint("nvmlDeviceGetEnforcedPowerLimit", device) == round(gpu["power_limit_w"] * 1000)
        assert nvml.uint("nvmlDeviceGetPowerUsage", device) == round(gpu["power_draw_w"] * 1000)
        assert nvml.uint("nvmlDeviceGetTemperature", device, 0) == gpu["temperature_c"]
        assert nvml.ulonglong("nvmlDeviceGetCurrentClocksEventReasons", device) == 0
        usage = Utilization()
        assert nvml.nvmlDeviceGetUtilizationRates(device, ctypes.byref(usage)) == SUCCESS and usage.gpu == 0
        fabric = FabricInfo()
        if gpu["fabric_state"] is None:
            assert nvml.nvmlDeviceGetGpuFabricInfo(device, ctypes.byref(fabric)) == NOT_SUPPORTED
        else:
            assert nvml.nvmlDeviceGetGpuFabricInfo(device, ctypes.byref(fabric)) == SUCCESS
            assert (fabric.state, fabric.status) == (3, 0) == (
                {"Completed": 3}[gpu["fabric_state"]], {"Success": 0}[gpu["fabric_status"]])
        # NVML_FI_DEV_RESET_STATUS, NVML_FI_DEV_DRAIN_AND_RESET_STATUS; NVML_FI_DEV_GET_GPU_RECOVERY_ACTION only
        # where a profile gives the action (the profiles' 535 captures print none)
        assert nvml.fields(device, [(226, 0), (227, 0), (230, 0), (12345, 0)]) == [
            (SUCCESS, 1, 0), (SUCCESS, 1, 0), (NOT_SUPPORTED, 1, 0), (NOT_SUPPORTED, 1, 0)]


@pytest.mark.parametrize("action, value", [("none", 0), ("gpu_reset", 1), ("node_reboot", 2), ("drain_p2p", 3),
                                           ("drain_and_reset", 4), ("recover_imex_domain", 5)])
def test_a_recovery_action_as_a_driver_from_570_reports_it(nvml, action, value):
    """Field 230 answers the planted nvmlDeviceGpuRecoveryAction_t (nvml.h's values); the deprecated reset fields
    226 and 227 then answer NOT_SUPPORTED, and the other GPUs keep the 535 shape."""
    nvml.use_profile("pairs-4gpu", {"gpus": {"1": {"recovery_action": action}}})
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.fields(nvml.handle(1), [(226, 0), (227, 0), (230, 0)]) == [
        (NOT_SUPPORTED, 1, 0), (NOT_SUPPORTED, 1, 0), (SUCCESS, 1, value)]
    assert nvml.fields(nvml.handle(0), [(226, 0), (227, 0), (230, 0)]) == [
        (SUCCESS, 1, 0), (SUCCESS, 1, 0), (NOT_SUPPORTED, 1, 0)]


@pytest.mark.parametrize("name", HEALTHY)
def test_topology_follows_the_capture(nvml, name):
    """NVLink ends, pair levels and affinities as the profile's real topo -m capture shows them."""
    profile = emulator_profile.load_profile(name)
    topology = emulator_profile.read_topology((PROFILES / profile["topology"]).read_text())
    nvml.use_profile(name)
    assert nvml.nvmlInit_v2() == SUCCESS
    devices = [nvml.handle(index) for index in range(len(profile["bus_ids"]))]
    links = profile["nvlink"]["links_per_gpu"]
    switches = profile.get("nvswitches")
    state = ctypes.c_uint()
    for index, device in enumerate(devices):
        remote = []
        for link in range(links):
            assert nvml.nvmlDeviceGetNvLinkState(device, link, ctypes.byref(state)) == SUCCESS and state.value == 1
            pci = PciInfo()
            assert nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(device, link, ctypes.byref(pci)) == SUCCESS
            remote.append((nvml.uint("nvmlDeviceGetNvLinkRemoteDeviceType", device, link), pci.busId.decode()))
        past = nvml.nvmlDeviceGetNvLinkState(device, links, ctypes.byref(state)) if links < 18 else NOT_SUPPORTED
        assert past == NOT_SUPPORTED        # no link at that index (a PCIe GPU has none at all)
        assert nvml.nvmlDeviceGetNvLinkState(device, 18, ctypes.byref(state)) == INVALID_ARGUMENT
        bonds = {peer: int(topology["relation"][(index, peer)][2:]) for peer in range(len(devices))
                 if peer != index and topology["relation"][(index, peer)].startswith("NV")}
        if switches:
            assert {kind for kind, _bus in remote} == {2}
            per_switch = {bus: sum(1 for _kind, end in remote if end == bus) for _kind, bus in remote}
            assert sorted(per_switch) == ["00000000:%02X:00.0" % (0x10 + n) for n in range(switches["count"])]
            assert max(per_switch.values()) - min(per_switch.values()) <= 1        # round-robin
        else:
            assert {kind for kind, _bus in remote} <= {0}
            assert sorted(bus for _kind, bus in remote) == sorted(
                bus for peer, width in bonds.items() for bus in ["00000000:" + profile["bus_ids"][peer]] * width)
        for peer, other in enumerate(devices):
            level = ctypes.c_int()
            if peer == index:
                assert nvml.nvmlDeviceGetTopologyCommonAncestor(device, other, ctypes.byref(level)) == INVALID_ARGUMENT
                continue
            assert nvml.nvmlDeviceGetTopologyCommonAncestor(device, other, ctypes.byref(level)) == SUCCESS
            relation = topology["relation"][(index, peer)]
            if relation.startswith("NV"):
                same_node = topology["numa_affinity"][index] == topology["numa_affinity"][peer]
                assert level.value == (40 if same_node else 50)
            else:
                assert level.value == {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50}[relation]
            status = ctypes.c_int(99)
            assert nvml.nvmlDeviceGetP2PStatus(device, other, 2, ctypes.byref(status)) == SUCCESS
            assert (status.value == 0) == relation.startswith("NV")
        words = (ctypes.c_ulong * 4)()
        assert nvml.nvmlDeviceGetCpuAffinity(device, 4, words) == SUCCESS
        cpus = {word * 64 + bit for word in range(4) for bit in range(64) if words[word] >> bit & 1}
        assert cpus == expand(topology["cpu_affinity"][index])
        assert nvml.nvmlDeviceGetMemoryAffinity(device, 4, words, 0) == SUCCESS
        assert {bit for bit in range(64) if words[0] >> bit & 1} == {int(topology["numa_affinity"][index])}
        # GPU NUMA ID N/A: NOT_SUPPORTED; no such column (a driver before NVML 12.4 added the call): not implemented
        assert nvml.uint("nvmlDeviceGetNumaNodeId", device) == (
            "error", NOT_SUPPORTED if "GPU NUMA ID" in topology["columns"] else FUNCTION_NOT_FOUND)


def expand(cpu_list):
    cpus = set()
    for part in cpu_list.split(","):
        first, _dash, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    return cpus


def test_pcie_profile_has_no_nvlink(nvml):
    """A GPU without NVLink answers NOT_SUPPORTED for every link index (what DCGM and TensorRT-LLM's NVLink probes
    catch on PCIe GPUs), and no NVLink speed field."""
    nvml.use_profile("pcie-4gpu")
    assert nvml.nvmlInit_v2() == SUCCESS
    device = nvml.handle(0)
    state = ctypes.c_uint()
    assert {nvml.nvmlDeviceGetNvLinkState(device, link, ctypes.byref(state)) for link in range(18)} == {NOT_SUPPORTED}
    assert nvml.fields(device, [(90, 0), (164, 0)]) == [(NOT_SUPPORTED, 1, 0), (NOT_SUPPORTED, 1, 0)]


def test_nvlink_speed_fields(nvml):
    nvml.use_profile("pairs-4gpu", {"inactive_links": [[0, 2]]})
    assert nvml.nvmlInit_v2() == SUCCESS
    device = nvml.handle(0)
    assert nvml.fields(device, [(90, 0), (164, 0), (164, 2), (164, 4)]) == [
        (SUCCESS, 1, 14062), (SUCCESS, 1, 14062), (NOT_SUPPORTED, 1, 0), (NOT_SUPPORTED, 1, 0)]


# ------------------------------------------------------------------------------------------------ faults


def test_faults_change_exactly_what_they_should(nvml):
    faults = {
        "lost_gpus": [1],
        "inactive_links": [[0, 1]],
        "all_links_inactive": [2],
        "gpus": {"3": {"ecc_dram_uncorrectable_volatile": 1, "ecc_sram_uncorrectable_volatile": 2,
                       "ecc_sram_correctable_aggregate": 5,
                       "remapped_rows": {"correctable": 3, "uncorrectable": 1, "pending": True, "failure": False},
                       "retired_pages_pending": True, "clock_event_reasons": ["sw_power_cap", "hw_thermal_slowdown"],
                       "temperature_c": 91, "power_draw_w": 250.5, "compute_mode": "Exclusive_Process",
                       "pcie_gen_current": 1, "pcie_width_current": 8, "pcie_replay_counter": 7, "module_id": 4,
                       "reset_required": True, "drain_and_reset_recommended": True,
                       "fabric_state": "In Progress", "fabric_status": "Not Supported"}},
    }
    nvml.use_profile("pairs-4gpu", faults)
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetCount_v2") == 4           # a lost GPU still counts
    lost = nvml.handle(1, expect=GPU_IS_LOST)
    assert nvml.text("nvmlDeviceGetName", lost) == ("error", GPU_IS_LOST)
    assert nvml.uint("nvmlDeviceGetTemperature", lost, 0) == ("error", GPU_IS_LOST)
    first, third, fourth = nvml.handle(0), nvml.handle(2), nvml.handle(3)
    level = ctypes.c_int()
    assert nvml.nvmlDeviceGetTopologyCommonAncestor(first, lost, ctypes.byref(level)) == GPU_IS_LOST
    status = ctypes.c_int()
    assert nvml.nvmlDeviceGetP2PStatus(third, fourth, 2, ctypes.byref(status)) == SUCCESS
    assert status.value == 5        # all of GPU2's links down: no NVLink P2P to its pair (NVML_P2P_STATUS_NOT_SUPPORTED)
    assert nvml.nvmlDeviceGetP2PStatus(first, nvml.handle(0), 2, ctypes.byref(status)) == INVALID_ARGUMENT
    state = ctypes.c_uint()
    states = []
    for device in (first, third, fourth):
        row = []
        for link in range(4):
            assert nvml.nvmlDeviceGetNvLinkState(device, link, ctypes.byref(state)) == SUCCESS
            row.append(state.value)
        states.append(row)
    assert states == [[1, 0, 1, 1], [0, 0, 0, 0], [1, 1, 1, 1]]
    pci = PciInfo()
    assert nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(first, 1, ctypes.byref(pci)) == NOT_SUPPORTED   # down: unknown
    assert nvml.nvmlDeviceGetNvLinkRemotePciInfo_v2(first, 0, ctypes.byref(pci)) == SUCCESS
    assert pci.busId == b"00000000:1C:00.0"
    # GPU3's overrides, and GPU2 (no override) unchanged
    assert nvml.ulonglong("nvmlDeviceGetTotalEccErrors", fourth, 1, 0) == 3
    assert nvml.ulonglong("nvmlDeviceGetMemoryErrorCounter", fourth, 1, 0, 7) == 2
    assert nvml.ulonglong("nvmlDeviceGetMemoryErrorCounter", fourth, 1, 0, 2) == 1
    assert nvml.ulonglong("nvmlDeviceGetTotalEccErrors", fourth, 0, 1) == 5
    assert nvml.ulonglong("nvmlDeviceGetMemoryErrorCounter", fourth, 1, 0, 1) == ("error", NOT_SUPPORTED)   # L2
    assert nvml.ulonglong("nvmlDeviceGetTotalEccErrors", third, 1, 0) == 0
    rows = [ctypes.c_uint() for _index in range(4)]
    assert nvml.nvmlDeviceGetRemappedRows(fourth, *[ctypes.byref(row) for row in rows]) == SUCCESS
    assert [row.value for row in rows] == [3, 1, 1, 0]
    assert nvml.uint("nvmlDeviceGetRetiredPagesPendingStatus", fourth) == 1
    assert nvml.ulonglong("nvmlDeviceGetCurrentClocksEventReasons", fourth) == 0x4 | 0x40
    assert nvml.ulonglong("nvmlDeviceGetCurrentClocksThrottleReasons", fourth) == 0x44
    assert nvml.ulonglong("nvmlDeviceGetCurrentClocksEventReasons", third) == 0
    assert nvml.uint("nvmlDeviceGetTemperature", fourth, 0) == 91
    assert nvml.uint("nvmlDeviceGetPowerUsage", fourth) == 250500
    assert nvml.uint("nvmlDeviceGetComputeMode", fourth) == 3
    assert nvml.uint("nvmlDeviceGetCurrPcieLinkGeneration", fourth) == 1
    assert nvml.uint("nvmlDeviceGetMaxPcieLinkGeneration", fourth) == 4
    assert nvml.uint("nvmlDeviceGetCurrPcieLinkWidth", fourth) == 8
    assert nvml.uint("nvmlDeviceGetPcieReplayCounter", fourth) == 7
    assert nvml.uint("nvmlDeviceGetModuleId", fourth) == 4
    assert nvml.uint("nvmlDeviceGetModuleId", third) == 1           # the profile's
    assert nvml.fields(fourth, [(226, 0), (227, 0), (230, 0), (144, 0)]) == [
        (SUCCESS, 1, 1), (SUCCESS, 1, 1), (NOT_SUPPORTED, 1, 0), (SUCCESS, 1, 1)]
    fabric = FabricInfo()
    assert nvml.nvmlDeviceGetGpuFabricInfo(fourth, ctypes.byref(fabric)) == SUCCESS
    assert (fabric.state, fabric.status) == (2, NOT_SUPPORTED)
    assert nvml.nvmlDeviceGetGpuFabricInfo(third, ctypes.byref(fabric)) == NOT_SUPPORTED


def test_not_reported_keys_answer_not_supported(nvml):
    """A key a profile sets to null (nvidia-smi prints N/A) is NOT_SUPPORTED, never 0."""
    gone = {"remapped_rows": None, "retired_pages_pending": None, "temperature_c": None, "power_draw_w": None,
            "clock_event_reasons": None, "reset_required": None, "ecc_sram_uncorrectable_volatile": None,
            "ecc_dram_uncorrectable_volatile": None}
    nvml.use_profile("pcie-4gpu", {"gpus": {"0": gone}})
    assert nvml.nvmlInit_v2() == SUCCESS
    device = nvml.handle(0)
    rows = [ctypes.c_uint() for _index in range(4)]
    assert nvml.nvmlDeviceGetRemappedRows(device, *[ctypes.byref(row) for row in rows]) == NOT_SUPPORTED
    assert nvml.uint("nvmlDeviceGetRetiredPagesPendingStatus", device) == ("error", NOT_SUPPORTED)
    assert nvml.uint("nvmlDeviceGetTemperature", device, 0) == ("error", NOT_SUPPORTED)
    assert nvml.uint("nvmlDeviceGetPowerUsage", device) == ("error", NOT_SUPPORTED)
    assert nvml.ulonglong("nvmlDeviceGetCurrentClocksEventReasons", device) == ("error", NOT_SUPPORTED)
    assert nvml.ulonglong("nvmlDeviceGetTotalEccErrors", device, 1, 0) == ("error", NOT_SUPPORTED)
    assert nvml.fields(device, [(226, 0), (227, 0), (230, 0)]) == [
        (NOT_SUPPORTED, 1, 0), (SUCCESS, 1, 0), (NOT_SUPPORTED, 1, 0)]
    count = ctypes.c_uint(0)
    assert nvml.nvmlDeviceGetRetiredPages(device, 0, ctypes.byref(count), None) == NOT_SUPPORTED
    assert nvml.uint("nvmlDeviceGetTemperature", nvml.handle(1), 0) == 33        # only GPU0 changed


def test_faults_json_and_the_older_inactive_links_file(tmp_path):
    """The no-argument re-render reads both fault files of the configuration directory."""
    (tmp_path / "faults.json").write_text(json.dumps({"lost_gpus": [2], "gpus": {"0": {"temperature_c": 80}}}))
    (tmp_path / "inactive_links").write_text("1 3\nnot a line\n")
    text = (tmp_path / emulator_profile.write_nvml_conf("pairs-4gpu", str(tmp_path))).read_text()
    blocks = text.split("\ngpu ")
    assert "\nlost 1\n" in blocks[3] and "\nlost 0\n" in blocks[2]
    assert "\ntemperature_c 80\n" in blocks[1] and "\ntemperature_c 33\n" in blocks[2]
    assert "\nlink 3 0 0 00000000:1B:00.0 0x223010de\n" in blocks[2]
    assert "\nlink 3 1 0 00000000:1C:00.0 0x223010de\n" in blocks[1]


def test_per_gpu_profile_overrides(nvml):
    profile = emulator_profile.load_profile("pcie-4gpu")
    profile["per_gpu"] = {"2": {"compute_mode": "Prohibited", "module_id": 3}}
    nvml.use_profile("pcie-4gpu", {"gpus": {"2": {"module_id": 9}}}, profile=profile)
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetComputeMode", nvml.handle(2)) == 2
    assert nvml.uint("nvmlDeviceGetModuleId", nvml.handle(2)) == 9         # faults override the profile
    assert nvml.uint("nvmlDeviceGetComputeMode", nvml.handle(1)) == 0


def test_persistence_mode_follows_the_daemon(nvml, tmp_path):
    nvml.use_profile("pcie-4gpu")
    proc = tmp_path / "proc"
    for pid, argv in (("100", ["/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced",
                               "--no-persistence-mode", "--verbose"]), ("7", ["/bin/sh"])):
        (proc / pid).mkdir(parents=True)
        (proc / pid / "cmdline").write_bytes(b"\0".join(arg.encode() for arg in argv) + b"\0")
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetPersistenceMode", nvml.handle(0)) == 0   # Ubuntu's unit: forced off
    assert nvml.nvmlShutdown() == SUCCESS
    (proc / "101").mkdir()
    (proc / "101" / "cmdline").write_bytes(b"/usr/bin/python3\0/usr/bin/nvidia-persistenced\0--verbose\0")
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetPersistenceMode", nvml.handle(0)) == 1   # NVIDIA's unit: on
    assert nvml.nvmlShutdown() == SUCCESS
    shutil.rmtree(proc)
    (tmp_path / "persistence").write_text("1\n")                            # nvidia-smi -pm 1
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetPersistenceMode", nvml.handle(0)) == 1


# ------------------------------------------------------------------------------------------------ errors


def test_error_profiles_give_nvml_codes(nvml, tmp_path):
    nvml.use_profile("mismatch")
    assert nvml.nvmlInit_v2() == LIB_RM_VERSION_MISMATCH
    assert nvml.uint("nvmlDeviceGetCount_v2") == ("error", UNINITIALIZED)
    assert nvml.nvmlErrorString(LIB_RM_VERSION_MISMATCH) == b"RM has detected an NVML/RM version mismatch."
    nvml.use_profile("no-devices")
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.uint("nvmlDeviceGetCount_v2") == 0
    assert nvml.handle(0, expect=INVALID_ARGUMENT) is not None
    assert nvml.nvmlShutdown() == SUCCESS
    unreachable = {"error": {"text": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                     "Make sure that the latest NVIDIA driver is installed and running.\n",
                             "rc": 9, "xml_rc": 9}}
    nvml.use_profile("driver-not-loaded", profile=unreachable)
    assert nvml.nvmlInit_v2() == DRIVER_NOT_LOADED
    (tmp_path / "nvml.conf").unlink()
    assert nvml.nvmlInit_v2() == DRIVER_NOT_LOADED          # no emulated driver at all
    nvml.use("init 0\ndevice_count 1\ngpu 0\nbogus line\n")
    assert nvml.nvmlInit_v2() == 999                         # a conf it cannot read: NVML_ERROR_UNKNOWN


def test_calls_before_init_and_after_shutdown(nvml):
    nvml.use_profile("pairs-4gpu")
    device = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, ctypes.byref(device)) == UNINITIALIZED
    assert nvml.text("nvmlSystemGetDriverVersion", size=80) == ("error", UNINITIALIZED)
    assert nvml.nvmlShutdown() == UNINITIALIZED
    assert nvml.nvmlInit_v2() == SUCCESS and nvml.nvmlInit_v2() == SUCCESS      # reference counted
    device = nvml.handle(0)
    assert nvml.nvmlShutdown() == SUCCESS
    assert nvml.uint("nvmlDeviceGetMinorNumber", device) == 0
    assert nvml.nvmlShutdown() == SUCCESS
    assert nvml.uint("nvmlDeviceGetMinorNumber", device) == ("error", UNINITIALIZED)


def test_bad_arguments_and_short_buffers(nvml):
    nvml.use_profile("hgx-a100-8gpu")
    assert nvml.nvmlInit_v2() == SUCCESS
    device = nvml.handle(0)
    assert nvml.handle(8, expect=INVALID_ARGUMENT) is not None
    assert nvml.nvmlDeviceGetHandleByIndex_v2(0, None) == INVALID_ARGUMENT
    assert nvml.nvmlDeviceGetCount_v2(None) == INVALID_ARGUMENT
    assert nvml.uint("nvmlDeviceGetMinorNumber", ctypes.c_void_p(12345)) == ("error", INVALID_ARGUMENT)
    assert nvml.uint("nvmlDeviceGetTemperature", device, 1) == ("error", INVALID_ARGUMENT)
    assert nvml.text("nvmlDeviceGetName", device, size=len("NVIDIA A100-SXM4-80GB")) == ("error", INSUFFICIENT_SIZE)
    assert nvml.text("nvmlDeviceGetName", device, size=len("NVIDIA A100-SXM4-80GB") + 1) == "NVIDIA A100-SXM4-80GB"
    assert nvml.text("nvmlDeviceGetUUID", device, size=20) == ("error", INSUFFICIENT_SIZE)
    assert nvml.text("nvmlSystemGetDriverVersion", size=5) == ("error", INSUFFICIENT_SIZE)
    assert nvml.nvmlDeviceGetCpuAffinity(device, 0, (ctypes.c_ulong * 1)()) == INVALID_ARGUMENT
    words = (ctypes.c_ulong * 1)()
    assert nvml.nvmlDeviceGetCpuAffinity(device, 1, words) == SUCCESS                # truncated to the set given
    assert words[0] == ((1 << 24) - 1) | (((1 << 16) - 1) << 48)          # CPUs 0-23 and 48-63 of 0-23,48-71
    assert nvml.fields(device, [(226, 0)]) and nvml.nvmlDeviceGetFieldValues(device, 0, None) == INVALID_ARGUMENT
    assert nvml.uint("nvmlDeviceGetMaxMigDeviceCount", device) == 7
    mig = ctypes.c_void_p()
    assert nvml.nvmlDeviceGetMigDeviceHandleByIndex(device, 0, ctypes.byref(mig)) == NOT_FOUND     # MIG off
    assert nvml.uint("nvmlDeviceGetGpuInstanceId", device) == ("error", NOT_SUPPORTED)


def test_retired_pages_short_count(nvml):
    profile = emulator_profile.load_profile("pcie-4gpu")
    nvml.use(emulator_profile.render_nvml_conf(profile, "pcie-4gpu").replace("retired_pages 1 0", "retired_pages 1 2"))
    assert nvml.nvmlInit_v2() == SUCCESS
    device = nvml.handle(0)
    count = ctypes.c_uint(0)
    assert nvml.nvmlDeviceGetRetiredPages(device, 1, ctypes.byref(count), None) == INSUFFICIENT_SIZE
    assert count.value == 2
    addresses = (ctypes.c_ulonglong * 2)()
    assert nvml.nvmlDeviceGetRetiredPages(device, 1, ctypes.byref(count), addresses) == SUCCESS
    assert count.value == 2 and addresses[0] != addresses[1]
    count.value = 0
    assert nvml.nvmlDeviceGetRetiredPages(device, 0, ctypes.byref(count), None) == SUCCESS and count.value == 0
    assert nvml.nvmlDeviceGetRetiredPages(device, 2, ctypes.byref(count), None) == INVALID_ARGUMENT


def test_hung_profile_blocks_init(library_path, tmp_path):
    conf = tmp_path / "nvml.conf"
    conf.write_text(emulator_profile.render_nvml_conf(emulator_profile.load_profile("hung"), "hung"))
    assert child_call(library_path, conf, "sys.exit(lib.nvmlInit_v2())", timeout=2) is None
    conf.write_text(emulator_profile.render_nvml_conf(emulator_profile.load_profile("pcie-4gpu"), "pcie-4gpu"))
    done = child_call(library_path, conf, "sys.exit(lib.nvmlInit_v2())", timeout=10)
    assert done is not None and done.returncode == 0       # the same child code returns on a healthy profile


def test_hung_gpu_blocks_its_calls_only(library_path, tmp_path):
    conf = tmp_path / "nvml.conf"
    conf.write_text(emulator_profile.render_nvml_conf(emulator_profile.load_profile("pcie-4gpu"), "pcie-4gpu",
                                                      {"gpus": {"1": {"hang": True}}}))
    body = """
        assert lib.nvmlInit_v2() == 0
        device, value = ctypes.c_void_p(), ctypes.c_uint()
        assert lib.nvmlDeviceGetHandleByIndex_v2(%d, ctypes.byref(device)) == 0
        sys.exit(lib.nvmlDeviceGetMinorNumber(device, ctypes.byref(value)))
    """
    done = child_call(library_path, conf, body % 0, timeout=10)
    assert done is not None and done.returncode == 0, done and done.stderr
    assert child_call(library_path, conf, body % 1, timeout=2) is None


def test_renderer_refuses_an_inconsistent_profile():
    profile = emulator_profile.load_profile("pairs-4gpu")
    profile["nvlink"]["links_per_gpu"] = 6          # the capture bonds NV4
    with pytest.raises(ValueError):
        emulator_profile.render_nvml_conf(profile, "pairs-4gpu")
    with pytest.raises(ValueError):
        emulator_profile.read_topology("        GPU0    GPU1\nGPU0     X      NV4\n")


def test_uuid_is_the_smi_emulators():
    """Both renderers derive a GPU's UUID from the profile name and index in the same way."""
    text = emulator_profile.render_nvml_conf(emulator_profile.load_profile("pcie-4gpu"), "pcie-4gpu")
    assert "uuid GPU-%s" % uuid_module.uuid5(uuid_module.NAMESPACE_DNS, "pcie-4gpu-3") in text


# --- the health calls of newer drivers (nvml.h at 2f9e261), structures written here from the header --------------

ARGUMENT_VERSION_MISMATCH = 25


class FabricInfoV3(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t (nvmlGpuFabricInfo_v2_t is the same without healthSummary)."""
    _fields_ = [("version", ctypes.c_uint), ("clusterUuid", ctypes.c_ubyte * 16), ("status", ctypes.c_int),
                ("cliqueId", ctypes.c_uint), ("state", ctypes.c_ubyte), ("healthMask", ctypes.c_uint),
                ("healthSummary", ctypes.c_ubyte)]


class FabricInfoV2(ctypes.Structure):
    _fields_ = FabricInfoV3._fields_[:-1]


class EccSramErrorStatus(ctypes.Structure):
    """nvmlEccSramErrorStatus_v1_t: a version, eleven counters, bThresholdExceeded."""
    _fields_ = [("version", ctypes.c_uint)] + [("counter%d" % i, ctypes.c_ulonglong) for i in range(11)] + [
        ("bThresholdExceeded", ctypes.c_uint)]


class RepairStatus(ctypes.Structure):
    """nvmlRepairStatus_v1_t."""
    _fields_ = [("version", ctypes.c_uint), ("bChannelRepairPending", ctypes.c_uint), ("bTpcRepairPending", ctypes.c_uint)]


def struct_version(structure, version):
    """NVML_STRUCT_VERSION: sizeof | version << 24."""
    return ctypes.sizeof(structure) | (version << 24)


def test_versioned_structures_have_nvml_h_sizes():
    """The sizes the versions encode, as a C compiler lays nvml.h's structs out on x86_64."""
    assert [ctypes.sizeof(s) for s in (FabricInfoV2, FabricInfoV3, EccSramErrorStatus, RepairStatus)] == [36, 40, 104, 12]


def test_health_calls_of_newer_drivers(nvml):
    """Planted SRAM threshold, repair status and exhausted banks answer through the versioned calls; a wrong struct
    version is ARGUMENT_VERSION_MISMATCH; unplanted GPUs answer as the 535 branch does (no threshold or repair
    status: NOT_SUPPORTED)."""
    nvml.use_profile("hgx-a100-8gpu", {"gpus": {"1": {"sram_threshold_exceeded": True,
                                                      "repair_pending": {"channel": True, "tpc": False},
                                                      "row_remapper_banks_exhausted": 4}}})
    assert nvml.nvmlInit_v2() == SUCCESS
    sram = EccSramErrorStatus(version=struct_version(EccSramErrorStatus, 1))
    assert nvml.nvmlDeviceGetSramEccErrorStatus(nvml.handle(1), ctypes.byref(sram)) == SUCCESS
    assert sram.bThresholdExceeded == 1
    assert nvml.nvmlDeviceGetSramEccErrorStatus(nvml.handle(0), ctypes.byref(sram)) == NOT_SUPPORTED
    sram.version = struct_version(EccSramErrorStatus, 2)
    assert nvml.nvmlDeviceGetSramEccErrorStatus(nvml.handle(1), ctypes.byref(sram)) == ARGUMENT_VERSION_MISMATCH
    repair = RepairStatus(version=struct_version(RepairStatus, 1))
    assert nvml.nvmlDeviceGetRepairStatus(nvml.handle(1), ctypes.byref(repair)) == SUCCESS
    assert (repair.bChannelRepairPending, repair.bTpcRepairPending) == (1, 0)
    histogram = (ctypes.c_uint * 5)()
    assert nvml.nvmlDeviceGetRowRemapperHistogram(nvml.handle(1), histogram) == SUCCESS
    assert list(histogram) == [636, 0, 0, 0, 4]        # the A100 profile's 640 banks


def test_fabric_health_of_newer_drivers(nvml):
    """Fabric health on Hopper (A100 has no fabric info: NOT_SUPPORTED, as the real 535 capture): v3 answers the
    mask and summary, a library that knows only v2 refuses v3 and answers v2 with the mask, and an unplanted GPU's
    library is of the 535 branch, without nvmlDeviceGetGpuFabricInfoV (FUNCTION_NOT_FOUND)."""
    faults = {"gpus": {"2": {"fabric_health": {"summary": "Unhealthy", "degraded_bandwidth": True,
                                               "incorrect_configuration": "insufficient_nvlinks"}},
                       "3": {"fabric_health": {"summary": "Healthy", "route_unhealthy": False, "version": 2}}}}
    nvml.use_profile("hgx-h100-8gpu", faults)
    assert nvml.nvmlInit_v2() == SUCCESS
    fabric = FabricInfoV3(version=struct_version(FabricInfoV3, 3))
    assert nvml.nvmlDeviceGetGpuFabricInfoV(nvml.handle(2), ctypes.byref(fabric)) == SUCCESS
    assert (fabric.state, fabric.healthSummary) == (3, 2)
    assert fabric.healthMask == (1 << 0) | (5 << 8)     # DEGRADED_BW_TRUE; INCORRECT_CONFIGURATION_INSUFFICIENT_NVLINKS
    assert nvml.nvmlDeviceGetGpuFabricInfoV(nvml.handle(3), ctypes.byref(fabric)) == ARGUMENT_VERSION_MISMATCH
    older = FabricInfoV2(version=struct_version(FabricInfoV2, 2))
    assert nvml.nvmlDeviceGetGpuFabricInfoV(nvml.handle(3), ctypes.byref(older)) == SUCCESS
    assert older.healthMask == 2 << 4                   # ROUTE_UNHEALTHY_FALSE
    assert nvml.nvmlDeviceGetGpuFabricInfoV(nvml.handle(0), ctypes.byref(fabric)) == FUNCTION_NOT_FOUND


def test_mig_hides_the_remapped_rows(nvml):
    """nvml.h: nvmlDeviceGetRemappedRows answers NOT_SUPPORTED "If MIG is enabled"; the fake does the same for the
    remap fields 142-145 and the histogram (the header does not say: answered as the rows are)."""
    rows = {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}
    nvml.use_profile("hgx-a100-8gpu", {"gpus": {"2": {"mig": True, "remapped_rows": rows}}})
    assert nvml.nvmlInit_v2() == SUCCESS
    current, pending = ctypes.c_uint(), ctypes.c_uint()
    assert nvml.nvmlDeviceGetMigMode(nvml.handle(2), ctypes.byref(current), ctypes.byref(pending)) == SUCCESS
    assert (current.value, pending.value) == (1, 1)
    values = [ctypes.c_uint() for _counter in range(4)]
    assert nvml.nvmlDeviceGetRemappedRows(nvml.handle(2), *[ctypes.byref(v) for v in values]) == NOT_SUPPORTED
    assert nvml.nvmlDeviceGetRemappedRows(nvml.handle(1), *[ctypes.byref(v) for v in values]) == SUCCESS
    assert [slot[0] for slot in nvml.fields(nvml.handle(2), [(142, 0), (143, 0), (144, 0), (145, 0)])] == [NOT_SUPPORTED] * 4
    histogram = (ctypes.c_uint * 5)()
    assert nvml.nvmlDeviceGetRowRemapperHistogram(nvml.handle(2), histogram) == NOT_SUPPORTED


# --- memory and power as DCGM reads them (nvml.h: nvmlMemory_v2_t, NVML_FI_DEV_POWER_AVERAGE/INSTANT) ------------

class MemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t: version, total, reserved, free, used (nvml.h at 2f9e261; from NVML 11.6, driver 510)."""
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


MIB = 1024 * 1024


def with_driver(name, driver):
    return dict(emulator_profile.load_profile(name), driver_version=driver)


def test_memory_info_v2_keeps_the_reserved_memory_apart(nvml):
    """nvmlDeviceGetMemoryInfo_v2 answers total, reserved (the 512 MiB the nvidia-smi emulator prints) and the
    allocated memory apart; nvmlMemory_t's used is their sum ("Sum of Reserved and Allocated device memory"); a wrong
    version word is ARGUMENT_VERSION_MISMATCH, as for the other versioned structs."""
    assert ctypes.sizeof(MemoryV2) == 40
    nvml.use_profile("hgx-h100-8gpu", {"gpus": {"1": {"memory_used_mib": 30000}}})
    assert nvml.nvmlInit_v2() == SUCCESS
    memory = MemoryV2(version=struct_version(MemoryV2, 2))
    assert nvml.nvmlDeviceGetMemoryInfo_v2(nvml.handle(1), ctypes.byref(memory)) == SUCCESS
    assert (memory.total, memory.reserved, memory.used, memory.free) == (
        81559 * MIB, 512 * MIB, 30000 * MIB, (81559 - 512 - 30000) * MIB)
    older = Memory()
    assert nvml.nvmlDeviceGetMemoryInfo(nvml.handle(1), ctypes.byref(older)) == SUCCESS
    assert (older.total, older.used, older.free) == (81559 * MIB, 30512 * MIB, (81559 - 30512) * MIB)
    memory.version = struct_version(MemoryV2, 1)
    assert nvml.nvmlDeviceGetMemoryInfo_v2(nvml.handle(1), ctypes.byref(memory)) == ARGUMENT_VERSION_MISMATCH


def test_memory_info_v2_is_missing_before_driver_510(nvml):
    nvml.use_profile("hgx-h100-8gpu", profile=with_driver("hgx-h100-8gpu", "470.256.02"))
    assert nvml.nvmlInit_v2() == SUCCESS
    memory = MemoryV2(version=struct_version(MemoryV2, 2))
    assert nvml.nvmlDeviceGetMemoryInfo_v2(nvml.handle(0), ctypes.byref(memory)) == FUNCTION_NOT_FOUND
    older = Memory()
    assert nvml.nvmlDeviceGetMemoryInfo(nvml.handle(0), ctypes.byref(older)) == SUCCESS and older.used == 512 * MIB


def test_power_fields_where_the_driver_and_the_gpu_have_them(nvml):
    """Fields 185 (average, "Ampere (except GA100) or newer") and 186 (instant, "all architectures"), scope 0, from
    the 535 driver's NVML 12.2: an H100 answers both and nvmlDeviceGetPowerUsage is its average; a planted spike moves
    the instant reading only; an A100 (GA100) answers 186 only; scope 1 (the module) is not emulated; a 525 driver
    knows neither field."""
    nvml.use_profile("hgx-h100-8gpu", {"gpus": {"1": {"power_draw_instant_w": 612.5}}})
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.fields(nvml.handle(0), [(185, 0), (186, 0), (186, 1)]) == [
        (SUCCESS, 1, 68000), (SUCCESS, 1, 68000), (NOT_SUPPORTED, 1, 0)]
    assert nvml.fields(nvml.handle(1), [(185, 0), (186, 0)]) == [(SUCCESS, 1, 68000), (SUCCESS, 1, 612500)]
    assert nvml.uint("nvmlDeviceGetPowerUsage", nvml.handle(1)) == 68000
    while nvml.lib.nvmlShutdown() == SUCCESS:
        pass
    nvml.use_profile("hgx-a100-8gpu")
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.fields(nvml.handle(0), [(185, 0), (186, 0)]) == [(NOT_SUPPORTED, 1, 0), (SUCCESS, 1, 60000)]
    while nvml.lib.nvmlShutdown() == SUCCESS:
        pass
    nvml.use_profile("hgx-h100-8gpu", profile=with_driver("hgx-h100-8gpu", "525.147.05"))
    assert nvml.nvmlInit_v2() == SUCCESS
    assert nvml.fields(nvml.handle(0), [(185, 0), (186, 0)]) == [(NOT_SUPPORTED, 1, 0), (NOT_SUPPORTED, 1, 0)]
    assert nvml.uint("nvmlDeviceGetPowerUsage", nvml.handle(0)) == 68000


def test_renderer_refuses_an_instant_spike_where_the_draw_is_the_instant_reading():
    """On GA100 (and older GPUs) nvmlDeviceGetPowerUsage is the instant reading itself (nvml.h): a different
    power_draw_instant_w there would make the stand-ins contradict each other."""
    with pytest.raises(ValueError, match="power_draw_instant_w"):
        emulator_profile.render_nvml_conf(emulator_profile.load_profile("hgx-a100-8gpu"), "hgx-a100-8gpu",
                                          {"gpus": {"0": {"power_draw_instant_w": 400.0}}})
