# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The ctypes binding of ``libnvidia-ml.so.1`` and the gather it makes: every library call of the NVML backend.

``collect(library, progress)`` loads the library, initialises it, reads every GPU, its NVLinks, affinity and the
pairs between GPUs, and shuts it down again; it returns the result dict ``nvml.gather`` documents. It runs in the
child process of ``nvml_child``, never in the caller: a call that hangs in the driver is killed with the child.

Structure layouts are nvml.h's (see ``nvml_constants``). A call whose symbol the loaded library lacks (an older
driver) or that answers NVML_ERROR_NOT_SUPPORTED leaves its field None and is named in ``missing``; it never fails
the whole gather.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import ctypes
import os
import time

from ansible_collections.gpufleet.node.plugins.module_utils.nvml_constants import (
    AFFINITY_SCOPE_NODE, AGGREGATE_ECC, DEVICE_MIG_ENABLE, ERROR_ARGUMENT_VERSION_MISMATCH, ERROR_FUNCTION_NOT_FOUND,
    ERROR_GPU_IS_LOST, ERROR_INSUFFICIENT_SIZE, ERROR_INVALID_ARGUMENT, ERROR_NOT_SUPPORTED, FABRIC_UUID_LEN,
    FEATURE_ENABLED, FI_DEV_DRAIN_AND_RESET_STATUS, FI_DEV_GET_GPU_RECOVERY_ACTION, FI_DEV_NVLINK_GET_SPEED,
    FI_DEV_NVLINK_SPEED_MBPS_COMMON, FI_DEV_POWER_AVERAGE, FI_DEV_POWER_INSTANT, FI_DEV_RESET_STATUS, LOCATION_DRAM,
    LOCATION_SRAM, MEMORY_ERROR_CORRECTED, MEMORY_ERROR_UNCORRECTED, NAME_SIZE, NVLINK_MAX_LINKS,
    P2P_CAPS_INDEX_NVLINK, PCI_BUS_ID_LEGACY_SIZE, PCI_BUS_ID_SIZE, RETIREMENT_DOUBLE_BIT,
    RETIREMENT_MULTIPLE_SINGLE_BIT, SERIAL_SIZE, SUCCESS, SYSTEM_VERSION_SIZE, TEMPERATURE_GPU, UUID_SIZE,
    VALUE_MEMBER, VBIOS_SIZE, VOLATILE_ECC)
from ansible_collections.gpufleet.node.plugins.module_utils.nvml_convert import (
    architecture_name, clock_event_reason_names, compute_mode_name, cpu_list, cuda_version_string, device_type_name,
    fabric_health, fabric_names, mib, nvlink_relations, p2p_status_name, recovery_action_name, reset_status,
    return_code_name, row_remapper_histogram, state_for_return, topology_matrix, watts)

# Every NVML symbol this module may call, in the order it first calls them: the contract of the stand-in library
# (tests/emulator/fake_nvml), which must export each one.
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


# --- ctypes structures (nvml.h) ---------------------------------------------------------------------------

class _PciInfo(ctypes.Structure):
    """nvmlPciInfo_t (filled by nvmlDeviceGetPciInfo_v3 and nvmlDeviceGetNvLinkRemotePciInfo_v2)."""
    _fields_ = [
        ("busIdLegacy", ctypes.c_char * PCI_BUS_ID_LEGACY_SIZE),
        ("domain", ctypes.c_uint),
        ("bus", ctypes.c_uint),
        ("device", ctypes.c_uint),
        ("pciDeviceId", ctypes.c_uint),
        ("pciSubSystemId", ctypes.c_uint),
        ("busId", ctypes.c_char * PCI_BUS_ID_SIZE),
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
        ("clusterUuid", ctypes.c_ubyte * FABRIC_UUID_LEN),
        ("status", ctypes.c_int),
        ("cliqueId", ctypes.c_uint),
        ("state", ctypes.c_ubyte),
    ]


