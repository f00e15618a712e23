"""The nvidia-smi emulator (tests/emulator/nvidia_smi_emulator.py) against real nvidia-smi output.

It is run as a process, as gpu_facts runs nvidia-smi, with $GPUFLEET_EMULATOR_PROFILE and a configuration
directory ($GPUFLEET_EMULATOR_CONFIG) holding the planted faults (faults.json). The real artifacts it copies are
in fixtures/nvidia-smi (see SOURCE there): a 535.54.03 `-q -x` of an A100-SXM4-80GB (influxdata/telegraf's test
data), the <remapped_rows> element of a later capture, and an AWS p5's `nvlink -s` and `--query-gpu`. The
profiles' values and their sources are in tests/emulator/profiles/SOURCES.md.
"""
import json
import os
import pathlib
import re
import subprocess
import sys
import xml.etree.ElementTree as ET

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi

from .conftest import ROOT

EMULATOR = ROOT / "tests" / "emulator" / "nvidia_smi_emulator.py"
PROFILES = ROOT / "tests" / "emulator" / "profiles"
FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "nvidia-smi"
CAPTURE_535 = FIXTURES / "a100-sxm4-80gb-535.54.03.q-x.xml"
REMAPPED_ROWS = FIXTURES / "rtx-a5000-590.44.01.remapped-rows.xml-excerpt"

GPU_PROFILES = ["hgx-a100-8gpu", "hgx-h100-8gpu", "pairs-4gpu", "pcie-4gpu"]
LOST = "Unable to determine the device handle for GPU 0000:%s: GPU is lost.  Reboot the system to recover this GPU\n"


def profile_data(name):
    return json.loads((PROFILES / (name + ".json")).read_text(encoding="utf-8"))


@pytest.fixture
def smi(tmp_path):
    """Runs the emulator: smi(profile, *argv) -> CompletedProcess; smi.faults(dict) plants faults.json."""
    config = tmp_path / "config"
    config.mkdir()
    (tmp_path / "proc").mkdir()     # no nvidia-persistenced runs (the host's /proc shows other test nodes' daemons)

    def run(profile, *argv):
        env = {"PATH": "/usr/bin:/bin", "GPUFLEET_EMULATOR_PROFILE": profile, "GPUFLEET_EMULATOR_CONFIG": str(config),
               "GPUFLEET_EMULATOR_PROC": str(tmp_path / "proc")}
        return subprocess.run([sys.executable, str(EMULATOR)] + list(argv), env=env, capture_output=True, text=True,
                              timeout=30, check=False)

    def faults(data):
        (config / "faults.json").write_text(json.dumps(data), encoding="utf-8")

    run.faults = faults
    run.config = config
    return run


def xml_gpus(result):
    root = ET.fromstring(result.stdout)
    return root, dict((gpu.get("id"), gpu) for gpu in root.findall("gpu"))


def paths(element, prefix=""):
    """Every element path under element ('pci/pci_gpu_link_info/pcie_gen/max_link_gen', ...)."""
    found = set()
    for child in element:
        path = prefix + child.tag
        found.add(path)
        found |= paths(child, path + "/")
    return found


def child_orders(element, prefix="", orders=None):
    """{path of a parent: [its children's tags in document order]}."""
    orders = {} if orders is None else orders
    orders[prefix] = [child.tag for child in element]
    for child in element:
        child_orders(child, prefix + child.tag + "/", orders)
    return orders


def is_subsequence(short, long):
    remaining = iter(long)
    return all(any(tag == candidate for candidate in remaining) for tag in short)


# --- -q -x against the real 535 capture -------------------------------------------------------------------

@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_xml_has_the_elements_of_a_real_535_capture_in_its_order(smi, profile):
    """Mimics driver 535.54.03's `nvidia-smi -q -x` (telegraf's a100-sxm4-v12.xml): every element the emulator
    prints exists at the same path there, siblings come in the same order, and the header is the same."""
    real = ET.parse(str(CAPTURE_535)).getroot()
    real_gpu = real.find("gpu")
    remapped = ET.fromstring(REMAPPED_ROWS.read_text(encoding="utf-8"))
    allowed = paths(real_gpu) | set("remapped_rows/" + path for path in paths(remapped))
    real_orders = child_orders(remapped, "remapped_rows/", child_orders(real_gpu))

    result = smi(profile, "-q", "-x")
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.splitlines()[1] == CAPTURE_535.read_text(encoding="utf-8").splitlines()[1]   # the v12 DTD
    root, gpus = xml_gpus(result)
    assert [child.tag for child in root][:4] == [child.tag for child in real][:4]   # timestamp, versions, count
    for gpu in gpus.values():
        printed = paths(gpu)
        assert printed - allowed == set()
        for parent, tags in child_orders(gpu).items():
            assert is_subsequence(tags, real_orders[parent]), (parent, tags)
        for health in ("product_architecture", "gpu_module_id", "gpu_reset_status/reset_required",
                       "gpu_reset_status/drain_and_reset_recommended", "pci/replay_counter", "compute_mode",
                       "clocks_event_reasons/clocks_event_reason_sw_power_cap", "ecc_errors/volatile/sram_uncorrectable",
                       "ecc_errors/aggregate/dram_uncorrectable", "remapped_rows", "temperature/gpu_temp",
                       "gpu_power_readings/power_draw", "fabric/state", "fabric/status"):
            assert health in printed, health


