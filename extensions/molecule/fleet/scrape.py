"""Scrapes a fleet node's exporter from inside the node, for tests/ and tests_with_faults/ (testinfra hosts)."""
import re

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def scrape(host):
    """{metric: {gpu label or None: value}} from the node's exporter, on the port its host_vars give it."""
    url = "http://%s/metrics" % host.ansible.get_variables()["gpu_monitoring_listen_address"]
    text = host.check_output("python3 -c 'import sys, urllib.request; "
                             "sys.stdout.write(urllib.request.urlopen(sys.argv[1], timeout=10).read().decode())' %s", url)
    metrics = {}
    for line in text.splitlines():
        match = SAMPLE.match(line)
        if line.startswith("#") or not match:
            continue
        labels = dict(LABEL.findall(match.group(2) or ""))
        metrics.setdefault(match.group(1), {})[labels.get("gpu")] = float(match.group(3))
    return metrics
