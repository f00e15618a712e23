"""The power limits and locked clocks are in effect on the idle GPUs, read back through nvidia-smi and gpu_facts
(both backends: the nvidia-smi emulator and the fake NVML library); the busy GPU 3 was left as it was."""
import json

import pytest

from conftest import BUSES, BUSY


def test_nvidia_smi_reports_500_w_on_the_idle_gpus_and_700_w_on_the_busy_one(host):
    out = host.check_output("nvidia-smi --query-gpu=pci.bus_id,power.limit --format=csv,noheader,nounits")
    limits = dict(line.split(", ") for line in out.splitlines())
    assert limits == dict((bus, "700.00" if bus == BUSY else "500.00") for bus in BUSES)


@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_gpu_facts_reads_the_limits_back(host, backend):
    facts = host.ansible("gpufleet.node.gpu_facts", "backend=%s" % backend, check=False)["ansible_facts"]["gpu"]
    assert facts["state"] == "ok"
    assert dict((d["pci_bus_id"], d["power_limit_w"]) for d in facts["devices"]) == \
        dict((bus, 700.0 if bus == BUSY else 500.0) for bus in BUSES)


def test_clocks_are_locked_on_the_idle_gpus_only(host):
    """Locked clocks are not readable through nvidia-smi; the emulator keeps what -lgc set."""
    settings = json.loads(host.file("/etc/gpufleet-emulator/settings.json").content_string)["gpus"]
    assert sorted(settings) == ["0", "1", "2", "4", "5", "6", "7"]
    assert all(entry == {"power_limit_w": 500.0, "locked_clocks_mhz": [1200, 1980]} for entry in settings.values())


def test_the_busy_gpu_is_still_busy(host):
    out = host.check_output("nvidia-smi --query-compute-apps=gpu_bus_id,pid --format=csv,noheader")
    assert out.strip() == "%s, 4242" % BUSY
