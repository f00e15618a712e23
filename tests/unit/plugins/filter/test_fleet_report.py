"""The whole fleet report in one pass (plugins/filter/fleet_report.py): hosts with GPU facts and an assessment are
reported, the others listed as missing; the drift is compared across the nodes reported; the JSON document and the
HTML page's data are text that parses back to the entries gpufleet_report_node makes, with every GPU fact.

The GPU facts are what gpu_facts gathers from the emulated boards (the both_backends fixture of
tests/unit/plugins/conftest.py), and hostvars is ansible-core's own, over an inventory and a fact cache in memory.
"""
import json

import pytest

from ansible.errors import AnsibleFilterError
from ansible.inventory.manager import InventoryManager
from ansible.parsing.dataloader import DataLoader
from ansible.vars.hostvars import HostVars
from ansible.vars.manager import VariableManager
from ansible_collections.gpufleet.node.plugins.filter.fleet_report import gpufleet_fleet_report
from ansible_collections.gpufleet.node.plugins.filter.report import gpufleet_report_node


def node(group, driver, failures=(), monitoring=None):
    return {"group": group, "versions": {"driver": driver, "cuda": "12.1", "nccl": "2.18.3", "torch": "2.5.1"},
            "container_runtime": None, "monitoring": monitoring, "gpus": 8, "shape": "8 GPUs",
            "health": {"failures": list(failures), "warnings": []}}


@pytest.fixture(name="fleet")
def fixture_fleet(both_backends, tmp_path):
    """hostvars of four hosts in group hgx: three with facts (one with an older driver), one never gathered; host
    hgx-2 is reached at an address its inventory writes as a template."""
    _nvml, hgx = both_backends("hgx-a100-8gpu")
    _nvml, pairs = both_backends("pairs-4gpu")
    inventory_file = tmp_path / "hosts.yml"
    inventory_file.write_text(
        "hgx:\n  hosts:\n    hgx-1: {ansible_host: 192.0.2.1}\n"
        "    hgx-2: {ansible_host: \"{{ inventory_hostname }}.mgmt.example.com\"}\n"
        "    hgx-3: {}\n    hgx-4: {}\n")
    loader = DataLoader()
    inventory = InventoryManager(loader=loader, sources=[str(inventory_file)])
    variables = VariableManager(loader=loader, inventory=inventory)
    for host, gpu, assessment in (("hgx-1", hgx, node("hgx", "535.183.01")),
                                  ("hgx-2", hgx, node("hgx", "535.183.01", ["GPU3: persistence mode off"], {
                                      "listen_address": ":9100", "metrics_path": "/metrics", "active": True})),
                                  ("hgx-3", pairs, node("hgx", "535.161.08"))):
        variables.set_host_facts(host, {"gpu": gpu, "gpufleet_node": assessment})
    return HostVars(inventory=inventory, variable_manager=variables, loader=loader)


def test_reports_the_gathered_hosts_and_lists_the_others(fleet):
    report = gpufleet_fleet_report(fleet, ["hgx-4", "hgx-3", "hgx-2", "hgx-1"], {"generated": "now", "facts": "x"})
    document = json.loads(report["json"])
    assert [entry["host"] for entry in document["nodes"]] == ["hgx-1", "hgx-2", "hgx-3"]
    assert document["missing"] == report["missing"] == ["hgx-4"] and report["count"] == 3
    assert document["generated"] == "now" and document["facts"] == "x"
    # One node per line, so that a large report can be grepped and diffed by node.
    lines = report["json"].splitlines()
    assert [json.loads(line.rstrip(","))["host"] for line in lines if line.startswith('{"container_runtime"')] \
        == ["hgx-1", "hgx-2", "hgx-3"]


def test_each_entry_is_what_gpufleet_report_node_makes(fleet):
    entries = dict((entry["host"], entry) for entry in json.loads(gpufleet_fleet_report(fleet, ["hgx-1", "hgx-3"])["json"])["nodes"])
    raw = fleet.raw_get("hgx-1")["ansible_facts"]
    expected = gpufleet_report_node({"inventory_hostname": "hgx-1", "ansible_host": "192.0.2.1",
                                     "ansible_facts": {"gpu": raw["gpu"]},
                                     "gpufleet_node": dict(raw["gpufleet_node"], drift=[])})
    assert entries["hgx-1"] == json.loads(json.dumps(expected))
    assert entries["hgx-1"]["gpu"]["topology"]["nvswitch"] is True    # every GPU fact, whole


def test_drift_is_compared_across_the_nodes_reported(fleet):
    entries = dict((entry["host"], entry) for entry in json.loads(gpufleet_fleet_report(fleet, ["hgx-1", "hgx-2", "hgx-3"])["json"])["nodes"])
    assert entries["hgx-3"]["node"]["drift"] == ["driver 535.161.08, the group runs 535.183.01"]
    assert entries["hgx-3"]["health"]["line"] == "failing: driver 535.161.08, the group runs 535.183.01"
    assert entries["hgx-1"]["node"]["drift"] == [] and entries["hgx-1"]["health"]["ok"] is True
    assert entries["hgx-2"]["health"]["reasons"] == ["GPU3: persistence mode off"]
    # Alone, hgx-3 differs from no one.
    alone = json.loads(gpufleet_fleet_report(fleet, ["hgx-3"])["json"])["nodes"][0]
    assert alone["node"]["drift"] == [] and alone["health"]["ok"] is True


def test_pages_carry_the_picture_and_no_gpu_facts(fleet):
    pages = json.loads(gpufleet_fleet_report(fleet, ["hgx-1", "hgx-3"])["pages"])
    assert [page["host"] for page in pages] == ["hgx-1", "hgx-3"]
    for page in pages:
        assert "gpu" not in page and "topology" not in page
        assert page["svg"].startswith("<svg") and 'aria-label="%s"' % page["host"] in page["svg"]
    assert 'data-switch="true"' in pages[0]["svg"] and 'data-switch="false"' in pages[1]["svg"]
    assert pages[0]["links"] == {"active": 96, "inactive": 0} and pages[1]["links"]["active"] == 16


def test_metrics_endpoint_takes_the_templated_address(fleet):
    entry = json.loads(gpufleet_fleet_report(fleet, ["hgx-2"])["json"])["nodes"][0]
    assert entry["metrics_endpoint"] == "http://hgx-2.mgmt.example.com:9100/metrics"


@pytest.mark.parametrize("hostvars, hosts, message", [
    ({"hgx-1": {}}, ["hgx-1"], "expects hostvars"),
    (None, "hgx-1", "expects a list of host names"),
])
def test_bad_input_is_a_filter_error(fleet, hostvars, hosts, message):
    with pytest.raises(AnsibleFilterError, match=message):
        gpufleet_fleet_report(fleet if hostvars is None else hostvars, hosts)