def test_xml_units_and_words_are_the_real_ones(smi):
    """Units and words as the 535 capture writes them: '27 C', '67.03 W', '81920 MiB', '16x', 'Not Active',
    'No', and a timestamp whose day is padded with a space ('Fri Aug  4 11:44:30 2023')."""
    real = ET.parse(str(CAPTURE_535)).getroot().find("gpu")
    shapes = {
        "temperature/gpu_temp": r"^\d+ C$",
        "gpu_power_readings/power_draw": r"^\d+\.\d\d W$",
        "gpu_power_readings/current_power_limit": r"^\d+\.\d\d W$",
        "fb_memory_usage/total": r"^\d+ MiB$",
        "pci/pci_gpu_link_info/link_widths/current_link_width": r"^\d+x$",
        "clocks_event_reasons/clocks_event_reason_sw_power_cap": r"^(Active|Not Active)$",
        "gpu_reset_status/reset_required": r"^(Yes|No)$",
        "pci/pci_device_id": r"^[0-9A-F]{4}10DE$",
        "utilization/memory_util": r"^(\d+ %|N/A)$",
    }
    for path, shape in shapes.items():
        assert re.match(shape, real.findtext(path)), path          # the pattern fits the real capture
    _root, gpus = xml_gpus(smi("hgx-a100-8gpu", "-q", "-x"))
    for gpu in gpus.values():
        for path, shape in shapes.items():
            assert re.match(shape, gpu.findtext(path)), (path, gpu.findtext(path))
    day = r"^[A-Z][a-z]{2} [A-Z][a-z]{2} [ 123]\d \d\d:\d\d:\d\d \d{4}$"
    assert re.match(day, ET.parse(str(CAPTURE_535)).getroot().findtext("timestamp"))
    assert re.match(day, _root.findtext("timestamp"))


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_xml_values_equal_the_profile(smi, profile):
    """Each GPU's -q -x shows the profile's values, per-GPU overrides included."""
    data = profile_data(profile)
    root, gpus = xml_gpus(smi(profile, "-q", "-x"))
    assert root.findtext("driver_version") == data["driver_version"]
    assert root.findtext("attached_gpus") == str(len(data["bus_ids"]))
    assert list(gpus) == ["00000000:" + bus for bus in data["bus_ids"]]
    for index, gpu in enumerate(gpus.values()):
        values = dict(data["gpu"], **data.get("per_gpu", {}).get(str(index), {}))
        assert gpu.findtext("product_name") == values["name"]
        assert gpu.findtext("product_architecture") == values["architecture"]
        assert gpu.findtext("gpu_module_id") == str(values["module_id"])
        assert gpu.findtext("pci/pci_device_id") == values["pci_device_id"][2:].upper() + "10DE"
        assert gpu.findtext("fb_memory_usage/total") == "%d MiB" % values["memory_total_mib"]
        assert gpu.findtext("gpu_power_readings/current_power_limit") == "%.2f W" % values["power_limit_w"]
        assert gpu.findtext("gpu_power_readings/power_draw") == "%.2f W" % values.get("power_draw_w", 60.0)
        assert gpu.findtext("temperature/gpu_temp") == "%d C" % values.get("temperature_c", 33)
        assert gpu.findtext("pci/pci_gpu_link_info/pcie_gen/max_link_gen") == str(values["pcie_gen"])
        assert gpu.findtext("pci/pci_gpu_link_info/link_widths/current_link_width") == "%dx" % values["pcie_width"]
        assert gpu.findtext("fabric/state") == (values.get("fabric_state") or "N/A")
        assert gpu.findtext("fabric/status") == (values.get("fabric_status") or "N/A")
        assert gpu.findtext("compute_mode") == "Default"
        assert [reason.text for reason in gpu.find("clocks_event_reasons")] == ["Not Active"] * 9
        histogram = gpu.find("remapped_rows/row_remapper_histogram")
        if "row_remapper_banks" in values:
            assert histogram.findtext("row_remapper_histogram_max") == "%d bank(s)" % values["row_remapper_banks"]
        else:
            assert histogram is None


CAPTURE_570 = (ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "nvidia-smi"
               / "64-rtx-3060-570-v12-platforminfo-xml" / "q-x.xml")


