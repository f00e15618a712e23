# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL: what all-reduce bandwidth a node's topology allows, and what nccl-tests measured.

Each filter is documented in its own file beside this one (``nccl_expected_busbw.yml``,
``nccl_tests_result.yml``); the parser of nccl-tests' output is ``module_utils.nccl_tests``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import itertools
import re

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.module_utils.nccl_tests import (
    NcclTestsParseError, parse_all_reduce_perf)

# Usable GB/s per lane and direction after encoding, by PCIe generation.
PCIE_LANE_GBPS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
# NVLink 2, 3 and 4 all run about 25 GB/s per link and direction (nvlink -s prints 25 or 26.562).
DEFAULT_LINK_GBPS = 25.0
# No GPU so far has more NVLinks than this; a GPU whose bonds add up to more reaches its peers through a switch.
MAX_LINKS_PER_GPU = 18
# Rings are searched exhaustively up to this many GPUs (8 GPUs: 5040 orders); larger nodes have NVSwitches.
MAX_RING_SEARCH = 10

_NV_BOND = re.compile(r"^NV(\d+)$")


def _bond(matrix, a, b):
    match = _NV_BOND.match(str(matrix.get(a, {}).get(b, "")))
    return int(match.group(1)) if match else 0


def nvlink_ring_width(gpus, matrix):
    """The widest bottleneck over all NVLink rings through every GPU: 0 when no NVLink ring exists.

    Two GPUs form a ring of their one bond.
    """
    if len(gpus) < 2 or len(gpus) > MAX_RING_SEARCH:
        return 0
    if len(gpus) == 2:
        return _bond(matrix, gpus[0], gpus[1])
    first, rest = gpus[0], gpus[1:]
    best = 0
    for order in itertools.permutations(rest):
        ring = (first,) + order
        narrowest = min(_bond(matrix, ring[i], ring[(i + 1) % len(ring)]) for i in range(len(ring)))
        best = max(best, narrowest)
    return best


def _link_gbps(nvlink):
    speeds = [link["speed_gbps"] for links in (nvlink or {}).values() for link in links
              if link.get("active") and link.get("speed_gbps")]
    return min(speeds) if speeds else DEFAULT_LINK_GBPS


def _pcie_gbps(devices):
    rates = []
    for device in devices or []:
        pcie = device.get("pcie") or {}
        gen, width = pcie.get("gen_max"), pcie.get("width_max")
        if gen in PCIE_LANE_GBPS and width:
            rates.append(PCIE_LANE_GBPS[gen] * width)
    return (min(rates), "PCIe") if rates else (PCIE_LANE_GBPS[4] * 16, "PCIe (assumed gen 4 x16)")


def nccl_expected_busbw(gpu, efficiency=0.75):
    """The all-reduce bus bandwidth the gpu facts' topology allows (see the sidecar nccl_expected_busbw.yml)."""
    if not isinstance(gpu, dict) or "topology" not in gpu:
        raise AnsibleFilterError("nccl_expected_busbw expects the gpu facts of gpufleet.node.gpu_facts")
    try:
        efficiency = float(efficiency)
    except (TypeError, ValueError):
        raise AnsibleFilterError("nccl_expected_busbw: efficiency must be a number, got %r" % (efficiency,))
    if not 0 < efficiency <= 1:
        raise AnsibleFilterError("nccl_expected_busbw: efficiency must be in (0, 1], got %s" % efficiency)
    topology = gpu["topology"]
    gpus = list(topology.get("gpus") or [])
    matrix = topology.get("matrix") or {}
    link_gbps = _link_gbps(topology.get("nvlink"))
    result = {"fabric": "none", "fabric_gbps": None, "link_gbps": link_gbps, "expected_busbw_gbps": None}
    if len(gpus) < 2:
        result["basis"] = "fewer than two GPUs: all-reduce moves no data between GPUs"
        return result
    links_per_gpu = {a: sum(_bond(matrix, a, b) for b in gpus if b != a) for a in gpus}
    switched = bool(topology.get("nvswitch")) or max(links_per_gpu.values()) > MAX_LINKS_PER_GPU
    if nvlink_ring_width(gpus, matrix) > 0:
        if switched:
            links = min(max(_bond(matrix, a, b) for b in gpus if b != a) for a in gpus)
            result["fabric"] = "nvswitch"
            basis = "%d NVLinks per GPU through NVSwitch" % links
        else:
            links = min(links_per_gpu.values())
            result["fabric"] = "nvlink_ring"
            basis = "every GPU on an NVLink ring, the least connected GPU has %d NVLinks" % links
        result["fabric_gbps"] = round(links * link_gbps, 3)
        basis += " at %g GB/s" % link_gbps
    else:
        rate, what = _pcie_gbps(gpu.get("devices"))
        result["fabric"] = "pcie"
        result["fabric_gbps"] = round(rate, 3)
        basis = "the ring crosses PCIe (not every GPU is on one NVLink ring): %s, %.1f GB/s" % (what, rate)
    result["expected_busbw_gbps"] = round(result["fabric_gbps"] * efficiency, 1)
    result["basis"] = "%s, times %g" % (basis, efficiency)
    return result


def nccl_tests_result(text):
    """What nccl-tests' all_reduce_perf measured: ``parse_all_reduce_perf`` of its output (see the sidecar
    nccl_tests_result.yml), with text it cannot read reported as a filter error."""
    try:
        return parse_all_reduce_perf(text)
    except NcclTestsParseError as exc:
        raise AnsibleFilterError("nccl_tests_result: %s" % exc) from exc


class FilterModule(object):
    """gpufleet.node NCCL filters."""

    def filters(self):
        return {
            "nccl_expected_busbw": nccl_expected_busbw,
            "nccl_tests_result": nccl_tests_result,
        }
