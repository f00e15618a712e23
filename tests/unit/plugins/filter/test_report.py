"""The fleet report's drawing (plugins/filter/report.py): the topology picture of a node, read back as XML, and a
node's entry in the report with its runtime, metrics endpoint and health line.

The facts follow the field names of gpufleet.node.gpu_facts; the picture's data-* attributes are its documented
interface (gpufleet_topology_svg.yml).
"""
import xml.etree.ElementTree as ET

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.report import (
    gpufleet_report_node, gpufleet_topology_svg, metrics_endpoint, metrics_note, runtime_line, self_converge_line)


def facts(**topology):
    """gpu facts of a node with two GPUs and one NVLink bond of 4 links; topology keys given replace its own."""
    gpu = {"state": "ok", "count": 2, "attached_gpus": 2, "pci": {"nvidia_gpus": 2, "nvswitches": 0},
           "devices": [{"index": 0, "name": "NVIDIA A100-SXM4-80GB"}, {"index": 1, "name": "NVIDIA A100-SXM4-80GB"}],
           "topology": {"gpus": ["GPU0", "GPU1"], "nvswitch": False, "nvlink_pair_list": [["GPU0", "GPU1", 4]],
                        "nvlink_links_active": 2, "nvlink_links_inactive": 0, "nvlink_gpus_all_inactive": [],
                        "nvlink": {"GPU0": [{"link": 0, "active": True}], "GPU1": [{"link": 0, "active": True}]}}}
    gpu["topology"].update(topology)
    return gpu


SVG = "{http://www.w3.org/2000/svg}"


def parse(svg):
    """The picture as XML (it must be well formed) and its bonds as (class, a, b, links)."""
    root = ET.fromstring(svg)
    bonds = [(g.get("class"), g.get("data-a"), g.get("data-b"), int(g.get("data-links")))
             for g in root.iter(SVG + "g") if (g.get("class") or "").split()[:1] == ["bond"]]
    return root, bonds


def eight_gpus(nvswitch):
    gpus = ["GPU%d" % i for i in range(8)]
    gpu = facts(gpus=gpus, nvswitch=nvswitch,
                nvlink_pair_list=[[a, b, 12] for i, a in enumerate(gpus) for b in gpus[i + 1:]],
                nvlink=dict((g, [{"link": n, "active": True} for n in range(12)]) for g in gpus),
                numa_affinity=dict((g, "0" if i < 4 else "1") for i, g in enumerate(gpus)),
                cpu_affinity=dict((g, "0-23" if i < 4 else "24-47") for i, g in enumerate(gpus)),
                gpu_nic={"GPU0": {"mlx5_0": "PIX", "mlx5_1": "SYS"}, "GPU1": {"mlx5_0": "PXB", "mlx5_1": "SYS"},
                         "GPU4": {"mlx5_0": "SYS", "mlx5_1": "PXB"}})
    gpu["pci"]["nvswitches"] = 6 if nvswitch else 0
    return gpu


def test_svg_of_an_nvswitch_node_wires_each_gpu_to_the_switch():
    gpu = eight_gpus(True)
    gpu["topology"]["nvlink"]["GPU5"][3]["active"] = False
    root, bonds = parse(gpufleet_topology_svg(gpu, "hgx <1>"))
    assert root.get("aria-label") == "hgx <1>" and root.get("data-switch") == "true"
    assert [(a, b) for _cls, a, b, _n in bonds] == [("GPU%d" % i, "NVSwitch") for i in range(8)]   # not 28 GPU pairs
    assert [n for _cls, _a, _b, n in bonds] == [12, 12, 12, 12, 12, 11, 12, 12]
    assert [cls for cls, a, _b, _n in bonds if "degraded" in cls] == ["bond switch-link degraded"]
    assert len([g for g in root.iter(SVG + "g") if g.get("class") == "switch"]) == 1
    assert [t.text for t in root.iter(SVG + "text") if t.get("class") == "down"] == ["1 down"]


def test_svg_groups_gpus_by_numa_node_with_their_nearest_nics():
    root, _bonds = parse(gpufleet_topology_svg(eight_gpus(False)))
    groups = [g.get("data-label") for g in root.iter(SVG + "g") if g.get("class") == "numa"]
    assert groups == [u"NUMA node 0 \u00b7 CPUs 0-23", u"NUMA node 1 \u00b7 CPUs 24-47"]
    links = sorted((g.get("data-gpu"), g.get("data-nic"), g.get("data-rel")) for g in root.iter(SVG + "g")
                   if g.get("class") == "nic-link")
    # GPU1 sees mlx5_0 only through PXB: that is its nearest; SYS NICs are not drawn
    assert links == [("GPU0", "mlx5_0", "PIX"), ("GPU1", "mlx5_0", "PXB"), ("GPU4", "mlx5_1", "PXB")]
    assert root.get("data-nics") == "2" and root.get("data-groups") == "2"