def test_memory_and_power_readings_as_the_profiles_driver_prints_them(smi):
    """From driver 570 <gpu_power_readings> holds <average_power_draw> and <instant_power_draw> and no <power_draw>,
    in the order of the real 570.124.04 capture (64); the 535 branch prints <power_draw> alone (the A100 capture).
    <fb_memory_usage> prints reserved apart from used, total = reserved + used + free. A planted spike shows in the
    instant reading only."""
    real = ET.parse(str(CAPTURE_570)).getroot().find("gpu/gpu_power_readings")
    smi.faults({"gpus": {"1": {"power_draw_instant_w": 612.5, "memory_used_mib": 1000}}})
    data = profile_data("hgx-b200-8gpu")
    assert data["driver_version"].startswith("580.")
    _root, gpus = xml_gpus(smi("hgx-b200-8gpu", "-q", "-x"))
    for index, gpu in enumerate(gpus.values()):
        values = dict(data["gpu"], **data.get("per_gpu", {}).get(str(index), {}))
        readings = gpu.find("gpu_power_readings")
        assert [child.tag for child in readings] == [child.tag for child in real]
        assert readings.findtext("average_power_draw") == "%.2f W" % values["power_draw_w"]
        assert readings.findtext("instant_power_draw") == ("612.50 W" if index == 1 else "%.2f W" % values["power_draw_w"])
        used = 1000 if index == 1 else values.get("memory_used_mib", 0)
        assert [(child.tag, child.text) for child in gpu.find("fb_memory_usage")] == [
            ("total", "%d MiB" % values["memory_total_mib"]), ("reserved", "512 MiB"), ("used", "%d MiB" % used),
            ("free", "%d MiB" % (values["memory_total_mib"] - 512 - used))]
    old = ET.parse(str(CAPTURE_535)).getroot().find("gpu/gpu_power_readings")
    _root, gpus = xml_gpus(smi("hgx-h100-8gpu", "-q", "-x"))
    for gpu in gpus.values():
        assert [child.tag for child in gpu.find("gpu_power_readings")] == [child.tag for child in old]
        assert gpu.findtext("gpu_power_readings/power_draw") == "68.00 W"


def test_a_gpu_without_an_average_prints_it_na_from_570():
    """nvml.h: NVML_FI_DEV_POWER_AVERAGE is "supported on Ampere (except GA100) or newer": an A100 on a 570+ driver
    prints N/A for it, its draw the instant one; before 570 only <power_draw>; no reserved before 510."""
    sys.path.insert(0, str(EMULATOR.parent))
    import nvidia_smi_emulator  # pylint: disable=import-outside-toplevel,import-error
    a100 = {"power_draw_w": 250.0, "architecture": "Ampere", "name": "NVIDIA A100-SXM4-80GB"}
    assert nvidia_smi_emulator.power_draws(a100, 580) == [("average_power_draw", "N/A"),
                                                          ("instant_power_draw", "250.00 W")]
    assert nvidia_smi_emulator.power_draws(a100, 535) == [("power_draw", "250.00 W")]
    l40s = {"power_draw_w": 88.5, "architecture": "Ada Lovelace", "name": "NVIDIA L40S"}
    assert nvidia_smi_emulator.power_draws(l40s, 570) == [("average_power_draw", "88.50 W"),
                                                          ("instant_power_draw", "88.50 W")]
    assert [tag for tag, _text in nvidia_smi_emulator.fb_memory_usage_children(
        {"memory_total_mib": 4096, "memory_used_mib": 42}, 470)] == ["total", "used", "free"]


def test_h100_fabric_is_completed_and_a100_fabric_is_not_reported(smi):
    """HGX H100 with its fabric manager done: State Completed, Status Success; an HGX A100 prints N/A there
    (bottlerocket-os/bottlerocket pull 3873, a p4d)."""
    _root, h100 = xml_gpus(smi("hgx-h100-8gpu", "-q", "-x"))
    assert set((gpu.findtext("fabric/state"), gpu.findtext("fabric/status")) for gpu in h100.values()) == {
        ("Completed", "Success")}
    _root, a100 = xml_gpus(smi("hgx-a100-8gpu", "-q", "-x"))
    assert set((gpu.findtext("fabric/state"), gpu.findtext("fabric/status")) for gpu in a100.values()) == {
        ("N/A", "N/A")}


@pytest.mark.parametrize("profile", GPU_PROFILES)
def test_the_collections_parsers_read_every_command(smi, profile):
    """gpu_facts' parsers take the emulator's output as they take real output: the same GPUs everywhere."""
    data = profile_data(profile)
    query = nvidia_smi.parse_query_xml(smi(profile, "-q", "-x").stdout)
    assert [gpu["pci_bus_id"] for gpu in query["gpus"]] == ["00000000:" + bus for bus in data["bus_ids"]]
    assert [gpu["memory_total_mib"] for gpu in query["gpus"]] == [data["gpu"]["memory_total_mib"]] * len(data["bus_ids"])
    assert [gpu["power_limit_w"] for gpu in query["gpus"]] == [data["gpu"]["power_limit_w"]] * len(data["bus_ids"])
    uuids = [gpu["uuid"] for gpu in query["gpus"]]
    assert [gpu["uuid"] for gpu in nvidia_smi.parse_gpu_list(smi(profile, "-L").stdout)] == uuids
    assert len(nvidia_smi.parse_topology(smi(profile, "topo", "-m").stdout)["gpus"]) == len(data["bus_ids"])
    csv = smi(profile, "--query-gpu=index,uuid,pci.bus_id", "--format=csv").stdout
    assert [row["uuid"] for row in nvidia_smi.parse_query_gpu_csv(csv)] == uuids
    status = smi(profile, "nvlink", "-s").stdout
    if data["nvlink"]["links_per_gpu"]:
        links = nvidia_smi.parse_nvlink_status(status)
        assert [links[index]["uuid"] for index in sorted(links)] == uuids
        assert set(len(gpu["links"]) for gpu in links.values()) == {data["nvlink"]["links_per_gpu"]}
    else:
        assert status == ""


