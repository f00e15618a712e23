"""gpu_facts on the node, for each emulated hardware profile and each backend: count, matrix, pairs, state.

The node has both stand-ins of tests/emulator: nvidia-smi (the emulator) and libnvidia-ml.so.1 (the fake NVML
library, found by the dynamic loader before any real one), driven by the same profile.
"""
import pathlib
import sys

import pytest

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[4] / "tools" / "bench"))
import compare_backends  # noqa: E402  pylint: disable=wrong-import-position

BACKENDS = ["nvml", "nvidia_smi"]
HEALTHY = ["hgx-a100-8gpu", "pairs-4gpu", "pcie-4gpu"]


def test_auto_takes_nvml_on_the_node(gather):
    gpu = gather("hgx-a100-8gpu")
    assert gpu["source"] == "nvml", gpu["errors"]
    assert gpu["state"] == "ok", gpu["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_nvswitch_node(gather, backend):
    gpu = gather("hgx-a100-8gpu", backend=backend)
    assert gpu["state"] == "ok" and gpu["source"] == backend
    assert gpu["count"] == 8
    assert gpu["driver_version"] == "535.183.01"
    assert gpu["cuda_driver_version"] == "12.2"
    assert gpu["topology"]["matrix"]["GPU0"] == dict(("GPU%d" % i, "NV12") for i in range(1, 8))
    assert gpu["topology"]["nvlink_pairs"] == 28
    assert gpu["topology"]["nvlink_all_to_all"] is True
    assert gpu["topology"]["nvswitch"] is True
    assert gpu["topology"]["nvlink_links_active"] == 96
    assert gpu["pci"] == {"nvidia_gpus": 8, "nvswitches": 6}
    assert [d["pci_bus_id"] for d in gpu["devices"]][:2] == ["00000000:07:00.0", "00000000:0A:00.0"]


def test_nvml_sees_the_switches_as_link_ends(gather):
    gpu = gather("hgx-a100-8gpu", backend="nvml")
    assert {link["remote_device_type"] for link in gpu["topology"]["nvlink"]["GPU0"]} == {"switch"}
    assert gpu["devices"][0]["compute_capability"] == "8.0"


@pytest.mark.parametrize("backend", BACKENDS)
def test_bridged_pairs(gather, backend):
    gpu = gather("pairs-4gpu", backend=backend)
    assert gpu["count"] == 4
    assert gpu["topology"]["matrix"]["GPU0"] == {"GPU1": "NV4", "GPU2": "SYS", "GPU3": "SYS"}
    assert gpu["topology"]["nvlink_pair_list"] == [["GPU0", "GPU1", 4], ["GPU2", "GPU3", 4]]
    assert gpu["topology"]["nvlink_all_to_all"] is False
    assert gpu["topology"]["cpu_affinity"]["GPU2"] == "1,3,5,7,9,11"


@pytest.mark.parametrize("backend", BACKENDS)
def test_pcie_only(gather, backend):
    gpu = gather("pcie-4gpu", backend=backend)
    assert gpu["state"] == "ok", gpu["message"]
    assert gpu["pci"] == {"nvidia_gpus": 4, "nvswitches": 0}
    assert gpu["topology"]["nvlink_pairs"] == 0
    assert gpu["topology"]["nvlink"] == {}
    assert set(gpu["topology"]["matrix"]["GPU3"].values()) == {"NODE"}
    assert gpu["topology"]["shape"] == "4 GPUs, no NVLink"
    assert gpu["topology"]["nvswitch"] is False


@pytest.mark.parametrize("profile", HEALTHY)
def test_both_backends_give_equal_facts(gather, profile):
    nvml = gather(profile, backend="nvml")
    smi = gather(profile, backend="nvidia_smi")
    assert compare_backends.differences(nvml, smi) == []


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("profile, state", [("mismatch", "driver_library_mismatch"), ("no-devices", "no_devices")])
def test_failure_states(gather, profile, state, backend):
    gpu = gather(profile, backend=backend)
    assert gpu["state"] == state
    assert gpu["message"]


@pytest.mark.parametrize("backend", BACKENDS)
def test_hung_gpu_times_out(gather, backend):
    gpu = gather("hung", timeout=2, backend=backend)
    assert gpu["state"] == "timeout"


@pytest.mark.parametrize("backend", BACKENDS)
def test_planted_faults_are_reported(gather, backend):
    faults = {"inactive_links": [[2, 7]], "gpus": {"1": {"ecc_sram_uncorrectable_volatile": 2,
                                                         "clock_event_reasons": ["hw_thermal_slowdown"]}}}
    gpu = gather("hgx-a100-8gpu", faults=faults, backend=backend)
    assert gpu["topology"]["nvlink_links_inactive"] == 1
    assert gpu["topology"]["nvlink"]["GPU2"][7]["active"] is False
    assert gpu["devices"][1]["ecc_errors_uncorrected_volatile"] == 2
    assert gpu["devices"][1]["clock_event_reasons_active"] == ["hw_thermal_slowdown"]
    assert gpu["devices"][0]["ecc_errors_uncorrected_volatile"] == 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_lost_gpu(gather, backend):
    gpu = gather("pairs-4gpu", faults={"lost_gpus": [2]}, backend=backend)
    assert gpu["state"] == "gpu_lost", gpu["message"]
    assert gpu["count"] == 3 and len(gpu["lost_gpus"]) == 1


def test_inactive_link_file_still_works(gather, host):
    host.run_expect([0], "echo '2 7' > /etc/gpufleet-emulator/inactive_links")
    gpu = gather("hgx-a100-8gpu", backend="nvidia_smi")
    assert gpu["topology"]["nvlink_links_inactive"] == 1
    assert gpu["topology"]["nvlink"]["GPU2"][7]["active"] is False


def test_check_mode(gather):
    gpu = gather("hgx-a100-8gpu", check=True)
    assert gpu["state"] == "ok" and gpu["count"] == 8
