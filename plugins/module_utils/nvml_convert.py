# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure conversions of what NVML answers into fact values, as ``nvidia-smi -q -x`` and ``topo -m`` print them.

No ctypes, no library: plain values in, plain values out, tested directly (tests/unit/plugins/module_utils/
test_nvml.py, through ``nvml``, which exports them). The binding (``nvml_bindings``) calls them on what the
library returned; the nvidia-smi parser shares ``reset_status`` and ``row_remapper_histogram``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils.nvml_constants import (
    ARCHITECTURES, CLOCK_EVENT_REASONS, COMPUTE_MODES, DEVICE_TYPES, FABRIC_HEALTH_MASK, FABRIC_HEALTH_SUMMARIES,
    FABRIC_STATE_COMPLETED, FABRIC_STATES, P2P_STATUSES, RECOVERY_ACTIONS, RESET_BY_ACTION, RETURN_CODES,
    STATE_FOR_RETURN, SUCCESS, TOPOLOGY_LEVELS)


def return_code_name(code):
    """nvmlReturn_t value -> its name in nvml.h; a value nvml.h does not name gives 'NVML_ERROR_<code>'."""
    if code is None:
        return None
    return RETURN_CODES.get(code, "NVML_ERROR_%s" % code)


def state_for_return(name):
    """A return code name (see return_code_name) -> one of STATES; 'ok' only for NVML_SUCCESS."""
    if name is None:
        return "error"
    return STATE_FOR_RETURN.get(name, "error")


def clock_event_reason_names(mask):
    """Clock event (throttle) reason bitmask -> sorted names; None for None. Bits nvml.h does not define
    are left out (nvidia-smi prints no element for them either)."""
    if mask is None:
        return None
    return sorted(name for bit, name in CLOCK_EVENT_REASONS if mask & bit)


def cpu_list(words, bits_per_word=64):
    """A CPU (or NUMA node) bitmask as NVML returns it (an array of unsigned longs, lowest CPU in bit 0 of
    the first word) -> ranges as topo -m prints them ("0-23,48-71"); None when no bit is set or words is
    None. A run of two or more numbers is written as a range, as the kernel's cpulist does."""
    if words is None:
        return None
    numbers = []
    for position, word in enumerate(words):
        base = position * bits_per_word
        while word:
            lowest = word & -word
            numbers.append(base + lowest.bit_length() - 1)
            word ^= lowest
    if not numbers:
        return None
    runs = []
    start = previous = numbers[0]
    for number in numbers[1:]:
        if number != previous + 1:
            runs.append((start, previous))
            start = number
        previous = number
    runs.append((start, previous))
    return ",".join("%d" % first if first == last else "%d-%d" % (first, last) for first, last in runs)


def relation_for_level(level):
    """nvmlGpuTopologyLevel_t -> PIX/PXB/PHB/NODE/SYS; None for a level nvml.h does not define."""
    return TOPOLOGY_LEVELS.get(level)


def architecture_name(code):
    """NVML_DEVICE_ARCH_* -> name as nvidia-smi prints product_architecture; None when unknown."""
    return ARCHITECTURES.get(code)


def compute_mode_name(code):
    """nvmlComputeMode_t -> name as nvidia-smi prints compute_mode; None when unknown."""
    return COMPUTE_MODES.get(code)


def p2p_status_name(code):
    """nvmlGpuP2PStatus_t -> a short name ("OK", "not supported", ...); None when unknown."""
    return P2P_STATUSES.get(code)


def device_type_name(code):
    """nvmlIntNvLinkDeviceType_t -> "gpu", "switch", "ibmnpu", "unknown"; None for None or another value."""
    return DEVICE_TYPES.get(code)