# --- nvlink -s and --query-gpu against real captures ------------------------------------------------------

def test_h100_nvlink_status_is_a_p5s(smi):
    """Mimics an AWS p5's `nvidia-smi nvlink -s` (fixture p5-h100-550.90.07.nvlink-s.txt, its tab shown expanded
    as published): the same lines but for the GPUs' UUIDs."""
    real = (FIXTURES / "p5-h100-550.90.07.nvlink-s.txt").read_text(encoding="utf-8")
    result = smi("hgx-h100-8gpu", "nvlink", "-s")
    assert result.returncode == 0
    uuid = re.compile(r"GPU-[0-9a-f-]{36}")
    assert uuid.sub("UUID", result.stdout.expandtabs(8)) == uuid.sub("UUID", real)


def test_h100_query_gpu_is_a_p5s(smi):
    """Mimics an AWS p5's `nvidia-smi --query-gpu=index,name --format=csv,noheader`, byte for byte."""
    real = (FIXTURES / "p5-h100-550.90.07.query-gpu-index-name.csv").read_text(encoding="utf-8")
    assert smi("hgx-h100-8gpu", "--query-gpu=index,name", "--format=csv,noheader").stdout == real


@pytest.mark.parametrize("fmt, expected", [
    ("csv", ["index, temperature.gpu, power.draw [W], utilization.gpu [%], memory.used [MiB], memory.total [MiB], "
             "clocks_event_reasons.active", "0, 33, 60.00 W, 0 %, 0 MiB, 81920 MiB, 0x0000000000000000"]),
    ("csv,nounits", ["index, temperature.gpu, power.draw [W], utilization.gpu [%], memory.used [MiB], "
                     "memory.total [MiB], clocks_event_reasons.active", "0, 33, 60.00, 0, 0, 81920, 0x0000000000000000"]),
    ("csv,noheader", ["0, 33, 60.00 W, 0 %, 0 MiB, 81920 MiB, 0x0000000000000000"]),
    ("csv,noheader,nounits", ["0, 33, 60.00, 0, 0, 81920, 0x0000000000000000"]),
])
def test_query_gpu_prints_units_as_the_real_tool(smi, fmt, expected):
    """Published CSV logs: 'power.draw [W], utilization.gpu [%]' in the header, '62.87 W, 0 %' as values,
    nounits dropping the units from the values only; masks like '0x00000000000001FF' (NVIDIA/nvidia-settings
    issue 80)."""
    fields = "index,temperature.gpu,power.draw,utilization.gpu,memory.used,memory.total,clocks_event_reasons.active"
    result = smi("hgx-a100-8gpu", "--query-gpu=" + fields, "--format=" + fmt)
    assert result.returncode == 0
    assert result.stdout.splitlines()[:len(expected)] == expected
    assert len(result.stdout.splitlines()) == 8 + (0 if "noheader" in fmt else 1)


def test_query_gpu_refuses_an_unknown_field(smi):
    result = smi("hgx-a100-8gpu", "--query-gpu=index,temperature.bogus", "--format=csv")
    assert result.returncode == 2
    assert result.stdout == 'Field "temperature.bogus" is not a valid field to query.\n\n'


# --- faults -----------------------------------------------------------------------------------------------

def test_pcie_only_nvlink_status_prints_nothing_and_succeeds(smi):
    """What GPUs without NVLink print for `nvidia-smi nvlink -s`: nothing, exit status 0."""
    result = smi("pcie-4gpu", "nvlink", "-s")
    assert (result.returncode, result.stdout, result.stderr) == (0, "", "")
    assert smi("pairs-4gpu", "nvlink", "-s").stdout != ""


def test_inactive_links_from_faults_json_and_the_older_file(smi):
    """Real `nvlink -s` marks a down link 'Link N: <inactive>' (Azure/azhpc-diagnostics issue 73)."""
    smi.faults({"inactive_links": [[3, 5]]})
    (smi.config / "inactive_links").write_text("6 0\n", encoding="utf-8")
    links = nvidia_smi.parse_nvlink_status(smi("hgx-a100-8gpu", "nvlink", "-s").stdout)
    inactive = sorted((index, link["link"]) for index, gpu in links.items() for link in gpu["links"] if not link["active"])
    assert inactive == [(3, 5), (6, 0)]
    assert "\t Link 5: <inactive>" in smi("hgx-a100-8gpu", "nvlink", "-s").stdout.splitlines()


