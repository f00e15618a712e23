# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The values of NVIDIA's ``nvml.h`` the NVML backend uses: return codes, enums, buffer sizes, field ids and masks.

Data only, no imports: the binding (``nvml_bindings``), the conversions (``nvml_convert``), the metrics
(``gpu_metrics``) and the health gates (``health``) read them from here. Every value is taken from ``nvml.h`` as
published in github.com/NVIDIA/go-nvml, file ``gen/nvml/nvml.h`` (NVML_API_VERSION 13, commit
2f9e261fe40a7a1c54783d66805e8920564763b4, July 2026); the names the tables give are those ``nvidia-smi -q -x`` and
``nvidia-smi topo -m`` print, so that both backends give one fact schema.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

# The library every driver installs.
LIBRARY = "libnvidia-ml.so.1"

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

# The failure states both backends report (nvidia_smi.ERROR_STATES is this tuple: the parser imports it from here,
# which needs nothing else), and the states gather() reports: those, ok, and two of the NVML backend's own.
ERROR_STATES = (
    "driver_library_mismatch",
    "driver_not_loaded",
    "no_devices",
    "gpu_lost",
    "device_error",
    "error",
)
STATES = ("ok",) + ERROR_STATES + ("timeout", "library_not_found")

# Return code name -> state; any other failing code is "error".
STATE_FOR_RETURN = {
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
NAME_SIZE = 96              # NVML_DEVICE_NAME_V2_BUFFER_SIZE
UUID_SIZE = 96              # NVML_DEVICE_UUID_V2_BUFFER_SIZE
SERIAL_SIZE = 30            # NVML_DEVICE_SERIAL_BUFFER_SIZE
VBIOS_SIZE = 32             # NVML_DEVICE_VBIOS_VERSION_BUFFER_SIZE
SYSTEM_VERSION_SIZE = 80    # NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE, NVML_SYSTEM_NVML_VERSION_BUFFER_SIZE
PCI_BUS_ID_SIZE = 32        # NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
PCI_BUS_ID_LEGACY_SIZE = 16   # NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
FABRIC_UUID_LEN = 16        # NVML_GPU_FABRIC_UUID_LEN
NVLINK_MAX_LINKS = 36       # NVML_NVLINK_MAX_LINKS (12 and 18 in older headers: the library answers
# NVML_ERROR_INVALID_ARGUMENT or NOT_SUPPORTED past the links a device has)

FEATURE_ENABLED = 1         # nvmlEnableState_t NVML_FEATURE_ENABLED
MEMORY_ERROR_CORRECTED = 0      # nvmlMemoryErrorType_t
MEMORY_ERROR_UNCORRECTED = 1
VOLATILE_ECC = 0            # nvmlEccCounterType_t
AGGREGATE_ECC = 1
LOCATION_DRAM = 2           # nvmlMemoryLocation_t NVML_MEMORY_LOCATION_DRAM (Turing+)
LOCATION_SRAM = 7           # NVML_MEMORY_LOCATION_SRAM (Turing+)
RETIREMENT_MULTIPLE_SINGLE_BIT = 0   # nvmlPageRetirementCause_t
RETIREMENT_DOUBLE_BIT = 1
TEMPERATURE_GPU = 0         # nvmlTemperatureSensors_t NVML_TEMPERATURE_GPU
P2P_CAPS_INDEX_NVLINK = 2   # nvmlGpuP2PCapsIndex_t
AFFINITY_SCOPE_NODE = 0     # nvmlAffinityScope_t NVML_AFFINITY_SCOPE_NODE
DEVICE_MIG_ENABLE = 1       # NVML_DEVICE_MIG_ENABLE

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
RESET_BY_ACTION = {"none": (False, False), "gpu_reset": (True, None), "node_reboot": (True, None),
                   "drain_and_reset": (True, True)}

# nvmlValueType_t -> the member of nvmlValue_t that holds the value.
VALUE_MEMBER = {0: "dVal", 1: "uiVal", 2: "ulVal", 3: "ullVal", 4: "sllVal", 5: "siVal", 6: "usVal"}

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
FABRIC_STATE_COMPLETED = 3

# NVML_GPU_FABRIC_HEALTH_SUMMARY_* (nvmlGpuFabricInfo_v3_t.healthSummary); NOT_SUPPORTED is None.
FABRIC_HEALTH_SUMMARIES = {0: None, 1: "Healthy", 2: "Unhealthy", 3: "Limited Capacity"}
# The fields of nvmlGpuFabricInfo_v2/v3_t.healthMask: (fact name, NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*,
# NVML_GPU_FABRIC_HEALTH_MASK_WIDTH_*, {value: meaning}). Value 0 of each is *_NOT_SUPPORTED (None); for the
# yes/no fields 1 is *_TRUE and 2 *_FALSE.
YES_NO_FIELD = {1: True, 2: False}
FABRIC_HEALTH_MASK = (
    ("degraded_bandwidth", 0, 0x3, YES_NO_FIELD),
    ("route_recovery_in_progress", 2, 0x3, YES_NO_FIELD),
    ("route_unhealthy", 4, 0x3, YES_NO_FIELD),
    ("access_timeout_recovery", 6, 0x3, YES_NO_FIELD),
    ("incorrect_configuration", 8, 0xf, {1: "none", 2: "incorrect_sysguid", 3: "incorrect_chassis_sn", 4: "no_partition",
                                         5: "insufficient_nvlinks", 6: "incompatible_gpu_fw", 7: "invalid_location",
                                         8: "gpu_state_invalid"}),
    ("partition_assigned", 12, 0x3, YES_NO_FIELD),
)
