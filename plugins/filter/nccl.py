# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NCCL: what all-reduce bandwidth a node's topology allows, and what nccl-tests measured (pure functions)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nccl_expected_busbw
author: gpufleet.node maintainers (@gpufleet)
version_added: "0.1.0"
short_description: The all-reduce bus bandwidth a node's GPU topology allows
description:
  - Estimates, from the C(gpu) facts of gpufleet.node.gpu_facts, the bus bandwidth (GB/s) that
    C(all_reduce_perf) of nccl-tests should reach across all GPUs of the node at large message sizes.
  - 'The model: a ring all-reduce runs at the bandwidth of its slowest hop. Where every GPU is on one NVLink
    ring (an NVSwitch, a full mesh, a hybrid cube mesh), that is the NVLink bandwidth of the least connected GPU
    (its links times the link speed; through an NVSwitch the links of one GPU, not the sum over peers).
    Otherwise the ring crosses PCIe and the slowest GPU''s PCIe link bounds it. The result is that bandwidth
    times I(efficiency).'
  - 'With the default efficiency 0.75: 8x A100 SXM over NVSwitch 225 GB/s (measured about 230), 8x H100 SXM
    358 GB/s (measured about 370 with rings).'
positional: _input, efficiency
options:
  _input:
    description: The C(gpu) facts of gpufleet.node.gpu_facts.
    type: dict
    required: true
  efficiency:
    description: The fraction of the fabric bandwidth NCCL reaches as bus bandwidth.
    type: float
    default: 0.75
"""

EXAMPLES = r"""
- name: Show what the node's topology allows
  ansible.builtin.debug:
    msg: "{{ ansible_facts['gpu'] | gpufleet.node.nccl_expected_busbw }}"
"""

RETURN = r"""
_value:
  description: C(fabric) (C(nvswitch), C(nvlink_ring), C(pcie) or C(none) for fewer than two GPUs),
    C(fabric_gbps), C(link_gbps), C(expected_busbw_gbps) (None for fewer than two GPUs) and C(basis), a sentence.
  type: dict
"""

import itertools
import re

from ansible.errors import AnsibleFilterError

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


_ROW = re.compile(r"^\s*(\d+)\s+(\d+)\s+(\S+)\s+(\S+)\s+(-?\d+)\s+((?:[\d.]+\s+){3}\d+)\s+((?:[\d.]+\s+){3}\d+)\s*$")
_AVG = re.compile(r"^#\s*Avg bus bandwidth\s*:\s*([\d.]+)")
_DEVICE = re.compile(r"^#\s+Rank\s+(\d+).*?device\s+(\d+)\s+\[(0x[0-9a-fA-F]+)\]\s+(.*?)\s*$")


def nccl_tests_result(text):
    """Parses the output of nccl-tests' all_reduce_perf.

    Returns ``rows`` (size in bytes, out-of-place and in-place time in us, algbw and busbw in GB/s, wrong
    counts), ``ranks`` (the devices used), ``avg_busbw_gbps`` (the average nccl-tests prints, over every size),
    ``peak_busbw_gbps`` (the best busbw at the largest size, the figure to compare with what the fabric
    allows) and ``wrong`` (the sum of the #wrong columns: data that did not add up).
    """
    if not isinstance(text, str):
        raise AnsibleFilterError("nccl_tests_result expects the text all_reduce_perf printed")
    rows, ranks, average = [], [], None
    for line in text.splitlines():
        row = _ROW.match(line)
        if row:
            out_place = row.group(6).split()
            in_place = row.group(7).split()
            rows.append({
                "size_bytes": int(row.group(1)), "count": int(row.group(2)), "type": row.group(3),
                "redop": row.group(4),
                "out_of_place": {"time_us": float(out_place[0]), "algbw_gbps": float(out_place[1]),
                                 "busbw_gbps": float(out_place[2]), "wrong": int(out_place[3])},
                "in_place": {"time_us": float(in_place[0]), "algbw_gbps": float(in_place[1]),
                             "busbw_gbps": float(in_place[2]), "wrong": int(in_place[3])},
            })
            continue
        avg = _AVG.match(line)
        if avg:
            average = float(avg.group(1))
            continue
        device = _DEVICE.match(line)
        if device:
            ranks.append({"rank": int(device.group(1)), "device": int(device.group(2)),
                          "bus": device.group(3), "name": device.group(4)})
    if not rows or average is None:
        raise AnsibleFilterError("all_reduce_perf printed no result table or no 'Avg bus bandwidth' line: %s"
                                 % (text.strip().splitlines()[-1:] or ["(no output)"])[0])
    largest = max(rows, key=lambda r: r["size_bytes"])
    return {
        "rows": rows,
        "ranks": ranks,
        "avg_busbw_gbps": average,
        "peak_busbw_gbps": max(largest["out_of_place"]["busbw_gbps"], largest["in_place"]["busbw_gbps"]),
        "largest_size_bytes": largest["size_bytes"],
        "wrong": sum(r["out_of_place"]["wrong"] + r["in_place"]["wrong"] for r in rows),
    }


class FilterModule(object):
    def filters(self):
        return {
            "nccl_expected_busbw": nccl_expected_busbw,
            "nccl_tests_result": nccl_tests_result,
        }