def cuda_version_string(version):
    """nvmlSystemGetCudaDriverVersion_v2's integer (12020) -> "12.2" (NVML_CUDA_DRIVER_VERSION_MAJOR/MINOR);
    None for None or a value that is not a plausible version."""
    if not isinstance(version, int) or version <= 0:
        return None
    return "%d.%d" % (version // 1000, version % 1000 // 10)


def fabric_names(state, status, status_text=None):
    """nvmlGpuFabricInfo_t's state and status -> {"state", "status"} as nvidia-smi prints them.

    The status is only meaningful once the state is completed (nvml.h): then "Success" for NVML_SUCCESS,
    else status_text (what nvmlErrorString says) or the return code name. Before that, or when the state is
    unknown, status is None.
    """
    name = FABRIC_STATES.get(state)
    if state != FABRIC_STATE_COMPLETED or status is None:
        return {"state": name, "status": None}
    if status == SUCCESS:
        return {"state": name, "status": "Success"}
    return {"state": name, "status": status_text or return_code_name(status)}


def fabric_health(mask, summary=None):
    """nvmlGpuFabricInfo_v2/v3_t's healthMask and healthSummary -> {"summary", "degraded_bandwidth",
    "route_recovery_in_progress", "route_unhealthy", "access_timeout_recovery", "incorrect_configuration",
    "partition_assigned"}: each None where NVML says NOT_SUPPORTED or gives a value nvml.h does not define (an
    incorrect configuration nvml.h does not name is "unknown (N)": it is not the value that means none). None when
    neither mask nor summary was read (the v1 struct has neither; v2 has no summary)."""
    if mask is None and summary is None:
        return None
    health = {"summary": FABRIC_HEALTH_SUMMARIES.get(summary) if summary is not None else None}
    for name, shift, width, values in FABRIC_HEALTH_MASK:
        value = (mask >> shift) & width if mask is not None else 0
        if name == "incorrect_configuration" and value > 1 and value not in values:
            health[name] = "unknown (%d)" % value
        else:
            health[name] = values.get(value)
    return health


def row_remapper_histogram(values):
    """nvmlRowRemapperHistogramValues_t's five counts (max, high, partial, low, none: banks with all, many, some,
    few and no spare rows left) -> a dict; None for None."""
    if values is None:
        return None
    return dict(zip(("max", "high", "partial", "low", "none"), values))


def recovery_action_name(value):
    """The name of an nvmlDeviceGpuRecoveryAction_t value (RECOVERY_ACTIONS); a value nvml.h did not have when this
    was written is "unknown (N)", still an action the driver asks for; None when NVML did not answer."""
    if value is None:
        return None
    return RECOVERY_ACTIONS.get(value, "unknown (%d)" % value)


def reset_status(reset_required, drain_and_reset, recovery_action):
    """(reset_required, drain_and_reset_recommended) as bools or None. The recovery action (a name of
    recovery_action_name, from field NVML_FI_DEV_GET_GPU_RECOVERY_ACTION) answers first where it says so for sure;
    the deprecated fields NVML_FI_DEV_RESET_STATUS and NVML_FI_DEV_DRAIN_AND_RESET_STATUS (what nvidia-smi prints
    under gpu_reset_status, read by drivers that lack the action) answer what it leaves open."""
    by_action = RESET_BY_ACTION.get(recovery_action, (None, None))
    return tuple(answer if answer is not None else None if field is None else bool(field)
                 for answer, field in zip(by_action, (reset_required, drain_and_reset)))


def nvlink_relations(links, bus_ids):
    """Count the active NVLinks between GPUs.

    links: {gpu label: [link dicts with active, remote_pci_bus_id, remote_device_type]}; bus_ids: {gpu
    label: its PCI bus id}. Returns {label: {other label: n}} for every pair with n > 0. A link to another
    GPU counts for that GPU (matched by PCI bus id, case- and domain-width-insensitive; also where the remote
    type is unknown because the library could not say, as the bus id is the GPU's). Where a GPU's
    links go to NVSwitches, every other GPU that also reaches a switch is at the number of the row GPU's
    active switch links, as topo -m prints NV12 on an 8x A100 HGX board.
    """
    by_bus = dict((_bus_key(bus), label) for label, bus in bus_ids.items() if _bus_key(bus))
    direct = {}
    switch_links = {}
    for label, entries in links.items():
        for entry in entries:
            if not entry.get("active"):
                continue
            kind = entry.get("remote_device_type")
            if kind == "switch":
                switch_links[label] = switch_links.get(label, 0) + 1
            elif kind in ("gpu", None):  # None: a library without the type call; the bus id alone is sure
                peer = by_bus.get(_bus_key(entry.get("remote_pci_bus_id")))
                if peer is not None and peer != label:
                    row = direct.setdefault(label, {})
                    row[peer] = row.get(peer, 0) + 1
    result = {}
    for label in links:
        row = dict(direct.get(label, {}))
        if switch_links.get(label):
            for other in switch_links:
                if other != label:
                    row[other] = row.get(other, 0) + switch_links[label]
        if row:
            result[label] = row
    return result


def topology_matrix(labels, levels, nvlinks):
    """The topo -m matrix: {label: {other: relation}} with self omitted.

    levels: {(label, other): nvmlGpuTopologyLevel_t or None}, looked up in either order; nvlinks: the
    output of nvlink_relations. NVLink wins ("NV<n>"); else the PCIe relation; None where neither is known.
    """
    matrix = {}
    for label in labels:
        row = {}
        for other in labels:
            if other == label:
                continue
            count = nvlinks.get(label, {}).get(other)
            if count:
                row[other] = "NV%d" % count
                continue
            level = levels.get((label, other))
            if level is None:
                level = levels.get((other, label))
            row[other] = relation_for_level(level) if level is not None else None
        matrix[label] = row
    return matrix


def _bus_key(bus_id):
    """A PCI bus id normalised for comparison: "0000:07:00.0" and "00000000:07:00.0" are one device."""
    if not bus_id:
        return None
    parts = bus_id.strip().lower().split(":")
    if len(parts) == 3:
        try:
            return "%x:%s:%s" % (int(parts[0], 16), parts[1], parts[2])
        except ValueError:
            return None
    if len(parts) == 2:
        return "0:%s:%s" % (parts[0], parts[1])
    return None


def mib(value_bytes):
    """Bytes -> MiB (int, rounded down, as nvidia-smi prints fb_memory_usage); None for None."""
    if value_bytes is None:
        return None
    return int(value_bytes // (1024 * 1024))


def watts(milliwatts):
    """mW -> W (float); None for None."""
    if milliwatts is None:
        return None
    return milliwatts / 1000.0
