"""After plant-faults.yml: the metrics follow the faults (temperature, ECC, row remapping, clock events, NVLink,
the health verdict), still equal to what the emulated hardware reports."""
import json

from conftest import of_gpu


def faults(host):
    return json.loads(host.file("/etc/gpufleet-emulator/faults.json").content_string)


def test_the_planted_values_are_scraped(host, scrape, hardware):
    metrics, (rows, _links) = scrape(), hardware()
    for index, planted in faults(host).get("gpus", {}).items():
        index = int(index)
        if "temperature_c" in planted:
            assert of_gpu(metrics, "DCGM_FI_DEV_GPU_TEMP", index)[1] == planted["temperature_c"] == int(
                rows[index]["temperature.gpu"])
        if "ecc_dram_uncorrectable_volatile" in planted:
            assert of_gpu(metrics, "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", index)[1] == planted["ecc_dram_uncorrectable_volatile"]
            assert of_gpu(metrics, "DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", index)[1] == planted["ecc_dram_uncorrectable_aggregate"]
        if "remapped_rows" in planted:
            assert of_gpu(metrics, "DCGM_FI_DEV_ROW_REMAP_PENDING", index)[1] == 1
            assert of_gpu(metrics, "DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", index)[1] == planted["remapped_rows"]["uncorrectable"]
        if "clock_event_reasons" in planted:
            assert of_gpu(metrics, "DCGM_FI_DEV_CLOCKS_EVENT_REASONS", index)[1] == int(
                rows[index]["clocks_event_reasons.active"], 16) == 0x41  # gpu_idle | hw_thermal_slowdown (nvml.h)
            reasons = dict((labels["reason"], value) for labels, value in metrics["gpufleet_clock_event_reason_active"]
                           if labels["gpu"] == str(index))
            assert reasons["hw_thermal_slowdown"] == 1


def test_nvlink_down_is_scraped(host, scrape, hardware):
    planted = faults(host)
    metrics, (_rows, links) = scrape(), hardware()
    for first, _second in planted.get("inactive_links", []):
        assert of_gpu(metrics, "gpufleet_nvlink_links_down", first)[1] == links[first]["down"] >= 1
    for index in planted.get("all_links_inactive", []):
        assert links[index]["all_down"]
        assert of_gpu(metrics, "gpufleet_nvlink_all_links_down", index)[1] == 1
        assert of_gpu(metrics, "gpufleet_nvlink_links_up", index)[1] == 0


def test_the_health_verdict_fails_the_faulty_gpus(host, scrape, verdict):
    metrics, health = scrape(), verdict()
    assert health["failures"] and metrics["gpufleet_node_healthy"][0][1] == 0
    assert metrics["gpufleet_node_health_failures"][0][1] == len(health["failures"])
    unhealthy = sorted(int(labels["gpu"]) for labels, value in metrics["gpufleet_gpu_healthy"] if value == 0)
    planted = faults(host)
    expected = set(int(index) for index in planted.get("gpus", {}))
    expected |= set(planted.get("all_links_inactive", [])) | set(pair[0] for pair in planted.get("inactive_links", []))
    assert set(unhealthy) == expected
