# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts straight from NVML (``libnvidia-ml.so.1``, installed with every driver) through ctypes.

Standard library only, Python 3.8 or newer. The whole collection runs in a forked child process that sends
its result back as JSON over a pipe, so a GPU or driver call that hangs can be killed (SIGKILL) at the
timeout without taking the caller with it; the caller never loads the library itself.

Interface:

* ``gather(timeout, library=LIBRARY)``: everything, as a dict (see its docstring)
* ``FUNCTIONS``: every NVML symbol this module may call (a stand-in library must export each one)
* pure conversions, tested directly: ``return_code_name``, ``state_for_return``, ``clock_event_reason_names``,
  ``cpu_list``, ``relation_for_level``, ``nvlink_relations``, ``topology_matrix``, ``architecture_name``,
  ``compute_mode_name``, ``cuda_version_string``, ``fabric_names``, ``fabric_health``,
  ``row_remapper_histogram``, ``struct_version``, ``reset_status``, ``p2p_status_name``,
  ``device_type_name``, ``mib``, ``watts``

Every structure layout, enum value, constant and return code below is taken from NVIDIA's ``nvml.h`` as
published in github.com/NVIDIA/go-nvml, file ``gen/nvml/nvml.h`` (NVML_API_VERSION 13, commit
2f9e261fe40a7a1c54783d66805e8920564763b4, July 2026). Field names and spellings of the results follow what
``nvidia-smi -q -x`` and ``nvidia-smi topo -m`` print, so that both backends give one fact schema.

A call whose symbol the loaded library lacks (an older driver) or that answers NVML_ERROR_NOT_SUPPORTED
leaves its field None and is named in ``missing``; it never fails the whole gather.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import faulthandler
import json
import mmap
import os
import select
import signal
import time

LIBRARY = "libnvidia-ml.so.1"

# Every NVML symbol this module may call, in the order it first calls them.
FUNCTIONS = (
    "nvmlInit_v2",
    "nvmlShutdown",
    "nvmlErrorString",
    "nvmlSystemGetDriverVersion",
    "nvmlSystemGetNVMLVersion",
    "nvmlSystemGetCudaDriverVersion_v2",
    "nvmlDeviceGetCount_v2",
    "nvmlDeviceGetHandleByIndex_v2",
    "nvmlDeviceGetName",
    "nvmlDeviceGetUUID",
    "nvmlDeviceGetSerial",
    "nvmlDeviceGetPciInfo_v3",
    "nvmlDeviceGetMinorNumber",
    "nvmlDeviceGetModuleId",
    "nvmlDeviceGetArchitecture",
    "nvmlDeviceGetCudaComputeCapability",
    "nvmlDeviceGetVbiosVersion",
    "nvmlDeviceGetMemoryInfo_v2",
    "nvmlDeviceGetMemoryInfo",
    "nvmlDeviceGetPersistenceMode",
    "nvmlDeviceGetComputeMode",
    "nvmlDeviceGetMigMode",
    "nvmlDeviceGetEccMode",
    "nvmlDeviceGetTotalEccErrors",
    "nvmlDeviceGetMemoryErrorCounter",
    "nvmlDeviceGetRetiredPages",
    "nvmlDeviceGetRetiredPagesPendingStatus",
    "nvmlDeviceGetRemappedRows",
    "nvmlDeviceGetRowRemapperHistogram",
    "nvmlDeviceGetSramEccErrorStatus",
    "nvmlDeviceGetRepairStatus",
    "nvmlDeviceGetCurrPcieLinkGeneration",
    "nvmlDeviceGetMaxPcieLinkGeneration",
    "nvmlDeviceGetCurrPcieLinkWidth",
    "nvmlDeviceGetMaxPcieLinkWidth",
    "nvmlDeviceGetPcieReplayCounter",
    "nvmlDeviceGetEnforcedPowerLimit",
    "nvmlDeviceGetPowerUsage",
    "nvmlDeviceGetTemperature",
    "nvmlDeviceGetCurrentClocksEventReasons",
    "nvmlDeviceGetCurrentClocksThrottleReasons",
    "nvmlDeviceGetUtilizationRates",
    "nvmlDeviceGetGpuFabricInfoV",
    "nvmlDeviceGetGpuFabricInfo",
    "nvmlDeviceGetFieldValues",
    "nvmlDeviceGetMaxMigDeviceCount",
    "nvmlDeviceGetMigDeviceHandleByIndex",
    "nvmlDeviceGetGpuInstanceId",
    "nvmlDeviceGetComputeInstanceId",
    "nvmlDeviceGetAttributes_v2",
    "nvmlDeviceGetNvLinkState",
    "nvmlDeviceGetNvLinkRemotePciInfo_v2",
    "nvmlDeviceGetNvLinkRemoteDeviceType",
    "nvmlDeviceGetTopologyCommonAncestor",
    "nvmlDeviceGetP2PStatus",
    "nvmlDeviceGetCpuAffinity",
    "nvmlDeviceGetMemoryAffinity",
    "nvmlDeviceGetNumaNodeId",
)

# --- constants from nvml.h --------------------------------------------------------------------------------

# nvmlReturn_t
RETURN_CODES = {
    0: "NVML_SUCCESS",
    1: "NVML_ERROR_UNINITIALIZED",
    2: "NVML_ERROR_INVALID_ARGUMENT",
    3: "NVML_ERROR_NOT_SUPPORTED",
    4: "NVML_ERROR_NO_PERMISSION",
    5: "NVML_ERROR_ALREADY_INITIALIZED",
    6: "NVML_ERROR_NOT_FOUND",
    7: "NVML_ERROR_INSUFFICIENT_SIZE",
    8: "NVML_ERROR_INSUFFICIENT_POWER",
    9: "NVML_ERROR_DRIVER_NOT_LOADED",
    10: "NVML_ERROR_TIMEOUT",
    11: "NVML_ERROR_IRQ_ISSUE",
    12: "NVML_ERROR_LIBRARY_NOT_FOUND",
    13: "NVML_ERROR_FUNCTION_NOT_FOUND",
    14: "NVML_ERROR_CORRUPTED_INFOROM",
    15: "NVML_ERROR_GPU_IS_LOST",
    16: "NVML_ERROR_RESET_REQUIRED",
    17: "NVML_ERROR_OPERATING_SYSTEM",
    18: "NVML_ERROR_LIB_RM_VERSION_MISMATCH",
    19: "NVML_ERROR_IN_USE",
    20: "NVML_ERROR_MEMORY",
    21: "NVML_ERROR_NO_DATA",
    22: "NVML_ERROR_VGPU_ECC_NOT_SUPPORTED",
    23: "NVML_ERROR_INSUFFICIENT_RESOURCES",
    24: "NVML_ERROR_FREQ_NOT_SUPPORTED",
    25: "NVML_ERROR_ARGUMENT_VERSION_MISMATCH",
    26: "NVML_ERROR_DEPRECATED",
    27: "NVML_ERROR_NOT_READY",
    28: "NVML_ERROR_GPU_NOT_FOUND",
    29: "NVML_ERROR_INVALID_STATE",
    30: "NVML_ERROR_RESET_TYPE_NOT_SUPPORTED",
    999: "NVML_ERROR_UNKNOWN",
}
SUCCESS = 0
ERROR_INVALID_ARGUMENT = 2
ERROR_NOT_SUPPORTED = 3
ERROR_INSUFFICIENT_SIZE = 7
ERROR_FUNCTION_NOT_FOUND = 13
ERROR_GPU_IS_LOST = 15
ERROR_ARGUMENT_VERSION_MISMATCH = 25

