"""The GPU metrics scraped from the node's exporter equal what the emulated hardware reports."""
import json

import pytest

from conftest import of_gpu

DCGM_LABELS = ["gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION"]


def test_every_gpu_with_dcgm_exporters_labels(host, scrape, hardware):
    metrics, (rows, _links) = scrape(), hardware()
    assert len(metrics["DCGM_FI_DEV_GPU_TEMP"]) == len(rows)
    for index, row in rows.items():
        labels, _value = of_gpu(metrics, "DCGM_FI_DEV_GPU_TEMP", index)
        assert sorted(labels) == sorted(DCGM_LABELS)
        assert labels["UUID"] == row["uuid"] and labels["modelName"] == row["name"]
        assert labels["pci_bus_id"] == row["pci.bus_id"] and labels["device"] == "nvidia%d" % index
        assert labels["DCGM_FI_DRIVER_VERSION"] == row["driver_version"]
        assert labels["Hostname"] == host.check_output("hostname")


def test_values_equal_the_emulated_hardware(scrape, hardware):
    metrics, (rows, _links) = scrape(), hardware()
    for index, row in rows.items():
        assert of_gpu(metrics, "DCGM_FI_DEV_GPU_TEMP", index)[1] == int(row["temperature.gpu"])
        assert of_gpu(metrics, "DCGM_FI_DEV_GPU_UTIL", index)[1] == int(row["utilization.gpu"])
        assert of_gpu(metrics, "DCGM_FI_DEV_POWER_USAGE", index)[1] == pytest.approx(float(row["power.draw"]), abs=0.01)
        assert of_gpu(metrics, "DCGM_FI_DEV_ENFORCED_POWER_LIMIT", index)[1] == pytest.approx(
            float(row["enforced.power.limit"]), abs=0.01)
        # as DCGM reads nvmlMemory_v2_t: used (without the reserved memory), reserved and free make up the frame buffer
        assert (of_gpu(metrics, "DCGM_FI_DEV_FB_USED", index)[1] + of_gpu(metrics, "DCGM_FI_DEV_FB_RESERVED", index)[1]
                + of_gpu(metrics, "DCGM_FI_DEV_FB_FREE", index)[1] == int(row["memory.total"]))
        assert of_gpu(metrics, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", index)[1] == int(row["clocks_event_reasons.active"], 16)
        assert of_gpu(metrics, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", index)[1] == int(row["ecc.errors.uncorrected.volatile.total"])
        assert of_gpu(metrics, "DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", index)[1] == int(row["ecc.errors.corrected.volatile.total"])
        assert of_gpu(metrics, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", index)[1] == int(row["ecc.errors.uncorrected.aggregate.total"])
        assert of_gpu(metrics, "DCGM_FI_DEV_ROW_REMAP_PENDING", index)[1] is not None


def test_nvlink_links_equal_nvlink_s(scrape, hardware):
    metrics, (rows, links) = scrape(), hardware()
    for index in rows:
        up = of_gpu(metrics, "gpufleet_nvlink_links_up", index)[1]
        if index not in links:
            assert up is None  # no NVLink reported: no sample, never a 0
            continue
        assert up == links[index]["up"]
        assert of_gpu(metrics, "gpufleet_nvlink_all_links_down", index)[1] == (1 if links[index]["all_down"] else 0)
        if not links[index]["all_down"]:
            assert of_gpu(metrics, "gpufleet_nvlink_links_down", index)[1] == links[index]["down"]


def test_health_is_the_fleets_verdict(scrape, verdict):
    metrics, health = scrape(), verdict()
    assert metrics["gpufleet_node_healthy"][0][1] == (0 if health["failures"] else 1)
    assert metrics["gpufleet_node_health_failures"][0][1] == len(health["failures"])
    for labels, value in metrics["gpufleet_gpu_healthy"]:
        named = [failure for failure in health["failures"] if ("GPU%s:" % labels["gpu"]) in failure
                 or ("GPU%s " % labels["gpu"]) in failure]
        assert value == (0 if named else 1), named


def test_both_backends_give_the_same_metrics(host):
    """The collector run again with the nvidia-smi backend, into another file: the same samples as NVML's."""
    settings = json.loads(host.file("/etc/gpufleet/gpu-metrics.json").content_string)
    assert settings["backend"] == "auto"
    runs = {}
    for backend in ("nvml", "nvidia_smi"):
        path = "/tmp/gpu-metrics-%s" % backend
        host.run_expect([0], "mkdir -p %s" % path)
        other = dict(settings, backend=backend, textfile=path + "/gpu.prom")
        host.run_expect([0], "printf '%%s' '%s' > %s/settings.json" % (json.dumps(other), path))
        host.run_expect([0], "python3 /usr/local/lib/gpufleet/gpufleet-gpu-metrics.py %s/settings.json" % path)
        runs[backend] = [line for line in host.file(path + "/gpu.prom").content_string.splitlines()
                         if not line.startswith(("gpufleet_gpu_facts_ok", "gpufleet_gpu_metrics_timestamp"))]
        host.run_expect([0], "rm -rf %s" % path)
    driver = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()[0]
    if int(driver.split(".")[0]) < 570:
        # -q -x prints the instant power reading from driver 570 only; NVML has had its field (186) since 535
        instant = [line for line in runs["nvml"] if "DCGM_FI_DEV_POWER_USAGE_INSTANT" in line]
        assert any(line.startswith("DCGM_FI_DEV_POWER_USAGE_INSTANT{") for line in instant)
        assert not any("DCGM_FI_DEV_POWER_USAGE_INSTANT" in line for line in runs["nvidia_smi"])
        runs["nvml"] = [line for line in runs["nvml"] if line not in instant]
    assert runs["nvml"] == runs["nvidia_smi"]
    assert any(line.startswith("DCGM_FI_DEV_GPU_TEMP{") for line in runs["nvml"])
