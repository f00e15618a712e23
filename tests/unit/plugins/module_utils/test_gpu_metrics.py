"""gpu_metrics: the GPU facts as Prometheus text, with dcgm-exporter's names and labels; and the collector on emulated
hardware, without Ansible.

The names and labels are checked against NVIDIA's sources (read at github.com/NVIDIA/dcgm-exporter and
github.com/NVIDIA/go-dcgm, see DCGM_SOURCES below), the format against Prometheus' text exposition format
(https://prometheus.io/docs/instrumenting/exposition_formats/: one HELP and one TYPE line per family before its
samples, label values with backslash, double quote and line feed escaped).
"""
import json
import os
import pathlib
import re
import shutil
import socket
import stat
import subprocess
import sys

import pytest
import yaml

from ansible_collections.gpufleet.node.plugins.module_utils import gpu_metrics

ROOT = pathlib.Path(__file__).resolve().parents[4]
EMULATION = ROOT / "tests" / "emulator"
COLLECTOR = ROOT / "roles" / "gpu_monitoring" / "files" / "gpufleet-gpu-metrics.py"

# DCGM field names as NVIDIA publishes them, with the Prometheus type dcgm-exporter gives them:
# - dcgm-exporter etc/default-counters.csv and etc/dcp-metrics-included.csv (lines "FIELD, type, help"; the
#   commented ones too, which users enable by removing the '#');
# - the rest from DCGM's field list (go-dcgm pkg/dcgm/const_fields.go): 112 DCGM_FI_DEV_CLOCKS_EVENT_REASONS,
#   164 DCGM_FI_DEV_ENFORCED_POWER_LIMIT, 396 DCGM_FI_DEV_ROW_REMAP_PENDING, 157 DCGM_FI_DEV_POWER_USAGE_INSTANT.
DCGM_SOURCES = {
    "DCGM_FI_DEV_GPU_UTIL": "gauge",                       # default-counters.csv
    "DCGM_FI_DEV_FB_USED": "gauge",                        # default-counters.csv
    "DCGM_FI_DEV_FB_FREE": "gauge",                        # default-counters.csv
    "DCGM_FI_DEV_FB_RESERVED": "gauge",                    # default-counters.csv
    "DCGM_FI_DEV_POWER_USAGE_INSTANT": "gauge",            # const_fields.go 157, dcgm_fields.h's description
    "DCGM_FI_DEV_GPU_TEMP": "gauge",                       # default-counters.csv
    "DCGM_FI_DEV_POWER_USAGE": "gauge",                    # default-counters.csv
    "DCGM_FI_DEV_PCIE_REPLAY_COUNTER": "counter",          # default-counters.csv
    "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL": "counter",            # default-counters.csv (commented)
    "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL": "counter",            # default-counters.csv (commented)
    "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL": "counter",            # default-counters.csv (commented)
    "DCGM_FI_DEV_RETIRED_SBE": "counter",                  # dcp-metrics-included.csv
    "DCGM_FI_DEV_RETIRED_DBE": "counter",                  # dcp-metrics-included.csv
    "DCGM_FI_DEV_RETIRED_PENDING": "counter",              # default-counters.csv (commented)
    "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS": "counter",  # default-counters.csv
    "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS": "counter",    # default-counters.csv
    "DCGM_FI_DEV_ROW_REMAP_FAILURE": "gauge",              # default-counters.csv
    "DCGM_FI_DEV_ROW_REMAP_PENDING": "gauge",              # const_fields.go 396, "Whether remapping of rows is pending"
    "DCGM_FI_DEV_CLOCKS_EVENT_REASONS": "gauge",           # const_fields.go 112 (bitmask)
    "DCGM_FI_DEV_ENFORCED_POWER_LIMIT": "gauge",           # const_fields.go 164
}
# dcgm-exporter's GPU label set: internal/pkg/rendermetrics/render_metrics.go, gpuMetricsFormat (gpu, UUID,
# pci_bus_id, device, modelName, Hostname when set), then label fields (DCGM_FI_DRIVER_VERSION, a "label" line of
# dcp-metrics-included.csv).
DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{((?:[a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\\n]|\\["\\n])*",?)*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\\n]|\\["\\n])*)"')


def parse(text):
    """Strict reading of the exposition text: {(name, ((label, value), ...)): value}, checking HELP/TYPE order."""
    samples, described = {}, []
    assert text.endswith("\n")
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name = line.split(" ")[2]
            assert name not in described, "two HELP lines for %s" % name
            described.append(name)
            continue
        if line.startswith("# TYPE "):
            _hash, _type, name, kind = line.split(" ")
            assert described[-1] == name and kind in ("gauge", "counter")
            continue
        match = SAMPLE.match(line)
        assert match, "not a sample line: %r" % line
        name = match.group(1)
        assert described and described[-1] == name, "sample of %s outside its family" % name
        labels = tuple((key, value.replace('\\"', '"').replace("\\n", "\n").replace("\\\\", "\\"))
                       for key, value in LABEL.findall(match.group(3) or ""))
        samples[(name, labels)] = float(match.group(4))
    return samples


def device(index, **fields):
    base = {"index": index, "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-%d" % index,
            "pci_bus_id": "00000000:%02X:00.0" % (0x18 + index), "utilization_gpu_pct": 0, "memory_used_mib": 512,
            "memory_free_mib": 80000, "temperature_c": 33, "power_draw_w": 70.5, "power_limit_w": 700.0,
            "clock_event_reasons_active": ["gpu_idle"], "ecc_errors_corrected_volatile": 0,
            "ecc_errors_uncorrected_volatile": 0, "ecc_errors_uncorrected_aggregate": 0,
            "retired_pages": None,
            "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
            "pcie": {"replay_counter": 0}}
    base.update(fields)
    return base


def facts(devices, **topology):
    return {"state": "ok", "source": "nvml", "driver_version": "535.183.01", "count": len(devices),
            "devices": devices, "topology": dict({"nvlink": {}, "nvlink_gpus_all_inactive": []}, **topology)}


def value(samples, name, gpu):
    found = [v for (metric, labels), v in samples.items() if metric == name and ("gpu", str(gpu)) in labels]
    assert len(found) <= 1
    return found[0] if found else None


def test_every_dcgm_name_is_a_published_field_with_its_type():
    names = dict((name, kind) for name, kind, _help, _value in gpu_metrics.DEVICE_METRICS)
    dcgm = dict((name, kind) for name, kind in names.items() if name.startswith(gpu_metrics.DCGM_PREFIX))
    assert dcgm == DCGM_SOURCES
    assert all(name.startswith(("DCGM_FI_", "gpufleet_")) for name in names)


def test_labels_are_dcgm_exporters_in_its_order():
    text = gpu_metrics.render(facts([device(0)]), hostname="node-1")
    line = [line for line in text.splitlines() if line.startswith("DCGM_FI_DEV_GPU_TEMP{")][0]
    assert [key for key, _value in LABEL.findall(line)] == DCGM_LABELS
    assert ('device="nvidia0"' in line and 'modelName="NVIDIA H100 80GB HBM3"' in line
            and 'DCGM_FI_DRIVER_VERSION="535.183.01"' in line and 'pci_bus_id="00000000:18:00.0"' in line)


def test_values_are_the_facts():
    hot = device(1, temperature_c=91, utilization_gpu_pct=87, ecc_errors_uncorrected_volatile=2)
    samples = parse(gpu_metrics.render(facts([device(0), hot])))
    assert value(samples, "DCGM_FI_DEV_GPU_TEMP", 0) == 33 and value(samples, "DCGM_FI_DEV_GPU_TEMP", 1) == 91
    assert value(samples, "DCGM_FI_DEV_GPU_UTIL", 1) == 87
    assert value(samples, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1) == 2
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE", 0) == 70.5
    assert value(samples, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", 0) == 700.0
    assert value(samples, "DCGM_FI_DEV_FB_USED", 0) == 512 and value(samples, "DCGM_FI_DEV_FB_FREE", 0) == 80000
    assert value(samples, "DCGM_FI_DEV_ROW_REMAP_PENDING", 0) == 0
    assert samples[("gpufleet_gpu_facts_ok", (("state", "ok"), ("source", "nvml")))] == 1


def test_memory_and_power_as_dcgm_exports_them():
    """DCGM_FI_DEV_FB_USED is nvmlMemory_v2_t's used, without the reserved memory, which is DCGM_FI_DEV_FB_RESERVED
    (DcgmCacheManager.cpp reads nvmlDeviceGetMemoryInfo_v2 from driver 510); DCGM_FI_DEV_POWER_USAGE is
    nvmlDeviceGetPowerUsage (power_draw_w, the 1 s average on Ampere except GA100 and newer) and
    DCGM_FI_DEV_POWER_USAGE_INSTANT field 186 (power_draw_instant_w). The values of the A100 capture (31: reserved
    869, used 50, free 80999 MiB) and of an RTX 3090 on 590 (66: average 35.06 W, instant 35.15 W)."""
    gpu = device(0, memory_reserved_mib=869, memory_used_mib=50, memory_free_mib=80999, power_draw_w=35.06,
                 power_draw_average_w=35.06, power_draw_instant_w=35.15)
    samples = parse(gpu_metrics.render(facts([gpu])))
    assert [value(samples, name, 0) for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
                                                 "DCGM_FI_DEV_FB_FREE")] == [50, 869, 80999]
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE", 0) == 35.06
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE_INSTANT", 0) == 35.15
    # a driver before 510 (no reserved) and -q -x before 570 (no instant reading): no sample, never a 0
    older = parse(gpu_metrics.render(facts([device(0, memory_reserved_mib=None, memory_used_mib=42,
                                                   power_draw_instant_w=None)])))
    assert value(older, "DCGM_FI_DEV_FB_USED", 0) == 42
    assert value(older, "DCGM_FI_DEV_FB_RESERVED", 0) is None and value(older, "DCGM_FI_DEV_POWER_USAGE_INSTANT", 0) is None
    text = gpu_metrics.render(facts([device(0)]))
    assert "DCGM_FI_DEV_FB_RESERVED" not in text and "DCGM_FI_DEV_POWER_USAGE_INSTANT" not in text
    assert "# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n" in text    # default-counters.csv


def test_an_unknown_value_gets_no_sample_never_a_zero():
    samples = parse(gpu_metrics.render(facts([device(0, temperature_c=None, remapped_rows=None,
                                                     clock_event_reasons_active=None), device(1)])))
    assert value(samples, "DCGM_FI_DEV_GPU_TEMP", 0) is None and value(samples, "DCGM_FI_DEV_GPU_TEMP", 1) == 33
    assert value(samples, "DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", 0) is None
    assert value(samples, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0) is None
    assert value(samples, "DCGM_FI_DEV_RETIRED_SBE", 0) is None  # retired_pages None: not reported
    text = gpu_metrics.render(facts([device(0, temperature_c=None)]))
    assert "DCGM_FI_DEV_GPU_TEMP" not in text  # no family without a sample (no HELP/TYPE either)


def test_no_gpu_says_so():
    gpu = {"state": "not_installed", "source": None, "count": 0, "devices": [], "topology": {}}
    samples = parse(gpu_metrics.render(gpu, hostname="cpu-node"))
    assert samples == {("gpufleet_gpu_facts_ok", (("state", "not_installed"), ("source", "none"), ("Hostname", "cpu-node"))): 0,
                       ("gpufleet_gpu_count", (("Hostname", "cpu-node"),)): 0}


@pytest.mark.parametrize("hostname", ["gpufleet-demo-hgx", "node-7.example.org", 'odd "name"'])
def test_the_hostname_label_carries_what_was_given(hostname):
    """Every sample, per GPU and node-wide, carries the given name as Hostname, unchanged (the renderer reads no
    host name of its own: the collector chooses it)."""
    health = {"failures": ["GPU1: uncorrectable ECC errors"], "warnings": []}
    samples = parse(gpu_metrics.render(facts([device(0), device(1)]), health=health, hostname=hostname,
                                       timestamp=1.0))
    names = set(name for name, _labels in samples)
    assert {"DCGM_FI_DEV_GPU_TEMP", "gpufleet_gpu_healthy", "gpufleet_node_healthy", "gpufleet_gpu_count",
            "gpufleet_gpu_metrics_timestamp_seconds"} <= names
    assert all(dict(labels).get("Hostname") == hostname for _name, labels in samples)


@pytest.mark.parametrize("hostname", [None, ""])
def test_no_hostname_no_label(hostname):
    text = gpu_metrics.render(facts([device(0)]), health={"failures": [], "warnings": []}, hostname=hostname)
    assert "Hostname" not in text


def test_label_values_are_escaped():
    text = gpu_metrics.render(facts([device(0, name='Odd "GPU"\\ name\nline two')]))
    assert 'modelName="Odd \\"GPU\\"\\\\ name\\nline two"' in text
    labels = dict([key for key in parse(text) if key[0] == "DCGM_FI_DEV_GPU_TEMP"][0][1])
    assert labels["modelName"] == 'Odd "GPU"\\ name\nline two'


def test_help_and_type_once_per_family_before_its_samples():
    text = gpu_metrics.render(facts([device(0), device(1), device(2)]), health={"failures": [], "warnings": []})
    parse(text)  # checks the order
    assert text.count("# TYPE DCGM_FI_DEV_GPU_TEMP gauge\n") == 1
    assert text.count("# TYPE DCGM_FI_DEV_ECC_DBE_VOL_TOTAL counter\n") == 1


def test_clock_event_reasons_as_dcgms_bitmask_and_per_reason():
    samples = parse(gpu_metrics.render(facts([device(0, clock_event_reasons_active=["gpu_idle", "hw_thermal_slowdown"])])))
    # nvmlClocksEventReasonGpuIdle 0x1, nvmlClocksEventReasonHwThermalSlowdown 0x40 (nvml.h)
    assert value(samples, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", 0) == 0x41
    active = dict((dict(labels)["reason"], v) for (name, labels), v in samples.items()
                  if name == "gpufleet_clock_event_reason_active")
    assert active["hw_thermal_slowdown"] == 1 and active["gpu_idle"] == 1 and active["sw_power_cap"] == 0
    assert gpu_metrics.clock_event_mask([]) == 0 and gpu_metrics.clock_event_mask(None) is None


def test_nvlink_links_per_gpu():
    links = [{"link": n, "active": n != 2} for n in range(4)]
    nvlink = {"GPU0": links, "GPU1": [{"link": 0, "active": True}], "GPU2": []}
    gpu = facts([device(0), device(1), device(2)], nvlink=nvlink, nvlink_gpus_all_inactive=["GPU2"])
    samples = parse(gpu_metrics.render(gpu))
    assert (value(samples, "gpufleet_nvlink_links_up", 0), value(samples, "gpufleet_nvlink_links_down", 0)) == (3, 1)
    assert value(samples, "gpufleet_nvlink_all_links_down", 2) == 1 and value(samples, "gpufleet_nvlink_all_links_down", 0) == 0
    # nvidia-smi prints one line for a GPU whose links are all down: how many is unknown, so no sample
    assert value(samples, "gpufleet_nvlink_links_up", 2) == 0 and value(samples, "gpufleet_nvlink_links_down", 2) is None
    no_nvlink = parse(gpu_metrics.render(facts([device(0)])))
    assert value(no_nvlink, "gpufleet_nvlink_links_up", 0) is None


def test_health_verdict_per_gpu_and_node():
    health = {"failures": ["GPU1: 2 uncorrected ECC errors since the driver loaded (max 0)",
                           "NVLink inactive: GPU10 link 2"], "warnings": ["x"]}
    samples = parse(gpu_metrics.render(facts([device(0), device(1), device(10)]), health=health))
    assert [value(samples, "gpufleet_gpu_healthy", n) for n in (0, 1, 10)] == [1, 0, 0]
    assert samples[("gpufleet_node_healthy", ())] == 0
    assert samples[("gpufleet_node_health_failures", ())] == 2
    healthy = parse(gpu_metrics.render(facts([device(0)]), health={"failures": [], "warnings": []}))
    assert healthy[("gpufleet_node_healthy", ())] == 1


def test_write_atomically(tmp_path):
    target = tmp_path / "gpu.prom"
    target.write_text("old\n")
    gpu_metrics.write_atomically(str(target), "new\n")
    assert target.read_text() == "new\n" and stat.S_IMODE(target.stat().st_mode) == 0o644
    assert sorted(path.name for path in tmp_path.iterdir()) == ["gpu.prom"]
    with pytest.raises(OSError):
        gpu_metrics.write_atomically(str(tmp_path / "absent" / "gpu.prom"), "x\n")


# --- on emulated hardware -----------------------------------------------------------------------------------

# both_backends (gpu_facts on the emulator and the fake NVML library): tests/unit/plugins/conftest.py


FAULTS = {"inactive_links": [[0, 2]], "all_links_inactive": [3],
          "gpus": {"1": {"ecc_dram_uncorrectable_volatile": 2, "temperature_c": 91}}}


def without_family(text, name):
    return "".join(line + "\n" for line in text.splitlines()
                   if not re.match(r"^(# (HELP|TYPE) )?%s[ {]" % re.escape(name), line))


@pytest.mark.parametrize("profile, faults", [("hgx-h100-8gpu", None), ("pcie-4gpu", None), ("hgx-h100-8gpu", FAULTS),
                                             ("hgx-b200-8gpu", None)])
def test_both_backends_give_the_same_metrics(both_backends, profile, faults):
    nvml_facts, smi_facts = both_backends(profile, faults)
    nvml_text = gpu_metrics.render(nvml_facts, hostname="n")
    smi_text = gpu_metrics.render(smi_facts, hostname="n")
    if not smi_facts["driver_version"].startswith(("570.", "575.", "580.", "590.", "595.")):
        # -q -x prints the instant reading from driver 570 only; NVML has field 186 from 535
        assert "DCGM_FI_DEV_POWER_USAGE_INSTANT" in nvml_text and "DCGM_FI_DEV_POWER_USAGE_INSTANT" not in smi_text
        nvml_text = without_family(nvml_text, "DCGM_FI_DEV_POWER_USAGE_INSTANT")
    strip = re.compile(r'(gpufleet_gpu_facts_ok\{state="[^"]*"),source="[^"]*"')
    assert strip.sub(r"\1", nvml_text) == strip.sub(r"\1", smi_text)
    samples = parse(nvml_text)
    truth = json.loads((EMULATION / "profiles" / (profile + ".json")).read_text(encoding="utf-8"))
    assert len([key for key in samples if key[0] == "DCGM_FI_DEV_GPU_TEMP"]) == len(truth["bus_ids"])
    if faults:
        assert value(samples, "DCGM_FI_DEV_GPU_TEMP", 1) == 91 and value(samples, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", 1) == 2
        assert value(samples, "gpufleet_nvlink_all_links_down", 3) == 1
        assert value(samples, "gpufleet_nvlink_links_down", 0) >= 1


# The collector's Hostname settings (tasks/configure.yml) and the label they give: none, the name the role wrote
# (gpu_monitoring_hostname, or the inventory name on a container node), the machine's host name at collection time.
COLLECTOR_HOSTNAMES = [({"hostname_label": False, "hostname": "ignored"}, None),
                       ({"hostname_label": True, "hostname": "gpufleet-demo-hgx"}, "gpufleet-demo-hgx"),
                       ({"hostname_label": True, "hostname": ""}, socket.gethostname())]


def run_collector(tmp_path, settings_values, env_values=None):
    """The role's collector, laid out as the role installs it (the files of its __gpu_monitoring_code in namespace
    packages), run by a Python without Ansible on the emulated node both_backends set up; returns the samples it
    wrote."""
    lib = tmp_path / "lib"
    node = lib / "ansible_collections" / "gpufleet" / "node"
    role_vars = yaml.safe_load((ROOT / "roles" / "gpu_monitoring" / "vars" / "main.yml").read_text(encoding="utf-8"))
    for path in role_vars["__gpu_monitoring_code"]:
        (node / path).parent.mkdir(parents=True, exist_ok=True)   # namespace packages, no __init__.py
        shutil.copy(ROOT / path, node / path)
    shutil.copy(COLLECTOR, lib / COLLECTOR.name)
    textfile = tmp_path / "textfile" / "gpufleet-gpu.prom"
    textfile.parent.mkdir()
    settings = tmp_path / "gpu-metrics.json"
    settings.write_text(json.dumps(dict({"backend": "nvidia_smi", "timeout_s": 10, "textfile": str(textfile),
                                         "persistence_expected": True, "health_thresholds": {}}, **settings_values)))
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(tmp_path / "nvidia-smi", bindir / "nvidia-smi")
    python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
    env = dict(os.environ, PATH="%s:%s" % (bindir, os.environ.get("PATH", "")), **(env_values or {}))
    env.pop("PYTHONPATH", None)
    done = subprocess.run([python, "-I", str(lib / COLLECTOR.name), str(settings)], env=env, capture_output=True,
                          text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert sorted(path.name for path in textfile.parent.iterdir()) == ["gpufleet-gpu.prom"]
    return parse(textfile.read_text())


@pytest.mark.parametrize("hostname_settings, label", COLLECTOR_HOSTNAMES, ids=["no-label", "given", "own"])
def test_the_collector_runs_without_ansible(both_backends, tmp_path, hostname_settings, label):
    """The role's collector run by a Python without Ansible: gathers with the collection's code, judges with the
    health gates (module_utils/health.py) and writes the file, every sample's Hostname label the one the settings
    say."""
    both_backends("pcie-4gpu", {"gpus": {"2": {"temperature_c": 88}}})
    samples = run_collector(tmp_path, hostname_settings)
    assert value(samples, "DCGM_FI_DEV_GPU_TEMP", 2) == 88
    hostname = (("Hostname", label),) if label else ()
    assert samples[("gpufleet_gpu_facts_ok", (("state", "ok"), ("source", "nvidia_smi")) + hostname)] == 1
    assert ("gpufleet_node_healthy", hostname) in samples
    assert all(dict(labels).get("Hostname") == label for _name, labels in samples)


@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_the_collector_exports_memory_and_power_as_dcgm(both_backends, fake_nvml_library, tmp_path, backend):
    """On an emulated HGX B200 (driver 580) with a power spike and an allocation planted on GPU 1, the collector, by
    either backend, exports FB_USED without the 512 MiB the driver reserves, FB_RESERVED apart, POWER_USAGE the
    averaged reading and POWER_USAGE_INSTANT the spike, as DCGM reads them."""
    both_backends("hgx-b200-8gpu", {"gpus": {"1": {"power_draw_instant_w": 612.5, "memory_used_mib": 30000}}})
    truth = json.loads((EMULATION / "profiles" / "hgx-b200-8gpu.json").read_text(encoding="utf-8"))
    total = dict(truth["gpu"], **truth.get("per_gpu", {}).get("1", {}))["memory_total_mib"]
    average = dict(truth["gpu"], **truth.get("per_gpu", {}).get("1", {}))["power_draw_w"]
    samples = run_collector(tmp_path, {"backend": backend, "hostname_label": False},
                            {"LD_LIBRARY_PATH": os.path.dirname(fake_nvml_library)})
    assert samples[("gpufleet_gpu_facts_ok", (("state", "ok"), ("source", backend)))] == 1
    assert [value(samples, name, 1) for name in ("DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_RESERVED",
                                                 "DCGM_FI_DEV_FB_FREE")] == [30000, 512, total - 512 - 30000]
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE", 1) == pytest.approx(average)
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE_INSTANT", 1) == 612.5
    assert value(samples, "DCGM_FI_DEV_POWER_USAGE_INSTANT", 0) == pytest.approx(average)
