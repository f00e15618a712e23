# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet validation and the topology picture: pure functions over gpu facts and probes.

Each filter is documented in its own file beside this one (``gpufleet_node_health.yml``,
``gpufleet_version_drift.yml``, ``gpufleet_topology_svg.yml``, ``gpufleet_report_node.yml``).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible.errors import AnsibleFilterError


def gpufleet_node_health(gpu, probes=None):
    """``{"failures": [...], "warnings": [...]}`` for one node, from its gpu facts and probes."""
    if not isinstance(gpu, dict) or "state" not in gpu:
        raise AnsibleFilterError("gpufleet_node_health expects the gpu facts of gpufleet.node.gpu_facts")
    probes = probes or {}
    failures, warnings = [], []
    if gpu["state"] != "ok":
        failures.append("driver: %s (%s)" % (gpu["state"], gpu.get("message") or "no message"))
        return {"failures": failures, "warnings": warnings}
    pci = (gpu.get("pci") or {}).get("nvidia_gpus")
    if pci is not None and pci != gpu.get("count"):
        failures.append("GPUs: %s on the PCI bus, nvidia-smi sees %s" % (pci, gpu.get("count")))
    topology = gpu.get("topology") or {}
    inactive = []
    for name, links in sorted((topology.get("nvlink") or {}).items()):
        down = [str(link["link"]) for link in links if link.get("active") is False]
        if down:
            inactive.append("%s link %s" % (name, ",".join(down)))
    if inactive:
        failures.append("NVLink inactive: %s" % "; ".join(inactive))
    for device in gpu.get("devices") or []:
        label = "GPU%s" % device.get("index")
        if device.get("persistence_mode") is False and probes.get("persistence_expected", True):
            failures.append("%s: persistence mode off" % label)
        if device.get("ecc_errors_uncorrected_volatile"):
            failures.append("%s: %d uncorrected ECC errors" % (label, device["ecc_errors_uncorrected_volatile"]))
        pages = device.get("retired_pages") or {}
        if pages.get("pending"):
            failures.append("%s: retired pages pending (reset the GPU)" % label)
        pcie = device.get("pcie") or {}
        if pcie.get("width_current") and pcie.get("width_max") and pcie["width_current"] < pcie["width_max"]:
            failures.append("%s: PCIe x%d of x%d" % (label, pcie["width_current"], pcie["width_max"]))
        if pcie.get("gen_current") and pcie.get("gen_max") and pcie["gen_current"] < pcie["gen_max"]:
            warnings.append("%s: PCIe gen %d of %d (normal when idle)" % (label, pcie["gen_current"], pcie["gen_max"]))
    if topology.get("nvswitch") and probes.get("fabricmanager_active") is not True:
        failures.append("fabric manager not active on an NVSwitch system")
    return {"failures": failures, "warnings": warnings}