def test_svg_draws_no_nics_where_the_backend_gives_none():
    gpu = eight_gpus(False)
    gpu["topology"]["gpu_nic"] = None
    root, bonds = parse(gpufleet_topology_svg(gpu))
    assert root.get("data-nics") == "0" and len(bonds) == 28


def test_svg_bonds_match_the_pairs_and_mark_inactive_links():
    gpu = facts(gpus=["GPU0", "GPU1", "GPU2", "GPU3"], nvlink_pair_list=[["GPU0", "GPU1", 4], ["GPU2", "GPU3", 3]],
                nvlink_gpus_all_inactive=["GPU1"])
    gpu["topology"]["nvlink"]["GPU2"] = [{"link": 3, "active": False}]
    svg = gpufleet_topology_svg(gpu, "node <1>")
    root, bonds = parse(svg)
    assert bonds == [("bond degraded", "GPU0", "GPU1", 4), ("bond degraded", "GPU2", "GPU3", 3)]
    assert [t.text for t in root.iter(SVG + "text") if t.get("class") == "links"] == ["NV4", "NV3"]
    assert [t.text for t in root.iter(SVG + "text") if t.get("class") == "down"] == ["all links down", "1 down"]
    assert root.get("data-switch") == "false" and root.get("data-bonds") == "2" and root.get("data-gpus") == "4"
    assert "node &lt;1&gt;" in svg and svg.startswith("<svg") and svg.endswith("</svg>")


def test_svg_has_a_legend():
    root, _bonds = parse(gpufleet_topology_svg(facts()))
    legend = [g for g in root.iter(SVG + "g") if g.get("class") == "legend"]
    assert len(legend) == 1
    words = [t.text for t in legend[0].iter(SVG + "text")]
    assert words == ["GPU (red: links down)", "NVSwitch", "NVLink bond (NV# links)", "inactive NVLink", "NIC, PIX (PXB dotted)",
                     "NUMA node"]


def test_svg_of_a_node_without_gpus():
    svg = gpufleet_topology_svg({"state": "not_installed", "topology": {}})
    root, bonds = parse(svg)
    assert root.get("data-gpus") == "0" and bonds == [] and "not_installed" in svg


def test_report_node_from_host_vars():
    gpu = facts()
    gpu["summary"] = {"models": {"NVIDIA A100-SXM4-80GB": 2}}
    node = {"group": "hgx", "versions": {}, "health": {"failures": [], "warnings": ["w"]}, "drift": []}
    entry = gpufleet_report_node({"inventory_hostname": "n1", "ansible_facts": {"gpu": gpu}, "gpufleet_node": node})
    assert entry["host"] == "n1" and entry["node"] is node and entry["state"] == "ok"
    assert entry["health"] == {"ok": True, "reasons": [], "warnings": ["w"], "line": "ok"}
    assert entry["topology"]["nvlink_pair_list"] == [["GPU0", "GPU1", 4]] and "nvlink" not in entry["topology"]
    assert entry["gpu"] is gpu    # the JSON carries every fact
    failing = dict(node, health={"failures": ["GPU1: reset required"], "warnings": []}, drift=["nccl missing, the group runs 2.18.3"])
    entry = gpufleet_report_node({"inventory_hostname": "n2", "ansible_facts": {"gpu": gpu}, "gpufleet_node": failing})
    assert entry["health"]["line"] == "failing: GPU1: reset required; nccl missing, the group runs 2.18.3"
    assert entry["health"]["ok"] is False
    with pytest.raises(AnsibleFilterError):
        gpufleet_report_node({"inventory_hostname": "n1"})


@pytest.mark.parametrize("listen, address, expected", [
    (":9100", "node-1", "http://node-1:9100/metrics"),
    ("0.0.0.0:9100", "192.0.2.7", "http://192.0.2.7:9100/metrics"),
    ("[::]:9100", "2001:db8::7", "http://[2001:db8::7]:9100/metrics"),
    ("127.0.0.1:19101", "node-1", "http://127.0.0.1:19101/metrics"),
    ("node-1:notaport", "node-1", None),
])
def test_metrics_endpoint_from_the_listen_address(listen, address, expected):
    monitoring = {"listen_address": listen, "metrics_path": "/metrics", "active": True}
    assert metrics_endpoint(monitoring, address) == expected


def test_no_metrics_endpoint_without_an_active_exporter():
    assert metrics_endpoint(None, "n1") is None
    assert metrics_endpoint({"listen_address": ":9100", "active": False}, "n1") is None
    assert metrics_endpoint({"listen_address": ":9100", "active": None}, "n1") is None