# States gather() reports: nvidia_smi.ERROR_STATES plus two of its own. Kept literal here so that the
# child process needs no other module_utils (tests/unit/.../test_nvml.py checks the two stay equal).
STATES = (
    "ok",
    "driver_library_mismatch",
    "driver_not_loaded",
    "no_devices",
    "gpu_lost",
    "device_error",
    "error",
    "timeout",
    "library_not_found",
)

# Return code name -> state; any other failing code is "error".
_STATE_FOR_RETURN = {
    "NVML_SUCCESS": "ok",
    "NVML_ERROR_DRIVER_NOT_LOADED": "driver_not_loaded",
    "NVML_ERROR_LIB_RM_VERSION_MISMATCH": "driver_library_mismatch",
    "NVML_ERROR_GPU_IS_LOST": "gpu_lost",
    "NVML_ERROR_GPU_NOT_FOUND": "no_devices",
    "NVML_ERROR_LIBRARY_NOT_FOUND": "library_not_found",
    "NVML_ERROR_FUNCTION_NOT_FOUND": "library_not_found",
    "NVML_ERROR_RESET_REQUIRED": "device_error",
    "NVML_ERROR_CORRUPTED_INFOROM": "device_error",
    "NVML_ERROR_IRQ_ISSUE": "device_error",
    "NVML_ERROR_INSUFFICIENT_POWER": "device_error",
}

# Buffer sizes (nvmlConstants).
_NAME_SIZE = 96             # NVML_DEVICE_NAME_V2_BUFFER_SIZE
_UUID_SIZE = 96             # NVML_DEVICE_UUID_V2_BUFFER_SIZE
_SERIAL_SIZE = 30           # NVML_DEVICE_SERIAL_BUFFER_SIZE
_VBIOS_SIZE = 32            # NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE
_SYSTEM_VERSION_SIZE = 80   # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE
_PCI_BUS_ID_SIZE = 32       # NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
_PCI_BUS_ID_LEGACY_SIZE = 16  # NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
_FABRIC_UUID_LEN = 16       # NVML_GPU_FABRIC_UUID_LEN
NVLINK_MAX_LINKS = 36       # NVML_NVLINK_MAX_LINKS (12 and 18 in older headers: the library answers
# NVML_ERROR_INVALID_ARGUMENT or NOT_SUPPORTED past the links a device has)

_FEATURE_ENABLED = 1        # nvmlEnableState_t NVML_FEATURE_ENABLED
_MEMORY_ERROR_CORRECTED = 0     # nvmlMemoryErrorType_t
_MEMORY_ERROR_UNCORRECTED = 1
_VOLATILE_ECC = 0           # nvmlEccCounterType_t
_AGGREGATE_ECC = 1
_LOCATION_DRAM = 2          # nvmlMemoryLocation_t NVML_MEMORY_LOCATION_DRAM (Turing+)
_LOCATION_SRAM = 7          # NVML_MEMORY_LOCATION_SRAM (Turing+)
_RETIREMENT_MULTIPLE_SINGLE_BIT = 0  # nvmlPageRetirementCause_t
_RETIREMENT_DOUBLE_BIT = 1
_TEMPERATURE_GPU = 0        # nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
_P2P_CAPS_INDEX_NVLINK = 2  # nvmlGpuP2PCapsIndex_t
_AFFINITY_SCOPE_NODE = 0    # nvmlAffinityScope_t NVML_AFFINITY_SCOPE_NODE
_DEVICE_MIG_ENABLE = 1      # NVML_DEVICE_MIG_ENABLE

# nvmlFieldValue_t field ids: what nvidia-smi prints under gpu_reset_status, and the NVLink speed.
FI_DEV_NVLINK_SPEED_MBPS_COMMON = 90
FI_DEV_NVLINK_GET_SPEED = 164
FI_DEV_RESET_STATUS = 226
FI_DEV_DRAIN_AND_RESET_STATUS = 227
FI_DEV_GET_GPU_RECOVERY_ACTION = 230
# NVML_FI_DEV_POWER_AVERAGE "GPU power averaged over 1 sec interval, supported on Ampere (except GA100) or newer
# architectures" and NVML_FI_DEV_POWER_INSTANT "Current GPU power, supported on all architectures", in milliwatts; scope
# 0 is the GPU alone (1: the module, GPU and Grace CPU). In nvml.h from NVML 12.2 (the 535 branch).
FI_DEV_POWER_AVERAGE = 185
FI_DEV_POWER_INSTANT = 186

# nvmlDeviceGpuRecoveryAction_t (nvml.h) by value, as the fact names it; RECOVER_IMEX_DOMAIN came with NVML 595.
RECOVERY_ACTIONS = {0: "none", 1: "gpu_reset", 2: "node_reboot", 3: "drain_p2p", 4: "drain_and_reset",
                    5: "recover_imex_domain"}
# What an action answers of (reset required, drain and reset recommended), where it says so for sure: NONE neither,
# GPU_RESET and NODE_REBOOT (a reboot resets the GPU too) a reset, DRAIN_AND_RESET both. DRAIN_P2P (stop
# peer-to-peer work, then read the action again) and RECOVER_IMEX_DOMAIN do not answer the two questions: None.
_RESET_BY_ACTION = {"none": (False, False), "gpu_reset": (True, None), "node_reboot": (True, None),
                    "drain_and_reset": (True, True)}

# nvmlValueType_t -> the member of nvmlValue_t that holds the value.
_VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

# nvmlClocksEventReason* bits, named as nvidia-smi -q -x names the elements (without the prefix).
CLOCK_EVENT_REASONS = (
    (0x0000000000000001, "gpu_idle"),
    (0x0000000000000002, "applications_clocks_setting"),
    (0x0000000000000004, "sw_power_cap"),
    (0x0000000000000008, "hw_slowdown"),
    (0x0000000000000010, "sync_boost"),
    (0x0000000000000020, "sw_thermal_slowdown"),
    (0x0000000000000040, "hw_thermal_slowdown"),
    (0x0000000000000080, "hw_power_brake_slowdown"),
    (0x0000000000000100, "display_clocks_setting"),
)

# NVML_DEVICE_ARCH_* -> product_architecture as nvidia-smi prints it.
ARCHITECTURES = {
    2: "Kepler",
    3: "Maxwell",
    4: "Pascal",
    5: "Volta",
    6: "Turing",
    7: "Ampere",
    8: "Ada Lovelace",
    9: "Hopper",
    10: "Blackwell",
    13: "Rubin",
}

# nvmlComputeMode_t -> compute_mode as nvidia-smi prints it.
COMPUTE_MODES = {
    0: "Default",
    1: "Exclusive_Thread",
    2: "Prohibited",
    3: "Exclusive_Process",
}

# nvmlGpuTopologyLevel_t -> the relation `nvidia-smi topo -m` prints (its legend: PIX at most a single PCIe
# bridge, PXB multiple bridges without the host bridge, PHB through a host bridge, NODE between host bridges
# of one NUMA node, SYS across the SMP interconnect). NVML_TOPOLOGY_INTERNAL is, in nvidia-smi's manual (topo -n
# path 0), "a single PCIe switch on a dual GPU board (e.g. Tesla K80)": at most a single bridge, PIX.
TOPOLOGY_LEVELS = {
    0: "PIX",
    10: "PIX",
    20: "PXB",
    30: "PHB",
    40: "NODE",
    50: "SYS",
}