def test_all_links_inactive_prints_nvmls_message_under_the_gpu(smi):
    """A GPU whose links are all down (leptonai/gpud issue 1085): its header, then
    'NVML: Unable to retrieve NVLink information as all links are inActive', and no link lines."""
    smi.faults({"all_links_inactive": [2]})
    result = smi("hgx-h100-8gpu", "nvlink", "-s")
    assert result.returncode == 0
    lines = result.stdout.splitlines()
    header = next(number for number, line in enumerate(lines) if line.startswith("GPU 2: "))
    assert lines[header + 1] == "NVML: Unable to retrieve NVLink information as all links are inActive"
    assert lines[header + 2].startswith("GPU 3: ")
    assert len(lines) == 8 + 7 * 18 + 1


def test_a_lost_gpu_is_missing_everywhere_with_the_real_message(smi):
    """A GPU fallen off the bus: missing from every listing while attached_gpus still counts it, and
    'Unable to determine the device handle for GPU 0000:4A:00.0: GPU is lost.  Reboot the system to recover
    this GPU' (fixture 42's words) on stderr with exit status 15 (NVML_ERROR_GPU_IS_LOST)."""
    smi.faults({"lost_gpus": [3]})
    message = LOST % "4A:00.0"
    result = smi("hgx-a100-8gpu", "-q", "-x")
    assert (result.returncode, result.stderr) == (15, message)
    root, gpus = xml_gpus(result)
    assert root.findtext("attached_gpus") == "8"
    assert "00000000:4A:00.0" not in gpus and len(gpus) == 7
    for argv in (["-L"], ["nvlink", "-s"], ["--query-gpu=index,uuid", "--format=csv,noheader"]):
        result = smi("hgx-a100-8gpu", *argv)
        assert (result.returncode, result.stderr) == (15, message), argv
        assert len(result.stdout.splitlines()) == (7 * 13 if argv[0] == "nvlink" else 7), argv
        assert "GPU 3:" not in result.stdout and not result.stdout.startswith("3,")
    topo = smi("hgx-a100-8gpu", "topo", "-m")
    assert (topo.returncode, topo.stdout, topo.stderr) == (15, "", message)
    assert smi("hgx-a100-8gpu", "--version").returncode == 0


def test_per_gpu_faults_show_on_that_gpu_only(smi):
    """The health fields operators drain on, planted on GPU 2 of an HGX A100 as -q -x of the 535 branch prints them."""
    smi.faults({"gpus": {"2": {
        "ecc_dram_uncorrectable_volatile": 2, "ecc_sram_uncorrectable_volatile": 1, "ecc_dram_correctable_aggregate": 7,
        "remapped_rows": {"correctable": 1, "uncorrectable": 0, "pending": True, "failure": False},
        "clock_event_reasons": ["sw_power_cap", "hw_slowdown", "hw_thermal_slowdown"], "temperature_c": 91,
        "power_draw_w": 61.52, "reset_required": True, "drain_and_reset_recommended": True,
        "fabric_state": "In Progress", "fabric_status": "N/A", "compute_mode": "Exclusive_Process",
        "pcie_gen_current": 3, "pcie_width_current": 8, "pcie_replay_counter": 12, "retired_pages_pending": True,
        "utilization_gpu_pct": 97, "memory_used_mib": 1000}}})
    _root, gpus = xml_gpus(smi("hgx-a100-8gpu", "-q", "-x"))
    faulty, healthy = gpus["00000000:44:00.0"], gpus["00000000:4A:00.0"]
    expected = {
        "ecc_errors/volatile/dram_uncorrectable": ("2", "0"),
        "ecc_errors/volatile/sram_uncorrectable": ("1", "0"),
        "ecc_errors/aggregate/dram_correctable": ("7", "0"),
        "remapped_rows/remapped_row_corr": ("1", "0"),
        "remapped_rows/remapped_row_pending": ("Yes", "No"),
        "remapped_rows/remapped_row_failure": ("No", "No"),
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_max": ("639 bank(s)", "640 bank(s)"),
        "remapped_rows/row_remapper_histogram/row_remapper_histogram_high": ("1 bank(s)", "0 bank(s)"),
        "clocks_event_reasons/clocks_event_reason_sw_power_cap": ("Active", "Not Active"),
        "clocks_event_reasons/clocks_event_reason_hw_thermal_slowdown": ("Active", "Not Active"),
        "clocks_event_reasons/clocks_event_reason_gpu_idle": ("Not Active", "Not Active"),
        "temperature/gpu_temp": ("91 C", "33 C"),
        "gpu_power_readings/power_draw": ("61.52 W", "60.00 W"),
        "gpu_reset_status/reset_required": ("Yes", "No"),
        "gpu_reset_status/drain_and_reset_recommended": ("Yes", "No"),
        "fabric/state": ("In Progress", "N/A"),
        "compute_mode": ("Exclusive_Process", "Default"),
        "pci/pci_gpu_link_info/pcie_gen/current_link_gen": ("3", "4"),
        "pci/pci_gpu_link_info/pcie_gen/max_link_gen": ("4", "4"),
        "pci/pci_gpu_link_info/link_widths/current_link_width": ("8x", "16x"),
        "pci/replay_counter": ("12", "0"),
        "retired_pages/pending_retirement": ("Yes", "No"),
        "utilization/gpu_util": ("97 %", "0 %"),
        "fb_memory_usage/used": ("1000 MiB", "0 MiB"),
    }
    for path, (bad, good) in expected.items():
        assert (faulty.findtext(path), healthy.findtext(path)) == (bad, good), path
    csv = smi("hgx-a100-8gpu", "--query-gpu=index,clocks_throttle_reasons.active,ecc.errors.uncorrected.volatile.total,"
              "temperature.gpu,pcie.link.width.current", "--format=csv,noheader").stdout.splitlines()
    assert csv[2] == "2, 0x000000000000004C, 3, 91, 8"     # sw_power_cap 0x4 | hw_slowdown 0x8 | hw_thermal_slowdown 0x40
    assert csv[1] == "1, 0x0000000000000000, 0, 33, 16"