class _FabricInfoV2(ctypes.Structure):
    """nvmlGpuFabricInfo_v2_t (nvmlDeviceGetGpuFabricInfoV, version nvmlGpuFabricInfo_v2)."""
    _fields_ = [
        ("version", ctypes.c_uint),
        ("clusterUuid", ctypes.c_ubyte * FABRIC_UUID_LEN),
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
        return None if value is None else value == FEATURE_ENABLED

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
            member = VALUE_MEMBER.get(slot.valueType)
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
             for location in (LOCATION_DRAM, LOCATION_SRAM)]
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
        mig_mode = {"current": mig_current.value == DEVICE_MIG_ENABLE,
                    "pending": mig_pending.value == DEVICE_MIG_ENABLE}
    ecc_current, ecc_pending = ctypes.c_uint(), ctypes.c_uint()
    ecc_mode = {"current": None, "pending": None}
    if nvml.call("nvmlDeviceGetEccMode", label, handle, ctypes.byref(ecc_current), ctypes.byref(ecc_pending)):
        ecc_mode = {"current": ecc_current.value == FEATURE_ENABLED, "pending": ecc_pending.value == FEATURE_ENABLED}
    reset_fields = (FI_DEV_RESET_STATUS, FI_DEV_DRAIN_AND_RESET_STATUS, FI_DEV_GET_GPU_RECOVERY_ACTION)
    power_fields = (FI_DEV_POWER_AVERAGE, FI_DEV_POWER_INSTANT)
    values = nvml.fields(label, handle, [(field, 0) for field in reset_fields + power_fields])
    recovery_action = recovery_action_name(values[(FI_DEV_GET_GPU_RECOVERY_ACTION, 0)])
    reset_required, drain = reset_status(values[(FI_DEV_RESET_STATUS, 0)], values[(FI_DEV_DRAIN_AND_RESET_STATUS, 0)],
                                         recovery_action)
    memory = _memory(nvml, label, handle)
    device = {
        "index": index,
        "name": nvml.text("nvmlDeviceGetName", label, NAME_SIZE, handle),
        "uuid": nvml.text("nvmlDeviceGetUUID", label, UUID_SIZE, handle),
        "serial": nvml.text("nvmlDeviceGetSerial", label, SERIAL_SIZE, handle),
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
        "ecc_errors_uncorrected_volatile": _ecc_total(nvml, label, handle, MEMORY_ERROR_UNCORRECTED, VOLATILE_ECC),
        "ecc_errors_uncorrected_aggregate": _ecc_total(nvml, label, handle, MEMORY_ERROR_UNCORRECTED, AGGREGATE_ECC),
        "ecc_errors_corrected_volatile": _ecc_total(nvml, label, handle, MEMORY_ERROR_CORRECTED, VOLATILE_ECC),
        "retired_pages": {
            "single_bit_ecc": _retired_count(nvml, label, handle, RETIREMENT_MULTIPLE_SINGLE_BIT),
            "double_bit_ecc": _retired_count(nvml, label, handle, RETIREMENT_DOUBLE_BIT),
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
        "temperature_c": nvml.uint("nvmlDeviceGetTemperature", label, handle, ctypes.c_int(TEMPERATURE_GPU)) or None,
        "clock_event_reasons_active": _clock_reasons(nvml, label, handle),
        "fabric": _fabric(nvml, label, handle),
        "vbios_version": nvml.text("nvmlDeviceGetVbiosVersion", label, VBIOS_SIZE, handle),
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
        active = state.value == FEATURE_ENABLED
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
        args = (handle, ctypes.c_uint(size), words, ctypes.c_int(AFFINITY_SCOPE_NODE))
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
            code = nvml.raw("nvmlDeviceGetP2PStatus", handles[label], handles[other], ctypes.c_int(P2P_CAPS_INDEX_NVLINK),
                            ctypes.byref(status))
            p2p.setdefault(label, {})[other] = p2p_status_name(status.value) if code == SUCCESS else None
            if code == ERROR_NOT_SUPPORTED:
                nvml.missing.add("nvmlDeviceGetP2PStatus")
    return levels, p2p


def collect(library, progress=None):
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
    result["driver_version"] = nvml.text("nvmlSystemGetDriverVersion", None, SYSTEM_VERSION_SIZE)
    result["nvml_version"] = nvml.text("nvmlSystemGetNVMLVersion", None, SYSTEM_VERSION_SIZE)
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