def test_metrics_note_flags_stale_or_missing_gpu_metrics():
    fresh = {"active": True, "textfile_age_s": 20, "interval_s": 30}
    assert metrics_note(fresh) is None
    assert metrics_note(dict(fresh, textfile_age_s=91)) == "GPU metrics 91 s old (every 30 s expected)"
    assert metrics_note(dict(fresh, textfile_age_s=90)) is None
    assert metrics_note(dict(fresh, textfile_age_s=None)) == "no GPU metrics written yet"
    assert metrics_note(dict(fresh, active=False, textfile_age_s=None)) is None
    assert metrics_note(None) is None


def test_runtime_line():
    assert runtime_line(None) == "none"
    assert runtime_line({"toolkit": "1.17.8-1", "engines": {}, "cdi": None}) == "none"
    runtime = {"toolkit": "1.17.8-1", "engines": {"docker": {"default": True}, "containerd": {"default": False}},
               "cdi": "/etc/cdi/nvidia.yaml"}
    assert runtime_line(runtime) == "nvidia runtime in containerd, docker (default) · toolkit 1.17.8-1 · CDI"
    runtime["engines"]["containerd"]["restart_pending"] = True
    assert runtime_line(runtime).startswith("nvidia runtime in containerd (restart pending), docker (default)")


def test_report_node_carries_runtime_and_endpoint():
    gpu = facts()
    gpu["summary"] = {"models": {}}
    node = {"group": "g", "versions": {}, "health": {"failures": [], "warnings": []}, "drift": [],
            "container_runtime": {"toolkit": "1.17.8-1", "engines": {"docker": {"default": False}}, "cdi": None},
            "monitoring": {"listen_address": ":9100", "metrics_path": "/metrics", "active": True}}
    entry = gpufleet_report_node({"inventory_hostname": "n1", "ansible_host": "198.51.100.4",
                                  "ansible_facts": {"gpu": gpu}, "gpufleet_node": node})
    assert entry["container_runtime"] == "nvidia runtime in docker · toolkit 1.17.8-1"
    assert entry["metrics_endpoint"] == "http://198.51.100.4:9100/metrics"
    entry = gpufleet_report_node({"inventory_hostname": "n1", "ansible_facts": {"gpu": gpu},
                                  "gpufleet_node": dict(node, container_runtime=None, monitoring=None)})
    assert entry["container_runtime"] == "none" and entry["metrics_endpoint"] is None


def test_self_converge_line():
    # the fields gpu_facts' stack takes from the runner's record (roles/self_converge/README.md)
    good = {"ok": True, "time": "2026-12-07T14:03:12Z", "message": "converged: 0 changed",
            "commit": "3f7f13c2a1b4c5d6e7f8091a2b3c4d5e6f708192", "changed": 0, "last_ok": None}
    assert self_converge_line(None) == "-"
    assert self_converge_line(good) == "ok 2026-12-07 14:03:12 (0 changed) · 3f7f13c2a1"
    assert self_converge_line(dict(good, commit=None, changed=None)) == "ok 2026-12-07 14:03:12"
    failed = dict(good, ok=False, message="the playbook failed (ansible-playbook exit status 2): node: Check the settings")
    assert self_converge_line(dict(failed, time=None, message="not a record")) == "failed: not a record"
    assert self_converge_line(failed) == ("failed 2026-12-07 14:03:12: the playbook failed (ansible-playbook exit "
                                          "status 2): node: Check the settings")


@pytest.mark.parametrize("profile", ["hgx-a100-8gpu", "hgx-h100-8gpu"])
def test_svg_of_emulated_nvswitch_nodes_by_either_backend(both_backends, profile):
    """The facts both backends of gpu_facts gather from an emulated HGX board (tests/unit/plugins/conftest.py): each
    GPU wired to the NVSwitch, none to another GPU."""
    for gpu in both_backends(profile):
        assert gpu["state"] == "ok", gpu["message"]
        root, bonds = parse(gpufleet_topology_svg(gpu))
        assert root.get("data-switch") == "true", gpu["source"]
        assert [(a, b) for _cls, a, b, _n in bonds] == [("GPU%d" % i, "NVSwitch") for i in range(8)], gpu["source"]


@pytest.mark.parametrize("function, value", [(gpufleet_topology_svg, ["GPU0"]), (gpufleet_report_node, {})])
def test_what_is_not_the_expected_input_is_a_filter_error(function, value):
    with pytest.raises(AnsibleFilterError, match=r"gpufleet_(topology_svg|report_node) (expects|needs)"):
        function(value)