def test_every_clock_event_reason_has_its_nvml_bit(smi):
    """All nine reasons of the 535 schema active give nvml.h's nine bits, 0x1FF, the mask a real GPU reports as
    clocks_throttle_reasons.supported (NVIDIA/nvidia-settings issue 80); each alone gives its own bit."""
    reasons = [tag.replace("clocks_event_reason_", "") for tag in
               (element.tag for element in ET.parse(str(CAPTURE_535)).getroot().find("gpu/clocks_event_reasons"))]
    bits = {"gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
            "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
            "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100}
    assert sorted(reasons) == sorted(bits)
    query = ("hgx-a100-8gpu", "--query-gpu=clocks_event_reasons.active", "--format=csv,noheader")
    for first in (0, 8):        # eight GPUs: each reason alone on one of them, in two rounds
        names = sorted(bits)[first:first + 8]
        smi.faults({"gpus": dict((str(index), {"clock_event_reasons": [name]}) for index, name in enumerate(names))})
        rows = smi(*query).stdout.split()
        assert rows[:len(names)] == ["0x%016X" % bits[name] for name in names]
    smi.faults({"gpus": {"7": {"clock_event_reasons": reasons}}})
    assert smi(*query).stdout.split()[7] == "0x00000000000001FF"
    _root, xml = xml_gpus(smi("hgx-a100-8gpu", "-q", "-x"))
    assert set(element.text for element in xml["00000000:C3:00.0"].find("clocks_event_reasons")) == {"Active"}


def test_unsupported_fields_print_na(smi):
    """Where a GPU does not report a value, -q -x prints N/A (e.g. the capture's <remapped_rows>N/A</remapped_rows>)
    and --query-gpu prints [N/A]."""
    smi.faults({"gpus": {"0": {"remapped_rows": None, "temperature_c": None, "clock_event_reasons": None,
                               "reset_required": None, "retired_pages_pending": None}}})
    _root, gpus = xml_gpus(smi("hgx-a100-8gpu", "-q", "-x"))
    gpu = gpus["00000000:07:00.0"]
    assert gpu.findtext("remapped_rows") == "N/A" and len(gpu.find("remapped_rows")) == 0
    assert gpu.findtext("temperature/gpu_temp") == "N/A"
    assert gpu.findtext("gpu_reset_status/reset_required") == "N/A"
    assert gpu.findtext("retired_pages/pending_retirement") == "N/A"
    assert set(reason.text for reason in gpu.find("clocks_event_reasons")) == {"N/A"}
    csv = smi("hgx-a100-8gpu", "--query-gpu=temperature.gpu,clocks_event_reasons.active", "--format=csv,noheader")
    assert csv.stdout.splitlines()[:2] == ["[N/A], [N/A]", "33, 0x0000000000000000"]


def test_faults_are_read_at_every_call(smi):
    """A fault planted or cleared between two calls shows in the next call (no state kept by the emulator)."""
    assert smi("pairs-4gpu", "-L").stdout.count("\n") == 4
    smi.faults({"lost_gpus": [0]})
    assert smi("pairs-4gpu", "-L").stdout.count("\n") == 3
    (smi.config / "faults.json").unlink()
    assert smi("pairs-4gpu", "-L").stdout.count("\n") == 4


def test_a_broken_faults_file_is_an_error_not_a_healthy_node(smi):
    (smi.config / "faults.json").write_text("{not json", encoding="utf-8")
    result = smi("hgx-a100-8gpu", "-q", "-x")
    assert result.returncode != 0 and result.stdout == ""
    assert "faults.json" in result.stderr
    smi.faults({"gpus": {"0": {"clock_event_reasons": ["sw_powercap"]}}})
    result = smi("hgx-a100-8gpu", "-q", "-x")
    assert result.returncode != 0 and "sw_powercap" in result.stderr


# --- -pl, -lgc, -rgc, --query-compute-apps ------------------------------------------------------------------
# Mimic the real nvidia-smi's published outputs: "Power limit for GPU 00000000:3B:00.0 was set to 250.00 W from
# 300.00 W." then "All done." (h2oai/h2ogpt FAQ, "Throttle GPUs in case of reset/reboot"); "Provided power limit
# 150.00 W is not a valid power limit which should be between 60.00 W and 70.00 W for GPU 00000000:00:04.0" then
# "Terminating early due to previous errors." (published terminal logs); 'GPU clocks set to "(gpuClkMin 1740,
# gpuClkMax 1740)" for GPU 00000000:61:00.0' then "All done." (Red Hat OpenShift's GPU operator docs); the
# persistence-mode warning of a -lgc log with persistence off; min/max power limits in gpu_power_readings (the 535
# capture's min_power_limit / max_power_limit); exit codes from the man page's RETURN VALUE list.

def as_root():
    """The emulator checks the effective user; tests run it as whoever runs pytest."""
    if os.geteuid() != 0:
        pytest.skip("-pl / -lgc need root, as on a real GPU")


def persistence_on(smi):
    """Persistence mode Enabled, as ``nvidia-smi -pm 1`` leaves it (the emulator's persistence file)."""
    (smi.config / "persistence").write_text("1\n", encoding="utf-8")


def test_pl_sets_the_limit_everywhere_it_is_read(smi):
    as_root()
    persistence_on(smi)
    result = smi("hgx-h100-8gpu", "-i", "00000000:53:00.0", "-pl", "500")
    assert result.returncode == 0
    assert result.stdout == "Power limit for GPU 00000000:53:00.0 was set to 500.00 W from 700.00 W.\nAll done.\n"
    query = smi("hgx-h100-8gpu", "--query-gpu=index,power.limit,power.default_limit,power.min_limit,power.max_limit",
                "--format=csv,noheader,nounits")
    assert query.stdout.splitlines()[:2] == ["0, 500.00, 700.00, 200.00, 700.00", "1, 700.00, 700.00, 200.00, 700.00"]
    _root, gpus = xml_gpus(smi("hgx-h100-8gpu", "-q", "-x"))
    readings = gpus["00000000:53:00.0"].find("gpu_power_readings")
    assert readings.findtext("current_power_limit") == "500.00 W"
    assert readings.findtext("default_power_limit") == "700.00 W"
    assert readings.findtext("min_power_limit") == "200.00 W" and readings.findtext("max_power_limit") == "700.00 W"


def test_pl_outside_the_range_is_refused_with_the_real_message(smi):
    as_root()
    result = smi("hgx-h100-8gpu", "-i", "0", "-pl", "800")
    assert result.returncode == 2
    assert result.stdout == ("Provided power limit 800.00 W is not a valid power limit which should be between 200.00 W "
                             "and 700.00 W for GPU 00000000:53:00.0\nTerminating early due to previous errors.\n")
    assert not (smi.config / "settings.json").exists()


def test_pl_without_i_sets_every_gpu_and_index_lists_work(smi):
    as_root()
    assert smi("pcie-4gpu", "-i", "0,2", "-pl", "350").returncode == 0
    assert smi("hgx-h100-8gpu", "-pl", "450").stdout.count("was set to 450.00 W from ") == 8
    assert smi("hgx-h100-8gpu", "-i", "9", "-pl", "450").returncode == 6


def test_lgc_and_rgc_keep_their_state(smi):
    as_root()
    persistence_on(smi)
    result = smi("hgx-h100-8gpu", "-i", "1", "-lgc", "1200,1980")
    assert result.returncode == 0
    assert result.stdout.startswith('GPU clocks set to "(gpuClkMin 1200, gpuClkMax 1980)" for GPU 00000000:64:00.0\n')
    assert result.stdout.endswith("All done.\n")
    settings = json.loads((smi.config / "settings.json").read_text())
    assert settings["gpus"]["1"]["locked_clocks_mhz"] == [1200, 1980]
    assert smi("hgx-h100-8gpu", "-i", "1", "-rgc").stdout.endswith("All done.\n")
    assert json.loads((smi.config / "settings.json").read_text())["gpus"]["1"]["locked_clocks_mhz"] is None
    assert smi("hgx-h100-8gpu", "-i", "1", "-lgc", "1980,abc").returncode == 2


def test_pl_renders_nvml_conf_again_for_the_fake_nvml(smi):
    as_root()
    sys.path.insert(0, str(EMULATOR.parent))
    import emulator_profile  # pylint: disable=import-outside-toplevel
    emulator_profile.write_nvml_conf("hgx-h100-8gpu", str(smi.config))
    persistence_on(smi)
    assert smi("hgx-h100-8gpu", "-i", "0", "-pl", "500").returncode == 0
    conf = (smi.config / "nvml.conf").read_text()
    assert conf.split("gpu 1\n")[0].count("power_limit_mw 500000") == 1
    assert conf.split("gpu 1\n")[1].count("power_limit_mw 700000") == 7


def test_compute_apps_are_the_planted_ones(smi):
    result = smi("hgx-h100-8gpu", "--query-compute-apps=gpu_bus_id,pid,process_name,used_gpu_memory", "--format=csv")
    assert result.returncode == 0 and result.stdout == "gpu_bus_id, pid, process_name, used_gpu_memory [MiB]\n"
    smi.faults({"gpus": {"3": {"compute_apps": [{"pid": 4242, "process_name": "python3", "used_memory_mib": 1024}]}}})
    result = smi("hgx-h100-8gpu", "--query-compute-apps=gpu_bus_id,pid", "--format=csv,noheader")
    assert result.stdout == "00000000:86:00.0, 4242\n"


def as_user(smi, *argv):
    """The emulator run by a user other than root (uid 1000)."""
    env = {"PATH": "/usr/bin:/bin", "GPUFLEET_EMULATOR_PROFILE": "hgx-h100-8gpu",
           "GPUFLEET_EMULATOR_CONFIG": str(smi.config)}
    code = ("import os, runpy, sys; os.geteuid = lambda: 1000; sys.argv = [%r] + %r; "
            "runpy.run_path(%r, run_name='__main__')" % (str(EMULATOR), list(argv), str(EMULATOR)))
    return subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=30, check=False)


