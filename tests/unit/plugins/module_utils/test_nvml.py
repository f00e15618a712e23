"""The NVML backend: its pure conversions, and gather() against a stand-in libnvidia-ml.so.1 built with gcc.

Values the conversions rely on come from NVIDIA's nvml.h as published in github.com/NVIDIA/go-nvml,
gen/nvml/nvml.h (NVML_API_VERSION 13): nvmlClocksEventReason* bits, NVML_DEVICE_ARCH_*, nvmlComputeMode_t,
nvmlGpuTopologyLevel_t, nvmlGpuP2PStatus_t, nvmlIntNvLinkDeviceType_t, NVML_GPU_FABRIC_STATE_*,
NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR and nvmlReturn_t. Spellings follow real nvidia-smi output (topo -m
captures in fixtures/nvidia-smi: "0-23,48-71" on an AWS p4d, "0,2,4,6,8,10" on interleaved CPUs; -q -x's
product_architecture "Ada Lovelace"; -q's fabric "In Progress" with status N/A while the fabric manager has not
finished). NVML_TOPOLOGY_INTERNAL is PIX: nvidia-smi's own help for ``topo -n`` names path 0 "a single PCIe
switch on a dual GPU board", which topo -m's legend calls PIX (at most a single PCIe bridge).
"""
import ast
import importlib.util
import json
import pathlib
import re
import shutil
import subprocess
import time

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils import nvml
from ansible_collections.gpufleet.node.plugins.module_utils import nvml_bindings


# --- return codes and states ------------------------------------------------------------------------------

@pytest.mark.parametrize("code, name", [
    (0, "NVML_SUCCESS"),
    (3, "NVML_ERROR_NOT_SUPPORTED"),
    (9, "NVML_ERROR_DRIVER_NOT_LOADED"),
    (15, "NVML_ERROR_GPU_IS_LOST"),
    (18, "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    (28, "NVML_ERROR_GPU_NOT_FOUND"),
    (999, "NVML_ERROR_UNKNOWN"),
    (77, "NVML_ERROR_77"),
    (None, None),
])
def test_return_code_name(code, name):
    assert nvml.return_code_name(code) == name


@pytest.mark.parametrize("name, state", [
    ("NVML_SUCCESS", "ok"),
    ("NVML_ERROR_DRIVER_NOT_LOADED", "driver_not_loaded"),
    ("NVML_ERROR_LIB_RM_VERSION_MISMATCH", "driver_library_mismatch"),
    ("NVML_ERROR_GPU_IS_LOST", "gpu_lost"),
    ("NVML_ERROR_GPU_NOT_FOUND", "no_devices"),
    ("NVML_ERROR_LIBRARY_NOT_FOUND", "library_not_found"),
    ("NVML_ERROR_RESET_REQUIRED", "device_error"),
    ("NVML_ERROR_NO_PERMISSION", "error"),
    ("NVML_ERROR_UNKNOWN", "error"),
    ("NVML_ERROR_77", "error"),
    (None, "error"),
])
def test_state_for_return(name, state):
    assert nvml.state_for_return(name) == state


def test_states_are_the_nvidia_smi_states_plus_two():
    assert set(nvml.STATES) == set(nvidia_smi.ERROR_STATES) | {"ok", "timeout", "library_not_found"}


def test_every_mapped_state_is_a_state():
    for name in nvml.RETURN_CODES.values():
        assert nvml.state_for_return(name) in nvml.STATES


# --- conversions ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("mask, names", [
    (0, []),
    (0x1, ["gpu_idle"]),
    (0x4, ["sw_power_cap"]),
    (0x4 | 0x1, ["gpu_idle", "sw_power_cap"]),
    (0x8 | 0x40 | 0x80, ["hw_power_brake_slowdown", "hw_slowdown", "hw_thermal_slowdown"]),
    (0x2 | 0x10 | 0x20 | 0x100, ["applications_clocks_setting", "display_clocks_setting", "sw_thermal_slowdown",
                                 "sync_boost"]),
    (0x200 | 0x1, ["gpu_idle"]),
    (None, None),
])
def test_clock_event_reason_names(mask, names):
    assert nvml.clock_event_reason_names(mask) == names


@pytest.mark.parametrize("words, bits, text", [
    ([0x00FFFFFF | (0xFFFF << 48)], 64, "0-23,48-63"),
    ([0x0000FFFFFF000000 | 0x00FFFFFF, 0], 64, "0-47"),
    ([0x555], 64, "0,2,4,6,8,10"),
    ([0x3], 64, "0-1"),
    ([0x1, 0x1], 64, "0,64"),
    ([0xFFFFFFFF, 0x1], 32, "0-32"),
    ([0], 64, None),
    ([], 64, None),
    (None, 64, None),
])
def test_cpu_list(words, bits, text):
    assert nvml.cpu_list(words, bits) == text


def test_cpu_list_across_words_as_an_aws_p4d_prints_it():
    low = (1 << 24) - 1 | ((1 << 16) - 1) << 48   # 0-23 and 48-63
    high = (1 << 8) - 1                              # 64-71
    assert nvml.cpu_list([low, high], 64) == "0-23,48-71"


@pytest.mark.parametrize("level, relation", [
    (10, "PIX"), (20, "PXB"), (30, "PHB"), (40, "NODE"), (50, "SYS"), (0, "PIX"), (35, None), (None, None),
])
def test_relation_for_level(level, relation):
    assert nvml.relation_for_level(level) == relation


@pytest.mark.parametrize("code, name", [
    (7, "Ampere"), (9, "Hopper"), (10, "Blackwell"), (8, "Ada Lovelace"), (5, "Volta"), (0xFFFFFFFF, None), (None, None),
])
def test_architecture_name(code, name):
    assert nvml.architecture_name(code) == name


@pytest.mark.parametrize("code, name", [
    (0, "Default"), (2, "Prohibited"), (3, "Exclusive_Process"), (4, None), (None, None),
])
def test_compute_mode_name(code, name):
    assert nvml.compute_mode_name(code) == name


@pytest.mark.parametrize("version, text", [
    (12020, "12.2"), (11080, "11.8"), (13000, "13.0"), (12090, "12.9"), (0, None), (-1, None), (None, None),
])
def test_cuda_version_string(version, text):
    assert nvml.cuda_version_string(version) == text


@pytest.mark.parametrize("state, status, text, expected", [
    (3, 0, None, {"state": "Completed", "status": "Success"}),
    (3, 999, "Unknown Error", {"state": "Completed", "status": "Unknown Error"}),
    (3, 999, None, {"state": "Completed", "status": "NVML_ERROR_UNKNOWN"}),
    (2, 0, None, {"state": "In Progress", "status": None}),
    (1, 0, None, {"state": "Not Started", "status": None}),
    (0, 0, None, {"state": None, "status": None}),
    (9, 0, None, {"state": None, "status": None}),
])
def test_fabric_names(state, status, text, expected):
    assert nvml.fabric_names(state, status, text) == expected


@pytest.mark.parametrize("code, name", [(0, "OK"), (5, "not supported"), (2, "GPU not supported"), (42, None)])
def test_p2p_status_name(code, name):
    assert nvml.p2p_status_name(code) == name


@pytest.mark.parametrize("code, name", [(0, "gpu"), (1, "ibmnpu"), (2, "switch"), (0xFF, "unknown"), (3, None), (None, None)])
def test_device_type_name(code, name):
    assert nvml.device_type_name(code) == name


