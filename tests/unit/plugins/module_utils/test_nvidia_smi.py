"""The nvidia-smi parsers against every real capture in fixtures/nvidia-smi, and against edge cases."""
import json
import pathlib

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi
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