def test_setters_need_root(smi):
    """As the man page says of -pl and -lgc ("Requires root"): another user is refused with exit 4 and nothing kept,
    in the real tool's words: "Failed to set power management limit for GPU 00000000:01:00.0: Insufficient
    Permissions" (github.com/NVIDIA/nvidia-docker/issues/495), and for clocks "The current user does not have
    permission to change clocks for GPU 00000000:01:00.0." then "Terminating early due to previous errors."
    (captures of drivers 565.57.01, 580.173.02 and 595.78, -rgc alike)."""
    persistence_on(smi)
    result = as_user(smi, "-i", "0", "-pl", "500")
    assert result.returncode == 4
    assert result.stdout == "Failed to set power management limit for GPU 00000000:53:00.0: Insufficient Permissions\n"
    for argv in (["-i", "1", "-lgc", "1200,1980"], ["-i", "1", "-rgc"]):
        result = as_user(smi, *argv)
        assert result.returncode == 4
        assert result.stdout == ("The current user does not have permission to change clocks for GPU 00000000:64:00.0.\n"
                                 "Terminating early due to previous errors.\n")
    assert not (smi.config / "settings.json").exists()


def test_a_setting_the_gpu_does_not_support_is_a_warning_with_exit_0(smi):
    """The real tool's words for a GPU without the feature (a laptop GPU's -pl; a Tesla K80's -lgc on 470.42.01):
    "... is not supported for GPU ...", "Treating as warning and moving on.", "All done.", exit 0, nothing set."""
    as_root()
    persistence_on(smi)
    smi.faults({"gpus": {"0": {"power_limit_supported": False, "locked_clocks_supported": False}}})
    result = smi("hgx-h100-8gpu", "-i", "0", "-pl", "500")
    assert result.returncode == 0
    assert result.stdout == ("Changing power management limit is not supported for GPU: 00000000:53:00.0.\n"
                             "Treating as warning and moving on.\nAll done.\n")
    result = smi("hgx-h100-8gpu", "-i", "0,1", "-lgc", "1200,1980")
    assert result.returncode == 0
    assert result.stdout == ("Setting locked GPU clocks is not supported for GPU 00000000:53:00.0.\n"
                             "Treating as warning and moving on.\n"
                             'GPU clocks set to "(gpuClkMin 1200, gpuClkMax 1980)" for GPU 00000000:64:00.0\nAll done.\n')
    settings = json.loads((smi.config / "settings.json").read_text())["gpus"]
    assert "0" not in settings and settings["1"] == {"locked_clocks_mhz": [1200, 1980]}
    query = smi("hgx-h100-8gpu", "--query-gpu=power.limit", "--format=csv,noheader,nounits")
    assert query.stdout.splitlines()[0] == "700.00"


