"""Every node of the fleet serves its GPU metrics (gpufleet.node.gpu_monitoring, on the port its host_vars give it):
scraped from inside the node, one sample per GPU the emulated hardware has, the temperatures it reports, and the
healthy verdict validate gives the healthy fleet. The faulted fleet is checked in tests_with_faults/test_metrics.py."""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from scrape import scrape  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ["gpufleet-fleet-hgx", "gpufleet-fleet-pairs", "gpufleet-fleet-pcie"]


def temperatures(host):
    rows = host.check_output("nvidia-smi --query-gpu=index,temperature.gpu --format=csv,noheader,nounits")
    return dict((index.strip(), float(value)) for index, value in (row.split(",") for row in rows.splitlines()))


@pytest.fixture(name="metrics")
def fixture_metrics(host):
    # A fresh sample: the timer's service, run now, rather than waiting for its next tick.
    host.run_expect([0], "systemctl start gpufleet-gpu-metrics.service")
    return scrape(host)


def test_one_sample_per_gpu_with_the_hardware_temperatures(host, metrics):
    expected = temperatures(host)
    assert metrics["DCGM_FI_DEV_GPU_TEMP"] == expected
    assert metrics["gpufleet_gpu_count"][None] == len(expected)


def test_the_healthy_fleet_is_healthy_in_its_metrics(metrics):
    assert metrics["gpufleet_node_healthy"][None] == 1
    assert set(metrics["gpufleet_gpu_healthy"].values()) == {1}
    assert set(metrics["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"].values()) == {0}
