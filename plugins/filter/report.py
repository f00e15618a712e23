# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet report's drawing: a node's topology picture and its entry in the report, from gpu facts and probes.

Each filter is documented in its own file beside this one (``gpufleet_topology_svg.yml``,
``gpufleet_report_node.yml``); playbooks/report.yml uses them. The health line an entry carries is the verdict
``fleet_facts.yml`` stored (``gpufleet_node.health``, from the filter gpufleet_node_health), not judged again here.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math

from ansible.errors import AnsibleFilterError


def _known_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


def _escape(text):
    return str(text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


# Colours of the picture, as presentation attributes: the SVG reads the same alone and inside the report.
COLOURS = {"gpu": "#1d2430", "bad": "#d04848", "bond": "#3a6fd8", "switch": "#6a4bb5", "nic": "#2f7d4a",
           "nic_fill": "#e3f2e7", "numa": "#f4f6fa", "muted": "#5b6575", "text": "#1d2430"}


def _printed(value):
    """A topo -m column value, or None where it says nothing."""
    if value is None:
        return None
    value = str(value).strip()
    return None if value in ("", "N/A") else value


def _numa_groups(gpus, topology):
    """``[(label, [gpu, ...]), ...]``: GPUs grouped by NUMA node (else by CPU affinity), in GPU order."""
    numa = topology.get("numa_affinity") or {}
    cpus = topology.get("cpu_affinity") or {}
    groups, order = {}, []
    for name in gpus:
        node, cpu = _printed(numa.get(name)), _printed(cpus.get(name))
        if node is not None:
            label = "NUMA node %s" % node + (" · CPUs %s" % cpu if cpu else "")
        elif cpu is not None:
            label = "CPUs %s" % cpu
        else:
            label = "NUMA node unknown"
        if label not in groups:
            groups[label] = []
            order.append(label)
        groups[label].append(name)
    return [(label, groups[label]) for label in order]


def _nearest_nics(gpus, topology):
    """``{gpu: ([nic, ...], relation)}``: per GPU the NICs at its closest PCIe level, PIX before PXB."""
    gpu_nic = topology.get("gpu_nic")
    if not isinstance(gpu_nic, dict):
        return {}
    nearest = {}
    for name in gpus:
        relations = gpu_nic.get(name) or {}
        for level in ("PIX", "PXB"):
            nics = sorted(nic for nic, relation in relations.items() if relation == level)
            if nics:
                nearest[name] = (nics, level)
                break
    return nearest


def _links_of(name, topology, pairs):
    """(active, inactive) NVLink links of one GPU: from its links where listed, else from its widest bond."""
    links = (topology.get("nvlink") or {}).get(name)
    if links:
        return (sum(1 for link in links if link.get("active")), sum(1 for link in links if link.get("active") is False))
    widths = [width for a, b, width in pairs if name in (a, b)]
    return (max(widths) if widths else 0, 0)


def gpufleet_topology_svg(gpu, title=""):
    """An SVG picture of a node: GPUs grouped by NUMA node with their nearest NICs, NVLink bonds with their width
    (or, on NVSwitch systems, each GPU wired to the switch), inactive links marked, and a legend.

    Bonds carry data-a, data-b and data-links (data-b is "NVSwitch" for a GPU's links to the switch), GPUs
    data-gpu, NICs data-nic and their edges data-gpu, data-nic and data-rel, so tests (and people) can read it back."""
    if not isinstance(gpu, dict):
        raise AnsibleFilterError("gpufleet_topology_svg expects the gpu facts of gpufleet.node.gpu_facts")
    topology = gpu.get("topology") or {}
    gpus = list(topology.get("gpus") or [])
    pairs = [pair for pair in topology.get("nvlink_pair_list") or [] if pair[0] in gpus and pair[1] in gpus]
    nvlink = topology.get("nvlink") or {}
    dead = set(topology.get("nvlink_gpus_all_inactive") or [])
    degraded = dead | set(name for name, links in nvlink.items() if any(link.get("active") is False for link in links))
    switch = bool(topology.get("nvswitch")) or any(
        link.get("remote_device_type") == "switch" for links in nvlink.values() for link in links)
    groups = _numa_groups(gpus, topology)
    nearest = _nearest_nics(gpus, topology)

    cell, pad, inner, head, nic_row, switch_h, legend_h = 64, 12, 8, 20, 40, 30, 62
    per_row = min(8, max([len(members) for _label, members in groups] or [1]))
    width = max(340, 2 * pad + 2 * inner + per_row * cell)
    points, nic_points, boxes = {}, {}, []
    y = pad
    switch_y = None
    # NVSwitch: the switch sits between the first half of the NUMA groups and the rest (below a single group);
    # NICs go on the far side of each group, so the GPUs face the switch.
    split = (len(groups) + 1) // 2 if switch else len(groups)
    for number, (label, members) in enumerate(groups):
        if switch and number == split:
            switch_y = y + pad
            y += switch_h + 3 * pad
        above = switch and number < split
        below = switch and not above     # its title goes at the bottom, clear of the links to the switch
        group_nics = []
        for name in members:
            for nic in nearest.get(name, ([], None))[0]:
                if nic not in nic_points and nic not in group_nics:
                    group_nics.append(nic)
        rows = int(math.ceil(len(members) / float(per_row)))
        top = y
        y += 0 if below else head
        if group_nics and above:
            nic_y = y + nic_row / 2
            y += nic_row
        for i, name in enumerate(members):
            points[name] = (pad + inner + cell / 2 + (i % per_row) * cell, y + cell / 2 + (i // per_row) * cell)
        y += rows * cell
        if group_nics and not above:
            nic_y = y + nic_row / 2
            y += nic_row
        for i, nic in enumerate(group_nics):
            nic_points[nic] = (pad + inner + cell / 2 + (i % per_row) * cell, nic_y)
        y += head if below else 0
        boxes.append((label, top, y - top + inner, below))
        y += inner + pad
    if switch and switch_y is None:
        switch_y = y + pad
        y += switch_h + 3 * pad
    legend_y = y
    height = y + legend_h

    parts = ['<svg xmlns="http://www.w3.org/2000/svg" class="topology" viewBox="0 0 %d %d" width="%d" height="%d" '
             'role="img" aria-label="%s" data-gpus="%d" data-switch="%s" data-groups="%d" data-nics="%d" '
             'font-family="system-ui, sans-serif" font-size="11">'
             % (width, height, width, height, _escape(title or "NVLink topology"), len(gpus),
                "true" if switch else "false", len(groups), len(nic_points))]
    if not gpus:
        parts.append('<text x="%d" y="%d" text-anchor="middle" class="empty" fill="%s">%s</text>'
                     % (width / 2, pad + 20, COLOURS["bad"], _escape(gpu.get("state", "no GPUs"))))
    for label, top, box_h, below in boxes:
        parts.append('<g class="numa" data-label="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="6" fill="%s" '
                     'stroke="%s" stroke-dasharray="4 3"/><text x="%d" y="%d" class="numa-label" fill="%s">%s</text></g>'
                     % (_escape(label), pad, top, width - 2 * pad, box_h, COLOURS["numa"], COLOURS["muted"], pad + 6,
                        top + box_h - 8 if below else top + 14, COLOURS["muted"], _escape(label)))
    if switch:
        count = (gpu.get("pci") or {}).get("nvswitches")
        parts.append('<g class="switch" data-switches="%s"><rect x="%d" y="%d" width="%d" height="%d" rx="4" fill="%s"/>'
                     '<text x="%d" y="%d" text-anchor="middle" fill="#fff" font-weight="600">NVSwitch%s</text></g>'
                     % (count if count is not None else "", pad, switch_y, width - 2 * pad, switch_h, COLOURS["switch"],
                        width / 2, switch_y + switch_h / 2 + 4, u" \u00d7%d" % count if _known_int(count) and count else ""))
    bonds = []
    if switch:
        for name in gpus:
            active, down = _links_of(name, topology, pairs)
            (x, gy) = points[name]
            edge_y = switch_y if gy < switch_y else switch_y + switch_h
            bonds.append((name, "NVSwitch", active, name in degraded, [(x, gy), (x, edge_y)],
                          (x, edge_y + (-7 if edge_y > gy else 16)), ' data-inactive="%d"' % down, " switch-link"))
    else:
        for a, b, links in pairs:
            (x1, y1), (x2, y2) = points[a], points[b]
            span = abs(gpus.index(a) - gpus.index(b))
            if y1 == y2 and span > 1:
                # Same row, not neighbours: an arc over the GPUs between them.
                control = ((x1 + x2) / 2, y1 - 18 - 10 * span)
                bonds.append((a, b, links, a in degraded or b in degraded, [(x1, y1), control, (x2, y2)],
                              (control[0], (y1 + 2 * control[1] + y2) / 4), "", ""))
            else:
                bonds.append((a, b, links, a in degraded or b in degraded, [(x1, y1), (x2, y2)],
                              ((x1 + x2) / 2, (y1 + y2) / 2 - 4), "", ""))
    labelled = len(bonds) <= 12     # a full mesh is unreadable with a label per bond: its widths go in titles
    for a, b, links, bad, path, (tx, ty), extra, kind in bonds:
        if len(path) == 3:
            shape = '<path d="M%s %s Q%s %s %s %s" fill="none"' % (path[0] + path[1] + path[2])
        else:
            shape = '<line x1="%s" y1="%s" x2="%s" y2="%s"' % (path[0] + path[1])
        parts.append('<g class="bond%s%s" data-a="%s" data-b="%s" data-links="%d"%s><title>%s - %s: NV%d%s</title>'
                     '%s stroke="%s" stroke-width="%.1f"%s/>%s</g>'
                     % (kind, " degraded" if bad else "", a, b, links, extra, a, b, links,
                        " (inactive links)" if bad else "", shape, COLOURS["bad" if bad else "bond"],
                        1 + min(links, 18) / 3.0, ' stroke-dasharray="6 4"' if bad else "",
                        '<text x="%s" y="%s" text-anchor="middle" class="links" fill="%s" stroke="#fff" stroke-width="3" '
                        'paint-order="stroke">NV%d</text>' % (tx, ty, COLOURS["text"], links) if labelled else ""))
    for name in gpus:
        nics, level = nearest.get(name, ([], None))
        for nic in nics:
            (x1, y1), (x2, y2) = points[name], nic_points[nic]
            parts.append('<g class="nic-link" data-gpu="%s" data-nic="%s" data-rel="%s"><title>%s - %s: %s</title>'
                         '<line x1="%s" y1="%s" x2="%s" y2="%s" stroke="%s" stroke-width="1.5"%s/></g>'
                         % (name, _escape(nic), level, name, _escape(nic), level, x1, y1, x2, y2, COLOURS["nic"],
                            ' stroke-dasharray="2 3"' if level == "PXB" else ""))
    for name in gpus:
        x, gy = points[name]
        down = _links_of(name, topology, pairs)[1]
        note = "all links down" if name in dead else ("%d down" % down if down else "")
        parts.append('<g class="gpu%s" data-gpu="%s"><circle cx="%s" cy="%s" r="18" fill="%s"/><text x="%s" y="%s" '
                     'text-anchor="middle" fill="#fff" font-size="12" font-weight="600">%s</text>%s</g>'
                     % (" degraded" if name in degraded else "", name, x, gy, COLOURS["bad" if name in degraded else "gpu"],
                        x, gy + 4, name.replace("GPU", ""),
                        '<text x="%s" y="%s" text-anchor="middle" class="down" fill="%s">%s</text>'
                        % (x, gy + 30, COLOURS["bad"], note) if note else ""))
    for nic, (x, ny) in nic_points.items():
        parts.append('<g class="nic" data-nic="%s"><title>%s</title><rect x="%s" y="%s" width="56" height="20" rx="3" '
                     'fill="%s" stroke="%s"/><text x="%s" y="%s" text-anchor="middle" fill="%s">%s</text></g>'
                     % (_escape(nic), _escape(nic), x - 28, ny - 10, COLOURS["nic_fill"], COLOURS["nic"], x, ny + 4,
                        COLOURS["text"], _escape(nic[:9])))
    parts.append(_legend(pad, legend_y, width))
    parts.append("</svg>")
    svg = "".join(parts)
    return svg.replace(' data-gpus="%d"' % len(gpus), ' data-gpus="%d" data-bonds="%d"' % (len(gpus), len(bonds)), 1)


def _legend(x, y, width):
    """The key to the picture: six items in three rows of two (the longer names on the left)."""
    second = x + 0.6 * (width - 2 * x)
    shapes = [
        '<circle cx="%%s" cy="%%s" r="7" fill="%s"/>' % COLOURS["gpu"],
        '<rect x="%%s" y="%%s" width="16" height="10" fill="%s"/>' % COLOURS["switch"],
        '<line x1="%%s" y1="%%s" x2="%%s" y2="%%s" stroke="%s" stroke-width="3"/>' % COLOURS["bond"],
        '<line x1="%%s" y1="%%s" x2="%%s" y2="%%s" stroke="%s" stroke-width="3" stroke-dasharray="4 3"/>' % COLOURS["bad"],
        '<rect x="%%s" y="%%s" width="16" height="10" fill="%s" stroke="%s"/>' % (COLOURS["nic_fill"], COLOURS["nic"]),
        '<rect x="%%s" y="%%s" width="16" height="10" fill="%s" stroke="%s" stroke-dasharray="3 2"/>'
        % (COLOURS["numa"], COLOURS["muted"]),
    ]
    names = ["GPU (red: links down)", "NVSwitch", "NVLink bond (NV# links)", "inactive NVLink", "NIC, PIX (PXB dotted)",
             "NUMA node"]
    parts = ['<g class="legend">']
    for i, (shape, name) in enumerate(zip(shapes, names)):
        ix, iy = (second if i % 2 else x), y + 10 + (i // 2) * 18
        if shape.startswith("<circle"):
            shape = shape % (ix + 8, iy)
        elif shape.startswith("<line"):
            shape = shape % (ix, iy, ix + 16, iy)
        else:
            shape = shape % (ix, iy - 5)
        parts.append('<g class="key">%s<text x="%s" y="%s" fill="%s">%s</text></g>' % (shape, ix + 22, iy + 4, COLOURS["text"], name))
    parts.append("</g>")
    return "".join(parts)


WILDCARD_HOSTS = ("", "0.0.0.0", "[::]", "::")


def metrics_endpoint(monitoring, address):
    """The URL a scraper uses for a node's metrics, from what gpu_facts' stack read (listen address, path, whether the
    exporter is active) and the address the fleet reaches the node at; None without an active exporter. A listen
    address without a host (":9100") or with a wildcard one listens on every address, so the node's own is used."""
    if not monitoring or not monitoring.get("active") or not monitoring.get("listen_address"):
        return None
    host, _sep, port = str(monitoring["listen_address"]).rpartition(":")
    if not port.isdigit():
        return None
    if host in WILDCARD_HOSTS:
        host = "[%s]" % address if ":" in address else address
    return "http://%s:%s%s" % (host, port, monitoring.get("metrics_path") or "/metrics")


def metrics_note(monitoring):
    """What the report adds to a node's metrics endpoint when its GPU metrics cannot be trusted as current: the
    collector's file missing, or older than three of its intervals (the timer has stopped or fails). None when
    they are fresh, or when there is no endpoint to qualify."""
    if not monitoring or not monitoring.get("active"):
        return None
    age, interval = monitoring.get("textfile_age_s"), monitoring.get("interval_s")
    if age is None:
        return "no GPU metrics written yet"
    if isinstance(interval, int) and interval > 0 and age > 3 * interval:
        return "GPU metrics %d s old (every %d s expected)" % (age, interval)
    return None


def runtime_line(runtime):
    """The report's container runtime cell: the engines that run GPU containers through NVIDIA's runtime."""
    if not runtime or not runtime.get("engines"):
        return "none"
    engines = ", ".join("%s%s%s" % (name, " (default)" if engine.get("default") else "",
                                    " (restart pending)" if engine.get("restart_pending") else "")
                        for name, engine in sorted(runtime["engines"].items()))
    toolkit = " · toolkit %s" % runtime["toolkit"] if runtime.get("toolkit") else ""
    return "nvidia runtime in %s%s%s" % (engines, toolkit, " · CDI" if runtime.get("cdi") else "")


def self_converge_line(run):
    """The report's self-converge cell: "-" for a node that does not converge itself, else how its last run ended."""
    if not run:
        return "-"
    when = str(run.get("time") or "").replace("T", " ").rstrip("Z")
    when = " " + when if when else ""
    if run.get("ok"):
        changed = run.get("changed")
        return "ok%s%s%s" % (when, " (%s changed)" % changed if changed is not None else "",
                             " · %s" % str(run["commit"])[:10] if run.get("commit") else "")
    return "failed%s: %s" % (when, run.get("message") or "no message")


def gpufleet_report_node(host_vars):
    """One node's entry of the fleet report, from its hostvars (after playbooks/fleet_facts.yml): what the page
    shows, a health line, and every GPU fact."""
    try:
        gpu = host_vars["ansible_facts"]["gpu"]
        topology = gpu["topology"]
        node = host_vars["gpufleet_node"]
        reasons = list(node["health"]["failures"]) + list(node.get("drift") or [])
        address = str(host_vars.get("ansible_host") or host_vars["inventory_hostname"])
        return {
            "host": host_vars["inventory_hostname"],
            "node": node,
            "models": gpu["summary"]["models"],
            "state": gpu["state"],
            "health": {"ok": not reasons, "reasons": reasons, "warnings": list(node["health"]["warnings"]),
                       "line": "ok" if not reasons else "failing: " + "; ".join(reasons)},
            "topology": dict((key, topology.get(key)) for key in (
                "gpus", "nvlink_pair_list", "nvswitch", "nvlink_links_active", "nvlink_links_inactive",
                "nvlink_gpus_all_inactive")),
            "container_runtime": runtime_line(node.get("container_runtime")),
            "metrics_endpoint": metrics_endpoint(node.get("monitoring"), address),
            "metrics_note": metrics_note(node.get("monitoring")),
            "self_converge": self_converge_line(node.get("self_converge")),
            "gpu": gpu,
        }
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("gpufleet_report_node needs a host's vars after fleet_facts.yml (missing %s)" % exc)


class FilterModule(object):
    """gpufleet.node report filters."""

    def filters(self):
        return {
            "gpufleet_topology_svg": gpufleet_topology_svg,
            "gpufleet_report_node": gpufleet_report_node,
        }
