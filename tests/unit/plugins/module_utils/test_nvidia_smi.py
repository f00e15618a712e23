"""The nvidia-smi parsers against every real capture in fixtures/nvidia-smi, and against edge cases."""
import json
import re
import pathlib

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils import nvml
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import NvidiaSmiParseError

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "nvidia-smi"


def captures(pattern):
    found = sorted(FIXTURES.glob("*/" + pattern))
    assert found, pattern
    return [pytest.param(path, id=path.parent.name + "/" + path.name) for path in found]


def expected_for(path):
    return json.loads((path.parent / "expected.json").read_text(encoding="utf-8"))


def read(path):
    return path.read_text(encoding="utf-8")


# --- topo -m ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", captures("topo-m*.txt"))
def test_topology_matches_ground_truth(path):
    expected = expected_for(path)
    topology = nvidia_smi.parse_topology(read(path))
    assert len(topology["gpus"]) == expected["gpu_count"]
    assert topology["matrix"] == expected["nvlink_matrix"]
    assert topology["nics"] == expected["nics"]
    if "gpu_nic_matrix" in expected:
        assert topology["gpu_nic"] == expected["gpu_nic_matrix"]
    else:
        assert all(relations == {} for relations in topology["gpu_nic"].values())
    for key in ("cpu_affinity", "numa_affinity", "gpu_numa_id"):
        if key in expected:
            assert topology[key] == expected[key], key
        else:  # the column is absent from this driver's output
            assert set(topology[key].values()) == {None}, key