def test_units():
    assert nvml.mib(85899345920) == 81920
    assert nvml.mib(1024 * 1024 - 1) == 0
    assert nvml.mib(None) is None
    assert nvml.watts(400000) == 400.0
    assert nvml.watts(61250) == 61.25
    assert nvml.watts(None) is None


# --- links and the matrix ---------------------------------------------------------------------------------

def _link(number, remote_type, remote_bus=None, active=True):
    return {"link": number, "active": active, "speed_gbps": 25.0 if active else None,
            "remote_pci_bus_id": remote_bus, "remote_device_type": remote_type}


def test_switch_links_give_every_pair_the_row_gpus_active_links():
    links = dict(("GPU%d" % gpu, [_link(number, "switch", "00000000:%02X:00.0" % (0x10 + number % 6))
                                  for number in range(12)]) for gpu in range(4))
    links["GPU3"][0]["active"] = False
    bus_ids = dict(("GPU%d" % gpu, "00000000:%02X:00.0" % (0x07 + gpu)) for gpu in range(4))
    relations = nvml.nvlink_relations(links, bus_ids)
    assert relations["GPU0"] == {"GPU1": 12, "GPU2": 12, "GPU3": 12}
    assert relations["GPU3"] == {"GPU0": 11, "GPU1": 11, "GPU2": 11}


def test_direct_links_count_per_peer_by_bus_id():
    bus_ids = {"GPU0": "00000000:1B:00.0", "GPU1": "00000000:1C:00.0", "GPU2": "00000000:88:00.0",
               "GPU3": "00000000:89:00.0"}
    links = {
        "GPU0": [_link(n, "gpu", "0000:1c:00.0") for n in range(4)],
        "GPU1": [_link(n, "gpu", "00000000:1B:00.0") for n in range(3)] + [_link(3, None, None, active=False)],
        "GPU2": [_link(n, "gpu", "00000000:89:00.0") for n in range(4)],
        "GPU3": [_link(n, "gpu", "00000000:88:00.0") for n in range(4)],
    }
    relations = nvml.nvlink_relations(links, bus_ids)
    assert relations == {"GPU0": {"GPU1": 4}, "GPU1": {"GPU0": 3}, "GPU2": {"GPU3": 4}, "GPU3": {"GPU2": 4}}


def test_a_link_to_an_unknown_device_or_bus_counts_for_no_gpu():
    bus_ids = {"GPU0": "00000000:1B:00.0", "GPU1": "00000000:1C:00.0"}
    links = {"GPU0": [_link(0, "gpu", "00000000:AA:00.0"), _link(1, "unknown", "00000000:1C:00.0"),
                      _link(2, "gpu", None)]}
    assert nvml.nvlink_relations(links, bus_ids) == {}


def test_a_link_of_unknown_type_to_a_gpus_bus_id_counts_for_that_gpu():
    bus_ids = {"GPU0": "00000000:1B:00.0", "GPU1": "00000000:1C:00.0"}
    links = {"GPU0": [_link(0, None, "00000000:1C:00.0"), _link(1, None, "00000000:10:00.0")]}
    assert nvml.nvlink_relations(links, bus_ids) == {"GPU0": {"GPU1": 1}}


def test_a_gpu_alone_on_the_switches_is_joined_to_no_one():
    links = {"GPU0": [_link(0, "switch")], "GPU1": [_link(0, "switch", active=False)]}
    assert nvml.nvlink_relations(links, {"GPU0": "0000:01:00.0", "GPU1": "0000:02:00.0"}) == {}


def test_topology_matrix_nvlink_first_then_pcie_levels_either_order():
    labels = ["GPU0", "GPU1", "GPU2"]
    levels = {("GPU0", "GPU1"): 50, ("GPU2", "GPU0"): 10, ("GPU1", "GPU2"): None}
    matrix = nvml.topology_matrix(labels, levels, {"GPU0": {"GPU1": 4}, "GPU1": {"GPU0": 4}})
    assert matrix == {
        "GPU0": {"GPU1": "NV4", "GPU2": "PIX"},
        "GPU1": {"GPU0": "NV4", "GPU2": None},
        "GPU2": {"GPU0": "PIX", "GPU1": None},
    }


def test_functions_are_unique_nvml_symbols():
    assert len(set(nvml.FUNCTIONS)) == len(nvml.FUNCTIONS)
    assert all(name.startswith("nvml") for name in nvml.FUNCTIONS)


def test_functions_are_the_calls_the_binding_makes():
    """FUNCTIONS (what a stand-in library must export) names every NVML function nvml_bindings.py calls by name, and
    nothing it does not call."""
    path = pathlib.Path(nvml_bindings.__file__)
    tree = ast.parse(path.read_text(encoding="utf-8"))
    (listed,) = [node.value for node in tree.body if isinstance(node, ast.Assign)
                 and [getattr(target, "id", None) for target in node.targets] == ["FUNCTIONS"]]
    in_the_tuple = set(id(node) for node in ast.walk(listed))
    called = set(node.value for node in ast.walk(tree) if isinstance(node, ast.Constant) and id(node) not in in_the_tuple
                 and isinstance(node.value, str) and re.match(r"^nvml(Init|Shutdown|ErrorString|System|Device)\w*$", node.value))
    assert called and set(nvml.FUNCTIONS) == set(nvml_bindings.FUNCTIONS)
    assert {"not in FUNCTIONS": sorted(called - set(nvml.FUNCTIONS)), "never called": sorted(set(nvml.FUNCTIONS) - called)} == {
        "not in FUNCTIONS": [], "never called": []}


# --- gather() against the fake libnvidia-ml.so.1 of the emulated GPUs -------------------------------------
#
# tests/emulator/fake_nvml/fake_nvml.c is built with gcc into a temporary directory; each test renders the
# nvml.conf it reads from a hardware profile (tests/emulator/profiles) and planted faults with the emulator's
# own renderer, so the values checked here are the profile's, read through the real NVML ABI.

REPO = pathlib.Path(__file__).resolve().parents[4]
EMULATOR = REPO / "tests" / "emulator"
PROFILES = EMULATOR / "profiles"
TIMEOUT = 5


def _build(sources, output, *defines):
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("gcc is needed to build a stand-in libnvidia-ml.so.1")
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(output)] + list(defines) + [str(path) for path in sources],
                   check=True)
    return str(output)


@pytest.fixture(scope="module")
def fake_library(fake_nvml_library):
    # conftest.py's build of tests/emulator/fake_nvml (or tools/fake-nvml.sh's, where the node has no gcc)
    return fake_nvml_library