# nvmlGpuP2PStatus_t
P2P_STATUSES = {
    0: "OK",
    1: "chipset not supported",
    2: "GPU not supported",
    3: "topology not supported",
    4: "disabled by regkey",
    5: "not supported",
    6: "unknown",
}

# nvmlIntNvLinkDeviceType_t
DEVICE_TYPES = {0x00: "gpu", 0x01: "ibmnpu", 0x02: "switch", 0xFF: "unknown"}

# NVML_GPU_FABRIC_STATE_* -> fabric/state as nvidia-smi prints it (NOT_SUPPORTED prints N/A: None).
FABRIC_STATES = {0: None, 1: "Not Started", 2: "In Progress", 3: "Completed"}
_FABRIC_STATE_COMPLETED = 3

# NVML_GPU_FABRIC_HEALTH_SUMMARY_* (nvmlGpuFabricInfo_v3_t.healthSummary); NOT_SUPPORTED is None.
FABRIC_HEALTH_SUMMARIES = {0: None, 1: "Healthy", 2: "Unhealthy", 3: "Limited Capacity"}
# The fields of nvmlGpuFabricInfo_v2/v3_t.healthMask: (fact name, NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*,
# NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_*, {value: meaning}). Value 0 of each is *_NOT_SUPPORTED (None); for the
# yes/no fields 1 is *_TRUE and 2 *_FALSE.
_YES_NO_FIELD = {1: True, 2: False}
FABRIC_HEALTH_MASK = (
    ("degraded_bandwidth", 0, 0x3, _YES_NO_FIELD),
    ("route_recovery_in_progress", 2, 0x3, _YES_NO_FIELD),
    ("route_unhealthy", 4, 0x3, _YES_NO_FIELD),
    ("access_timeout_recovery", 6, 0x3, _YES_NO_FIELD),
    ("incorrect_configuration", 8, 0xf, {1: "none", 2: "incorrect_sysguid", 3: "incorrect_chassis_sn", 4: "no_partition",
                                         5: "insufficient_nvlinks", 6: "incompatible_gpu_fw", 7: "invalid_location",
                                         8: "gpu_state_invalid"}),
    ("partition_assigned", 12, 0x3, _YES_NO_FIELD),
)


# --- pure conversions -------------------------------------------------------------------------------------

def return_code_name(code):
    """nvmlReturn_t value -> its name in nvml.h; a value nvml.h does not name gives 'NVML_ERROR_<code>'."""
    if code is None:
        return None
    return RETURN_CODES.get(code, "NVML_ERROR_%s" % code)


def state_for_return(name):
    """A return code name (see return_code_name) -> one of STATES; 'ok' only for NVML_SUCCESS."""
    if name is None:
        return "error"
    return _STATE_FOR_RETURN.get(name, "error")


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
    if state != _FABRIC_STATE_COMPLETED or status is None:
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
    by_action = _RESET_BY_ACTION.get(recovery_action, (None, None))
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


# --- ctypes structures (nvml.h) ---------------------------------------------------------------------------

class _PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (filled by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2)."""
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * _PCI_BUS_ID_LEGACY_SIZE),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * _PCI_BUS_ID_SIZE),
    ]


class _Memory(ctypes.Structure):
    """nvmlMemory_t (bytes)."""
    _fields_ = [("total", ctypes.c_ulonglong), ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _MemoryV2(ctypes.Structure):
    """nvmlMemory_v2_t (bytes; nvmlDeviceGetMemoryInfo_v2, version nvmlMemory_v2): ``used`` is the allocated memory
    without ``reserved`` ("Device memory (in bytes) reserved for system use (driver or firmware)"), where
    nvmlMemory_t's ``used`` is the "Sum of Reserved and Allocated device memory"."""
    _fields_ = [("version", ctypes.c_uint), ("total", ctypes.c_ulonglong), ("reserved", ctypes.c_ulonglong),
                ("free", ctypes.c_ulonglong), ("used", ctypes.c_ulonglong)]


class _Utilization(ctypes.Structure):
    """nvmlUtilization_t (percent)."""
    _fields_ = [("gpu", ctypes.c_uint), ("memory", ctypes.c_uint)]


