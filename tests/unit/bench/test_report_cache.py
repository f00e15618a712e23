"""playbooks/report.yml from a real fact cache: a run that gathers (fleet_facts.yml on simulated hosts, the bench's,
tools/bench/simulated_fleet.py) fills a jsonfile cache; report.yml -e gpufleet_report_from_cache=true then writes
the same report from that cache alone, without reaching a host (the cached inventory has no way to reach one),
compares drift across the nodes it reports, lists the hosts the cache lacks, and fails with advice on an empty
cache."""
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tools" / "bench"))
import simulated_fleet  # noqa: E402  pylint: disable=wrong-import-position

# Three profiles on driver 535 and an HGX B200 on 580: the B200 drifts from its group when all four are compared.
PROFILES = ["hgx-a100-8gpu", "pairs-4gpu", "pcie-4gpu", "hgx-b200-8gpu"]
HOSTS = ["node-0001", "node-0002", "node-0003", "node-0004"]


def collections_path(tmp):
    path = tmp / "collections"
    (path / "ansible_collections" / "gpufleet").mkdir(parents=True, exist_ok=True)
    link = path / "ansible_collections" / "gpufleet" / "node"
    if not link.exists():
        link.symlink_to(ROOT)
    return path


def playbook(tmp, inventory, cache, report, *args):
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path(tmp)), ANSIBLE_INJECT_FACT_VARS="false",
               ANSIBLE_CACHE_PLUGIN="jsonfile", ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache), ANSIBLE_FORKS="8",
               ANSIBLE_PIPELINING="true", ANSIBLE_NOCOLOR="1", ANSIBLE_LOCAL_TMP=str(tmp / "ansible-tmp"))
    binary = pathlib.Path(sys.executable).parent / "ansible-playbook"
    return subprocess.run([str(binary) if binary.exists() else "ansible-playbook", "-i", str(inventory),
                           str(ROOT / "playbooks" / "report.yml"), "-e", "gpufleet_report_dir=%s" % report] + list(args),
                          env=env, capture_output=True, text=True, timeout=600, check=False)


def nodes(report):
    return dict((node["host"], node) for node in json.loads((report / "fleet-report.json").read_text())["nodes"])


@pytest.fixture(name="gathered", scope="module")
def fixture_gathered(tmp_path_factory):
    """The report of four simulated hosts, gathered; the jsonfile cache that run filled."""
    tmp = tmp_path_factory.mktemp("gathered")
    inventory = simulated_fleet.write_fleet(tmp / "fleet", len(HOSTS), 0, profiles=PROFILES)
    result = playbook(tmp, inventory, tmp / "cache", tmp / "report")
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]
    return tmp, tmp / "cache", tmp / "report"


def test_the_gathered_report_fills_the_cache(gathered):
    _tmp, cache, report = gathered
    assert json.loads((report / "fleet-report.json").read_text())["facts"] == "gathered"
    assert sorted(nodes(report)) == HOSTS
    files = sorted(os.listdir(cache))
    assert len(files) == len(HOSTS) and all(any(name.endswith(host) for name in files) for host in HOSTS), files


def test_report_from_the_cache_is_the_gathered_report(gathered):
    tmp, cache, report = gathered
    inventory = simulated_fleet.cache_inventory(tmp / "cached.json", len(HOSTS))    # no way to reach a host
    result = playbook(tmp, inventory, cache, tmp / "from-cache", "-e", "gpufleet_report_from_cache=true")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Gather GPU facts" not in result.stdout and "skipping: no hosts matched" in result.stdout
    document = json.loads((tmp / "from-cache" / "fleet-report.json").read_text())
    assert document["facts"] == "fact cache" and document["missing"] == []
    assert nodes(tmp / "from-cache") == nodes(report)
    # The B200 (driver 580) drifts from the three 535 nodes of its group, in both.
    assert nodes(report)["node-0004"]["node"]["drift"] == ["driver 580.105.08, the group runs 535.183.01"]
    assert nodes(report)["node-0001"]["gpu"]["topology"]["nvswitch"] is True
    html = (tmp / "from-cache" / "fleet-report.html").read_text()
    assert "facts from the fact cache" in html and html.count('<section class="node') == len(HOSTS)


