# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The whole fleet report in one pass over the hosts, for playbooks/report.yml (documented in
``gpufleet_fleet_report.yml`` beside this file).

Why one filter over ``hostvars`` rather than a ``map`` of gpufleet_report_node in the playbook: ansible-core 2.19
hands every container that passes through a template to the next plugin as a lazy proxy, and walks it again to
finalise a task's result, each value costing microseconds. A fleet's GPU facts are some hundred values per node,
so building the report in Jinja walked them several times, and a report of 5,000 nodes took minutes. Here each
host's variables are read once, untemplated (``HostVars.raw_get``: facts are data from modules and the fact cache,
never templates), and everything heavy leaves as strings: the JSON document and each node's picture.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.fleet import gpufleet_version_drift
from ansible_collections.gpufleet.node.plugins.filter.report import gpufleet_report_node, gpufleet_topology_svg


def _address(hostvars, host, raw):
    """The host's ansible_host, templated only when the inventory wrote a template there."""
    address = raw.get("ansible_host")
    if isinstance(address, str) and ("{{" in address or "{%" in address):
        address = hostvars[host].get("ansible_host")
    return address


def gpufleet_fleet_report(hostvars, hosts, header=None):
    """``{"json": text, "pages": text, "missing": [host], "count": n}`` for ``hosts``, from their variables in
    ``hostvars``: facts gathered in this run or read from the fact cache alike. ``json`` is the report's JSON
    document (``header``, ``missing`` and ``nodes``, one node per line); ``pages`` the JSON list of what the HTML
    page shows of each node (its entry without the GPU facts, with its picture as ``svg``)."""
    if not hasattr(hostvars, "raw_get"):
        raise AnsibleFilterError("gpufleet_fleet_report expects hostvars (the magic variable) as its input")
    if isinstance(hosts, str) or not all(isinstance(host, str) for host in hosts):
        raise AnsibleFilterError("gpufleet_fleet_report expects a list of host names, such as ansible_play_hosts")
    found, missing = {}, []
    for host in sorted(hosts):
        raw = hostvars.raw_get(host)
        facts = raw.get("ansible_facts") if isinstance(raw, dict) else None
        if not isinstance(facts, dict) or not isinstance(facts.get("gpu"), dict) \
                or not isinstance(facts.get("gpufleet_node"), dict):
            missing.append(host)
            continue
        found[host] = (raw, facts)
    drift = gpufleet_version_drift(dict((host, facts["gpufleet_node"]) for host, (_raw, facts) in found.items()))
    entries, pages = [], []
    for host in sorted(found):
        raw, facts = found[host]
        node = dict(facts["gpufleet_node"], drift=drift[host])
        entry = gpufleet_report_node({"inventory_hostname": host, "ansible_host": _address(hostvars, host, raw),
                                      "ansible_facts": {"gpu": facts["gpu"]}, "gpufleet_node": node})
        entries.append(json.dumps(entry, sort_keys=True, ensure_ascii=False))
        page = dict((key, value) for key, value in entry.items() if key not in ("gpu", "topology"))
        page["links"] = {"active": entry["topology"]["nvlink_links_active"],
                         "inactive": entry["topology"]["nvlink_links_inactive"]}
        page["svg"] = gpufleet_topology_svg(facts["gpu"], host)
        pages.append(page)
    document = dict(header or {}, missing=missing)
    head = json.dumps(document, sort_keys=True, indent=2, ensure_ascii=False)
    # One node per line: a fleet's report is greppable and diffs by node.
    text = head[:-2] + ',\n  "nodes": [\n' + ",\n".join(entries) + "\n  ]\n}\n"
    # Both as text: ansible-core walks every value of a task's result once more, which for the pages of a large
    # fleet cost more than making them.
    return {"json": text, "pages": json.dumps(pages, ensure_ascii=False), "missing": missing, "count": len(pages)}


class FilterModule(object):
    """gpufleet.node fleet report filter."""

    def filters(self):
        return {"gpufleet_fleet_report": gpufleet_fleet_report}
