"""The NVML backend: its pure conversions, and gather() against a stand-in libnvidia-ml.so.1 built with gcc.

Values the conversions rely on come from NVIDIA's nvml.h as published in github.com/NVIDIA/go-nvml,
gen/nvml/nvml.h (NVML_API_VERSION 13): nvmlClocksEventReason* bits, NVML_DEVICE_ARCH_*, nvmlComputeMode_t,
nvmlGpuTopologyLevel_t, nvmlGpuP2PStatus_t, nvmlIntNvLinkDeviceType_t, NVML_GPU_FABRIC_STATE_*,
NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR and nvmlReturn_t. Spellings follow real nvidia-smi output (topo -m
captures in fixtures/nvidia-smi: "0-23,48-71" on an AWS p4d, "0,2,4,6,8,10" on interleaved CPUs).
"""
import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils import nvml


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
    (10, "PIX"), (20, "PXB"), (30, "PHB"), (40, "NODE"), (50, "SYS"), (0, None), (35, None), (None, None),
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