@pytest.fixture(scope="module")
def emulator():
    spec = importlib.util.spec_from_file_location("gpufleet_emulator_profile", str(EMULATOR / "emulator_profile.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def run_fake(fake_library, emulator, tmp_path, monkeypatch):
    """gather() on the fake library with a profile (a name, or a dict and its name) and faults."""
    def run(name, faults=None, profile=None, timeout=TIMEOUT):
        profile = profile if profile is not None else _profile(name)
        conf = tmp_path / "nvml.conf"
        conf.write_text(emulator.render_nvml_conf(profile, name, faults), encoding="utf-8")
        monkeypatch.setenv("GPUFLEET_NVML_CONF", str(conf))
        return nvml.gather(timeout, library=fake_library)
    return run


def _profile(name):
    return json.loads((PROFILES / (name + ".json")).read_text(encoding="utf-8"))


def _hardware_profiles():
    names = sorted(path.stem for path in PROFILES.glob("*.json"))
    found = [name for name in names if "bus_ids" in _profile(name)]
    assert len(found) >= 3
    return found


def _expected_gpu(profile, index):
    """The per-GPU values a profile defines, with the defaults of tests/emulator/profiles' contract."""
    values = {"architecture": "Ampere", "compute_capability": "8.0", "temperature_c": 33, "power_draw_w": 60.0,
              "compute_mode": "Default", "module_id": None, "fabric_state": None, "fabric_status": None}
    values.update(profile["gpu"])
    values.update(profile.get("per_gpu", {}).get(str(index), {}))
    return values


@pytest.mark.parametrize("name", _hardware_profiles())
def test_gather_gives_each_profiles_values(run_fake, name):
    profile = _profile(name)
    result = run_fake(name)
    assert result["state"] == "ok", result["message"]
    assert result["nvml_return"] is None and result["lost"] == [] and result["errors"] == []
    assert result["count"] == len(profile["bus_ids"])
    assert result["driver_version"] == profile["driver_version"]
    assert result["cuda_driver_version"] == profile["cuda_version"]
    assert [device["index"] for device in result["devices"]] == list(range(len(profile["bus_ids"])))
    for device, bus in zip(result["devices"], profile["bus_ids"]):
        gpu = _expected_gpu(profile, device["index"])
        assert device["pci_bus_id"] == "00000000:" + bus.upper()
        assert device["name"] == gpu["name"]
        assert device["memory_total_mib"] == gpu["memory_total_mib"]
        assert device["power_limit_w"] == gpu["power_limit_w"]
        assert device["power_draw_w"] == gpu["power_draw_w"]
        assert device["vbios_version"] == gpu["vbios_version"]
        assert device["architecture"] == gpu["architecture"]
        assert device["compute_capability"] == gpu["compute_capability"]
        assert device["temperature_c"] == gpu["temperature_c"]
        assert device["compute_mode"] == gpu["compute_mode"]
        assert device["module_id"] == gpu["module_id"]
        assert device["minor_number"] == device["index"]
        assert device["uuid"].startswith("GPU-")
        assert device["pcie"] == {"gen_current": gpu["pcie_gen"], "gen_max": gpu["pcie_gen"],
                                  "width_current": gpu["pcie_width"], "width_max": gpu["pcie_width"],
                                  "replay_counter": 0}
        # a 535 library: no nvmlDeviceGetGpuFabricInfoV, so no fabric health
        assert device["fabric"] == {"state": gpu["fabric_state"], "status": gpu["fabric_status"], "health": None}
        assert device["sram_threshold_exceeded"] is None and device["repair_pending"] is None
        assert device["ecc_errors_uncorrected_volatile"] == 0
        assert device["ecc_errors_uncorrected_aggregate"] == 0
        assert device["ecc_errors_corrected_volatile"] == 0
        assert device["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
        assert device["retired_pages"]["pending"] is False
        assert device["clock_event_reasons_active"] == []
        assert device["reset_required"] is False and device["drain_and_reset_recommended"] is False
        assert device["mig_mode"]["current"] is not True and device["mig_devices"] == []
        # nvmlDeviceGetMemoryInfo_v2 (every profile's driver is 510 or newer): the 512 MiB the emulator reserves
        # apart from the allocated memory, as nvidia-smi prints them
        used = gpu.get("memory_used_mib") or 0
        assert (device["memory_reserved_mib"], device["memory_used_mib"], device["memory_free_mib"]) == (
            512, used, gpu["memory_total_mib"] - 512 - used)
        # fields 185/186 (every profile's driver is 535 or newer): the average only on a GPU that has one (nvml.h:
        # Ampere except GA100, and newer), where power_draw_w (nvmlDeviceGetPowerUsage) is that average
        averages = gpu["architecture"] in ("Ampere", "Ada Lovelace", "Hopper", "Blackwell") and "A100" not in gpu["name"]
        assert device["power_draw_average_w"] == (gpu["power_draw_w"] if averages else None)
        assert device["power_draw_instant_w"] == gpu["power_draw_w"]


def _with_driver(name, driver):
    profile = _profile(name)
    profile["driver_version"] = driver
    return profile


def test_gather_memory_v2_apart_from_the_reserved_memory(run_fake):
    """nvmlDeviceGetMemoryInfo_v2 (nvmlMemory_v2_t with its version word): used without the reserved memory; a
    library before driver 510 lacks the call, and nvmlDeviceGetMemoryInfo's used counts the reservation (nvml.h:
    "Sum of Reserved and Allocated device memory"), with no reserved to report."""
    faults = {"gpus": {"1": {"memory_used_mib": 30000}}}
    device = run_fake("hgx-h100-8gpu", faults)["devices"][1]
    assert (device["memory_total_mib"], device["memory_reserved_mib"], device["memory_used_mib"],
            device["memory_free_mib"]) == (81559, 512, 30000, 81559 - 512 - 30000)
    result = run_fake("hgx-h100-8gpu", faults, profile=_with_driver("hgx-h100-8gpu", "470.256.02"))
    assert result["state"] == "ok" and "nvmlDeviceGetMemoryInfo_v2" in result["absent"]
    device = result["devices"][1]
    assert (device["memory_total_mib"], device["memory_reserved_mib"], device["memory_used_mib"],
            device["memory_free_mib"]) == (81559, None, 30512, 81559 - 512 - 30000)


def test_gather_average_and_instant_power_fields(run_fake):
    """nvmlDeviceGetPowerUsage for power_draw_w (what DCGM exports as DCGM_FI_DEV_POWER_USAGE), NVML_FI_DEV_POWER_AVERAGE
    (185) and NVML_FI_DEV_POWER_INSTANT (186) apart: a spike planted on an H100 shows in the instant reading only; an
    A100 (GA100) has no average; a driver before 535 (NVML 12.2, the first nvml.h with the two fields) neither."""
    device = run_fake("hgx-h100-8gpu", {"gpus": {"1": {"power_draw_instant_w": 612.5}}})["devices"][1]
    assert (device["power_draw_w"], device["power_draw_average_w"], device["power_draw_instant_w"]) == (68.0, 68.0, 612.5)
    device = run_fake("hgx-a100-8gpu", {"gpus": {"0": {"power_draw_w": 301.25}}})["devices"][0]
    assert (device["power_draw_w"], device["power_draw_average_w"], device["power_draw_instant_w"]) == (
        301.25, None, 301.25)
    result = run_fake("hgx-h100-8gpu", profile=_with_driver("hgx-h100-8gpu", "525.147.05"))
    device = result["devices"][0]
    assert (device["power_draw_w"], device["power_draw_average_w"], device["power_draw_instant_w"]) == (68.0, None, None)
    assert result["errors"] == []


@pytest.mark.parametrize("name", _hardware_profiles())
def test_gather_topology_equals_the_profiles_topo_m_capture(run_fake, name):
    profile = _profile(name)
    capture = nvidia_smi.parse_topology((PROFILES / profile["topology"]).read_text(encoding="utf-8"))
    topology = run_fake(name)["topology"]
    assert topology["gpus"] == capture["gpus"]
    assert topology["matrix"] == capture["matrix"]
    assert topology["cpu_affinity"] == capture["cpu_affinity"]
    assert topology["numa_affinity"] == capture["numa_affinity"]
    for label, value in capture["gpu_numa_id"].items():
        if value is not None:  # a capture from a driver without the column says nothing
            assert topology["gpu_numa_id"][label] == value
    assert topology["nics"] is None and topology["gpu_nic"] is None
    links = profile["nvlink"].get("links_per_gpu", 0)
    if not links:
        assert topology["nvlink"] == {}
        return
    switches = bool(profile.get("nvswitches"))
    for label in capture["gpus"]:
        entries = topology["nvlink"][label]
        assert [entry["link"] for entry in entries] == list(range(links))
        assert all(entry["active"] for entry in entries)
        assert all(entry["speed_gbps"] == profile["nvlink"]["speed_gbps"] for entry in entries)
        assert set(entry["remote_device_type"] for entry in entries) == {"switch" if switches else "gpu"}
        peers = [other for other, relation in capture["matrix"][label].items() if relation.startswith("NV")]
        assert all(topology["p2p"][label][peer] == "OK" for peer in peers)


def test_gather_a_lost_gpu_is_named_and_left_out(run_fake):
    result = run_fake("hgx-a100-8gpu", {"lost_gpus": [2]})
    assert result["state"] == "gpu_lost"
    assert result["nvml_return"] == "NVML_ERROR_GPU_IS_LOST"
    assert result["count"] == 8
    assert [device["index"] for device in result["devices"]] == [0, 1, 3, 4, 5, 6, 7]
    assert [(entry["index"], entry["nvml_return"]) for entry in result["lost"]] == [(2, "NVML_ERROR_GPU_IS_LOST")]
    assert "GPU2" not in result["topology"]["gpus"] and "GPU2" not in result["topology"]["matrix"]["GPU0"]
    assert "GPU2" in result["message"]


def test_gather_an_inactive_switch_link_narrows_its_gpus_row(run_fake):
    topology = run_fake("hgx-a100-8gpu", {"inactive_links": [[0, 3]]})["topology"]
    assert [entry["active"] for entry in topology["nvlink"]["GPU0"]].count(False) == 1
    assert topology["nvlink"]["GPU0"][3]["active"] is False
    assert topology["nvlink"]["GPU0"][3]["speed_gbps"] is None
    assert set(topology["matrix"]["GPU0"].values()) == {"NV11"}
    assert topology["matrix"]["GPU1"]["GPU0"] == "NV12"


def test_gather_all_links_of_a_bridged_gpu_down(run_fake):
    topology = run_fake("pairs-4gpu", {"all_links_inactive": [1]})["topology"]
    assert [entry["active"] for entry in topology["nvlink"]["GPU1"]] == [False] * 4
    assert not topology["matrix"]["GPU1"]["GPU0"].startswith("NV")
    assert topology["matrix"]["GPU2"]["GPU3"] == "NV4"


def test_gather_health_faults(run_fake):
    fault = {
        "ecc_dram_uncorrectable_volatile": 2, "ecc_sram_uncorrectable_volatile": 1,
        "ecc_dram_uncorrectable_aggregate": 5, "ecc_sram_uncorrectable_aggregate": 4,
        "ecc_dram_correctable_volatile": 7, "ecc_sram_correctable_volatile": 3,
        "remapped_rows": {"correctable": 1, "uncorrectable": 2, "pending": True, "failure": False},
        "retired_pages_pending": True, "reset_required": True, "drain_and_reset_recommended": True,
        "clock_event_reasons": ["sw_power_cap", "hw_slowdown"], "temperature_c": 91, "power_draw_w": 612.5,
        "compute_mode": "Exclusive_Process", "pcie_width_current": 8, "pcie_gen_current": 3, "pcie_replay_counter": 17,
        "fabric_state": "In Progress", "fabric_status": None,
    }
    result = run_fake("hgx-h100-8gpu", {"gpus": {"3": fault}})
    assert result["state"] == "ok"
    device = result["devices"][3]
    assert device["ecc_errors_uncorrected_volatile"] == 3
    assert device["ecc_errors_uncorrected_aggregate"] == 9
    assert device["ecc_errors_corrected_volatile"] == 10
    assert device["remapped_rows"] == {"correctable": 1, "uncorrectable": 2, "pending": True, "failure": False}
    assert device["retired_pages"]["pending"] is True
    assert device["reset_required"] is True and device["drain_and_reset_recommended"] is True
    assert device["clock_event_reasons_active"] == ["hw_slowdown", "sw_power_cap"]
    assert device["temperature_c"] == 91 and device["power_draw_w"] == 612.5
    assert device["compute_mode"] == "Exclusive_Process"
    assert device["pcie"] == {"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16, "replay_counter": 17}
    assert device["fabric"] == {"state": "In Progress", "status": None, "health": None}
    healthy = result["devices"][2]
    assert healthy["ecc_errors_uncorrected_volatile"] == 0 and healthy["fabric"]["state"] == "Completed"


def test_gather_newer_drivers_health_faults(run_fake):
    """The calls of newer drivers on the fake library: the SRAM threshold (nvmlEccSramErrorStatus_v1_t), the repair
    status (nvmlRepairStatus_v1_t), the histogram of a profile with its bank count (the A100's 640), fabric health
    through nvmlDeviceGetGpuFabricInfoV (v3, and v2 where the library refuses v3), and MIG hiding the remapped rows."""
    faults = {"gpus": {
        "1": {"sram_threshold_exceeded": True, "repair_pending": {"channel": False, "tpc": True},
              "row_remapper_banks_exhausted": 2,
              "remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": False, "failure": False}},
        "2": {"fabric_state": "Completed", "fabric_status": "Success",
              "fabric_health": {"summary": "Limited Capacity", "access_timeout_recovery": True,
                                "incorrect_configuration": "no_partition", "degraded_bandwidth": False}},
        "3": {"fabric_state": "Completed", "fabric_status": "Success",
              "fabric_health": {"summary": "Unhealthy", "degraded_bandwidth": True, "version": 2}},
        "4": {"mig": True}}}
    result = run_fake("hgx-a100-8gpu", faults)
    assert result["state"] == "ok" and result["errors"] == []
    first, second, third, fourth, mig = result["devices"][:5]
    assert first["row_remapper_histogram"] == {"max": 640, "high": 0, "partial": 0, "low": 0, "none": 0}
    assert first["sram_threshold_exceeded"] is None and first["repair_pending"] is None
    assert second["sram_threshold_exceeded"] is True
    assert second["repair_pending"] == {"channel": False, "tpc": True}
    assert second["row_remapper_histogram"] == {"max": 637, "high": 1, "partial": 0, "low": 0, "none": 2}
    assert third["fabric"]["health"] == {
        "summary": "Limited Capacity", "degraded_bandwidth": False, "route_recovery_in_progress": None,
        "route_unhealthy": None, "access_timeout_recovery": True, "incorrect_configuration": "no_partition",
        "partition_assigned": None}
    assert fourth["fabric"]["state"] == "Completed"
    assert fourth["fabric"]["health"]["summary"] is None and fourth["fabric"]["health"]["degraded_bandwidth"] is True
    assert mig["mig_mode"] == {"current": True, "pending": True}
    assert mig["remapped_rows"] is None and mig["row_remapper_histogram"] is None
    assert "nvmlDeviceGetRemappedRows" in result["missing"]


def test_gather_unsupported_remapping_is_none(run_fake):
    result = run_fake("pcie-4gpu", {"gpus": {"0": {"remapped_rows": None}}})
    assert result["devices"][0]["remapped_rows"] is None
    assert result["devices"][1]["remapped_rows"] is not None
    assert "nvmlDeviceGetRemappedRows" in result["missing"]


@pytest.mark.parametrize("name, state, code", [
    ("mismatch", "driver_library_mismatch", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    ("no-devices", "no_devices", None),
])
def test_gather_error_profiles(run_fake, name, state, code):
    result = run_fake(name)
    assert (result["state"], result["nvml_return"]) == (state, code)
    assert result["devices"] == [] and result["topology"] is None
    assert "\n" not in result["message"]


def test_gather_driver_not_loaded(run_fake):
    profile = {"error": {"text": "NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
                                 "Make sure that the latest NVIDIA driver is installed and running.\n", "rc": 9}}
    result = run_fake("not-loaded", profile=profile)
    assert (result["state"], result["nvml_return"]) == ("driver_not_loaded", "NVML_ERROR_DRIVER_NOT_LOADED")


def test_gather_a_hung_library_is_killed_at_the_timeout(run_fake):
    started = time.monotonic()
    result = run_fake("hung", timeout=1)
    assert result["state"] == "timeout"
    assert time.monotonic() - started < 2
    assert "nvmlInit_v2" in result["message"]


def test_gather_a_gpu_that_hangs_is_killed_at_the_timeout(run_fake):
    started = time.monotonic()
    result = run_fake("hgx-a100-8gpu", {"gpus": {"5": {"hang": True}}}, timeout=1)
    assert result["state"] == "timeout" and result["devices"] == []
    assert " on GPU5)" in result["message"]
    assert time.monotonic() - started < 2


def test_gather_without_the_library():
    result = nvml.gather(TIMEOUT, library="/nonexistent/libnvidia-ml.so.1")
    assert result["state"] == "library_not_found" and result["devices"] == []
    assert "/nonexistent/libnvidia-ml.so.1" in result["message"]


# --- gather() against a small C stub of this file's own -----------------------------------------------------
#
# Cases the emulated profiles do not make: an older driver's library without some symbols, direct GPU-to-GPU
# links with their speed field, a GPU lost in the middle of the gather, a call that hangs or crashes. The stub
# answers by $STUB_SCENARIO; its signatures follow nvml.h like the module's.

STUB_SOURCE = r"""
#include <stdlib.h>
#include <string.h>
#include <stdio.h>
#include <unistd.h>
typedef void *dev_t_;
struct pci { char legacy[16]; unsigned domain, bus, device, id, sub; char busId[32]; };
struct mem { unsigned long long total, free, used; };
struct util { unsigned gpu, memory; };
struct fabric { unsigned char uuid[16]; int status; unsigned clique; unsigned char state; };
union val { double d; int si; unsigned ui; unsigned long ul; unsigned long long ull; long long sll; unsigned short us; };
struct field { unsigned id, scope; long long ts, lat; int type; int ret; union val value; };
static const char *scenario(void) { const char *s = getenv("STUB_SCENARIO"); return s ? s : "ok"; }
static int is(const char *name) { return strcmp(scenario(), name) == 0; }
static int gpus[4] = {0, 1, 2, 3};
#define IDX(d) (*(int *)(d))
int nvmlInit_v2(void) {
    if (is("mismatch")) return 18;
    if (is("notloaded")) return 9;
    if (is("hang")) for (;;) sleep(1);
    return 0;
}
int nvmlShutdown(void) { return 0; }
const char *nvmlErrorString(int r) { return r == 18 ? "Driver/library version mismatch" : r == 15 ? "GPU is lost" : "Unknown Error"; }
int nvmlSystemGetDriverVersion(char *b, unsigned n) { snprintf(b, n, "535.183.01"); return 0; }
int nvmlSystemGetNVMLVersion(char *b, unsigned n) { snprintf(b, n, "12.535.183.01"); return 0; }
int nvmlSystemGetCudaDriverVersion_v2(int *v) { *v = 12020; return 0; }
int nvmlDeviceGetCount_v2(unsigned *c) { *c = is("nodev") ? 0 : is("lost") || is("lost_late") ? 3 : 2; return 0; }
int nvmlDeviceGetHandleByIndex_v2(unsigned i, dev_t_ *d) {
    if (is("lost") && i == 1) return 15;
    *d = &gpus[i]; return 0;
}
int nvmlDeviceGetName(dev_t_ d, char *b, unsigned n) { snprintf(b, n, "NVIDIA A100-SXM4-80GB"); return 0; }
int nvmlDeviceGetUUID(dev_t_ d, char *b, unsigned n) { snprintf(b, n, "GPU-0000000%d", IDX(d)); return 0; }
int nvmlDeviceGetSerial(dev_t_ d, char *b, unsigned n) { return 3; }
int nvmlDeviceGetPciInfo_v3(dev_t_ d, struct pci *p) {
    memset(p, 0, sizeof *p); snprintf(p->busId, 32, "00000000:%02X:00.0", 7 + IDX(d)); p->bus = 7 + IDX(d); return 0;
}
int nvmlDeviceGetMinorNumber(dev_t_ d, unsigned *v) { *v = IDX(d); return 0; }
#ifndef OLD_DRIVER
int nvmlDeviceGetModuleId(dev_t_ d, unsigned *v) { *v = IDX(d) + 1; return 0; }
int nvmlDeviceGetCurrentClocksEventReasons(dev_t_ d, unsigned long long *v) { *v = IDX(d) ? 0x4 | 0x1 : 0; return 0; }
int nvmlDeviceGetGpuFabricInfo(dev_t_ d, struct fabric *f) { memset(f, 0, sizeof *f); f->state = IDX(d) ? 2 : 3; f->status = 0; return 0; }
/* nvml.h's versioned structs, laid out by the compiler: a version word that is not sizeof | ver << 24 is refused as
   NVML_ERROR_ARGUMENT_VERSION_MISMATCH, as the real library does. Scenario fabric_v2: a library that knows only
   nvmlGpuFabricInfo_v2. GPU0: fabric Completed, bandwidth degraded, route recovery in progress, summary Unhealthy,
   SRAM threshold exceeded, a TPC repair pending, two banks without spare rows. */
struct fabric_v3 { unsigned version; unsigned char uuid[16]; int status; unsigned clique; unsigned char state;
                   unsigned health_mask; unsigned char health_summary; };
struct fabric_v2 { unsigned version; unsigned char uuid[16]; int status; unsigned clique; unsigned char state;
                   unsigned health_mask; };
#define VERSION(type, ver) ((unsigned)(sizeof(type) | ((ver) << 24)))
int nvmlDeviceGetGpuFabricInfoV(dev_t_ d, struct fabric_v3 *f) {
    unsigned version = f->version;
    if (version == VERSION(struct fabric_v3, 3) && !is("fabric_v2")) {
        memset(f, 0, sizeof *f); f->version = version;
        f->health_summary = IDX(d) ? 1 : 2;
    } else if (version == VERSION(struct fabric_v2, 2)) {
        memset(f, 0, sizeof(struct fabric_v2)); f->version = version;
    } else return 25;
    f->state = IDX(d) ? 2 : 3; f->status = 0;
    f->health_mask = IDX(d) ? (2u << 0) | (2u << 2) | (2u << 4) | (2u << 6) | (1u << 8) | (1u << 12)
                            : (1u << 0) | (1u << 2) | (2u << 4) | (0u << 6) | (1u << 8) | (1u << 12);
    return 0;
}
struct histogram { unsigned max, high, partial, low, none; };
int nvmlDeviceGetRowRemapperHistogram(dev_t_ d, struct histogram *h) {
    h->max = IDX(d) ? 640 : 630; h->high = IDX(d) ? 0 : 8; h->partial = 0; h->low = 0; h->none = IDX(d) ? 0 : 2; return 0;
}
struct sram { unsigned version; unsigned long long counts[11]; unsigned threshold; };
int nvmlDeviceGetSramEccErrorStatus(dev_t_ d, struct sram *s) {
    if (s->version != VERSION(struct sram, 1)) return 25;
    memset(s->counts, 0, sizeof s->counts); s->threshold = IDX(d) == 0; return 0;
}
struct repair { unsigned version, channel, tpc; };
int nvmlDeviceGetRepairStatus(dev_t_ d, struct repair *r) {
    if (r->version != VERSION(struct repair, 1)) return 25;
    r->channel = 0; r->tpc = IDX(d) == 0; return 0;
}
#endif
int nvmlDeviceGetCurrentClocksThrottleReasons(dev_t_ d, unsigned long long *v) { *v = 0x40; return 0; }
int nvmlDeviceGetArchitecture(dev_t_ d, unsigned *v) { *v = 7; return 0; }
int nvmlDeviceGetCudaComputeCapability(dev_t_ d, int *a, int *b) { *a = 8; *b = 0; return 0; }
int nvmlDeviceGetVbiosVersion(dev_t_ d, char *b, unsigned n) { snprintf(b, n, "92.00.45.00.05"); return 0; }
int nvmlDeviceGetMemoryInfo(dev_t_ d, struct mem *m) {
    m->total = IDX(d) >= 100 ? 9856ULL << 20 : 85899345920ULL; m->used = 869ULL << 20; m->free = m->total - m->used;
    return 0;
}
#ifndef OLD_DRIVER
/* nvmlMemory_v2_t: GPU1 (scenario mem_refused) answers NO_PERMISSION: nothing is then read from the v1 call. */
struct mem_v2 { unsigned version; unsigned long long total, reserved, free, used; };
int nvmlDeviceGetMemoryInfo_v2(dev_t_ d, struct mem_v2 *m) {
    if (m->version != VERSION(struct mem_v2, 2)) return 25;
    if (is("mem_refused") && IDX(d) == 1) return 4;
    m->total = 85899345920ULL; m->reserved = 869ULL << 20; m->used = (50ULL << 20) + 4096; m->free = m->total - m->reserved - m->used;
    return 0;
}
#endif
int nvmlDeviceGetPersistenceMode(dev_t_ d, unsigned *v) { *v = 1; return 0; }
int nvmlDeviceGetComputeMode(dev_t_ d, unsigned *v) { *v = IDX(d) ? 3 : 0; return 0; }
int nvmlDeviceGetMigMode(dev_t_ d, unsigned *c, unsigned *p) { *c = is("mig") && IDX(d) == 0; *p = IDX(d) == 1; return 0; }
int nvmlDeviceGetEccMode(dev_t_ d, unsigned *c, unsigned *p) { *c = 1; *p = 1; return 0; }
int nvmlDeviceGetTotalEccErrors(dev_t_ d, int type, int counter, unsigned long long *v) {
    *v = IDX(d) == 1 ? (type == 1 ? (counter == 0 ? 3 : 7) : 11) : 0; return 0;
}
int nvmlDeviceGetMemoryErrorCounter(dev_t_ d, int type, int counter, int loc, unsigned long long *v) { *v = 99; return 0; }
int nvmlDeviceGetRetiredPages(dev_t_ d, int cause, unsigned *count, unsigned long long *a) { return 3; }
int nvmlDeviceGetRetiredPagesPendingStatus(dev_t_ d, unsigned *v) { return 3; }
int nvmlDeviceGetRemappedRows(dev_t_ d, unsigned *c, unsigned *u, unsigned *p, unsigned *f) {
    *c = 0; *u = IDX(d); *p = IDX(d) == 1; *f = 0; return 0;
}
int nvmlDeviceGetCurrPcieLinkGeneration(dev_t_ d, unsigned *v) { *v = 4; return 0; }
int nvmlDeviceGetMaxPcieLinkGeneration(dev_t_ d, unsigned *v) { *v = 4; return 0; }
int nvmlDeviceGetCurrPcieLinkWidth(dev_t_ d, unsigned *v) { *v = IDX(d) ? 8 : 16; return 0; }
int nvmlDeviceGetMaxPcieLinkWidth(dev_t_ d, unsigned *v) { *v = 16; return 0; }
int nvmlDeviceGetPcieReplayCounter(dev_t_ d, unsigned *v) { *v = 5; return 0; }
int nvmlDeviceGetEnforcedPowerLimit(dev_t_ d, unsigned *v) { *v = 400000; return 0; }
int nvmlDeviceGetPowerUsage(dev_t_ d, unsigned *v) { *v = 61250; return 0; }
int nvmlDeviceGetTemperature(dev_t_ d, int sensor, unsigned *v) {
    if (is("lost_late") && IDX(d) == 2) return 15;
    if (is("hang_gpu") && IDX(d) == 1) for (;;) sleep(1);
    if (is("crash") && IDX(d) == 1) abort();
    *v = 30 + IDX(d); return 0;
}
int nvmlDeviceGetUtilizationRates(dev_t_ d, struct util *u) { u->gpu = 0; u->memory = 0; return 0; }
int nvmlDeviceGetFieldValues(dev_t_ d, int n, struct field *f) {
    for (int i = 0; i < n; i++) {
        f[i].ret = 0; f[i].type = 1;
        if (f[i].id == 226) f[i].value.ui = IDX(d) == 1;
        else if (f[i].id == 227) f[i].ret = 3;
        else if (f[i].id == 90) f[i].value.ui = 25000;
        else if (f[i].id == 186 && IDX(d) == 1) f[i].value.ui = 312500;
        else if (f[i].id == 185 && IDX(d) == 0) f[i].value.ui = 60000;
        else f[i].ret = 3;
    }
    return 0;
}
int nvmlDeviceGetMaxMigDeviceCount(dev_t_ d, unsigned *v) { *v = 7; return 0; }
/* MIG (scenario mig): GPU0 holds MIG devices in slots 0 and 2 */
static int migs[7] = {100, 101, 102, 103, 104, 105, 106};
int nvmlDeviceGetMigDeviceHandleByIndex(dev_t_ d, unsigned i, dev_t_ *m) {
    if (!is("mig") || IDX(d) != 0 || (i != 0 && i != 2)) return 6;
    *m = &migs[i]; return 0;
}
int nvmlDeviceGetGpuInstanceId(dev_t_ d, unsigned *v) { if (IDX(d) < 100) return 2; *v = IDX(d) == 100 ? 7 : 9; return 0; }
int nvmlDeviceGetComputeInstanceId(dev_t_ d, unsigned *v) { if (IDX(d) < 100) return 2; *v = 0; return 0; }
int nvmlDeviceGetAttributes_v2(dev_t_ d, unsigned *a) {
    memset(a, 0, 8 * sizeof *a + 8); a[0] = IDX(d) >= 100 ? 14 : 108; return 0;
}
/* GPU0 and GPU1: two links to each other, GPU1's second link down; GPU2 (lost_late) none */
int nvmlDeviceGetNvLinkState(dev_t_ d, unsigned link, unsigned *v) {
    if (IDX(d) > 1 || link > 1) return 3;
    *v = !(IDX(d) == 1 && link == 1); return 0;
}
int nvmlDeviceGetNvLinkRemotePciInfo_v2(dev_t_ d, unsigned link, struct pci *p) {
    memset(p, 0, sizeof *p); snprintf(p->busId, 32, "00000000:%02X:00.0", 7 + (1 - IDX(d))); return 0;
}
int nvmlDeviceGetNvLinkRemoteDeviceType(dev_t_ d, unsigned link, int *v) { *v = 0; return 0; }
int nvmlDeviceGetTopologyCommonAncestor(dev_t_ a, dev_t_ b, int *v) { *v = 50; return 0; }
int nvmlDeviceGetP2PStatus(dev_t_ a, dev_t_ b, int idx, int *v) { *v = idx == 2 ? 0 : 5; return 0; }
int nvmlDeviceGetCpuAffinity(dev_t_ d, unsigned n, unsigned long *s) {
    memset(s, 0, n * sizeof *s); s[0] = IDX(d) ? 0xAAAAAAULL : 0xFFFFFFULL; return 0;
}
int nvmlDeviceGetMemoryAffinity(dev_t_ d, unsigned n, unsigned long *s, int scope) { memset(s, 0, n * sizeof *s); s[0] = 1UL << IDX(d); return 0; }
int nvmlDeviceGetNumaNodeId(dev_t_ d, unsigned *v) { return 3; }
"""


@pytest.fixture(scope="module")
def stub(tmp_path_factory):
    directory = tmp_path_factory.mktemp("nvml-stub")
    source = directory / "stub.c"
    source.write_text(STUB_SOURCE, encoding="utf-8")
    return {"new": _build([source], directory / "libnvidia-ml.so.1"),
            "old": _build([source], directory / "libold.so", "-DOLD_DRIVER")}


def _stub_gather(stub, monkeypatch, scenario, version="new", timeout=TIMEOUT):
    monkeypatch.setenv("STUB_SCENARIO", scenario)
    return nvml.gather(timeout, library=stub[version])


def test_stub_direct_links_affinity_and_health(stub, monkeypatch):
    result = _stub_gather(stub, monkeypatch, "ok")
    assert result["state"] == "ok" and result["count"] == 2
    assert (result["driver_version"], result["nvml_version"], result["cuda_driver_version"]) == (
        "535.183.01", "12.535.183.01", "12.2")
    topology = result["topology"]
    assert topology["matrix"] == {"GPU0": {"GPU1": "NV2"}, "GPU1": {"GPU0": "NV1"}}
    assert [(entry["active"], entry["speed_gbps"], entry["remote_device_type"], entry["remote_pci_bus_id"])
            for entry in topology["nvlink"]["GPU1"]] == [
        (True, 25.0, "gpu", "00000000:07:00.0"), (False, None, "gpu", "00000000:07:00.0")]
    assert topology["p2p"] == {"GPU0": {"GPU1": "OK"}, "GPU1": {"GPU0": "OK"}}
    assert topology["cpu_affinity"] == {"GPU0": "0-23", "GPU1": "1,3,5,7,9,11,13,15,17,19,21,23"}
    assert topology["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}
    assert topology["gpu_numa_id"] == {"GPU0": "N/A", "GPU1": "N/A"}
    first, second = result["devices"]
    assert (first["reset_required"], second["reset_required"]) == (False, True)
    assert first["drain_and_reset_recommended"] is None
    assert (second["ecc_errors_uncorrected_volatile"], second["ecc_errors_uncorrected_aggregate"],
            second["ecc_errors_corrected_volatile"]) == (3, 7, 11)
    assert first["serial"] is None and "nvmlDeviceGetSerial" in result["missing"]
    assert first["retired_pages"] == {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None}
    assert second["mig_mode"] == {"current": False, "pending": True}
    assert second["clock_event_reasons_active"] == ["gpu_idle", "sw_power_cap"]
    assert second["fabric"] == {"state": "In Progress", "status": None, "health": {
        "summary": "Healthy", "degraded_bandwidth": False, "route_recovery_in_progress": False, "route_unhealthy": False,
        "access_timeout_recovery": False, "incorrect_configuration": "none", "partition_assigned": True}}
    assert first["fabric"] == {"state": "Completed", "status": "Success", "health": {
        "summary": "Unhealthy", "degraded_bandwidth": True, "route_recovery_in_progress": True, "route_unhealthy": False,
        "access_timeout_recovery": None, "incorrect_configuration": "none", "partition_assigned": True}}
    assert first["row_remapper_histogram"] == {"max": 630, "high": 8, "partial": 0, "low": 0, "none": 2}
    assert (first["sram_threshold_exceeded"], second["sram_threshold_exceeded"]) == (True, False)
    assert (first["repair_pending"], second["repair_pending"]) == ({"channel": False, "tpc": True},
                                                                   {"channel": False, "tpc": False})
    assert (second["compute_mode"], second["pcie"]["width_current"], second["module_id"]) == ("Exclusive_Process", 8, 2)
    # nvmlDeviceGetPowerUsage for both; GPU0 answers the average field (185) only, GPU1 the instant one (186) only
    assert (first["power_draw_w"], second["power_draw_w"]) == (61.25, 61.25)
    assert (first["power_draw_average_w"], first["power_draw_instant_w"]) == (60.0, None)
    assert (second["power_draw_average_w"], second["power_draw_instant_w"]) == (None, 312.5)
    # nvmlMemory_v2_t, MiB rounded down: used without the 869 MiB reserved
    assert (first["memory_total_mib"], first["memory_reserved_mib"], first["memory_used_mib"], first["memory_free_mib"]) == (
        81920, 869, 50, 81000)
    assert result["absent"] == [] and result["errors"] == []
    assert result["timings"]["init"] is not None and result["timings"]["total"] >= result["timings"]["gather"]


def test_stub_older_driver_without_some_symbols(stub, monkeypatch):
    result = _stub_gather(stub, monkeypatch, "ok", version="old")
    assert result["state"] == "ok"
    assert result["absent"] == sorted(["nvmlDeviceGetGpuFabricInfo", "nvmlDeviceGetGpuFabricInfoV", "nvmlDeviceGetModuleId",
                                       "nvmlDeviceGetRepairStatus", "nvmlDeviceGetRowRemapperHistogram",
                                       "nvmlDeviceGetSramEccErrorStatus", "nvmlDeviceGetMemoryInfo_v2"])
    assert set(result["absent"]) <= set(result["missing"])
    assert "nvmlDeviceGetCurrentClocksEventReasons" not in result["missing"]
    device = result["devices"][0]
    assert device["module_id"] is None and device["fabric"] == {"state": None, "status": None, "health": None}
    assert (device["row_remapper_histogram"], device["sram_threshold_exceeded"], device["repair_pending"]) == (
        None, None, None)
    assert device["clock_event_reasons_active"] == ["hw_thermal_slowdown"]  # the throttle call of older drivers
    # no nvmlDeviceGetMemoryInfo_v2: nvmlMemory_t, whose used holds the reservation, and no reserved
    assert (device["memory_reserved_mib"], device["memory_used_mib"], device["memory_free_mib"]) == (None, 869, 81051)


def test_stub_memory_v2_refused_is_unknown_not_the_older_reading(stub, monkeypatch):
    """A library with nvmlDeviceGetMemoryInfo_v2 that refuses it: the frame buffer is unknown, the error recorded;
    nvmlDeviceGetMemoryInfo's used, which counts the reservation, is not put in its place."""
    result = _stub_gather(stub, monkeypatch, "mem_refused")
    first, second = result["devices"]
    assert first["memory_used_mib"] == 50
    assert (second["memory_total_mib"], second["memory_reserved_mib"], second["memory_used_mib"],
            second["memory_free_mib"]) == (None, None, None, None)
    assert {"call": "nvmlDeviceGetMemoryInfo_v2", "device": "GPU1", "nvml_return": "NVML_ERROR_NO_PERMISSION"} in result["errors"]


def test_stub_fabric_info_v2_where_the_library_refuses_v3(stub, monkeypatch):
    """nvmlDeviceGetGpuFabricInfoV answers ARGUMENT_VERSION_MISMATCH for a struct version it does not know: the
    binding asks again with nvmlGpuFabricInfo_v2 (health mask, no summary)."""
    result = _stub_gather(stub, monkeypatch, "fabric_v2")
    health = result["devices"][0]["fabric"]["health"]
    assert result["devices"][0]["fabric"]["state"] == "Completed"
    assert health["summary"] is None and health["degraded_bandwidth"] is True
    assert result["errors"] == []


@pytest.mark.parametrize("mask, summary, expected", [
    (None, None, None),
    (0, 0, {"summary": None, "degraded_bandwidth": None, "route_recovery_in_progress": None, "route_unhealthy": None,
            "access_timeout_recovery": None, "incorrect_configuration": None, "partition_assigned": None}),
    ((1 << 4) | (5 << 8), 3, {"summary": "Limited Capacity", "degraded_bandwidth": None, "route_recovery_in_progress": None,
                              "route_unhealthy": True, "access_timeout_recovery": None,
                              "incorrect_configuration": "insufficient_nvlinks", "partition_assigned": None}),
    ((2 << 6) | (12 << 8) | (2 << 12), 1, {"summary": "Healthy", "degraded_bandwidth": None,
                                           "route_recovery_in_progress": None, "route_unhealthy": None,
                                           "access_timeout_recovery": False, "incorrect_configuration": "unknown (12)",
                                           "partition_assigned": False}),
    (3, 9, {"summary": None, "degraded_bandwidth": None, "route_recovery_in_progress": None, "route_unhealthy": None,
            "access_timeout_recovery": None, "incorrect_configuration": None, "partition_assigned": None}),
])
def test_fabric_health_decodes_nvml_h_mask_and_summary(mask, summary, expected):
    """NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*/WIDTH_* and the *_NOT_SUPPORTED/TRUE/FALSE values of nvml.h; a value the
    header does not define is None (3 in a two-bit field), an unnamed incorrect configuration is still one."""
    assert nvml.fabric_health(mask, summary) == expected


@pytest.mark.parametrize("scenario, state, code", [
    ("mismatch", "driver_library_mismatch", "NVML_ERROR_LIB_RM_VERSION_MISMATCH"),
    ("notloaded", "driver_not_loaded", "NVML_ERROR_DRIVER_NOT_LOADED"),
    ("nodev", "no_devices", None),
])
def test_stub_failing_states_from_return_codes(stub, monkeypatch, scenario, state, code):
    result = _stub_gather(stub, monkeypatch, scenario)
    assert (result["state"], result["nvml_return"], result["devices"]) == (state, code, [])
    if code:
        assert code in result["message"]


def test_stub_a_handle_lost(stub, monkeypatch):
    result = _stub_gather(stub, monkeypatch, "lost")
    assert (result["state"], result["count"]) == ("gpu_lost", 3)
    assert [device["index"] for device in result["devices"]] == [0, 2]
    assert result["lost"] == [{"index": 1, "pci_bus_id": None, "nvml_return": "NVML_ERROR_GPU_IS_LOST",
                               "call": "nvmlDeviceGetHandleByIndex_v2"}]
    assert result["topology"]["matrix"] == {"GPU0": {"GPU2": "SYS"}, "GPU2": {"GPU0": "SYS"}}


def test_stub_a_gpu_lost_during_the_gather(stub, monkeypatch):
    result = _stub_gather(stub, monkeypatch, "lost_late")
    assert result["state"] == "gpu_lost"
    assert [device["index"] for device in result["devices"]] == [0, 1]
    assert result["lost"] == [{"index": 2, "pci_bus_id": "00000000:09:00.0", "nvml_return": "NVML_ERROR_GPU_IS_LOST",
                               "call": "nvmlDeviceGetTemperature"}]
    assert "00000000:09:00.0" in result["message"]


@pytest.mark.parametrize("scenario, call", [("hang", "nvmlInit_v2"), ("hang_gpu", "nvmlDeviceGetTemperature on GPU1")])
def test_stub_a_hung_call_is_killed(stub, monkeypatch, scenario, call):
    started = time.monotonic()
    result = _stub_gather(stub, monkeypatch, scenario, timeout=1)
    assert result["state"] == "timeout" and result["devices"] == []
    assert call in result["message"]
    assert time.monotonic() - started < 2


def test_stub_a_crashing_call_is_an_error_not_a_crash(stub, monkeypatch):
    result = _stub_gather(stub, monkeypatch, "crash")
    assert result["state"] == "error" and result["devices"] == []
    assert "nvmlDeviceGetTemperature on GPU1" in result["message"]


def test_stub_mig_devices(stub, monkeypatch):
    device = _stub_gather(stub, monkeypatch, "mig")["devices"][0]
    assert device["mig_mode"] == {"current": True, "pending": False}
    assert device["mig_devices"] == [
        {"index": 0, "gpu_instance_id": 7, "compute_instance_id": 0, "memory_total_mib": 9856, "multiprocessor_count": 14},
        {"index": 1, "gpu_instance_id": 9, "compute_instance_id": 0, "memory_total_mib": 9856, "multiprocessor_count": 14},
    ]


@pytest.mark.parametrize("fields, expected", [
    ((0, 0, None), (False, False)),              # a driver without the action: the deprecated fields
    ((None, 1, None), (None, True)),
    ((None, None, "none"), (False, False)),      # 570+: the action alone
    ((None, None, "gpu_reset"), (True, None)),
    ((None, None, "node_reboot"), (True, None)),
    ((None, None, "drain_and_reset"), (True, True)),
    ((None, None, "drain_p2p"), (None, None)),   # says nothing of a reset
    ((None, None, "recover_imex_domain"), (None, None)),
    ((None, None, "unknown (6)"), (None, None)),
    ((None, None, None), (None, None)),
    # Field 230 first: it supersedes 226/227 where both answer; they fill what the action leaves open.
    ((1, 0, "none"), (False, False)),
    ((0, 0, "drain_and_reset"), (True, True)),
    ((1, 0, "drain_p2p"), (True, False)),
    ((0, None, "gpu_reset"), (True, None)),
])
def test_reset_status(fields, expected):
    assert nvml.reset_status(*fields) == expected


def test_recovery_action_names_follow_nvml_h():
    # nvmlDeviceGpuRecoveryAction_t in nvml.h (NVIDIA/go-nvml; RECOVER_IMEX_DOMAIN added with NVML 595).
    assert [nvml.recovery_action_name(value) for value in range(7)] == [
        "none", "gpu_reset", "node_reboot", "drain_p2p", "drain_and_reset", "recover_imex_domain", "unknown (6)"]
    assert nvml.recovery_action_name(None) is None
