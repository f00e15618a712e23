"""The all-reduce bandwidth a topology allows (over the shared captures' real topologies), and the filter over
the nccl-tests parser (the parser itself: tests/unit/plugins/module_utils/test_nccl_tests.py)."""
import pathlib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.nccl import (
    FilterModule, nccl_expected_busbw, nccl_tests_result, nvlink_ring_width)
from ansible_collections.gpufleet.node.plugins.module_utils.nccl_tests import (
    NcclTestsParseError, parse_all_reduce_perf)
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import parse_topology

HERE = pathlib.Path(__file__).resolve().parent
CAPTURES = HERE.parent / "module_utils" / "fixtures" / "nvidia-smi"
NCCL_TESTS = HERE.parent / "module_utils" / "fixtures" / "nccl-tests"


def facts_from_capture(name, **extra):
    topology = parse_topology((CAPTURES / name / "topo-m.txt").read_text())
    gpu = {"topology": {"gpus": topology["gpus"], "matrix": topology["matrix"], "nvswitch": False, "nvlink": {}},
           "devices": []}
    gpu["topology"].update(extra)
    return gpu


# Capture, fabric, expected bus bandwidth at efficiency 0.75 (25 GB/s per NVLink; PCIe gen 4 x16 assumed).
@pytest.mark.parametrize("capture, fabric, expected", [
    ("02-aws-p4d-24xlarge-a100", "nvswitch", 225.0),                 # 8x A100, NV12 through NVSwitch (about 230 measured)
    ("18-a100-8gpu-11nic-mlx5-columns-numa-range", "nvswitch", 225.0),
    ("03-aws-p5-48xlarge-h100", "nvswitch", 337.5),                  # 8x H100, NV18
    ("27-a100-sxm-64gb-4gpu-nv4-4nic", "nvlink_ring", 225.0),        # 4x A100 full mesh, 3 x NV4 per GPU
    ("19-v100-sxm2-8gpu-hybrid-cube-mesh-cpu-affinity-only", "nvlink_ring", 112.5),  # 6 links per V100
    ("26-4gpu-nvlink-bridge-pairs-nv4-interleaved-cpus", "pcie", 23.6),  # pairs: the ring crosses PCIe
    ("49-h100-nvl-8gpu-bridge-pairs-legend-typo", "pcie", 23.6),
    ("04-aws-g6e-12xlarge-4gpu-pcie-node", "pcie", 23.6),
    ("16-pcie-8gpu-all-sys-tabs", "pcie", 23.6),
])
def test_expectation_over_real_topologies(capture, fabric, expected):
    result = nccl_expected_busbw(facts_from_capture(capture))
    assert result["fabric"] == fabric
    assert result["expected_busbw_gbps"] == expected
    assert ("%g GB/s" % result["link_gbps"] if fabric != "pcie" else "PCIe") in result["basis"]


def test_nvswitch_from_pci_and_measured_link_speed():
    """With the PCI view and nvlink -s speeds (26.562 GB/s on H100) the figure follows them."""
    links = [{"link": i, "active": True, "speed_gbps": 26.562} for i in range(18)]
    gpu = facts_from_capture("03-aws-p5-48xlarge-h100", nvswitch=True, nvlink={"GPU0": links})
    result = nccl_expected_busbw(gpu)
    assert result["fabric"] == "nvswitch"
    assert result["fabric_gbps"] == pytest.approx(18 * 26.562, abs=0.01)
    assert result["expected_busbw_gbps"] == pytest.approx(358.6, abs=0.1)


def test_pcie_from_the_devices_link():
    gpu = facts_from_capture("04-aws-g6e-12xlarge-4gpu-pcie-node")
    gpu["devices"] = [{"pcie": {"gen_max": 4, "width_max": 16}}, {"pcie": {"gen_max": 3, "width_max": 16}}]
    result = nccl_expected_busbw(gpu, 0.5)
    assert result["fabric_gbps"] == pytest.approx(15.76, abs=0.01)   # the slowest GPU's gen 3 x16
    assert result["expected_busbw_gbps"] == 7.9


def test_a_broken_link_breaks_the_ring():
    """One pair of a 4-GPU full mesh without NVLink still leaves a ring; two such pairs through one GPU do not."""
    gpu = facts_from_capture("27-a100-sxm-64gb-4gpu-nv4-4nic")
    matrix = gpu["topology"]["matrix"]
    matrix["GPU0"]["GPU1"] = matrix["GPU1"]["GPU0"] = "SYS"
    assert nvlink_ring_width(gpu["topology"]["gpus"], matrix) == 4
    assert nccl_expected_busbw(gpu)["expected_busbw_gbps"] == 150.0   # GPU0 and GPU1 keep 8 links each
    matrix["GPU0"]["GPU2"] = matrix["GPU2"]["GPU0"] = "SYS"
    assert nccl_expected_busbw(gpu)["fabric"] == "pcie"


def test_one_gpu_has_no_expectation():
    result = nccl_expected_busbw({"topology": {"gpus": ["GPU0"], "matrix": {}}})
    assert result["fabric"] == "none" and result["expected_busbw_gbps"] is None


@pytest.mark.parametrize("bad, efficiency", [({}, 0.75), ("text", 0.75), ({"topology": {}}, 0), ({"topology": {}}, "x")])
def test_bad_input_is_an_error(bad, efficiency):
    with pytest.raises(AnsibleFilterError):
        nccl_expected_busbw(bad, efficiency)


# --- nccl_tests_result: a thin wrapper over module_utils.nccl_tests ----------------------------------------

def test_the_filter_returns_what_the_parser_reads():
    text = (NCCL_TESTS / "all_reduce_perf-4gpu-wrong.txt").read_text(encoding="utf-8")
    assert FilterModule().filters()["nccl_tests_result"] is nccl_tests_result
    assert nccl_tests_result(text) == parse_all_reduce_perf(text)


@pytest.mark.parametrize("text", ["", "NCCL failure common.cu:1000 'unhandled cuda error'\n", None])
def test_text_the_parser_cannot_read_is_a_filter_error(text):
    with pytest.raises(AnsibleFilterError, match="^nccl_tests_result: ") as raised:
        nccl_tests_result(text)
    assert isinstance(raised.value.__cause__, NcclTestsParseError)
