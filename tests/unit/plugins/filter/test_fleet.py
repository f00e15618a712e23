"""The fleet filters (plugins/filter/fleet.py): the health verdict and its thresholds as filters, which give what
plugins/module_utils/health.py gives (tested there, tests/unit/plugins/module_utils/test_health.py) and turn its
errors into AnsibleFilterError with the same message; the thresholds' documentation; version drift.
"""
import copy
import pathlib
import re

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter import fleet
from ansible_collections.gpufleet.node.plugins.filter.fleet import (
    gpufleet_health_thresholds, gpufleet_node_health, gpufleet_version_drift)
from ansible_collections.gpufleet.node.plugins.module_utils import health

DEVICE = {
    "index": 0, "name": "NVIDIA H100 80GB HBM3", "persistence_mode": True, "compute_mode": "Default",
    "ecc_mode": {"current": True, "pending": True}, "ecc_errors_uncorrected_volatile": 0,
    "ecc_errors_uncorrected_aggregate": 0, "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False,
                                                             "failure": False},
    "recovery_action": "none", "fabric": {"state": None, "status": None}, "clock_event_reasons_active": ["gpu_idle"],
    "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
}


def node(**changes):
    """gpu facts of a one-GPU node, its GPU changed as given."""
    return {"state": "ok", "count": 1, "attached_gpus": 1, "pci": {"nvidia_gpus": 1},
            "devices": [dict(copy.deepcopy(DEVICE), **changes)], "topology": {}}


@pytest.mark.parametrize("gpu, probes, thresholds", [
    (node(), None, None),
    (node(compute_mode="Prohibited", ecc_errors_uncorrected_volatile=2), {}, {}),
    (node(compute_mode="Prohibited"), {}, {"gpufleet_health_require_compute_mode_default": "false"}),
    (node(compute_mode=None, pcie={"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}),
     {"persistence_expected": False}, {"require_pcie_width_max": False}),
    ({"state": "gpu_lost", "message": "GPU 00000000:3B:00.0 is lost"}, {}, None),
])
def test_the_filter_is_the_verdict_of_module_utils(gpu, probes, thresholds):
    assert gpufleet_node_health(gpu, probes, thresholds) == health.gpufleet_node_health(gpu, probes, thresholds)
    assert gpufleet_health_thresholds(thresholds) == health.gpufleet_health_thresholds(thresholds)


def test_the_verdict_through_the_filter_fails_what_it_should():
    assert gpufleet_node_health(node()) == {"failures": [], "warnings": []}
    assert gpufleet_node_health(node(compute_mode="Prohibited"))["failures"] == [
        "GPU0: compute mode Prohibited, not Default"]


@pytest.mark.parametrize("overrides", [
    {"gpufleet_health_ecc_uncorrected_max": 0},
    {"gpufleet_health_nvlink_inactive_max": "two"},
    {"gpufleet_health_critical_xids": [0]},
    ["gpufleet_health_nvlink_inactive_max"],
])
def test_a_bad_threshold_is_an_ansible_filter_error_with_the_verdicts_message(overrides):
    with pytest.raises(health.HealthError) as raised:
        health.gpufleet_health_thresholds(overrides)
    words = str(raised.value)
    assert words.startswith(("gpufleet_health_", "unknown health threshold"))
    for call in (lambda: gpufleet_health_thresholds(overrides), lambda: gpufleet_node_health(node(), {}, overrides)):
        with pytest.raises(AnsibleFilterError) as failed:
            call()
        assert str(failed.value) == words
        assert not isinstance(failed.value, health.HealthError)


def test_facts_that_are_not_gpu_facts_are_an_ansible_filter_error():
    with pytest.raises(AnsibleFilterError, match="gpufleet_node_health expects the gpu facts of gpufleet.node.gpu_facts"):
        gpufleet_node_health({"count": 1})


def test_the_fleet_filters_are_the_fleet_level_ones():
    """The report's drawing is report.py's; fleet.py keeps the verdict's wrappers and the fleet-level gates."""
    assert sorted(fleet.FilterModule().filters()) == [
        "gpufleet_health_thresholds", "gpufleet_node_health", "gpufleet_version_drift"]


def test_the_documented_thresholds_are_the_defaults():
    """The sidecar (ansible-doc) and docs/health-gates.md name every threshold with its default."""
    root = pathlib.Path(__file__).resolve().parents[4]
    doc = yaml.safe_load((root / "plugins" / "filter" / "gpufleet_health_thresholds.yml").read_text())
    assert doc["RETURN"]["_value"]["sample"] == gpufleet_health_thresholds()
    guide = (root / "docs" / "health-gates.md").read_text()
    for name, value in gpufleet_health_thresholds().items():
        shown = "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value).replace("'", "")
        assert re.search(r"`gpufleet_health_%s` *\| *`%s`" % (name, re.escape(shown)), guide), name


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
