"""Scrape a node's exporter from inside the node, and read what the emulated hardware reports (nvidia-smi's CSV
query and nvlink -s: not the code under test, which reads NVML or -q -x)."""
import json
import os
import re
import sys

import pytest

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
QUERY = ("index,uuid,pci.bus_id,name,driver_version,temperature.gpu,power.draw,enforced.power.limit,utilization.gpu,"
         "memory.total,clocks_event_reasons.active,ecc.errors.uncorrected.volatile.total,"
         "ecc.errors.corrected.volatile.total,ecc.errors.uncorrected.aggregate.total")

# The collection (ANSIBLE_COLLECTIONS_PATH, tools/lib.sh) for the health gates' filter: the verdict to expect.
for _path in reversed(os.environ.get("ANSIBLE_COLLECTIONS_PATH", "").split(os.pathsep)):
    if _path and _path not in sys.path:
        sys.path.insert(0, _path)


def parse(text):
    """{metric: [(labels dict, value)]} of Prometheus' text format; every line must be a comment or a sample."""
    metrics = {}
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        match = SAMPLE.match(line)
        assert match, line
        labels = dict(LABEL.findall(match.group(2) or ""))
        metrics.setdefault(match.group(1), []).append((labels, float(match.group(3))))
    return metrics


@pytest.fixture
def listen(host):
    return host.ansible.get_variables()["gpu_monitoring_listen_address"]


@pytest.fixture
def textfile_directory(host):
    """The node's gpu_monitoring_textfile_directory (the package's directory unless the node sets another)."""
    return host.ansible.get_variables().get("gpu_monitoring_textfile_directory", "/var/lib/prometheus/node-exporter")


@pytest.fixture
def scrape(host, listen):
    def run():
        url = "http://%s/metrics" % listen
        text = host.check_output("python3 -c 'import sys, urllib.request; "
                                 "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' %s",
                                 url)
        return parse(text)
    return run


@pytest.fixture
def hardware(host):
    """Per GPU index, what nvidia-smi --query-gpu prints, and the active links nvlink -s lists."""
    def run():
        rows = {}
        for line in host.check_output("nvidia-smi --query-gpu=%s --format=csv,noheader,nounits", QUERY).splitlines():
            values = [value.strip() for value in line.split(",")]
            rows[int(values[0])] = dict(zip(QUERY.split(","), values))
        links, current = {}, None
        for line in host.check_output("nvidia-smi nvlink -s").splitlines():
            if line.startswith("GPU "):
                current = int(line.split(":")[0].split()[1])
                links[current] = {"up": 0, "down": 0, "all_down": False}
            elif "all links are inActive" in line:
                links[current]["all_down"] = True
            elif line.strip().startswith("Link "):
                links[current]["down" if "<inactive>" in line else "up"] += 1
        return rows, links
    return run


def of_gpu(metrics, name, index):
    found = [(labels, value) for labels, value in metrics.get(name, []) if labels.get("gpu") == str(index)]
    assert len(found) <= 1, (name, index)
    return found[0] if found else (None, None)


@pytest.fixture
def verdict(host):
    """The health verdict validate.yml would give: gpufleet_node_health over gpu_facts and the fabric manager probe."""
    from ansible_collections.gpufleet.node.plugins.filter.fleet import gpufleet_node_health  # pylint: disable=import-outside-toplevel

    def run():
        gpu = host.ansible("gpufleet.node.gpu_facts", check=False)["ansible_facts"]["gpu"]
        active = host.run("systemctl is-active nvidia-fabricmanager").stdout.strip() == "active"
        settings = json.loads(host.file("/etc/gpufleet/gpu-metrics.json").content_string)
        return gpufleet_node_health(gpu, {"fabricmanager_active": active if gpu["topology"]["nvswitch"] else None,
                                          "persistence_expected": settings["persistence_expected"]},
                                    settings["health_thresholds"])
    return run
