"""Fleet validation and the topology picture: node health, version drift and the SVG's edges."""
import copy
import re

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.fleet import (
    gpufleet_node_health, gpufleet_topology_svg, gpufleet_version_drift)


def healthy(**topology):
    device = {"index": 0, "persistence_mode": True, "ecc_errors_uncorrected_volatile": 0,
              "retired_pages": {"pending": False}, "pcie": {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16}}
    gpu = {"state": "ok", "count": 2, "pci": {"nvidia_gpus": 2},  # devices: two independent copies
           "devices": [copy.deepcopy(device), dict(copy.deepcopy(device), index=1)],
           "topology": {"gpus": ["GPU0", "GPU1"], "nvswitch": False, "nvlink_pair_list": [["GPU0", "GPU1", 4]],
                        "nvlink": {"GPU0": [{"link": 0, "active": True}], "GPU1": [{"link": 0, "active": True}]}}}
    gpu["topology"].update(topology)
    return gpu


def test_healthy_node():
    assert gpufleet_node_health(healthy(), {}) == {"failures": [], "warnings": []}


def test_every_failure_is_named():
    gpu = healthy(nvswitch=True)
    gpu["pci"]["nvidia_gpus"] = 3
    gpu["topology"]["nvlink"]["GPU1"] = [{"link": 0, "active": True}, {"link": 5, "active": False}]
    gpu["devices"][0].update(persistence_mode=False, ecc_errors_uncorrected_volatile=2, retired_pages={"pending": True})
    gpu["devices"][1]["pcie"].update(width_current=8, gen_current=1)
    health = gpufleet_node_health(gpu, {"fabricmanager_active": False})
    assert health["failures"] == [
        "GPUs: 3 on the PCI bus, nvidia-smi sees 2",
        "NVLink inactive: GPU1 link 5",
        "GPU0: persistence mode off",
        "GPU0: 2 uncorrected ECC errors",
        "GPU0: retired pages pending (reset the GPU)",
        "GPU1: PCIe x8 of x16",
        "fabric manager not active on an NVSwitch system",
    ]
    assert health["warnings"] == ["GPU1: PCIe gen 1 of 4 (normal when idle)"]


def test_a_silent_driver_is_one_failure():
    health = gpufleet_node_health({"state": "driver_not_loaded", "message": "no module"})
    assert health["failures"] == ["driver: driver_not_loaded (no module)"]


def test_drift_against_the_group_majority():
    nodes = {
        "a": {"group": "hgx", "versions": {"driver": "535.183.01", "cuda": "12.1.1", "nccl": "2.18.3", "torch": "2.5.1"}},
        "b": {"group": "hgx", "versions": {"driver": "535.183.01", "cuda": "12.1.1", "nccl": "2.18.3", "torch": "2.5.1"}},
        "c": {"group": "hgx", "versions": {"driver": "535.161.08", "cuda": "12.1.1", "nccl": None, "torch": "2.5.1"}},
        "d": {"group": "pcie", "versions": {"driver": "535.161.08", "cuda": None, "nccl": None, "torch": None}},
    }
    drift = gpufleet_version_drift(nodes)
    assert drift == {"a": [], "b": [], "d": [],
                     "c": ["driver 535.161.08, the group runs 535.183.01", "nccl missing, the group runs 2.18.3"]}
    with pytest.raises(AnsibleFilterError):
        gpufleet_version_drift([])


def test_svg_edges_match_the_pairs():
    gpu = healthy(gpus=["GPU0", "GPU1", "GPU2"], nvswitch=True,
                  nvlink_pair_list=[["GPU0", "GPU1", 12], ["GPU0", "GPU2", 12], ["GPU1", "GPU2", 6]])
    gpu["topology"]["nvlink"]["GPU2"] = [{"link": 3, "active": False}]
    svg = gpufleet_topology_svg(gpu, "node <1>")
    edges = re.findall(r'<g class="bond( degraded)?" data-a="(\w+)" data-b="(\w+)" data-links="(\d+)"', svg)
    assert edges == [("", "GPU0", "GPU1", "12"), (" degraded", "GPU0", "GPU2", "12"), (" degraded", "GPU1", "GPU2", "6")]
    assert svg.count("<circle") == 3 and "NVSwitch" in svg and "node &lt;1&gt;" in svg
    assert svg.startswith("<svg") and svg.endswith("</svg>")


def test_svg_of_a_node_without_gpus():
    svg = gpufleet_topology_svg({"state": "not_installed", "topology": {}})
    assert 'data-gpus="0"' in svg and "not_installed" in svg


def test_report_node_from_host_vars():
    from ansible_collections.gpufleet.node.plugins.filter.fleet import gpufleet_report_node
    gpu = healthy()
    gpu["summary"] = {"models": {"NVIDIA A100-SXM4-80GB": 2}}
    gpu["topology"].update(nvlink_links_active=2, nvlink_links_inactive=0)
    node = {"group": "hgx", "versions": {}, "health": {"failures": [], "warnings": []}, "drift": []}
    entry = gpufleet_report_node({"inventory_hostname": "n1", "ansible_facts": {"gpu": gpu}, "gpufleet_node": node})
    assert entry["host"] == "n1" and entry["node"] is node and entry["state"] == "ok"
    assert entry["topology"]["nvlink_pair_list"] == [["GPU0", "GPU1", 4]] and "nvlink" not in entry["topology"]
    with pytest.raises(AnsibleFilterError):
        gpufleet_report_node({"inventory_hostname": "n1"})


def test_persistence_off_is_a_failure_unless_the_node_is_meant_to_run_without_it():
    gpu = {"state": "ok", "count": 1, "pci": {"nvidia_gpus": 1}, "topology": {},
           "devices": [{"index": 0, "persistence_mode": False}]}
    assert gpufleet_node_health(gpu)["failures"] == ["GPU0: persistence mode off"]
    assert gpufleet_node_health(gpu, {"persistence_expected": False})["failures"] == []