def test_settings_do_not_outlive_nvidia_smi_without_persistence_mode(smi):
    """NVIDIA's Driver Persistence guide: the software power cap is "GPU initialization lifecycle" state, lost when
    the GPU is deinitialised after its last client; the real tool still says it set it, and warns."""
    as_root()
    result = smi("hgx-h100-8gpu", "-i", "0", "-pl", "500")
    assert result.returncode == 0
    assert result.stdout.startswith("Power limit for GPU 00000000:53:00.0 was set to 500.00 W from 700.00 W.\n")
    assert "Warning: persistence mode is disabled on device 00000000:53:00.0." in result.stdout
    assert smi("hgx-h100-8gpu", "-i", "0", "-lgc", "1200,1980").returncode == 0
    query = smi("hgx-h100-8gpu", "--query-gpu=power.limit", "--format=csv,noheader,nounits")
    assert query.stdout.splitlines()[0] == "700.00"
    assert not (smi.config / "settings.json").exists()
    # set while persistence mode was on, then persistence mode goes off: the next call finds the defaults
    persistence_on(smi)
    assert smi("hgx-h100-8gpu", "-i", "0", "-pl", "500").returncode == 0
    assert smi("hgx-h100-8gpu", "--query-gpu=power.limit", "--format=csv,noheader,nounits").stdout.startswith("500.00")
    (smi.config / "persistence").unlink()
    assert smi("hgx-h100-8gpu", "--query-gpu=power.limit", "--format=csv,noheader,nounits").stdout.startswith("700.00")
    persistence_on(smi)
    assert smi("hgx-h100-8gpu", "--query-gpu=power.limit", "--format=csv,noheader,nounits").stdout.startswith("700.00")