def gpufleet_version_drift(nodes, keys=("driver", "cuda", "nccl", "torch")):
    """``{host: [reasons]}`` for hosts whose versions differ from the most common one of their group.

    ``nodes`` maps host to ``{"group": name, "versions": {key: version or None}}``; None (not installed) counts as
    a version, so a node missing a component stands out too. Ties go to the value of the first host by name.
    """
    if not isinstance(nodes, dict):
        raise AnsibleFilterError("gpufleet_version_drift expects a mapping of host to group and versions")
    groups = {}
    for host in sorted(nodes):
        groups.setdefault(nodes[host].get("group"), []).append(host)
    drift = {host: [] for host in nodes}
    for hosts in groups.values():
        for key in keys:
            values = [(nodes[h].get("versions") or {}).get(key) for h in hosts]
            counts = {}
            for value in values:
                counts[value] = counts.get(value, 0) + 1
            common = max(counts, key=lambda v: (counts[v], -values.index(v)))
            for host, value in zip(hosts, values):
                if value != common:
                    drift[host].append("%s %s, the group runs %s" % (key, value or "missing", common or "none"))
    return drift


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def gpufleet_topology_svg(gpu, title=""):
    """An SVG picture of a node's NVLink topology: GPUs on a circle, one edge per NVLink bond, labelled with its
    link count (red and dashed where a GPU of the bond has inactive links), an NVSwitch badge where the node has
    switches. Each edge carries data-a, data-b and data-links, so tests (and people) can read it back."""
    if not isinstance(gpu, dict):
        raise AnsibleFilterError("gpufleet_topology_svg expects the gpu facts of gpufleet.node.gpu_facts")
    topology = gpu.get("topology") or {}
    gpus = list(topology.get("gpus") or [])
    pairs = topology.get("nvlink_pair_list") or []
    degraded = {name for name, links in (topology.get("nvlink") or {}).items()
                if any(link.get("active") is False for link in links)}
    size, radius = 320, 120
    centre = size / 2
    points = {}
    for i, name in enumerate(gpus):
        angle = 2 * math.pi * i / max(len(gpus), 1) - math.pi / 2
        points[name] = (round(centre + radius * math.cos(angle), 1), round(centre + radius * math.sin(angle), 1))
    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="topology" viewBox="0 0 %d %d" width="%d" height="%d" '
             'role="img" aria-label="%s" data-gpus="%d" data-bonds="%d">'
             % (size, size, size, size, _escape(title or "NVLink topology"), len(gpus), len(pairs))]
    if not gpus:
        parts.append('<text x="%d" y="%d" text-anchor="middle" class="empty">%s</text>'
                     % (centre, centre, _escape(gpu.get("state", "no GPUs"))))
    for a, b, links in pairs:
        if a not in points or b not in points:
            continue
        (x1, y1), (x2, y2) = points[a], points[b]
        bad = a in degraded or b in degraded
        parts.append('<g class="bond%s" data-a="%s" data-b="%s" data-links="%d"><line x1="%s" y1="%s" x2="%s" '
                     'y2="%s" stroke-width="%.1f"%s/><text x="%s" y="%s" class="links">%d</text></g>'
                     % (" degraded" if bad else "", a, b, links, x1, y1, x2, y2, 1 + min(links, 18) / 3,
                        ' stroke-dasharray="6 4"' if bad else "", round((x1 + x2) / 2, 1), round((y1 + y2) / 2, 1),
                        links))
    if topology.get("nvswitch"):
        parts.append('<text x="%d" y="%d" text-anchor="middle" class="switch">through NVSwitch</text>' % (centre, size - 4))
    for name in gpus:
        x, y = points[name]
        parts.append('<g class="gpu%s" data-gpu="%s"><circle cx="%s" cy="%s" r="20"/><text x="%s" y="%s" '
                     'text-anchor="middle">%s</text></g>'
                     % (" degraded" if name in degraded else "", name, x, y, x, y + 4, name.replace("GPU", "")))
    parts.append("</svg>")
    return "".join(parts)


def gpufleet_report_node(host_vars):
    """One node's entry of the fleet report, from its hostvars (after playbooks/fleet_facts.yml)."""
    try:
        gpu = host_vars["ansible_facts"]["gpu"]
        topology = gpu["topology"]
        return {
            "host": host_vars["inventory_hostname"],
            "node": host_vars["gpufleet_node"],
            "models": gpu["summary"]["models"],
            "state": gpu["state"],
            "topology": {key: topology[key] for key in (
                "gpus", "nvlink_pair_list", "nvswitch", "nvlink_links_active", "nvlink_links_inactive")},
        }
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("gpufleet_report_node needs a host's vars after fleet_facts.yml (missing %s)" % exc)


class FilterModule(object):
    """gpufleet.node fleet filters."""

    def filters(self):
        return {
            "gpufleet_node_health": gpufleet_node_health,
            "gpufleet_version_drift": gpufleet_version_drift,
            "gpufleet_topology_svg": gpufleet_topology_svg,
            "gpufleet_report_node": gpufleet_report_node,
        }
