"""The fleet after site.yml: validate passes; the report renders in a real headless browser with one topology
picture per node whose edges match the facts; planted faults make validate fail and name the node and reason.

Runs on the controller (the playbooks run against Molecule's inventory), once, not per host.
"""
import json
import os
import pathlib
import re
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
ARTIFACTS = pathlib.Path(os.environ.get("GPUFLEET_ARTIFACTS", ROOT / ".cache" / "artifacts"))
testinfra_hosts = ["gpufleet-fleet-hgx"]      # controller-side tests: run them once


def playbook(name, *extra):
    return subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(ROOT / "playbooks" / name),
         "-e", "gpufleet_ddp_rdzv_host=127.0.0.1", "-e", "gpufleet_ddp_port=29491",
         "-e", "gpufleet_ddp_local_addr=127.0.0.1"] + list(extra),
        capture_output=True, text=True, check=False)


def test_validate_passes_on_the_healthy_fleet():
    result = playbook("validate.yml")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "3 nodes validated, 0 failing" in result.stdout
    assert "12 ranks on 3 node(s)" in result.stdout or "6 ranks on 3 node(s)" in result.stdout


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


def test_report_renders_in_a_headless_browser(report):
    page = report / "fleet-report.html"
    data = json.loads((report / "fleet-report.json").read_text())
    assert "http" not in re.sub(r'xmlns="http://www.w3.org/2000/svg"', "", page.read_text())  # self-contained
    dom = chromium("--dump-dom", page.as_uri())
    assert dom.returncode == 0, dom.stderr[-2000:]
    assert "Uncaught" not in dom.stderr and "CONSOLE" not in dom.stderr.upper().replace("CONSOLE(", "")
    assert 'data-ready="true"' in dom.stdout                     # the page's script ran without an error
    sections = re.findall(r'<section class="node[^"]*" data-host="([^"]+)">(.*?)</section>', dom.stdout, re.S)
    assert [host for host, _html in sections] == [node["host"] for node in data["nodes"]]
    for (host, html), node in zip(sections, data["nodes"]):
        assert html.count('<svg') == 1, host
        drawn = sorted((a, b, int(n)) for a, b, n in
                       re.findall(r'<g class="bond[^"]*" data-a="(\w+)" data-b="(\w+)" data-links="(\d+)"', html))
        assert drawn == sorted(tuple(pair) for pair in node["topology"]["nvlink_pair_list"]), host
        assert len(re.findall(r'<g class="gpu', html)) == len(node["topology"]["gpus"]), host
    shapes = {node["host"]: len(node["topology"]["nvlink_pair_list"]) for node in data["nodes"]}
    assert shapes == {"gpufleet-fleet-hgx": 28, "gpufleet-fleet-pairs": 2, "gpufleet-fleet-pcie": 0}


def test_report_screenshot(report):
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shot = ARTIFACTS / "fleet-report.png"
    result = chromium("--screenshot=%s" % shot, "--window-size=1280,1100", (report / "fleet-report.html").as_uri())
    assert result.returncode == 0, result.stderr[-2000:]
    assert shot.stat().st_size > 20000 and shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.fixture
def planted(host):
    pairs = host.get_host("docker://gpufleet-fleet-pairs")
    pcie = host.get_host("docker://gpufleet-fleet-pcie")
    pairs.run_expect([0], "printf '0 2\\n1 2\\n' > /etc/gpufleet-emulator/inactive_links")
    profile = "/usr/local/lib/gpufleet-emulator/profiles/%s.json" % pcie.check_output("cat /etc/gpufleet-emulator/profile")
    pcie.run_expect([0], "cp %s /root/profile.bak && sed -i 's/\"driver_version\": \"[^\"]*\"/\"driver_version\": "
                         "\"535.161.08\"/' %s" % (profile, profile))
    yield
    pairs.run_expect([0], "rm -f /etc/gpufleet-emulator/inactive_links")
    pcie.run_expect([0], "mv /root/profile.bak %s" % profile)


def test_validate_names_the_faulty_nodes(planted):
    result = playbook("validate.yml", "-e", "gpufleet_validate_ddp=false")
    assert result.returncode != 0, result.stdout[-3000:]
    assert "3 nodes validated, 2 failing" in result.stdout
    assert re.search(r"gpufleet-fleet-pairs\s+NVLink inactive: GPU0 link 2; GPU1 link 2", result.stdout)
    assert re.search(r"gpufleet-fleet-pcie\s+driver 535.161.08, the group runs 535.", result.stdout)
    assert "gpufleet-fleet-hgx  " not in result.stdout.split("failing")[1].split("TASK")[0]