def test_drift_is_compared_across_the_nodes_reported(gathered):
    tmp, cache, _report = gathered
    inventory = simulated_fleet.cache_inventory(tmp / "cached.json", len(HOSTS))
    result = playbook(tmp, inventory, cache, tmp / "limited", "-e", "gpufleet_report_from_cache=true",
                      "--limit", "node-0004")
    assert result.returncode == 0, result.stdout[-4000:]
    only = nodes(tmp / "limited")
    assert sorted(only) == ["node-0004"] and only["node-0004"]["node"]["drift"] == []


def test_hosts_the_cache_lacks_are_listed(gathered):
    tmp, cache, _report = gathered
    inventory = simulated_fleet.cache_inventory(tmp / "more.json", 6)
    result = playbook(tmp, inventory, cache, tmp / "more", "-e", "gpufleet_report_from_cache=true")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "Not in the report, no facts in the fact cache: node-0005, node-0006" in result.stdout
    assert json.loads((tmp / "more" / "fleet-report.json").read_text())["missing"] == ["node-0005", "node-0006"]
    assert sorted(nodes(tmp / "more")) == HOSTS
    assert "not in the report, no facts: node-0005, node-0006" in (tmp / "more" / "fleet-report.html").read_text()


def test_copies_of_the_cache_report_as_their_originals(gathered):
    """The bench's larger caches: each copy holds the facts of a gathered host, byte for byte."""
    tmp, cache, _report = gathered
    copies = simulated_fleet.jsonfile_cache_copies(cache, tmp / "copies", HOSTS, 10)
    inventory = simulated_fleet.cache_inventory(tmp / "ten.json", 10)
    result = playbook(tmp, inventory, copies, tmp / "ten", "-e", "gpufleet_report_from_cache=true")
    assert result.returncode == 0, result.stdout[-4000:]
    ten = nodes(tmp / "ten")
    assert len(ten) == 10
    assert ten["node-0009"]["gpu"] == ten["node-0001"]["gpu"] and ten["node-0010"]["gpu"] == ten["node-0002"]["gpu"]
    # Three B200s (node-0004, -0008) against eight 535 nodes: still the minority.
    assert ten["node-0008"]["node"]["drift"] == ["driver 580.105.08, the group runs 535.183.01"]


def test_an_empty_cache_fails_with_advice(gathered):
    tmp, _cache, _report = gathered
    (tmp / "empty").mkdir(exist_ok=True)
    inventory = simulated_fleet.cache_inventory(tmp / "cached.json", len(HOSTS))
    result = playbook(tmp, inventory, tmp / "empty", tmp / "none", "-e", "gpufleet_report_from_cache=true")
    assert result.returncode != 0
    assert "No node of this play has GPU facts and an assessment in the fact cache" in result.stdout
    assert "Configure a fact cache" in result.stdout
    assert not (tmp / "none" / "fleet-report.json").exists()


def test_a_bad_threshold_of_one_node_stops_the_run_before_gathering(gathered):
    """fleet_facts.yml checks every node's gpufleet_health_* variables in one pass, before anything is gathered."""
    tmp, _cache, _report = gathered
    inventory = json.loads((tmp / "fleet" / "fleet-4.json").read_text())
    inventory["gpu_nodes"]["hosts"]["node-0003"]["gpufleet_health_nvlink_inactive_max"] = "two"
    (tmp / "bad.json").write_text(json.dumps(inventory))
    result = playbook(tmp, tmp / "bad.json", tmp / "bad-cache", tmp / "bad-report")
    assert result.returncode != 0
    assert "gpufleet_health_nvlink_inactive_max must be a whole number" in result.stdout
    assert "TASK [Gather GPU facts]" not in result.stdout and not (tmp / "bad-report").exists()
