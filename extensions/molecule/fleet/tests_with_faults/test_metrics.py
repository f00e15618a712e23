"""The metrics after plant-faults.yml (which also runs each node's GPU metrics service again): the planted faults
show in the samples of the GPUs they were planted on, and the node's verdict is the one validate gives."""
import pathlib
import sys

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[1]))
from scrape import scrape  # noqa: E402  pylint: disable=wrong-import-position

testinfra_hosts = ["gpufleet-fleet-hgx", "gpufleet-fleet-pairs", "gpufleet-fleet-pcie"]


def test_the_planted_faults_show_in_the_metrics(host):
    metrics = scrape(host)
    name = host.backend.get_hostname()
    if name == "gpufleet-fleet-hgx":
        assert metrics["gpufleet_node_healthy"][None] == 1
        return
    assert metrics["gpufleet_node_healthy"][None] == 0
    if name == "gpufleet-fleet-pairs":
        assert metrics["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL"]["1"] == 2
        assert metrics["DCGM_FI_DEV_ROW_REMAP_PENDING"]["2"] == 1
        assert metrics["gpufleet_nvlink_all_links_down"]["3"] == 1
        assert metrics["gpufleet_gpu_healthy"]["1"] == 0 and metrics["gpufleet_gpu_healthy"]["2"] == 0
    else:
        assert metrics["DCGM_FI_DEV_GPU_TEMP"]["3"] == 91
        assert metrics["gpufleet_gpu_healthy"]["3"] == 0