@pytest.mark.parametrize("path", captures("topo-m*.txt"))
def test_nvlink_summary_matches_ground_truth(path):
    expected = expected_for(path)
    summary = nvidia_smi.nvlink_summary(nvidia_smi.parse_topology(read(path))["matrix"])
    assert summary["pairs"] == expected["nvlink_pairs"]
    assert summary["max_links"] == expected["max_nvlink_count"]
    gpus = expected["gpu_count"]
    assert summary["all_to_all"] == (expected["nvlink_pairs"] == gpus * (gpus - 1) // 2)


def test_bridge_pairs_are_not_all_to_all():
    path = next(FIXTURES.glob("49-*/topo-m.txt"))
    summary = nvidia_smi.nvlink_summary(nvidia_smi.parse_topology(read(path))["matrix"])
    assert summary["pairs"] == 4
    assert summary["all_to_all"] is False
    assert summary["pair_list"] == [["GPU0", "GPU1", 12], ["GPU2", "GPU3", 12], ["GPU4", "GPU5", 12], ["GPU6", "GPU7", 12]]


def test_hybrid_cube_mesh_mixes_bond_widths():
    path = next(FIXTURES.glob("19-*/topo-m.txt"))
    summary = nvidia_smi.nvlink_summary(nvidia_smi.parse_topology(read(path))["matrix"])
    assert summary["bond_widths"] == [1, 2]
    assert summary["all_to_all"] is False


OLD_DRIVER = (
    "\x1b[4m\tGPU0\tGPU1\tmlx4_0\tCPU Affinity\x1b[0m\n"
    "GPU0\t X \tSOC\tPHB\t0-7,16-23\n"
    "GPU1\tSOC\t X \tSOC\t8-15,24-31\n"
    "mlx4_0\tPHB\tSOC\t X \t\n"
    "\n"
    "Legend:\n\n  X   = Self\n  SOC  = Connection traversing PCIe as well as the SMP link between CPU sockets(e.g. QPI)\n"
)


def test_old_driver_with_ansi_header_and_soc():
    topology = nvidia_smi.parse_topology(OLD_DRIVER)
    assert topology["gpus"] == ["GPU0", "GPU1"]
    assert topology["matrix"] == {"GPU0": {"GPU1": "SOC"}, "GPU1": {"GPU0": "SOC"}}
    assert topology["nics"] == ["mlx4_0"]
    assert topology["gpu_nic"] == {"GPU0": {"mlx4_0": "PHB"}, "GPU1": {"mlx4_0": "SOC"}}
    assert topology["cpu_affinity"] == {"GPU0": "0-7,16-23", "GPU1": "8-15,24-31"}
    assert topology["numa_affinity"] == {"GPU0": None, "GPU1": None}


def test_old_banner_before_the_matrix():
    text = "        ==========  MATRIX  ==========\n" + OLD_DRIVER
    assert nvidia_smi.parse_topology(text)["matrix"]["GPU0"] == {"GPU1": "SOC"}


def test_nic_columns_without_legend_keep_their_names():
    text = (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV2\tPIX\t0-31\t0\t\tN/A\n"
        "GPU1\tNV2\t X \tSYS\t32-63\t1\t\tN/A\n"
        "NIC0\tPIX\tSYS\t X \n"
    )
    topology = nvidia_smi.parse_topology(text)
    assert topology["nics"] == ["NIC0"]
    assert topology["gpu_nic"]["GPU1"] == {"NIC0": "SYS"}
    assert topology["numa_affinity"] == {"GPU0": "0", "GPU1": "1"}


def test_affinity_columns_that_touch_are_unknown_not_guessed():
    text = (
        "        GPU0    GPU1    CPU Affinity    NUMA Affinity   GPU NUMA ID\n"
        "GPU0     X      NV4     0-63,128-1910   N/A\n"
        "GPU1    NV4      X      64-127,192-255 1 N/A\n"
    )
    topology = nvidia_smi.parse_topology(text)
    assert topology["cpu_affinity"] == {"GPU0": None, "GPU1": "64-127,192-255"}
    assert topology["numa_affinity"] == {"GPU0": None, "GPU1": "1"}
    assert topology["gpu_numa_id"] == {"GPU0": None, "GPU1": "N/A"}


def test_single_gpu():
    text = "        GPU0    CPU Affinity    NUMA Affinity\nGPU0     X      0-15    0\n"
    topology = nvidia_smi.parse_topology(text)
    assert topology["matrix"] == {"GPU0": {}}
    assert nvidia_smi.nvlink_summary(topology["matrix"])["all_to_all"] is False


@pytest.mark.parametrize("text", ["", "No devices were found\n", "GPU0 X\n", "Legend:\n X = Self\n"])
def test_topology_rejects_what_is_not_a_matrix(text):
    with pytest.raises(NvidiaSmiParseError):
        nvidia_smi.parse_topology(text)


# --- nvlink -s -------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", captures("nvlink-s.txt"))
def test_nvlink_status_matches_ground_truth(path):
    expected = expected_for(path)["nvlink_status"]
    status = nvidia_smi.parse_nvlink_status(read(path))
    assert sorted(status) == [gpu["index"] for gpu in expected["gpus"]]
    for gpu in expected["gpus"]:
        label = "GPU%d" % gpu["index"]
        entry = status[gpu["index"]]
        assert entry["name"] == gpu["name"]
        assert entry["uuid"] == gpu["uuid"]
        assert len(entry["links"]) == expected["links_per_gpu"][label]
        assert sum(1 for link in entry["links"] if link["active"]) == expected["active_links_per_gpu"][label]
        inactive = [link["link"] for link in entry["links"] if link["active"] is False]
        assert inactive == expected["inactive_links_per_gpu"][label]
        speeds = set(link["speed_gbps"] for link in entry["links"] if link["active"])
        assert speeds == {expected["link_speed_gbps"][label]}


def test_nvlink_inactive_links_and_missing_uuid():
    text = (
        "GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaaa)\n"
        "\t Link 0: 25 GB/s\n\t Link 1: <inactive>\n"
        "GPU 1: NVIDIA A100-SXM4-40GB\n"
        "\t Link 0: <inactive>\n"
    )
    status = nvidia_smi.parse_nvlink_status(text)
    assert status[0]["links"] == [
        {"link": 0, "active": True, "speed_gbps": 25.0},
        {"link": 1, "active": False, "speed_gbps": None},
    ]
    assert status[1]["uuid"] is None
    assert status[1]["name"] == "NVIDIA A100-SXM4-40GB"


def test_nvlink_all_links_inactive_message():
    text = ("GPU 0: NVIDIA L40S (UUID: GPU-bbbb)\n"
            "\t NVML: Unable to retrieve NVLink information as all links are inActive\n")
    status = nvidia_smi.parse_nvlink_status(text)
    assert status == {0: {"name": "NVIDIA L40S", "uuid": "GPU-bbbb", "links": [], "all_inactive": True}}


def test_nvlink_rejects_other_text():
    with pytest.raises(NvidiaSmiParseError):
        nvidia_smi.parse_nvlink_status("Failed to initialize NVML: Unknown Error\n")


# --- -q -x -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("path", captures("q-x.xml"))
def test_query_xml_matches_ground_truth(path):
    expected = expected_for(path)
    query = nvidia_smi.parse_query_xml(read(path))
    assert query["driver_version"] == expected["driver_version"]
    assert query["cuda_version"] == expected["cuda_version"]
    assert query["attached_gpus"] == expected["attached_gpus"]
    assert len(query["gpus"]) == expected["gpu_count"]
    for truth, gpu in zip(expected["gpus"], query["gpus"]):
        assert gpu["index"] == truth["index"]
        assert gpu["name"] == truth["name"]
        assert gpu["uuid"] == truth["uuid"]
        assert gpu["serial"] == truth["serial"]
        assert gpu["pci_bus_id"] == truth["pci_bus_id"]
        assert gpu["minor_number"] == truth["minor_number"]
        assert "%d MiB" % gpu["memory_total_mib"] == truth["memory_total"]
        assert gpu["memory_free_mib"] is not None and gpu["memory_used_mib"] is not None
        assert gpu["mig_mode"]["current"] is {"Enabled": True, "Disabled": False}.get(truth["mig_mode_current"])
        assert len(gpu["mig_devices"]) == truth["mig_device_count"]


XML_CAPTURES_WITH_HEALTH = [param for param in captures("q-x.xml") if "health" in expected_for(param.values[0])]


@pytest.mark.parametrize("path", XML_CAPTURES_WITH_HEALTH)
def test_query_xml_health_fields_match_ground_truth(path):
    """Every field of the shared contract, against the values read off each real capture by hand (expected.json
    "health"; one capture per schema v10 to v13 and per driver generation 470 to 590)."""
    truth = expected_for(path)["health"]
    gpus = nvidia_smi.parse_query_xml(read(path))["gpus"]
    assert len(gpus) == len(truth)
    for gpu, fields in zip(gpus, truth):
        assert dict((key, gpu[key]) for key in fields) == fields


def test_the_captures_cover_every_schema_from_v10_to_v13():
    schemas = set(expected_for(param.values[0])["schema"] for param in XML_CAPTURES_WITH_HEALTH)
    assert schemas == {"nvsmi_device_v10.dtd", "nvsmi_device_v11.dtd", "nvsmi_device_v12.dtd", "nvsmi_device_v13.dtd"}
    for param in XML_CAPTURES_WITH_HEALTH:
        assert expected_for(param.values[0])["schema"] in read(param.values[0])


def test_query_xml_fields_of_the_a100_capture():
    gpu = nvidia_smi.parse_query_xml(read(next(FIXTURES.glob("31-*/q-x.xml"))))["gpus"][0]
    assert gpu["pcie"] == {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16, "replay_counter": 0}
    assert gpu["power_limit_w"] == 500.0
    assert gpu["vbios_version"] == "92.00.36.00.02"
    assert gpu["persistence_mode"] is False
    assert gpu["ecc_mode"] == {"current": True, "pending": True}
    assert [device["memory_total_mib"] for device in gpu["mig_devices"]] == [19968] * 4
    assert [device["gpu_instance_id"] for device in gpu["mig_devices"]] == [3, 4, 5, 6]


SMALL_XML = """<?xml version="1.0" ?>
<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v11.dtd">
<nvidia_smi_log>
  <driver_version>418.87.00</driver_version>
  <cuda_version>10.1</cuda_version>
  <attached_gpus>2</attached_gpus>
  <gpu id="00000004:04:00.0">
    <product_name>Tesla V100-SXM2-16GB</product_name>
    <persistence_mode>Enabled</persistence_mode>
    <minor_number>3</minor_number>
    <uuid>GPU-09101d09</uuid>
    <pci><pci_bus_id>00000004:04:00.0</pci_bus_id></pci>
    <fb_memory_usage><total>16160 MiB</total></fb_memory_usage>
    <power_readings><power_limit>300.00 W</power_limit></power_readings>
    <mig_mode><current_mig>N/A</current_mig><pending_mig>N/A</pending_mig></mig_mode>
  </gpu>
  <gpu id="00000035:03:00.0">
    <product_name>Tesla V100-SXM2-16GB</product_name>
    <minor_number>0</minor_number>
    <pci><pci_bus_id>00000035:03:00.0</pci_bus_id></pci>
  </gpu>
</nvidia_smi_log>
"""


def test_query_xml_old_driver_nonzero_domains_and_minor_numbers():
    query = nvidia_smi.parse_query_xml(SMALL_XML)
    first, second = query["gpus"]
    assert (first["index"], first["minor_number"], second["index"], second["minor_number"]) == (0, 3, 1, 0)
    assert first["pci_bus_id"] == "00000004:04:00.0"
    assert second["pci_bus_id"] == "00000035:03:00.0"
    assert first["power_limit_w"] == 300.0
    assert first["persistence_mode"] is True
    assert first["mig_mode"] == {"current": None, "pending": None}
    assert second["uuid"] is None and second["memory_total_mib"] is None


@pytest.mark.parametrize("text", ["", "Failed to initialize NVML: Unknown Error\n", "<nvidia_smi_log><gpu>",
                                  "<other/>"])
def test_query_xml_rejects_what_is_not_nvidia_smi_xml(text):
    with pytest.raises(NvidiaSmiParseError):
        nvidia_smi.parse_query_xml(text)


# --- errors ----------------------------------------------------------------------------------------------

ERROR_KINDS = {
    "driver_library_version_mismatch": "driver_library_mismatch",
    "driver_not_loaded_or_unreachable": "driver_not_loaded",
    "gpu_lost": "gpu_lost",
    "device_handle_unknown_error": "device_error",
    "no_devices_found": "no_devices",
}


@pytest.mark.parametrize("path", captures("error.txt"))
def test_errors_match_ground_truth(path):
    state, message = nvidia_smi.classify_error(read(path))
    assert state == ERROR_KINDS[expected_for(path)["error_kind"]]
    assert message == " ".join(read(path).split())


@pytest.mark.parametrize("text, state", [
    ("Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124\n",
     "driver_library_mismatch"),
    ("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. Make sure that the\n"
     "latest NVIDIA driver is installed and running.\n", "driver_not_loaded"),
    ("Unable to determine the device handle for GPU 0000:3B:00.0: Unknown Error\n", "device_error"),
    ("Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to\n"
     "recover this GPU\n", "gpu_lost"),
    ("Failed to initialize NVML: Unknown Error\n", "error"),
    ("", "error"),
])
def test_wrapped_and_variant_errors(text, state):
    assert nvidia_smi.classify_error(text)[0] == state
    assert "\n" not in nvidia_smi.classify_error(text)[1]


def test_nvml_library_version_after_a_mismatch():
    text = "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.124\n"
    assert nvidia_smi.nvml_library_version(text) == "570.124"
    assert nvidia_smi.nvml_library_version("Failed to initialize NVML: Driver/library version mismatch") is None


# --- -L and --query-gpu ----------------------------------------------------------------------------------

@pytest.mark.parametrize("path", captures("L.txt"))
def test_gpu_list_matches_ground_truth(path):
    assert nvidia_smi.parse_gpu_list(read(path)) == expected_for(path)["gpus"]


@pytest.mark.parametrize("path", captures("query-gpu.csv"))
def test_query_gpu_csv_matches_ground_truth(path):
    truth = expected_for(path)["query_gpu_csv"]
    if truth["header"]:
        rows = nvidia_smi.parse_query_gpu_csv(read(path))
        assert rows == truth["rows"]
    else:
        rows = nvidia_smi.parse_query_gpu_csv(read(path), fields=["index", "name"])
        assert [[row["index"], row["name"]] for row in rows] == truth["rows"]


# --- issue 15: each wrong value or missed state, from the kind of output that triggers it ----------------

def capture(prefix, name):
    return read(next(FIXTURES.glob(prefix + "-*/" + name)))


def only_gpu(text):
    return nvidia_smi.parse_query_xml(text)["gpus"][0]


def replace_once(text, old, new):
    assert text.count(old) >= 1, old
    return text.replace(old, new, 1)


def test_volatile_uncorrectable_ecc_counts_sram_errors():
    """535 (v12): two SRAM uncorrectable errors with DRAM at 0 are 2 errors, not 0."""
    text = capture("31", "q-x.xml")
    volatile = "<volatile>\n                <sram_correctable>0</sram_correctable>\n                <sram_uncorrectable>0"
    gpu = only_gpu(replace_once(text, volatile, volatile[:-1] + "2"))
    assert gpu["ecc_errors_uncorrected_volatile"] == 2
    assert gpu["ecc_errors_uncorrected_aggregate"] == 0


def test_v13_parity_and_secded_counters_are_counted():
    text = capture("65", "q-x.xml")
    block = text[text.index("<volatile>"):text.index("</volatile>")]
    counted = (block.replace("<sram_uncorrectable_parity>N/A", "<sram_uncorrectable_parity>1")
               .replace("<sram_uncorrectable_secded>N/A", "<sram_uncorrectable_secded>2")
               .replace("<dram_uncorrectable>N/A", "<dram_uncorrectable>4")
               .replace("<dram_correctable>N/A", "<dram_correctable>8")
               .replace("<sram_correctable>N/A", "<sram_correctable>16"))
    gpu = only_gpu(replace_once(text, block, counted))
    assert gpu["ecc_errors_uncorrected_volatile"] == 7
    assert gpu["ecc_errors_corrected_volatile"] == 24
    assert gpu["ecc_errors_uncorrected_aggregate"] is None  # still N/A there
    # One counter of the sum unreadable: the sum is unknown, not the sum of the others.
    partial = counted.replace("<sram_uncorrectable_secded>2", "<sram_uncorrectable_secded>N/A")
    assert only_gpu(replace_once(text, block, partial))["ecc_errors_uncorrected_volatile"] is None


def test_old_single_and_double_bit_schema_reads_the_totals():
    text = capture("62", "q-x.xml")
    block = text[text.index("<volatile>"):text.index("</volatile>")]
    double = block[block.index("<double_bit>"):]
    counted = block.replace(double, double.replace("<total>N/A", "<total>3")).replace("<total>N/A", "<total>5", 1)
    gpu = only_gpu(replace_once(text, block, counted))
    assert (gpu["ecc_errors_uncorrected_volatile"], gpu["ecc_errors_corrected_volatile"]) == (3, 5)


@pytest.mark.parametrize("prefix, module_id", [("31", 4), ("63", 1), ("64", 1), ("65", 1)])
def test_module_id_from_gpu_module_id_and_platform_info(prefix, module_id):
    """535 writes <gpu_module_id>, 570+ <platformInfo><module_id>: neither is null."""
    assert only_gpu(capture(prefix, "q-x.xml"))["module_id"] == module_id


@pytest.mark.parametrize("word", ["N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error",
                                  "[Unknown Error]", "Requested functionality has been deprecated",
                                  "Insufficient Permissions", "", "  "])
def test_no_value_words_are_none(word):
    text = capture("66", "q-x.xml")
    for old in ("<gpu_temp>32 C<", "<instant_power_draw>35.15 W<", "<average_power_draw>35.06 W<",
                "<compute_mode>Default<", "<product_architecture>Ampere<", "<replay_counter>0<",
                "<current_power_limit>350.00 W<", "<remapped_rows>N/A<"):
        text = replace_once(text, old, old[:old.index(">") + 1] + word + "<")
    gpu = only_gpu(text)
    assert gpu["temperature_c"] is None
    assert gpu["power_draw_w"] is None
    assert gpu["power_draw_average_w"] is None and gpu["power_draw_instant_w"] is None
    assert gpu["power_limit_w"] is None
    assert gpu["compute_mode"] is None
    assert gpu["architecture"] is None
    assert gpu["pcie"]["replay_counter"] is None
    assert gpu["remapped_rows"] is None


def test_values_not_of_their_form_are_none():
    text = capture("66", "q-x.xml")
    text = replace_once(text, "<gpu_temp>32 C<", "<gpu_temp>32.5 C<")
    text = replace_once(text, "<replay_counter>0<", "<replay_counter>0x10<")
    text = replace_once(text, "<average_power_draw>35.06 W<", "<average_power_draw>35.06 W 7<")
    gpu = only_gpu(text)
    assert gpu["temperature_c"] is None
    assert gpu["pcie"]["replay_counter"] is None
    # The average is printed but not readable: unknown, rather than the instant reading put in its place.
    assert gpu["power_draw_w"] is None and gpu["power_draw_average_w"] is None
    assert gpu["power_draw_instant_w"] == 35.15


def test_power_draw_is_what_nvml_power_usage_reads():
    """power_draw_w is nvmlDeviceGetPowerUsage's reading (DCGM_FI_DEV_POWER_USAGE): <power_draw> before driver 570;
    from 570, which prints <average_power_draw> and <instant_power_draw> instead (an RTX 3090, GA102, on 590:
    35.06 W and 35.15 W), the average, as nvml.h says the call returns on Ampere except GA100 and newer; the
    instant one on a GPU without an average (N/A: GA100 and older, where the call returns the instant reading)."""
    text = capture("66", "q-x.xml")
    gpu = only_gpu(text)
    assert (gpu["power_draw_w"], gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (35.06, 35.06, 35.15)
    gpu = only_gpu(replace_once(text, "<average_power_draw>35.06 W<", "<average_power_draw>N/A<"))
    assert (gpu["power_draw_w"], gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (35.15, None, 35.15)
    for number, draw in (("60", 26.78), ("31", 67.03)):     # v11 <power_readings>, v12 <gpu_power_readings>
        gpu = only_gpu(capture(number, "q-x.xml"))
        assert (gpu["power_draw_w"], gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (draw, None, None)


def test_other_scopes_power_readings_are_not_the_gpus():
    """<gpu_memory_power_readings> and <module_power_readings> of the 570 capture hold the same element names for
    other scopes: the GPU's readings come from <gpu_power_readings> only."""
    text = capture("64", "q-x.xml")
    text = replace_once(text, "<average_power_draw>11.60 W<", "<average_power_draw>N/A<")
    text = replace_once(text, "<instant_power_draw>11.63 W<", "<instant_power_draw>N/A<")
    assert "<gpu_memory_power_readings>" in text and "<module_power_readings>" in text
    gpu = only_gpu(text)
    assert (gpu["power_draw_w"], gpu["power_draw_average_w"], gpu["power_draw_instant_w"]) == (None, None, None)


def test_clock_event_reasons_of_both_names():
    assert only_gpu(capture("66", "q-x.xml"))["clock_event_reasons_active"] == ["sw_power_cap"]
    assert only_gpu(capture("61", "q-x.xml"))["clock_event_reasons_active"] == ["gpu_idle"]  # throttle name
    text = capture("60", "q-x.xml")
    assert only_gpu(text)["clock_event_reasons_active"] == []
    two = replace_once(replace_once(text, "reason_hw_thermal_slowdown>Not Active", "reason_hw_thermal_slowdown>Active"),
                       "reason_sw_power_cap>Not Active", "reason_sw_power_cap>Active")
    assert only_gpu(two)["clock_event_reasons_active"] == ["hw_thermal_slowdown", "sw_power_cap"]
    # One reason unreadable: the list might miss it, so it is unknown.
    unreadable = replace_once(text, "reason_sync_boost>Not Active", "reason_sync_boost>N/A")
    assert only_gpu(unreadable)["clock_event_reasons_active"] is None
    assert only_gpu(capture("68", "q-x.xml"))["clock_event_reasons_active"] is None  # the block is "N/A"


def test_remapped_rows_pending_and_failure():
    text = capture("61", "q-x.xml")
    text = replace_once(text, "<remapped_row_unc>0<", "<remapped_row_unc>3<")
    text = replace_once(text, "<remapped_row_pending>No<", "<remapped_row_pending>Yes<")
    text = replace_once(text, "<remapped_row_failure>No<", "<remapped_row_failure>Yes<")
    assert only_gpu(text)["remapped_rows"] == {"correctable": 0, "uncorrectable": 3, "pending": True, "failure": True}
    assert only_gpu(capture("60", "q-x.xml"))["remapped_rows"] is None  # "N/A": no row remapping on a T4


def test_reset_status_and_recovery_action():
    text = capture("31", "q-x.xml")
    gpu = only_gpu(text)
    assert (gpu["recovery_action"], gpu["reset_required"]) == (None, False)   # 535: no <gpu_recovery_action>
    required = replace_once(text, "<reset_required>No<", "<reset_required>Yes<")
    gpu = only_gpu(required)
    assert (gpu["reset_required"], gpu["drain_and_reset_recommended"]) == (True, False)
    # 570+: the reset status is deprecated; the recovery action tells (edited from the real "None").
    newer = capture("64", "q-x.xml")
    gpu = only_gpu(newer)
    assert (gpu["recovery_action"], gpu["reset_required"], gpu["drain_and_reset_recommended"]) == ("none", False, False)
    for words, expected in (("Drain and Reset", ("drain_and_reset", True, True)),
                            ("GPU Reset Required", ("gpu_reset", True, None)),
                            ("Node Reboot Required", ("node_reboot", True, None)),
                            ("Drain P2P", ("drain_p2p", None, None)),
                            ("Recover IMEX Domain", ("recover_imex_domain", None, None)),
                            ("Quarantine", ("unknown (Quarantine)", None, None)),
                            ("Drain", ("unknown (Drain)", None, None)),   # not guessed as drain and reset
                            ("N/A", (None, None, None))):
        gpu = only_gpu(replace_once(newer, "<gpu_recovery_action>None<", "<gpu_recovery_action>%s<" % words))
        assert (gpu["recovery_action"], gpu["reset_required"], gpu["drain_and_reset_recommended"]) == expected, words
    # Where both answer, the action wins over the deprecated fields; they fill what it leaves open.
    both = replace_once(replace_once(newer, "<gpu_recovery_action>None<", "<gpu_recovery_action>Drain P2P<"),
                        "<reset_required>Requested functionality has been deprecated<", "<reset_required>Yes<")
    assert only_gpu(both)["reset_required"] is True


def test_fabric_state_and_status():
    text = capture("65", "q-x.xml")
    assert only_gpu(text)["fabric"] == {"state": None, "status": None, "health": None}
    done = replace_once(replace_once(text, "<state>N/A</state>", "<state>Completed</state>"),
                        "<status>N/A</status>", "<status>Success</status>")
    assert only_gpu(done)["fabric"] == {"state": "Completed", "status": "Success", "health": None}
    assert only_gpu(replace_once(text, "<state>N/A</state>", "<state>In Progress</state>"))["fabric"]["state"] == \
        "In Progress"


def test_fabric_health_words():
    """<fabric><health> (capture 65, driver 590: six children, N/A on a PCIe GPU): the words nvml.h names are read,
    anything else stays None."""
    text = capture("65", "q-x.xml")
    unhealthy = replace_once(replace_once(replace_once(text, "<summary>N/A</summary>", "<summary>Unhealthy</summary>"),
                                          "<bandwidth>N/A</bandwidth>", "<bandwidth>Degraded</bandwidth>"),
                             "<route_unhealthy>N/A</route_unhealthy>", "<route_unhealthy>Yes</route_unhealthy>")
    health = only_gpu(unhealthy)["fabric"]["health"]
    assert health["summary"] == "Unhealthy" and health["degraded_bandwidth"] is True and health["route_unhealthy"] is True
    assert health["route_recovery_in_progress"] is None and health["incorrect_configuration"] is None
    odd = replace_once(replace_once(text, "<summary>N/A</summary>", "<summary>Mostly fine</summary>"),
                       "<incorrect_configuration>N/A</incorrect_configuration>",
                       "<incorrect_configuration>Insufficient NVLinks</incorrect_configuration>")
    health = only_gpu(odd)["fabric"]["health"]
    assert health["summary"] is None and health["incorrect_configuration"] == "insufficient_nvlinks"
    correct = replace_once(text, "<incorrect_configuration>N/A</incorrect_configuration>",
                           "<incorrect_configuration>Correct Configuration</incorrect_configuration>")
    assert only_gpu(correct)["fabric"]["health"]["incorrect_configuration"] == "none"


def test_row_remapper_histogram_sram_threshold_and_repair_pending():
    """Capture 65 (driver 590) prints the histogram ("192 bank(s)"), sram_threshold_exceeded N/A (ECC off) and the
    repair flags No; a bank without spare rows, the threshold and a pending repair are read where printed."""
    text = capture("65", "q-x.xml")
    gpu = nvidia_smi.parse_query_xml(text)["gpus"][0]
    assert gpu["row_remapper_histogram"] == {"max": 192, "high": 0, "partial": 0, "low": 0, "none": 0}
    assert gpu["sram_threshold_exceeded"] is None
    assert gpu["repair_pending"] == {"channel": False, "tpc": False}
    faulty = text.replace("<row_remapper_histogram_max>192 bank(s)", "<row_remapper_histogram_max>190 bank(s)", 1)
    faulty = faulty.replace("<row_remapper_histogram_none>0 bank(s)", "<row_remapper_histogram_none>2 bank(s)", 1)
    faulty = faulty.replace("<sram_threshold_exceeded>N/A", "<sram_threshold_exceeded>Yes", 1)
    faulty = faulty.replace("<tpc_repair_pending>No", "<tpc_repair_pending>Yes", 1)
    gpu = nvidia_smi.parse_query_xml(faulty)["gpus"][0]
    assert gpu["row_remapper_histogram"]["none"] == 2 and gpu["row_remapper_histogram"]["max"] == 190
    assert gpu["sram_threshold_exceeded"] is True
    assert gpu["repair_pending"] == {"channel": False, "tpc": True}
    # a histogram with a count it cannot read is no histogram (a partial one would be a wrong value)
    broken = text.replace("<row_remapper_histogram_low>0 bank(s)", "<row_remapper_histogram_low>Unknown Error", 1)
    assert nvidia_smi.parse_query_xml(broken)["gpus"][0]["row_remapper_histogram"] is None


def test_module_id_zero_and_temperature_zero_are_none():
    """Drivers before 570 print module id 0 on PCIe cards (570 prints 1 there); a vGPU guest prints 0 C."""
    assert only_gpu(capture("60", "q-x.xml"))["module_id"] is None
    assert only_gpu(capture("68", "q-x.xml"))["temperature_c"] is None


def test_memory_used_leaves_the_reserved_memory_apart_as_nvml_v2_does():
    """A T4 on 515 prints total 15360, reserved 388, used 1032, free 13939 MiB: used and reserved apart, as
    nvmlMemory_v2_t has them and DCGM exports them (DCGM_FI_DEV_FB_USED, DCGM_FI_DEV_FB_RESERVED); a GTX 1070 Ti on an
    older driver (schema v10) prints no reserved: unknown, not 0."""
    gpu = only_gpu(capture("60", "q-x.xml"))
    assert (gpu["memory_total_mib"], gpu["memory_reserved_mib"], gpu["memory_used_mib"], gpu["memory_free_mib"]) == (
        15360, 388, 1032, 13939)
    gpu = only_gpu(capture("67", "q-x.xml"))
    assert (gpu["memory_reserved_mib"], gpu["memory_used_mib"], gpu["memory_free_mib"]) == (None, 42, 4054)


def test_every_gpu_has_every_contract_field():
    fields = {"index", "name", "uuid", "serial", "pci_bus_id", "minor_number", "module_id", "memory_total_mib", "memory_used_mib",
              "memory_free_mib", "memory_reserved_mib", "power_draw_average_w", "power_draw_instant_w",
              "mig_mode", "mig_devices", "persistence_mode", "ecc_mode", "ecc_errors_uncorrected_volatile",
              "ecc_errors_uncorrected_aggregate", "ecc_errors_corrected_volatile", "retired_pages", "pcie",
              "power_limit_w", "vbios_version", "architecture", "compute_mode", "temperature_c", "power_draw_w",
              "clock_event_reasons_active", "remapped_rows", "recovery_action", "reset_required",
              "drain_and_reset_recommended", "fabric", "compute_capability", "utilization_gpu_pct",
              "row_remapper_histogram", "sram_threshold_exceeded", "repair_pending"}
    for param in captures("q-x.xml"):
        for gpu in nvidia_smi.parse_query_xml(read(param.values[0]))["gpus"]:
            assert set(gpu) == fields
            assert set(gpu["pcie"]) == {"gen_current", "gen_max", "width_current", "width_max", "replay_counter"}
            assert gpu["compute_capability"] is None


# nvlink -s

@pytest.mark.parametrize("text", ["", "\n", "  \n\n"])
def test_nvlink_status_of_gpus_without_nvlink_is_empty(text):
    """PCIe GPUs: nvidia-smi nvlink -s prints nothing and exits 0 (canonical/checkbox pull 431)."""
    assert nvidia_smi.parse_nvlink_status(text) == {}


@pytest.mark.parametrize("line", ["\t NVML: Unable to retrieve NVLink information as all links are inActive",
                                  "         NVML:Unable to retrieve Nvlink information as all links are inActive"])
def test_nvlink_all_inactive_variants(line):
    text = "GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-aaaa)\n" + line + "\nGPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-bbbb)\n" \
        "\t Link 0: 25 GB/s\n"
    status = nvidia_smi.parse_nvlink_status(text)
    assert status[0]["all_inactive"] is True and status[0]["links"] == []
    assert status[1]["all_inactive"] is False and len(status[1]["links"]) == 1


def test_nvlink_all_inactive_without_its_gpu_is_not_read_as_no_nvlink():
    with pytest.raises(NvidiaSmiParseError):
        nvidia_smi.parse_nvlink_status("NVML: Unable to retrieve NVLink information as all links are inActive\n")


def test_nvlink_inactive_in_a_gpu_name_is_not_all_inactive():
    status = nvidia_smi.parse_nvlink_status("GPU 0: Inactive Test GPU (UUID: GPU-a)\n\t Link 0: 25 GB/s\n")
    assert status[0]["all_inactive"] is False


def test_nvlink_cut_off_name_is_not_trusted():
    status = nvidia_smi.parse_nvlink_status("GPU 0: NVIDIA A100 (UUID: GPU-a)\n\t Link 0: 25 GB/s\nGPU 1: NVIDIA A1")
    assert status[0]["name"] == "NVIDIA A100"
    assert status[1]["name"] is None


# topo -m

def topo_lines(prefix):
    return capture(prefix, "topo-m.txt").split("\n")


def glue_header(text, first, second):
    """The header with the space between two column names taken out, as nvidia-smi prints long names."""
    lines = text.split("\n")
    for number, line in enumerate(lines):
        if line.split()[:1] == ["GPU0"] and "CPU" in line:
            lines[number] = re.sub(r"%s\s+%s" % (first, second), first + second, line)
            assert lines[number] != line
            return "\n".join(lines)
    raise AssertionError("no header")


GLUES = [("05", "NIC6", "NIC7"), ("18", "mlx5_9", "mlx5_10"), ("27", "NIC3", "CPU")]


@pytest.mark.parametrize("prefix, first, second", GLUES)
def test_glued_nic_header_does_not_invent_a_nic(prefix, first, second):
    path = next(FIXTURES.glob(prefix + "-*/topo-m.txt"))
    glued = nvidia_smi.parse_topology(glue_header(read(path), first, second))
    assert glued == nvidia_smi.parse_topology(read(path))
    assert glued["nics"] == expected_for(path)["nics"]


def test_glued_gpu_header_does_not_drop_a_gpu():
    path = next(FIXTURES.glob("02-*/topo-m.txt"))
    glued = nvidia_smi.parse_topology(glue_header(read(path), "GPU6", "GPU7"))
    assert glued["gpus"] == ["GPU%d" % index for index in range(8)]
    assert glued["matrix"] == expected_for(path)["nvlink_matrix"]
    assert nvidia_smi.nvlink_summary(glued["matrix"])["all_to_all"] is True


def test_glued_row_cells_are_split_when_unambiguous():
    text = (
        "\tGPU0\tGPU1\tGPU2\tNIC0\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID\n"
        "GPU0\t X \tNV2NV2\tPIX\t0-31\t0\t\tN/A\n"
        "GPU1\tNV2\t X \tSYSSYS\t32-63\t1\t\tN/A\n"
        "GPU2\tNV2\tSYS\t X \tSYS\t32-63\t1\t\tN/A\n"
    )
    topology = nvidia_smi.parse_topology(text)
    assert topology["matrix"] == {"GPU0": {"GPU1": "NV2", "GPU2": "NV2"}, "GPU1": {"GPU0": "NV2", "GPU2": "SYS"},
                                  "GPU2": {"GPU0": "NV2", "GPU1": "SYS"}}
    assert topology["gpu_nic"] == {"GPU0": {"NIC0": "PIX"}, "GPU1": {"NIC0": "SYS"}, "GPU2": {"NIC0": "SYS"}}
    assert topology["cpu_affinity"] == {"GPU0": "0-31", "GPU1": "32-63", "GPU2": "32-63"}


def test_a_row_glued_into_its_affinity_is_unknown_not_shifted():
    text = (
        "\tGPU0\tGPU1\tNIC0\tCPU Affinity\tNUMA Affinity\n"
        "GPU0\t X \tNV2\tPIX0-31\t0\n"
        "GPU1\tNV2\t X \tSYS\t32-63\t1\n"
    )
    topology = nvidia_smi.parse_topology(text)
    assert topology["matrix"]["GPU0"] == {"GPU1": None}
    assert topology["gpu_nic"]["GPU0"] == {"NIC0": None}
    assert topology["cpu_affinity"]["GPU0"] is None
    assert topology["matrix"]["GPU1"] == {"GPU0": "NV2"}
    assert nvidia_smi.nvlink_summary(topology["matrix"])["pairs"] == 1


def test_a_row_with_more_cells_than_columns_is_unknown():
    """A header glue nothing can split ('ib0ib1') leaves one column for two cells: the row cannot be placed."""
    text = "\tGPU0\tGPU1\tib0ib1\tCPU Affinity\nGPU0\t X \tNV4\tPIX\tSYS\t0-7\nGPU1\tNV4\t X \tSYS\tPIX\t8-15\n"
    topology = nvidia_smi.parse_topology(text)
    assert topology["matrix"] == {"GPU0": {"GPU1": None}, "GPU1": {"GPU0": None}}
    assert nvidia_smi.nvlink_summary(topology["matrix"])["all_to_all"] is None


def test_missing_rows_are_not_all_to_all():
    path = next(FIXTURES.glob("02-*/topo-m.txt"))
    lines = [line for line in read(path).split("\n") if not line.startswith("GPU7")]
    topology = nvidia_smi.parse_topology("\n".join(lines))
    assert topology["matrix"]["GPU0"]["GPU7"] == "NV12"  # GPU0's row still names it
    assert topology["matrix"]["GPU7"]["GPU0"] is None
    assert nvidia_smi.nvlink_summary(topology["matrix"])["all_to_all"] is True  # every pair known from one side
    lines = [line for line in lines if not line.startswith(("GPU6", "GPU7"))]
    summary = nvidia_smi.nvlink_summary(nvidia_smi.parse_topology("\n".join(lines))["matrix"])
    assert summary["all_to_all"] is None  # GPU6-GPU7 is in neither remaining row
    assert summary["complete"] is False
    assert summary["pairs"] == 27


def test_all_to_all_is_false_only_when_a_pair_is_known_not_to_be_nvlink():
    matrix = {"GPU0": {"GPU1": "NV4", "GPU2": None}, "GPU1": {"GPU0": "NV4", "GPU2": "SYS"}, "GPU2": {}}
    assert nvidia_smi.nvlink_summary(matrix)["all_to_all"] is False


def test_a_cut_last_line_does_not_give_a_cut_value():
    text = "\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-63\nGPU1\tNV12\t X \t64-12"
    topology = nvidia_smi.parse_topology(text)
    assert topology["cpu_affinity"] == {"GPU0": "0-63", "GPU1": None}
    assert topology["matrix"]["GPU1"] == {"GPU0": "NV12"}
    cut = nvidia_smi.parse_topology("\tGPU0\tGPU1\tCPU Affinity\nGPU0\t X \tNV12\t0-63\nGPU1\tNV1")
    assert cut["matrix"]["GPU1"] == {"GPU0": None}


# errors

def test_unmatched_failure_gives_its_first_line_not_all_output():
    stdout = "Some unexpected failure happened here\n" + "\n".join("line %d of noise" % number for number in range(500))
    state, message = nvidia_smi.classify_error(stdout)
    assert state == "error"
    assert message == "Some unexpected failure happened here"
    state, message = nvidia_smi.classify_error("=====\n\n" + "x" * 1000 + " word\n")
    assert len(message) <= nvidia_smi.MESSAGE_LIMIT and message.endswith("...")


def test_known_failure_inside_long_output_is_named_shortly():
    xml = capture("31", "q-x.xml")
    text = xml + "\nUnable to determine the device handle for GPU 0000:3b:00.0: GPU is lost.  Reboot the system to " \
        "recover this GPU\n"
    state, message = nvidia_smi.classify_error(text)
    assert state == "gpu_lost"
    assert message.startswith("Unable to determine the device handle for GPU 0000:3b:00.0: GPU is lost.")
    assert len(message) <= nvidia_smi.MESSAGE_LIMIT


def test_couldnt_communicate_stays_driver_not_loaded():
    text = read(next(FIXTURES.glob("41-*/error.txt")))
    assert nvidia_smi.classify_error(text)[0] == "driver_not_loaded"


def test_lost_gpus_are_named_by_normalised_bus_id():
    text = (
        "Unable to determine the device handle for GPU 0000:3b:00.0: GPU is lost.  Reboot the system to recover "
        "this GPU\nUnable to determine the device handle for GPU 00000000:07:00.0: GPU is lost.\n"
        "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.\n"
        "Unable to determine the device handle for GPU 0000:5E:00.0: Unknown Error\n"
    )
    assert nvidia_smi.lost_gpus(text) == ["00000000:07:00.0", "00000000:3B:00.0"]
    assert nvidia_smi.lost_gpus(read(next(FIXTURES.glob("42-*/error.txt")))) == ["00000000:03:00.0"]
    assert nvidia_smi.lost_gpus("No devices were found\n") == []
    assert nvidia_smi.lost_gpus(None) == []


@pytest.mark.parametrize("value, normalised", [
    ("00000000:07:00.0", "00000000:07:00.0"), ("0000:3b:00.0", "00000000:3B:00.0"), ("3B:00.0", "00000000:3B:00.0"),
    ("00000004:04:00.0", "00000004:04:00.0"), ("GPU-1", None), ("0000:3B:00.9", None), (None, None),
])
def test_normalise_bus_id(value, normalised):
    assert nvidia_smi.normalise_bus_id(value) == normalised


def test_nvml_reason_names_are_the_ones_q_x_prints():
    """The NVML backend names mask bits (nvml.h, tested in test_nvml.py) with the element names -q -x prints:
    the real 535 capture lists all nine, the same names."""
    printed = re.findall(r"<clocks_event_reason_([a-z_]+)>", capture("31", "q-x.xml"))
    assert sorted(printed) == sorted(name for _bit, name in nvml.CLOCK_EVENT_REASONS)


def test_utilization_in_percent_or_none():
    """<utilization><gpu_util> as every schema prints it (all captures show an idle "0 %"; edited to 37 % and N/A)."""
    text = capture("63", "q-x.xml")
    assert only_gpu(text)["utilization_gpu_pct"] == 0
    assert only_gpu(text.replace("<gpu_util>0 %</gpu_util>", "<gpu_util>37 %</gpu_util>"))["utilization_gpu_pct"] == 37
    assert only_gpu(text.replace("<gpu_util>0 %</gpu_util>", "<gpu_util>N/A</gpu_util>"))["utilization_gpu_pct"] is None
