# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet validation: a node's health verdict and its thresholds, and version drift across a group.

Each filter is documented in its own file beside this one (``gpufleet_node_health.yml``,
``gpufleet_health_thresholds.yml``, ``gpufleet_version_drift.yml``); docs/health-gates.md explains the gates. The
verdict and the thresholds live in plugins/module_utils/health.py, without Ansible, so that the metrics collector
of the role gpufleet.node.gpu_monitoring gives the same verdict on a node; the filters here call it and turn its
HealthError into AnsibleFilterError. The report's drawing is in report.py.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.module_utils import health


def gpufleet_node_health(gpu, probes=None, thresholds=None):
    """``{"failures": [...], "warnings": [...]}`` for one node, from its gpu facts, probes and health thresholds
    (module_utils/health.py's gpufleet_node_health)."""
    try:
        return health.gpufleet_node_health(gpu, probes, thresholds)
    except health.HealthError as exc:
        raise AnsibleFilterError(str(exc)) from None


def gpufleet_health_thresholds(overrides=None):
    """The health gates' thresholds, the defaults with ``overrides`` checked and applied (module_utils/health.py's
    gpufleet_health_thresholds). Raises AnsibleFilterError naming the bad variable."""
    try:
        return health.gpufleet_health_thresholds(overrides)
    except health.HealthError as exc:
        raise AnsibleFilterError(str(exc)) from None


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
    drift = dict((host, []) for host in nodes)
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


class FilterModule(object):
    """gpufleet.node fleet filters."""

    def filters(self):
        return {
            "gpufleet_node_health": gpufleet_node_health,
            "gpufleet_health_thresholds": gpufleet_health_thresholds,
            "gpufleet_version_drift": gpufleet_version_drift,
        }
