"""The fleet with the faults of plant-faults.yml (the side effect after the first verify; molecule.yml's
test_sequence runs `verify tests_with_faults`): validate fails exactly the two faulty nodes, each with the reasons
of its planted faults, and passes the NVSwitch node; the report says the same and draws the machine as it is,
checked in a real headless browser.

Runs on the controller (the playbooks run against Molecule's inventory), once, not per host.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[4]
ARTIFACTS = pathlib.Path(os.environ.get("GPUFLEET_ARTIFACTS", ROOT / ".cache" / "artifacts"))
HOSTS = ("gpufleet-fleet-hgx", "gpufleet-fleet-pairs", "gpufleet-fleet-pcie")
testinfra_hosts = ["gpufleet-fleet-hgx"]      # controller-side tests: run them once

# What plant-faults.yml planted, as the health gates must name it (docs/health-gates.md).
EXPECTED = {
    "gpufleet-fleet-pairs": [
        r"NVLink inactive: GPU0 link 2(; .*)?; GPU3 all links",
        r"GPU1: 2 uncorrected ECC errors since the driver loaded \(max 0\)",
        r"GPU2: row remapping pending \(reset the GPU\)",
    ],
    "gpufleet-fleet-pcie": [
        r"GPU0: compute mode Exclusive_Process, not Default",
        r"GPU3: hw_thermal_slowdown while idle",
        r"driver 535\.161\.08, the group runs 535\.[0-9.]+",
    ],
}


def playbook(name, *extra):
    return subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(ROOT / "playbooks" / name)] + list(extra),
        capture_output=True, text=True, check=False)


def failing_table(stdout):
    """``{host: [reasons]}`` from validate's table of failing nodes, read from the result of its task in either form
    of the callback (JSON, or YAML, which folds long lines). Each row is ``'%-28s %s' % (host or '', reason)``."""
    task = stdout[stdout.index("TASK [Show the failing nodes and why]"):]
    body = task[task.index("=>") + 2:]
    body = body[:body.index("TASK [")] if "TASK [" in body else body
    table, host = {}, None
    for row in yaml.safe_load(body)["msg"][1:]:
        host = row[:28].strip() or host
        table.setdefault(host, []).append(row[29:].strip())
    return table


def missing(reasons, host):
    """The expected reasons of ``host`` that ``reasons`` lacks."""
    return [pattern for pattern in EXPECTED[host] if not any(re.fullmatch(pattern, reason) for reason in reasons)]


def test_validate_fails_the_faulty_nodes_with_their_reasons():
    result = playbook("validate.yml", "-e", "gpufleet_validate_ddp=false")
    assert result.returncode != 0, result.stdout[-3000:]
    assert "3 nodes validated, 2 failing" in result.stdout, result.stdout[-3000:]
    table = failing_table(result.stdout)
    assert sorted(table) == ["gpufleet-fleet-pairs", "gpufleet-fleet-pcie"], table
    for host in table:
        assert missing(table[host], host) == [], (host, table[host])
    assert "gpufleet-fleet-hgx passed" in result.stdout


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    directory = tmp_path_factory.mktemp("report")
    result = playbook("report.yml", "-e", "gpufleet_report_dir=%s" % directory)
    assert result.returncode == 0, result.stdout[-4000:]
    return directory


def chromium(*args):
    binary = shutil.which("chromium") or shutil.which("chromium-browser")
    assert binary, "chromium is not installed (tools/host-deps.sh installs it)"
    return subprocess.run([binary, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                           "--enable-logging=stderr", "--v=0", "--virtual-time-budget=3000"] + list(args),
                          capture_output=True, text=True, timeout=120, check=False)


def test_the_report_json_carries_the_health_and_every_fact(report):
    nodes = dict((node["host"], node) for node in json.loads((report / "fleet-report.json").read_text())["nodes"])
    assert sorted(nodes) == list(HOSTS)
    assert nodes["gpufleet-fleet-hgx"]["health"]["line"] == "ok"
    for host in EXPECTED:
        health = nodes[host]["health"]
        assert health["ok"] is False and health["line"].startswith("failing: ")
        assert missing(health["reasons"], host) == [], (host, health["reasons"])
    pairs, pcie = nodes["gpufleet-fleet-pairs"]["gpu"], nodes["gpufleet-fleet-pcie"]["gpu"]
    assert pairs["devices"][2]["remapped_rows"]["pending"] is True
    assert pairs["devices"][1]["ecc_errors_uncorrected_volatile"] == 2
    assert pairs["topology"]["nvlink_gpus_all_inactive"] == ["GPU3"]
    assert "hw_thermal_slowdown" in pcie["devices"][3]["clock_event_reasons_active"]
    assert pcie["devices"][3]["temperature_c"] == 91
    assert pcie["devices"][0]["compute_mode"] == "Exclusive_Process"


def test_the_report_shows_each_nodes_runtime_and_metrics_endpoint(report):
    nodes = dict((node["host"], node) for node in json.loads((report / "fleet-report.json").read_text())["nodes"])
    ports = {"gpufleet-fleet-hgx": 19111, "gpufleet-fleet-pairs": 19112, "gpufleet-fleet-pcie": 19113}
    for host, port in ports.items():
        assert nodes[host]["metrics_endpoint"] == "http://127.0.0.1:%d/metrics" % port, host
    # Only the PCIe node runs GPU containers (containerd, from Debian's archive).
    assert nodes["gpufleet-fleet-pcie"]["container_runtime"].startswith("nvidia runtime in containerd · toolkit 1.")
    assert nodes["gpufleet-fleet-hgx"]["container_runtime"] == "none"
    html = (report / "fleet-report.html").read_text()
    assert "http://127.0.0.1:19113/metrics" in html and "nvidia runtime in containerd" in html


def test_the_report_renders_the_machine_as_it_is_in_a_headless_browser(report):
    page = report / "fleet-report.html"
    data = json.loads((report / "fleet-report.json").read_text())
    # Self-contained: nothing loaded from elsewhere (the metrics endpoints are text in their cells, not links).
    assert not re.search(r'(src|href|action)\s*=\s*["\']?[a-z]+:|url\(\s*["\']?[a-z]+:|@import', page.read_text())
    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr.upper().replace("CONSOLE(", "")
    assert 'data-ready="true"' in dom.stdout                     # the page's script ran without an error
    sections = dict(re.findall(r'<section class="node[^"]*" data-host="([^"]+)">(.*?)</section>', dom.stdout, re.S))
    assert sorted(sections) == list(HOSTS)
    for node in data["nodes"]:
        html = sections[node["host"]]
        assert html.count("<svg") == 1 and html.count('<g class="legend">') == 1, node["host"]
        assert len(re.findall(r'<g class="gpu', html)) == len(node["topology"]["gpus"]), node["host"]
        bonds = sorted((a, b, int(n)) for a, b, n in
                       re.findall(r'<g class="bond[^"]*" data-a="(\w+)" data-b="(\w+)" data-links="(\d+)"', html))
        if node["topology"]["nvswitch"]:
            # GPUs wired to one switch, not the complete graph of the 28 NV12 pairs of topo -m
            assert html.count('<g class="switch"') == 1 and 'data-switch="true"' in html
            assert bonds == [("GPU%d" % i, "NVSwitch", 12) for i in range(8)], bonds
            assert len(node["topology"]["nvlink_pair_list"]) == 28
        else:
            assert '<g class="switch"' not in html
            assert bonds == sorted(tuple(pair) for pair in node["topology"]["nvlink_pair_list"]), node["host"]
    hgx, pairs, pcie = (sections[host] for host in HOSTS)
    assert 'data-health="ok"' in hgx and "<li>" not in hgx
    for host, html in (("gpufleet-fleet-pairs", pairs), ("gpufleet-fleet-pcie", pcie)):
        assert 'data-health="failing"' in html, host
        shown = re.findall(r"<li>(.*?)</li>", html)
        assert missing(shown, host) == [], (host, shown)
    assert "all links down" in pairs and re.search(r'<g class="gpu degraded" data-gpu="GPU3"', pairs)
    assert re.search(r'<g class="gpu degraded" data-gpu="GPU0"', pairs)


def test_report_screenshot(report):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "fleet-report.png"
    result = chromium("--screenshot=%s" % shot, "--window-size=1400,1300", (report / "fleet-report.html").as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.stat().st_size > 20000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