class _FabricInfo(ctypes.Structure):
    """nvmlGpuFabricInfo_t (the unversioned struct of nvmlDeviceGetGpuFabricInfo)."""
    _fields_ = [
        ("clusterUuid", ctypes.c_ubyte * _FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class _FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t (nvmlDeviceGetGpuFabricInfoV, version nvmlGpuFabricInfo_v2)."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * _FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
        ("healthMask", ctypes.c_uint),
    ]


class _FabricInfoV3(ctypes.Structure):
    """nvmlGpuFabricInfo_v3_t: v2 and healthSummary (nvmlDeviceGetGpuFabricInfoV, version nvmlGpuFabricInfo_v3)."""
    _fields_ = _FabricInfoV2._fields_ + [("healthSummary", ctypes.c_ubyte)]


class _RowRemapperHistogram(ctypes.Structure):
    """nvmlRowRemapperHistogramValues_t (banks by spare rows left)."""
    _fields_ = [(name, ctypes.c_uint) for name in ("max", "high", "partial", "low", "none")]


class _EccSramErrorStatus(ctypes.Structure):
    """nvmlEccSramErrorStatus_v1_t (nvmlDeviceGetSramEccErrorStatus)."""
    _fields_ = [("version", ctypes.c_uint)] + [(name, ctypes.c_ulonglong) for name in (
        "aggregateUncParity", "aggregateUncSecDed", "aggregateCor", "volatileUncParity", "volatileUncSecDed",
        "volatileCor", "aggregateUncBucketL2", "aggregateUncBucketSm", "aggregateUncBucketPcie",
        "aggregateUncBucketMcu", "aggregateUncBucketOther")] + [("bThresholdExceeded", ctypes.c_uint)]


class _RepairStatus(ctypes.Structure):
    """nvmlRepairStatus_v1_t (nvmlDeviceGetRepairStatus)."""
    _fields_ = [("version", ctypes.c_uint), ("bChannelRepairPending", ctypes.c_uint), ("bTpcRepairPending", ctypes.c_uint)]


def struct_version(structure, version):
    """NVML_STRUCT_VERSION(data, ver) of nvml.h: the struct's size, with the version in the top byte."""
    return ctypes.sizeof(structure) | (version << 24)


class _DeviceAttributes(ctypes.Structure):
    """nvmlDeviceAttributes_t (nvmlDeviceGetAttributes_v2)."""
    _fields_ = [
        ("multiprocessorCount", ctypes.c_uint),
        ("sharedCopyEngineCount", ctypes.c_uint),
        ("sharedDecoderCount", ctypes.c_uint),
        ("sharedEncoderCount", ctypes.c_uint),
        ("sharedJpegCount", ctypes.c_uint),
        ("sharedOfaCount", ctypes.c_uint),
        ("gpuInstanceSliceCount", ctypes.c_uint),
        ("computeInstanceSliceCount", ctypes.c_uint),
        ("memorySizeMB", ctypes.c_ulonglong),
    ]


class _Value(ctypes.Union):
    """nvmlValue_t."""
    _fields_ = [
        ("dVal", ctypes.c_double),
        ("siVal", ctypes.c_int),
        ("uiVal", ctypes.c_uint),
        ("ulVal", ctypes.c_ulong),
        ("ullVal", ctypes.c_ulonglong),
        ("sllVal", ctypes.c_longlong),
        ("usVal", ctypes.c_ushort),
    ]


class _FieldValue(ctypes.Structure):
    """nvmlFieldValue_t."""
    _fields_ = [
        ("fieldId", ctypes.c_uint),
        ("scopeId", ctypes.c_uint),
        ("timestamp", ctypes.c_longlong),
        ("latencyUsec", ctypes.c_longlong),
        ("valueType", ctypes.c_int),
        ("nvmlReturn", ctypes.c_int),
        ("value", _Value),
    ]


def _decode(raw):
    value = raw.decode("utf-8", "replace").strip()
    return value or None


# --- the binding (runs in the child process) --------------------------------------------------------------

class _DeviceLost(Exception):
    """A call on a device handle answered NVML_ERROR_GPU_IS_LOST."""

    def __init__(self, call):
        super(_DeviceLost, self).__init__(call)
        self.call = call


class _Nvml:
    """The loaded library, calls made through it, and what was missing or failed."""

    def __init__(self, library, progress=None):
        self.lib = ctypes.CDLL(library)
        self.missing = set()
        self.absent = set()
        self.errors = []
        self.progress = progress
        self.device = None  # the GPU the calls are about, for the progress lines
        self._functions = {}

    def function(self, name):
        if name not in self._functions:
            try:
                function = getattr(self.lib, name)
            except AttributeError:
                function = None
            if function is not None:
                function.restype = ctypes.c_char_p if name == "nvmlErrorString" else ctypes.c_int
            self._functions[name] = function
        return self._functions[name]

    def raw(self, name, *args):
        """The return code of name(*args), or None when the library lacks the symbol or the driver the call
        (NVML_ERROR_FUNCTION_NOT_FOUND)."""
        function = self.function(name)
        if function is None:
            self.absent.add(name)
            self.missing.add(name)
            return None
        if self.progress is not None:
            self.progress(name if self.device is None else "%s on %s" % (name, self.device))
        code = function(*args)
        if code == ERROR_FUNCTION_NOT_FOUND:
            # The library has the symbol but this driver does not implement the call: as good as absent.
            self.absent.add(name)
            self.missing.add(name)
            return None
        return code

    def error_string(self, code):
        function = self.function("nvmlErrorString")
        if function is None or code is None:
            return None
        try:
            text = function(code)
        except (ctypes.ArgumentError, ValueError):
            return None
        return _decode(text) if text else None

    def call(self, name, label, *args):
        """True when name(*args) succeeded. NOT_SUPPORTED and an absent symbol are 'missing'; a lost GPU
        raises _DeviceLost; any other failure is recorded in errors. label names the device for errors."""
        return self.answered(name, label, self.raw(name, *args))

    def answered(self, name, label, code):
        """call's judgement of a return code raw gave: True on success, else the failure recorded."""
        if code is None:
            return False
        if code == SUCCESS:
            return True
        if code == ERROR_NOT_SUPPORTED:
            self.missing.add(name)
        elif code == ERROR_GPU_IS_LOST and label is not None:
            raise _DeviceLost(name)
        else:
            self.errors.append({"call": name, "device": label, "nvml_return": return_code_name(code)})
        return False

    def uint(self, name, label, *args):
        value = ctypes.c_uint()
        return value.value if self.call(name, label, *(args + (ctypes.byref(value),))) else None

    def ulonglong(self, name, label, *args):
        value = ctypes.c_ulonglong()
        return value.value if self.call(name, label, *(args + (ctypes.byref(value),))) else None

    def text(self, name, label, size, *args):
        buffer = ctypes.create_string_buffer(size)
        return _decode(buffer.value) if self.call(name, label, *(args + (buffer, ctypes.c_uint(size)))) else None

    def enabled(self, name, label, *args):
        value = self.uint(name, label, *args)
        return None if value is None else value == _FEATURE_ENABLED

    def fields(self, label, handle, wanted):
        """nvmlDeviceGetFieldValues for [(field id, scope id)]: {(field id, scope id): value or None}."""
        values = (_FieldValue * len(wanted))()
        for slot, (field_id, scope_id) in zip(values, wanted):
            slot.fieldId = field_id
            slot.scopeId = scope_id
        found = dict((key, None) for key in wanted)
        if not self.call("nvmlDeviceGetFieldValues", label, handle, ctypes.c_int(len(wanted)), values):
            return found
        for slot in values:
            member = _VALUE_MEMBER.get(slot.valueType)
            if slot.nvmlReturn == SUCCESS and member is not None:
                found[(slot.fieldId, slot.scopeId)] = getattr(slot.value, member)
            elif slot.nvmlReturn == ERROR_GPU_IS_LOST:
                raise _DeviceLost("nvmlDeviceGetFieldValues")
        return found


def _pci(nvml, name, label, *args):
    info = _PciInfo()
    if not nvml.call(name, label, *(args + (ctypes.byref(info),))):
        return None
    return _decode(info.busId) or _decode(info.busIdLegacy)


def _ecc_total(nvml, label, handle, error_type, counter_type):
    """nvmlDeviceGetTotalEccErrors (every memory location); where that is unavailable, DRAM + SRAM from
    nvmlDeviceGetMemoryErrorCounter, when both of those answer."""
    total = nvml.ulonglong("nvmlDeviceGetTotalEccErrors", label, handle, ctypes.c_int(error_type),
                           ctypes.c_int(counter_type))
    if total is not None:
        return total
    parts = [nvml.ulonglong("nvmlDeviceGetMemoryErrorCounter", label, handle, ctypes.c_int(error_type),
                            ctypes.c_int(counter_type), ctypes.c_int(location))
             for location in (_LOCATION_DRAM, _LOCATION_SRAM)]
    return None if None in parts else sum(parts)


def _retired_count(nvml, label, handle, cause):
    count = ctypes.c_uint(0)
    code = nvml.raw("nvmlDeviceGetRetiredPages", handle, ctypes.c_int(cause), ctypes.byref(count), None)
    if code in (SUCCESS, ERROR_INSUFFICIENT_SIZE):
        return count.value
    if code == ERROR_GPU_IS_LOST:
        raise _DeviceLost("nvmlDeviceGetRetiredPages")
    if code == ERROR_NOT_SUPPORTED:
        nvml.missing.add("nvmlDeviceGetRetiredPages")
    elif code is not None:
        nvml.errors.append({"call": "nvmlDeviceGetRetiredPages", "device": label,
                            "nvml_return": return_code_name(code)})
    return None


def _remapped_rows(nvml, label, handle):
    values = [ctypes.c_uint() for _position in range(4)]
    if not nvml.call("nvmlDeviceGetRemappedRows", label, handle, *[ctypes.byref(value) for value in values]):
        return None
    corrected, uncorrected, pending, failure = [value.value for value in values]
    return {"correctable": corrected, "uncorrectable": uncorrected, "pending": bool(pending),
            "failure": bool(failure)}


def _clock_reasons(nvml, label, handle):
    mask = None
    if nvml.function("nvmlDeviceGetCurrentClocksEventReasons") is not None:
        mask = nvml.ulonglong("nvmlDeviceGetCurrentClocksEventReasons", label, handle)
    else:  # drivers before 535 know the call by its older name
        mask = nvml.ulonglong("nvmlDeviceGetCurrentClocksThrottleReasons", label, handle)
    return clock_event_reason_names(mask)


def _fabric(nvml, label, handle):
    """The fabric state and status, with its health: nvmlDeviceGetGpuFabricInfoV with the v3 struct (health mask
    and summary), else v2 (mask only) where the library answers ARGUMENT_VERSION_MISMATCH, else the unversioned
    nvmlDeviceGetGpuFabricInfo of older libraries (no health)."""
    if nvml.function("nvmlDeviceGetGpuFabricInfoV") is not None:
        for structure, version in ((_FabricInfoV3, 3), (_FabricInfoV2, 2)):
            info = structure()
            info.version = struct_version(structure, version)
            code = nvml.raw("nvmlDeviceGetGpuFabricInfoV", handle, ctypes.byref(info))
            if code == SUCCESS:
                result = fabric_names(info.state, info.status, nvml.error_string(info.status))
                result["health"] = fabric_health(info.healthMask, info.healthSummary if version == 3 else None)
                return result
            if code == ERROR_ARGUMENT_VERSION_MISMATCH:
                continue
            if code == ERROR_GPU_IS_LOST:
                raise _DeviceLost("nvmlDeviceGetGpuFabricInfoV")
            if code == ERROR_NOT_SUPPORTED:
                nvml.missing.add("nvmlDeviceGetGpuFabricInfoV")
                return {"state": None, "status": None, "health": None}
            if code is not None:
                nvml.errors.append({"call": "nvmlDeviceGetGpuFabricInfoV", "device": label,
                                    "nvml_return": return_code_name(code)})
            break
    else:
        nvml.absent.add("nvmlDeviceGetGpuFabricInfoV")
        nvml.missing.add("nvmlDeviceGetGpuFabricInfoV")
    info = _FabricInfo()
    if not nvml.call("nvmlDeviceGetGpuFabricInfo", label, handle, ctypes.byref(info)):
        return {"state": None, "status": None, "health": None}
    return dict(fabric_names(info.state, info.status, nvml.error_string(info.status)), health=None)


def _memory(nvml, label, handle):
    """The frame buffer in MiB: {total, reserved, free, used}, as DCGM reads it (DcgmCacheManager's
    ReadAndCacheFBMemoryInfo: nvmlDeviceGetMemoryInfo_v2 from driver 510, nvmlDeviceGetMemoryInfo before). A library
    without the v2 call (before 510) gives nvmlMemory_t, whose used includes what the driver reserves, and no
    reserved; one that has it is asked nothing else, so used never changes meaning on a failure."""
    memory = _MemoryV2()
    memory.version = struct_version(_MemoryV2, 2)
    code = nvml.raw("nvmlDeviceGetMemoryInfo_v2", handle, ctypes.byref(memory))
    if code is not None:
        if not nvml.answered("nvmlDeviceGetMemoryInfo_v2", label, code):
            return {"total": None, "reserved": None, "free": None, "used": None}
        return {"total": mib(memory.total), "reserved": mib(memory.reserved), "free": mib(memory.free),
                "used": mib(memory.used)}
    older = _Memory()
    if not nvml.call("nvmlDeviceGetMemoryInfo", label, handle, ctypes.byref(older)):
        return {"total": None, "reserved": None, "free": None, "used": None}
    return {"total": mib(older.total), "reserved": None, "free": mib(older.free), "used": mib(older.used)}


def _histogram(nvml, label, handle):
    values = _RowRemapperHistogram()
    if not nvml.call("nvmlDeviceGetRowRemapperHistogram", label, handle, ctypes.byref(values)):
        return None
    return row_remapper_histogram([getattr(values, name) for name in ("max", "high", "partial", "low", "none")])


def _sram_threshold_exceeded(nvml, label, handle):
    """bThresholdExceeded of nvmlDeviceGetSramEccErrorStatus: the SRAM error threshold of NVIDIA's field diagnostic
    is exceeded (its RMA criterion); None where unreadable (NVML asks for root, older drivers lack the call)."""
    status = _EccSramErrorStatus()
    status.version = struct_version(_EccSramErrorStatus, 1)
    if not nvml.call("nvmlDeviceGetSramEccErrorStatus", label, handle, ctypes.byref(status)):
        return None
    return bool(status.bThresholdExceeded)


def _repair_pending(nvml, label, handle):
    """{"channel", "tpc"}: a channel (HBM) or TPC repair waits for a GPU reset (nvmlDeviceGetRepairStatus)."""
    status = _RepairStatus()
    status.version = struct_version(_RepairStatus, 1)
    if not nvml.call("nvmlDeviceGetRepairStatus", label, handle, ctypes.byref(status)):
        return None
    return {"channel": bool(status.bChannelRepairPending), "tpc": bool(status.bTpcRepairPending)}


def _mig_devices(nvml, label, handle):
    count = nvml.uint("nvmlDeviceGetMaxMigDeviceCount", label, handle)
    devices = []
    for slot in range(count or 0):
        mig = ctypes.c_void_p()
        code = nvml.raw("nvmlDeviceGetMigDeviceHandleByIndex", handle, ctypes.c_uint(slot), ctypes.byref(mig))
        if code != SUCCESS:
            if code == ERROR_GPU_IS_LOST:
                raise _DeviceLost("nvmlDeviceGetMigDeviceHandleByIndex")
            continue  # NVML_ERROR_NOT_FOUND: no MIG device in this slot
        memory = _Memory()
        attributes = _DeviceAttributes()
        devices.append({
            "index": len(devices),
            "gpu_instance_id": nvml.uint("nvmlDeviceGetGpuInstanceId", label, mig),
            "compute_instance_id": nvml.uint("nvmlDeviceGetComputeInstanceId", label, mig),
            "memory_total_mib": mib(memory.total) if nvml.call("nvmlDeviceGetMemoryInfo", label, mig,
                                                               ctypes.byref(memory)) else None,
            "multiprocessor_count": attributes.multiprocessorCount
            if nvml.call("nvmlDeviceGetAttributes_v2", label, mig, ctypes.byref(attributes)) else None,
        })
    return devices


def _device(nvml, index, handle):
    """One GPU in the shared per-GPU schema (plus its NVLinks, affinity and utilisation, kept apart)."""
    label = "GPU%d" % index
    major, minor = ctypes.c_int(), ctypes.c_int()
    capability = None
    if nvml.call("nvmlDeviceGetCudaComputeCapability", label, handle, ctypes.byref(major), ctypes.byref(minor)):
        capability = "%d.%d" % (major.value, minor.value)
    mig_current, mig_pending = ctypes.c_uint(), ctypes.c_uint()
    mig_mode = {"current": None, "pending": None}
    if nvml.call("nvmlDeviceGetMigMode", label, handle, ctypes.byref(mig_current), ctypes.byref(mig_pending)):
        mig_mode = {"current": mig_current.value == _DEVICE_MIG_ENABLE,
                    "pending": mig_pending.value == _DEVICE_MIG_ENABLE}
    ecc_current, ecc_pending = ctypes.c_uint(), ctypes.c_uint()
    ecc_mode = {"current": None, "pending": None}
    if nvml.call("nvmlDeviceGetEccMode", label, handle, ctypes.byref(ecc_current), ctypes.byref(ecc_pending)):
        ecc_mode = {"current": ecc_current.value == _FEATURE_ENABLED, "pending": ecc_pending.value == _FEATURE_ENABLED}
    reset_fields = (FI_DEV_RESET_STATUS, FI_DEV_DRAIN_AND_RESET_STATUS, FI_DEV_GET_GPU_RECOVERY_ACTION)
    power_fields = (FI_DEV_POWER_AVERAGE, FI_DEV_POWER_INSTANT)
    values = nvml.fields(label, handle, [(field, 0) for field in reset_fields + power_fields])
    recovery_action = recovery_action_name(values[(FI_DEV_GET_GPU_RECOVERY_ACTION, 0)])
    reset_required, drain = reset_status(values[(FI_DEV_RESET_STATUS, 0)], values[(FI_DEV_DRAIN_AND_RESET_STATUS, 0)],
                                         recovery_action)
    memory = _memory(nvml, label, handle)
    device = {
        "index": index,
        "name": nvml.text("nvmlDeviceGetName", label, _NAME_SIZE, handle),
        "uuid": nvml.text("nvmlDeviceGetUUID", label, _UUID_SIZE, handle),
        "serial": nvml.text("nvmlDeviceGetSerial", label, _SERIAL_SIZE, handle),
        "pci_bus_id": _pci(nvml, "nvmlDeviceGetPciInfo_v3", label, handle),
        "minor_number": nvml.uint("nvmlDeviceGetMinorNumber", label, handle),
        # 0 is what drivers before 570 report for PCIe cards (no module): unknown, as the -q -x parser reads it.
        "module_id": nvml.uint("nvmlDeviceGetModuleId", label, handle) or None,
        "architecture": architecture_name(nvml.uint("nvmlDeviceGetArchitecture", label, handle)),
        "compute_capability": capability,
        "memory_total_mib": memory["total"],
        "memory_used_mib": memory["used"],
        "memory_reserved_mib": memory["reserved"],
        "memory_free_mib": memory["free"],
        "mig_mode": mig_mode,
        "mig_devices": _mig_devices(nvml, label, handle) if mig_mode["current"] else [],
        "persistence_mode": nvml.enabled("nvmlDeviceGetPersistenceMode", label, handle),
        "compute_mode": compute_mode_name(nvml.uint("nvmlDeviceGetComputeMode", label, handle)),
        "ecc_mode": ecc_mode,
        "ecc_errors_uncorrected_volatile": _ecc_total(nvml, label, handle, _MEMORY_ERROR_UNCORRECTED, _VOLATILE_ECC),
        "ecc_errors_uncorrected_aggregate": _ecc_total(nvml, label, handle, _MEMORY_ERROR_UNCORRECTED, _AGGREGATE_ECC),
        "ecc_errors_corrected_volatile": _ecc_total(nvml, label, handle, _MEMORY_ERROR_CORRECTED, _VOLATILE_ECC),
        "retired_pages": {
            "single_bit_ecc": _retired_count(nvml, label, handle, _RETIREMENT_MULTIPLE_SINGLE_BIT),
            "double_bit_ecc": _retired_count(nvml, label, handle, _RETIREMENT_DOUBLE_BIT),
            "pending": nvml.enabled("nvmlDeviceGetRetiredPagesPendingStatus", label, handle),
        },
        "remapped_rows": _remapped_rows(nvml, label, handle),
        "row_remapper_histogram": _histogram(nvml, label, handle),
        "sram_threshold_exceeded": _sram_threshold_exceeded(nvml, label, handle),
        "repair_pending": _repair_pending(nvml, label, handle),
        "recovery_action": recovery_action,
        "reset_required": reset_required,
        "drain_and_reset_recommended": drain,
        "pcie": {
            "gen_current": nvml.uint("nvmlDeviceGetCurrPcieLinkGeneration", label, handle),
            "gen_max": nvml.uint("nvmlDeviceGetMaxPcieLinkGeneration", label, handle),
            "width_current": nvml.uint("nvmlDeviceGetCurrPcieLinkWidth", label, handle),
            "width_max": nvml.uint("nvmlDeviceGetMaxPcieLinkWidth", label, handle),
            "replay_counter": nvml.uint("nvmlDeviceGetPcieReplayCounter", label, handle),
        },
        "power_limit_w": watts(nvml.uint("nvmlDeviceGetEnforcedPowerLimit", label, handle)),
        # As DCGM reads DCGM_FI_DEV_POWER_USAGE (nvmlDeviceGetPowerUsage: averaged over 1 s on Ampere except GA100
        # and newer, instant on older GPUs) and DCGM_FI_DEV_POWER_USAGE_INSTANT (field 186).
        "power_draw_w": watts(nvml.uint("nvmlDeviceGetPowerUsage", label, handle)),
        "power_draw_average_w": watts(values[(FI_DEV_POWER_AVERAGE, 0)]),
        "power_draw_instant_w": watts(values[(FI_DEV_POWER_INSTANT, 0)]),
        # 0 C is what a vGPU guest reads (no sensor): unknown, as the -q -x parser reads it.
        "temperature_c": nvml.uint("nvmlDeviceGetTemperature", label, handle, ctypes.c_int(_TEMPERATURE_GPU)) or None,
        "clock_event_reasons_active": _clock_reasons(nvml, label, handle),
        "fabric": _fabric(nvml, label, handle),
        "vbios_version": nvml.text("nvmlDeviceGetVbiosVersion", label, _VBIOS_SIZE, handle),
    }
    return device


def _nvlinks(nvml, label, handle):
    """The device's NVLinks: [{link, active, speed_gbps, remote_pci_bus_id, remote_device_type}]; [] for a
    device without NVLink (every link answers NOT_SUPPORTED or INVALID_ARGUMENT)."""
    links = []
    for link in range(NVLINK_MAX_LINKS):
        state = ctypes.c_uint()
        code = nvml.raw("nvmlDeviceGetNvLinkState", handle, ctypes.c_uint(link), ctypes.byref(state))
        if code is None:
            return []
        if code == ERROR_GPU_IS_LOST:
            raise _DeviceLost("nvmlDeviceGetNvLinkState")
        if code == ERROR_INVALID_ARGUMENT:
            break  # past the links this library knows of
        if code != SUCCESS:
            continue
        active = state.value == _FEATURE_ENABLED
        # The far end of a link that is down may be unknown to the driver: asked, but not held as missing.
        kind = ctypes.c_int()
        if active:
            known = nvml.call("nvmlDeviceGetNvLinkRemoteDeviceType", label, handle, ctypes.c_uint(link), ctypes.byref(kind))
            remote_bus = _pci(nvml, "nvmlDeviceGetNvLinkRemotePciInfo_v2", label, handle, ctypes.c_uint(link))
        else:
            known = nvml.raw("nvmlDeviceGetNvLinkRemoteDeviceType", handle, ctypes.c_uint(link), ctypes.byref(kind)) == SUCCESS
            info = _PciInfo()
            code = nvml.raw("nvmlDeviceGetNvLinkRemotePciInfo_v2", handle, ctypes.c_uint(link), ctypes.byref(info))
            remote_bus = _decode(info.busId) if code == SUCCESS else None
        remote_type = device_type_name(kind.value) if known else None
        links.append({
            "link": link,
            "active": active,
            "speed_gbps": None,
            "remote_pci_bus_id": remote_bus,
            "remote_device_type": remote_type,
        })
    active_links = [entry["link"] for entry in links if entry["active"]]
    if active_links:
        # Per link NVML_FI_DEV_NVLINK_GET_SPEED (scope: the link), else the speed common to active links; MBps as
        # nvidia-smi nvlink -s prints GB/s (26562 -> 26.562).
        wanted = [(FI_DEV_NVLINK_GET_SPEED, link) for link in active_links] + [(FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0)]
        speeds = nvml.fields(label, handle, wanted)
        common = speeds[(FI_DEV_NVLINK_SPEED_MBPS_COMMON, 0)]
        for entry in links:
            if entry["active"]:
                mbps = speeds[(FI_DEV_NVLINK_GET_SPEED, entry["link"])] or common
                entry["speed_gbps"] = mbps / 1000.0 if mbps else None
    return links


def _affinity(nvml, label, handle, name):
    bits = ctypes.sizeof(ctypes.c_ulong) * 8
    size = max(16, ((os.cpu_count() or 1) + bits - 1) // bits)
    words = (ctypes.c_ulong * size)()
    if name == "nvmlDeviceGetMemoryAffinity":
        args = (handle, ctypes.c_uint(size), words, ctypes.c_int(_AFFINITY_SCOPE_NODE))
    else:
        args = (handle, ctypes.c_uint(size), words)
    if not nvml.call(name, label, *args):
        return None
    return cpu_list(list(words), bits)


def _numa_id(nvml, label, handle):
    """The GPU's own NUMA node as topo -m prints "GPU NUMA ID": the number, "N/A" where NVML says the GPU
    has none (NOT_SUPPORTED), None where it cannot be read."""
    node = ctypes.c_uint()
    code = nvml.raw("nvmlDeviceGetNumaNodeId", handle, ctypes.byref(node))
    if code == SUCCESS:
        return "%d" % node.value
    if code == ERROR_NOT_SUPPORTED:
        return "N/A"
    if code == ERROR_GPU_IS_LOST:
        raise _DeviceLost("nvmlDeviceGetNumaNodeId")
    if code is not None:
        nvml.errors.append({"call": "nvmlDeviceGetNumaNodeId", "device": label, "nvml_return": return_code_name(code)})
    return None


def _pairs(nvml, handles):
    """Common ancestor levels and NVLink P2P status of every GPU pair: (levels, p2p)."""
    levels = {}
    p2p = {}
    labels = sorted(handles, key=lambda name: int(name[3:]))
    for position, label in enumerate(labels):
        for other in labels[position + 1:]:
            level = ctypes.c_int()
            code = nvml.raw("nvmlDeviceGetTopologyCommonAncestor", handles[label], handles[other], ctypes.byref(level))
            levels[(label, other)] = level.value if code == SUCCESS else None
            if code not in (SUCCESS, None, ERROR_NOT_SUPPORTED):
                nvml.errors.append({"call": "nvmlDeviceGetTopologyCommonAncestor", "device": "%s,%s" % (label, other),
                                    "nvml_return": return_code_name(code)})
            elif code == ERROR_NOT_SUPPORTED:
                nvml.missing.add("nvmlDeviceGetTopologyCommonAncestor")
        for other in labels:
            if other == label:
                continue
            status = ctypes.c_int()
            code = nvml.raw("nvmlDeviceGetP2PStatus", handles[label], handles[other], ctypes.c_int(_P2P_CAPS_INDEX_NVLINK),
                            ctypes.byref(status))
            p2p.setdefault(label, {})[other] = p2p_status_name(status.value) if code == SUCCESS else None
            if code == ERROR_NOT_SUPPORTED:
                nvml.missing.add("nvmlDeviceGetP2PStatus")
    return levels, p2p


def _collect(library, progress=None):
    """The whole gather, in this process. Returns the result dict of gather() without timings' total."""
    started = time.monotonic()
    result = {
        "state": "error", "message": None, "nvml_return": None, "driver_version": None,
        "cuda_driver_version": None, "nvml_version": None, "count": None, "devices": [], "lost": [],
        "topology": None, "utilization": {}, "missing": [], "absent": [], "errors": [],
        "timings": {"init": None, "gather": None},
    }
    try:
        nvml = _Nvml(library, progress)
    except OSError as exc:
        result.update(state="library_not_found", message="cannot load the NVML library: %s" % " ".join(str(exc).split()))
        return result
    if nvml.function("nvmlInit_v2") is None:
        result.update(state="library_not_found", message="%s has no nvmlInit_v2: not an NVML library" % library)
        return result
    code = nvml.raw("nvmlInit_v2")
    result["timings"]["init"] = round(time.monotonic() - started, 6)
    if code != SUCCESS:
        name = return_code_name(code)
        result.update(state=state_for_return(name), nvml_return=name,
                      message="nvmlInit_v2 failed: %s (%s)" % (name, nvml.error_string(code) or "no description"))
        return result
    gather_started = time.monotonic()
    try:
        _collect_initialised(nvml, result)
    finally:
        nvml.raw("nvmlShutdown")
        result["missing"] = sorted(nvml.missing)
        result["absent"] = sorted(nvml.absent)
        result["errors"] = nvml.errors
        result["timings"]["gather"] = round(time.monotonic() - gather_started, 6)
    return result


def _collect_initialised(nvml, result):
    result["driver_version"] = nvml.text("nvmlSystemGetDriverVersion", None, _SYSTEM_VERSION_SIZE)
    result["nvml_version"] = nvml.text("nvmlSystemGetNVMLVersion", None, _SYSTEM_VERSION_SIZE)
    cuda = ctypes.c_int()
    if nvml.call("nvmlSystemGetCudaDriverVersion_v2", None, ctypes.byref(cuda)):
        result["cuda_driver_version"] = cuda_version_string(cuda.value)
    count = ctypes.c_uint()
    code = nvml.raw("nvmlDeviceGetCount_v2", ctypes.byref(count))
    if code != SUCCESS:
        name = return_code_name(code) if code is not None else "NVML_ERROR_FUNCTION_NOT_FOUND"
        result.update(state=state_for_return(name), nvml_return=name,
                      message="nvmlDeviceGetCount_v2 failed: %s (%s)" % (name, nvml.error_string(code) or "no description"))
        return
    result["count"] = count.value
    if count.value == 0:
        result.update(state="no_devices", message="NVML found no GPU%s" % (
            " (driver %s)" % result["driver_version"] if result["driver_version"] else ""))
        return
    handles = {}
    links = {}
    affinity = {"cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {}}
    for index in range(count.value):
        label = "GPU%d" % index
        nvml.device = label
        handle = ctypes.c_void_p()
        code = nvml.raw("nvmlDeviceGetHandleByIndex_v2", ctypes.c_uint(index), ctypes.byref(handle))
        if code != SUCCESS:
            result["lost"].append({"index": index, "pci_bus_id": None, "nvml_return": return_code_name(code),
                                   "call": "nvmlDeviceGetHandleByIndex_v2"})
            continue
        try:
            device = _device(nvml, index, handle)
            gpu_links = _nvlinks(nvml, label, handle)
            values = (
                _affinity(nvml, label, handle, "nvmlDeviceGetCpuAffinity"),
                _affinity(nvml, label, handle, "nvmlDeviceGetMemoryAffinity"),
                _numa_id(nvml, label, handle),
            )
            usage = _Utilization()
            utilization = {"gpu_pct": usage.gpu, "memory_pct": usage.memory} if nvml.call(
                "nvmlDeviceGetUtilizationRates", label, handle, ctypes.byref(usage)) else None
        except _DeviceLost as lost:
            result["lost"].append({"index": index, "pci_bus_id": _pci_quietly(nvml, handle),
                                   "nvml_return": "NVML_ERROR_GPU_IS_LOST", "call": lost.call})
            continue
        device["utilization_gpu_pct"] = utilization["gpu_pct"] if utilization else None
        result["devices"].append(device)
        handles[label] = handle
        if gpu_links:
            links[label] = gpu_links
        for key, value in zip(("cpu_affinity", "numa_affinity", "gpu_numa_id"), values):
            affinity[key][label] = value
        result["utilization"][label] = utilization
    nvml.device = None
    labels = ["GPU%d" % device["index"] for device in result["devices"]]
    levels, p2p = _pairs(nvml, handles)
    bus_ids = dict(("GPU%d" % device["index"], device["pci_bus_id"]) for device in result["devices"])
    result["topology"] = {
        "gpus": labels,
        "matrix": topology_matrix(labels, levels, nvlink_relations(links, bus_ids)),
        "nics": None,
        "gpu_nic": None,
        "cpu_affinity": affinity["cpu_affinity"],
        "numa_affinity": affinity["numa_affinity"],
        "gpu_numa_id": affinity["gpu_numa_id"],
        "nvlink": links,
        "p2p": p2p,
    }
    _decide(result)


def _pci_quietly(nvml, handle):
    info = _PciInfo()
    try:
        code = nvml.raw("nvmlDeviceGetPciInfo_v3", handle, ctypes.byref(info))
    except (ctypes.ArgumentError, ValueError):
        return None
    return _decode(info.busId) if code == SUCCESS else None


def _decide(result):
    """The state and message of a gather that got past nvmlDeviceGetCount_v2."""
    count = result["count"]
    found = len(result["devices"])
    lost = result["lost"]
    if not lost:
        result.update(state="ok", message="NVML %s: %d GPU%s, driver %s, CUDA %s" % (
            result["nvml_version"], found, "" if found == 1 else "s", result["driver_version"],
            result["cuda_driver_version"]))
        return
    codes = [entry["nvml_return"] for entry in lost]
    name = "NVML_ERROR_GPU_IS_LOST" if "NVML_ERROR_GPU_IS_LOST" in codes else codes[0]
    state = state_for_return(name)
    result.update(
        state="gpu_lost" if state == "gpu_lost" else "device_error",
        nvml_return=name,
        message="%d of %d GPUs unreachable (%s): %s" % (
            len(lost), count, name,
            ", ".join("GPU%d%s" % (entry["index"], " at %s" % entry["pci_bus_id"] if entry["pci_bus_id"] else "")
                      for entry in lost)))


# --- the child process ------------------------------------------------------------------------------------

def _write_all(fd, data):
    while data:
        written = os.write(fd, data)
        data = data[written:]


_LAST_CALL_SIZE = 256


def _child(write_fd, library, last_call):
    """Runs in the forked child: the gather, then the result as one JSON line. Never returns.

    The call in progress goes to last_call (memory shared with the parent, no system call per NVML call), so
    that a killed or crashed gather can say where it stopped.
    """
    status = 0
    try:
        # A crash inside the library ends the child alone; a Python stack dump of the parent's frames would
        # only be noise on the caller's stderr.
        faulthandler.disable()

        def progress(name):
            data = name.encode("ascii", "replace")[:_LAST_CALL_SIZE - 1]
            last_call[0:len(data) + 1] = data + b"\0"
        result = _collect(library, progress)
        _write_all(write_fd, ("R " + json.dumps(result, sort_keys=True) + "\n").encode("utf-8"))
    except BaseException as exc:  # pylint: disable=broad-except
        try:
            message = "NVML gather failed in the child: %s: %s" % (type(exc).__name__, " ".join(str(exc).split()))
            _write_all(write_fd, ("E " + json.dumps(message) + "\n").encode("utf-8"))
        except BaseException:  # pylint: disable=broad-except
            pass
        status = 1
    finally:
        os._exit(status)  # pylint: disable=protected-access


def _empty(state, message):
    return {
        "state": state, "message": message, "nvml_return": None, "driver_version": None,
        "cuda_driver_version": None, "nvml_version": None, "count": None, "devices": [], "lost": [],
        "topology": None, "utilization": {}, "missing": [], "absent": [], "errors": [],
        "timings": {"init": None, "gather": None},
    }


def _reap(pid, grace):
    """Wait for pid up to grace seconds; True when it was reaped."""
    deadline = time.monotonic() + grace
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def gather(timeout, library=LIBRARY):
    """Everything NVML says about this machine, collected in a child process killed after timeout seconds.

    Returns a dict:

    * ``state``: "ok", one of nvidia_smi.ERROR_STATES (driver_library_mismatch, driver_not_loaded, no_devices,
      gpu_lost, device_error, error), "timeout" or "library_not_found"; ``message``: one line;
      ``nvml_return``: the name of the NVML return code that decided a failing state, else None
    * ``driver_version``, ``cuda_driver_version`` ("12.2"), ``nvml_version``, ``count`` (what
      nvmlDeviceGetCount_v2 says, lost GPUs included)
    * ``devices``: the shared per-GPU fact schema, index order; ``lost``: [{index, pci_bus_id, nvml_return, call}]
      for GPUs whose handle could not be had, or on which a call answered GPU_IS_LOST; they are not in devices
    * ``topology``: gpus, matrix, nics (None), gpu_nic (None), cpu_affinity, numa_affinity, gpu_numa_id as
      ``nvidia_smi.parse_topology`` gives them; nvlink {"GPU0": [{link, active, speed_gbps,
      remote_pci_bus_id, remote_device_type}]} (GPUs without NVLink are absent); p2p {"GPU0": {"GPU1": "OK"}}
    * ``utilization``: {"GPU0": {gpu_pct, memory_pct}} (None where unreadable)
    * ``missing``: NVML calls that were absent from the library or answered NOT_SUPPORTED; ``absent``: only
      the absent ones; ``errors``: other failing calls [{call, device, nvml_return}]
    * ``timings``: init (nvmlInit_v2), gather (the rest), total (wall time in the caller), in seconds
    """
    started = time.monotonic()
    read_fd, write_fd = os.pipe()
    last_call = mmap.mmap(-1, _LAST_CALL_SIZE)  # anonymous and shared: the child's writes are seen here
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        last_call.close()
        return _empty("error", "cannot fork for the NVML gather: %s" % exc)
    if pid == 0:  # pragma: no cover - the child leaves through os._exit
        os.close(read_fd)
        _child(write_fd, library, last_call)
    os.close(write_fd)
    chunks = []
    timed_out = False
    deadline = started + timeout
    reaped = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _writable, _errors = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _reap(pid, 0.5)
        else:
            _reap(pid, 1.0)
        reaped = True
    finally:
        os.close(read_fd)
        if not reaped:
            # Interrupted (a signal, an exception while reading): never leave the child hung in the driver.
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _reap(pid, 0.5)
    called = last_call[:].split(b"\0", 1)[0].decode("ascii", "replace") or None
    last_call.close()
    result = _read_result(b"".join(chunks), timed_out, timeout, called)
    result["timings"]["total"] = round(time.monotonic() - started, 6)
    return result


def _read_result(data, timed_out, timeout, last_call=None):
    """The child's result from what it wrote; last_call is the call in progress it left in shared memory."""
    for line in data.decode("utf-8", "replace").splitlines():
        kind, _separator, rest = line.partition(" ")
        if kind == "R" and not timed_out:
            try:
                return json.loads(rest)
            except ValueError:
                break
        elif kind == "E" and not timed_out:
            try:
                return _empty("error", json.loads(rest))
            except ValueError:
                break
    if timed_out:
        return _empty("timeout", "NVML did not answer within %ss%s; the gather was killed" % (
            timeout, " (last call: %s)" % last_call if last_call else ""))
    return _empty("error", "the NVML gather ended without a result%s" % (
        " (last call: %s)" % last_call if last_call else ""))
