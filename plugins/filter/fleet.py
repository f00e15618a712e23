# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Fleet validation and the topology picture: pure functions over gpu facts and probes.

Each filter is documented in its own file beside this one (``gpufleet_node_health.yml``,
``gpufleet_health_thresholds.yml``, ``gpufleet_version_drift.yml``, ``gpufleet_topology_svg.yml``,
``gpufleet_report_node.yml``); docs/health-gates.md explains the gates.

Names checked at the source:
- clock event reasons: the ``clocks_event_reason_*`` elements of ``nvidia-smi -q -x`` (535 and later;
  ``clocks_throttle_reason_*`` before), as in the real captures under tests/unit/plugins/module_utils/fixtures/nvidia-smi,
  and the ``nvmlClocksEventReason*`` bits of nvml.h (NVIDIA/go-nvml, gen/nvml/nvml.h);
- fabric states: ``NVML_GPU_FABRIC_STATE_NOT_SUPPORTED / NOT_STARTED / IN_PROGRESS / COMPLETED`` of nvml.h
  (https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html); nvidia-smi prints "Completed" or "N/A".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import re

from ansible.errors import AnsibleFilterError

# The clock event reasons nvidia-smi names (without the clocks_event_reason_ / clocks_throttle_reason_ prefix).
CLOCK_EVENT_REASONS = (
    "gpu_idle", "applications_clocks_setting", "sw_power_cap", "hw_slowdown", "sync_boost", "sw_thermal_slowdown",
    "hw_thermal_slowdown", "hw_power_brake_slowdown", "display_clocks_setting",
)

PREFIX = "gpufleet_health_"

# name: (kind, default). kind "count": an integer >= 0, or null to turn the gate off; "flag": a boolean;
# "reasons": a list of clock event reason names ([] turns the gate off); "xids": a list of Xid numbers ([] turns the
# gate off). The critical Xids are those Azure's GPU health checks fail a node on (azurehpc-health-checks,
# azure_gpu_xid.nhc), with 95, an uncontained ECC error that NVIDIA's Xid catalog says needs a GPU reset.
THRESHOLDS = {
    "ecc_uncorrected_volatile_max": ("count", 0),
    # NVIDIA's memory error management guide, "RMA Policy": 512 remappings for uncorrectable errors set the row
    # remapping failure flag (the RMA criterion); Azure's azure_gpu_ecc.nhc fails above 512 uncorrectable remapped rows.
    "ecc_uncorrected_aggregate_max": ("count", 512),
    "fail_on_sram_threshold_exceeded": ("flag", True),
    "row_remapper_banks_exhausted_max": ("count", 0),
    "fail_on_repair_pending": ("flag", True),
    "fail_on_fabric_unhealthy": ("flag", True),
    "fail_on_remapped_rows_pending": ("flag", True),
    "fail_on_remapped_rows_failure": ("flag", True),
    "fail_on_retired_pages_pending": ("flag", True),
    "fail_on_recovery_action": ("flag", True),
    "fail_on_reset_required": ("flag", True),
    "fail_on_drain_and_reset_recommended": ("flag", True),
    "require_fabric_completed": ("flag", True),
    "slowdown_reasons_when_idle": ("reasons", ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown",
                                               "sw_thermal_slowdown"]),
    "require_pcie_width_max": ("flag", True),
    "require_pcie_gen_max": ("flag", True),
    "require_compute_mode_default": ("flag", True),
    "require_all_pci_gpus": ("flag", True),
    "nvlink_inactive_max": ("count", 0),
    "critical_xids": ("xids", [48, 56, 57, 58, 62, 63, 64, 65, 68, 69, 73, 74, 79, 80, 81, 92, 95, 119, 120]),
}

_TRUE = ("true", "yes", "on", "1")
_FALSE = ("false", "no", "off", "0")


def _threshold_value(name, kind, value):
    """The value of one threshold, checked; strings from ``-e name=value`` are read as Ansible reads them."""
    full = PREFIX + name
    if kind == "flag":
        if isinstance(value, bool):
            return value
        if isinstance(value, str) and value.strip().lower() in _TRUE + _FALSE:
            return value.strip().lower() in _TRUE
        raise AnsibleFilterError("%s must be true or false, not %r" % (full, value))
    if kind == "count":
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none")):
            return None
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise AnsibleFilterError("%s must be a whole number >= 0 (or null to turn the gate off), not %r" % (full, value))
    if isinstance(value, str):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if kind == "xids":
        if isinstance(value, (list, tuple)) and all(
                _known_int(item) and item > 0 or isinstance(item, str) and item.isdigit() for item in value):
            return sorted(set(int(item) for item in value))
        raise AnsibleFilterError("%s must be a list of Xid numbers (whole numbers > 0; [] turns the gate off), not %r"
                                 % (full, value))
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise AnsibleFilterError("%s must be a list of clock event reasons, not %r" % (full, value))
    unknown = [item for item in value if item not in CLOCK_EVENT_REASONS]
    if unknown:
        raise AnsibleFilterError("%s: unknown clock event reason %s (known: %s)"
                                 % (full, ", ".join(unknown), ", ".join(CLOCK_EVENT_REASONS)))
    return sorted(set(value))


def gpufleet_health_thresholds(overrides=None):
    """The health gates' thresholds: the defaults, with ``overrides`` (keys with or without the
    ``gpufleet_health_`` prefix) checked and applied. Raises AnsibleFilterError naming the bad variable."""
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise AnsibleFilterError("gpufleet_health_thresholds expects a mapping of gpufleet_health_* variables, not %r"
                                 % (overrides,))
    resolved = dict((name, _threshold_value(name, kind, default)) for name, (kind, default) in THRESHOLDS.items())
    for key, value in overrides.items():
        name = key[len(PREFIX):] if isinstance(key, str) and key.startswith(PREFIX) else key
        if name not in THRESHOLDS:
            raise AnsibleFilterError("unknown health threshold %s (known: %s)"
                                     % (key, ", ".join(PREFIX + known for known in sorted(THRESHOLDS))))
        resolved[name] = _threshold_value(name, THRESHOLDS[name][0], value)
    return resolved


def _idle(device):
    """True (idle), False (busy) or None (unknown) for one GPU.

    The utilisation where the facts carry it (``utilization_gpu_pct``: 0 is idle, more is busy); otherwise only
    ``gpu_idle`` among the active clock event reasons tells (idle). Its absence does not mean busy: real idle GPUs
    in P8 report no ``gpu_idle`` (an RTX 3090 on 590 with only ``sw_power_cap`` active, telegraf's testdata
    3090-v13.xml), so the load is then unknown."""
    utilisation = device.get("utilization_gpu_pct")
    if isinstance(utilisation, (int, float)) and not isinstance(utilisation, bool):
        return utilisation == 0
    reasons = device.get("clock_event_reasons_active")
    if isinstance(reasons, list) and "gpu_idle" in reasons:
        return True
    return None


def _known_int(value):
    return isinstance(value, int) and not isinstance(value, bool)


class _Assessment(object):
    """Collects failures, warnings and what could not be checked (gate: [GPU labels])."""

    def __init__(self):
        self.failures, self.warnings, self.unknown = [], [], {}

    def not_checked(self, what, label):
        self.unknown.setdefault(what, []).append(label)

    def result(self):
        for what, labels in sorted(self.unknown.items()):
            self.warnings.append("%s not reported (%s): not checked" % (what, ", ".join(labels)))
        return {"failures": self.failures, "warnings": self.warnings}


def _check_memory(device, label, limits, out):
    ecc = device.get("ecc_errors_uncorrected_volatile")
    if limits["ecc_uncorrected_volatile_max"] is not None:
        if _known_int(ecc):
            if ecc > limits["ecc_uncorrected_volatile_max"]:
                out.failures.append("%s: %d uncorrected ECC errors since the driver loaded (max %d)"
                                    % (label, ecc, limits["ecc_uncorrected_volatile_max"]))
        elif (device.get("ecc_mode") or {}).get("current") is False:
            out.warnings.append("%s: ECC is off, uncorrected errors are not counted" % label)
        else:
            out.not_checked("uncorrected ECC errors", label)
    aggregate = device.get("ecc_errors_uncorrected_aggregate")
    if limits["ecc_uncorrected_aggregate_max"] is not None:
        if _known_int(aggregate):
            if aggregate > limits["ecc_uncorrected_aggregate_max"]:
                out.failures.append("%s: %d uncorrected ECC errors in its lifetime (max %d)"
                                    % (label, aggregate, limits["ecc_uncorrected_aggregate_max"]))
        elif (device.get("ecc_mode") or {}).get("current") is not False:
            out.not_checked("lifetime uncorrected ECC errors", label)
    if limits["fail_on_sram_threshold_exceeded"] and device.get("sram_threshold_exceeded") is True:
        out.failures.append("%s: SRAM error threshold exceeded (NVIDIA's RMA criterion: run the field diagnostic)" % label)
    banks = (device.get("row_remapper_histogram") or {}).get("none")
    most = limits["row_remapper_banks_exhausted_max"]
    if most is not None and _known_int(banks) and banks > most:
        out.failures.append("%s: %d memory bank%s without spare rows (max %d; the next uncorrectable error there fails "
                            "the row remapping)" % (label, banks, "" if banks == 1 else "s", most))
    repair = device.get("repair_pending") or {}
    pending_repairs = [kind for kind in ("channel", "tpc") if repair.get(kind) is True]
    if limits["fail_on_repair_pending"] and pending_repairs:
        out.failures.append("%s: %s repair pending (reset the GPU)" % (
            label, " and ".join("TPC" if kind == "tpc" else kind for kind in pending_repairs)))
    rows = device.get("remapped_rows")
    if isinstance(rows, dict):
        if limits["fail_on_remapped_rows_failure"] and rows.get("failure") is True:
            out.failures.append("%s: row remapping failed (replace the GPU)" % label)
        if limits["fail_on_remapped_rows_pending"] and rows.get("pending") is True:
            out.failures.append("%s: row remapping pending (reset the GPU)" % label)
    pending = (device.get("retired_pages") or {}).get("pending")
    if limits["fail_on_retired_pages_pending"] and pending is True:
        out.failures.append("%s: retired pages pending (reset the GPU)" % label)
    # GPUs since Ampere remap rows instead of retiring pages (and report pending retirement as N/A): only when
    # neither is reported is the memory repair state unknown.
    watched = limits["fail_on_retired_pages_pending"] or limits["fail_on_remapped_rows_pending"]
    if not isinstance(rows, dict) and (device.get("mig_mode") or {}).get("current") is True and (
            limits["fail_on_remapped_rows_pending"] or limits["fail_on_remapped_rows_failure"]):
        # NVML answers NOT_SUPPORTED for remapped rows while MIG is on (nvml.h) and -q -x prints N/A (the A100 MIG
        # capture 31): the rows cannot be seen; the recovery action, the ECC counts and the Xids still are.
        out.not_checked("row remapping under MIG (turn MIG off to read it)", label)
    elif not isinstance(rows, dict) and pending is None and watched:
        out.not_checked("memory repair (remapped rows, retired pages)", label)


# What NVIDIA asks of each recovery action (nvml.h's comments on nvmlDeviceGpuRecoveryAction_t): the advice in a
# failure's reason.
_RECOVERY_ADVICE = {
    "gpu_reset": "reset the GPU",
    "node_reboot": "reboot the node",
    "drain_p2p": "stop peer-to-peer work, then read the action again",
    "drain_and_reset": "drain the GPU's work, then reset it",
    "recover_imex_domain": "recover the IMEX domain",
}


def _check_reset(device, label, limits, out):
    """The recovery action first (field 230, drivers from 570): any action but none fails the GPU with its name, as
    NVIDIA's RMA policy and the cloud health checks do; the reset flags it implies are not said twice. Where the
    driver reports no action (or the gate is off), the reset flags (of the action, else the deprecated fields)."""
    action = device.get("recovery_action")
    if limits["fail_on_recovery_action"] and action not in (None, "none"):
        out.failures.append("%s: recovery action %s (%s)" % (
            label, action, _RECOVERY_ADVICE.get(action, "an action this collection does not know: see NVIDIA's documentation")))
        return
    for key, wanted, reason in (
            ("reset_required", limits["fail_on_reset_required"], "reset required"),
            ("drain_and_reset_recommended", limits["fail_on_drain_and_reset_recommended"],
             "drain and reset recommended")):
        if not wanted:
            continue
        value = device.get(key)
        if value is True:
            out.failures.append("%s: %s" % (label, reason))
        elif value is None and action is None:
            out.not_checked(key.replace("_", " "), label)


# What a fabric health field that is set means (nvml.h's NVML_GPU_FABRIC_HEALTH_MASK_* comments): the failing ones,
# then the ones that only warn (the fabric recovers by itself, or has less capacity but works).
_FABRIC_FAULTS = (("degraded_bandwidth", "bandwidth degraded"), ("route_unhealthy", "route unhealthy"))
_FABRIC_NOTES = (("route_recovery_in_progress", "route recovery in progress"),
                 ("access_timeout_recovery", "access timeout recovery in progress"))


def _check_fabric(device, label, limits, out):
    fabric = device.get("fabric") or {}
    state, status = fabric.get("state"), fabric.get("status")
    if not isinstance(state, str) or state.strip().upper() in ("N/A", "NOT SUPPORTED"):
        return
    if limits["require_fabric_completed"]:
        if state.strip().lower() != "completed":
            out.failures.append("%s: NVLink fabric %s, not Completed (fabric manager)" % (label, state))
            return
        if isinstance(status, str) and status.strip().upper() not in ("SUCCESS", "N/A"):
            out.failures.append("%s: NVLink fabric Completed with status %s" % (label, status))
            return
    health = fabric.get("health")
    if not limits["fail_on_fabric_unhealthy"] or not isinstance(health, dict):
        return
    faults = [words for key, words in _FABRIC_FAULTS if health.get(key) is True]
    configuration = health.get("incorrect_configuration")
    if configuration not in (None, "none"):
        faults.append("incorrect configuration (%s)" % configuration.replace("_", " "))
    notes = [words for key, words in _FABRIC_NOTES if health.get(key) is True]
    summary = health.get("summary")
    if summary == "Unhealthy" or faults:
        out.failures.append("%s: NVLink fabric %s%s" % (label, "unhealthy" if summary == "Unhealthy" else "degraded",
                                                        ": " + ", ".join(faults + notes) if faults + notes else ""))
    elif summary == "Limited Capacity" or notes:
        out.warnings.append("%s: NVLink fabric %s" % (label, ", ".join(
            (["limited capacity"] if summary == "Limited Capacity" else []) + notes)))


def _check_clocks(device, label, limits, out):
    watched = limits["slowdown_reasons_when_idle"]
    if not watched:
        return
    reasons = device.get("clock_event_reasons_active")
    if not isinstance(reasons, list):
        out.not_checked("clock event reasons", label)
        return
    slow = [reason for reason in sorted(reasons) if reason in watched]
    if not slow:
        return
    idle = _idle(device)
    if idle:
        out.failures.append("%s: %s while idle" % (label, ", ".join(slow)))
    else:
        out.warnings.append("%s: %s while %s" % (label, ", ".join(slow), "busy" if idle is False else "its load is unknown"))


def _check_pcie(device, label, limits, out):
    pcie = device.get("pcie") or {}
    for kind, wanted in (("width", limits["require_pcie_width_max"]), ("gen", limits["require_pcie_gen_max"])):
        current, top = pcie.get(kind + "_current"), pcie.get(kind + "_max")
        if not wanted:
            continue
        if not (_known_int(current) and _known_int(top)):
            out.not_checked("PCIe link %s" % ("width" if kind == "width" else "generation"), label)
            continue
        if current >= top:
            continue
        if kind == "width":
            out.failures.append("%s: PCIe x%d of x%d" % (label, current, top))
        elif _idle(device) is False:
            out.failures.append("%s: PCIe gen %d of %d while busy" % (label, current, top))
        else:
            # An idle GPU lowers its link generation to save power: below the maximum is only suspect under load.
            out.warnings.append("%s: PCIe gen %d of %d (normal when idle)" % (label, current, top))


def _check_compute_mode(device, label, limits, out):
    if not limits["require_compute_mode_default"]:
        return
    mode = device.get("compute_mode")
    if mode is None:
        out.not_checked("compute mode", label)
    elif mode != "Default":
        out.failures.append("%s: compute mode %s, not Default" % (label, mode))


def _check_count(gpu, limits, out):
    if not limits["require_all_pci_gpus"]:
        return
    seen = gpu.get("count")
    pci = (gpu.get("pci") or {}).get("nvidia_gpus")
    attached = gpu.get("attached_gpus")
    if _known_int(pci) and _known_int(seen) and pci > seen:
        out.failures.append("GPUs: %d on the PCI bus, the driver sees %d" % (pci, seen))
    elif _known_int(pci) and _known_int(seen) and pci < seen:
        out.warnings.append("GPUs: the driver sees %d, the PCI bus shows %d" % (seen, pci))
    elif not _known_int(pci):
        out.not_checked("GPUs on the PCI bus", "node")
    if _known_int(attached) and _known_int(seen) and attached > seen:
        out.failures.append("GPUs: the driver counts %d attached, answers for %d (lost GPUs?)" % (attached, seen))


def _only_pci_short(gpu):
    """The state is device_error only because the PCI bus shows more GPUs than the driver lists (every attached GPU
    answers, none lost): the require_all_pci_gpus gate judges that, so that it can be turned off (vfio-bound GPUs)."""
    pci = (gpu.get("pci") or {}).get("nvidia_gpus")
    return (gpu.get("state") == "device_error" and not gpu.get("lost_gpus") and _known_int(pci)
            and _known_int(gpu.get("count")) and gpu.get("attached_gpus") == gpu.get("count") and pci > gpu["count"])


def _check_nvlink(topology, limits, out):
    most = limits["nvlink_inactive_max"]
    if most is None:
        return
    inactive, count = [], 0
    dead = sorted(topology.get("nvlink_gpus_all_inactive") or [], key=lambda name: (len(name), name))
    for name, links in sorted((topology.get("nvlink") or {}).items(), key=lambda item: (len(item[0]), item[0])):
        if name in dead:
            continue
        down = [str(link.get("link")) for link in links if link.get("active") is False]
        if down:
            inactive.append("%s link %s" % (name, ",".join(down)))
            count += len(down)
    inactive.extend("%s all links" % name for name in dead)
    reported = topology.get("nvlink_links_inactive")
    count = max(count, reported if _known_int(reported) else 0)
    # NVLink-capable PCIe cards without a bridge (A100/H100 PCIe, RTX A6000) report all their links down: that is
    # NVLink not fitted, not a fault, unless the node shows NVLink is in use (NVSwitches, or a GPU with an active
    # link).
    in_use = bool(topology.get("nvswitch")) or any(
        link.get("active") for links in (topology.get("nvlink") or {}).values() for link in links)
    if dead and not in_use and not count:
        out.warnings.append("NVLink: every link of %s is down and no GPU uses NVLink (no bridges fitted?)" % ", ".join(dead))
        return
    if dead or count > most:
        out.failures.append("NVLink inactive: %s" % ("; ".join(inactive) or "%d links" % count))
    elif count:
        out.warnings.append("NVLink inactive (%d allowed): %s" % (most, "; ".join(inactive) or "%d links" % count))


# An Xid line of the NVIDIA driver in the kernel log: "NVRM: Xid (PCI:0000:3b:00): 79, pid=1122, GPU has fallen off
# the bus." (NVIDIA's Xid catalog; the PCI address is domain:bus:device, some drivers add the function).
_XID_LINE = re.compile(r"NVRM: Xid \((?:PCI:)?([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})(?:\.[0-7])?\): "
                       r"(\d+)(?:,\s*(.*))?$")


def xid_events(lines):
    """``[(pci, xid, text)]`` in log order from kernel log lines: ``pci`` as (domain, bus, device) numbers, ``xid`` an
    int, ``text`` what follows the number (pid and message); lines that are not an NVRM Xid are skipped."""
    events = []
    for line in lines or []:
        match = _XID_LINE.search(line if isinstance(line, str) else "")
        if match:
            domain, bus, device, xid, text = match.groups()
            events.append(((int(domain, 16), int(bus, 16), int(device, 16)), int(xid), (text or "").strip()))
    return events


def _pci_key(bus_id):
    """(domain, bus, device) of a GPU's pci_bus_id ("00000000:3B:00.0"), or None."""
    match = re.match(r"^([0-9A-Fa-f]{4,8}):([0-9A-Fa-f]{2}):([0-9A-Fa-f]{2})", bus_id or "")
    return tuple(int(part, 16) for part in match.groups()) if match else None


def _check_xids(gpu, probes, limits, out):
    """Critical Xids in the kernel log since boot (the node probe's ``kernel_xids``: its source and the Xid lines),
    each once per GPU with its count and last message. Not evaluated where the caller read no kernel log (no
    ``kernel_xids``: the metrics collector, the driver role's verify); not checked, and said so, where the node's
    kernel log could not be read."""
    if not limits["critical_xids"] or "kernel_xids" not in probes:
        return
    log = probes.get("kernel_xids") or {}
    if not log.get("source"):
        out.not_checked("kernel log for Xids (%s)" % (log.get("error") or "no source"), "node")
        return
    labels = dict((_pci_key(device.get("pci_bus_id")), "GPU%s" % device.get("index")) for device in gpu.get("devices") or [])
    seen = {}
    for pci, xid, text in xid_events(log.get("lines")):
        if xid in limits["critical_xids"]:
            count, _text = seen.get((pci, xid), (0, ""))
            seen[(pci, xid)] = (count + 1, text)
    for (pci, xid), (count, text) in sorted(seen.items()):
        where = labels.get(pci) or "PCI %04x:%02x:%02x" % pci
        times = " (%d times)" % count if count > 1 else ""
        out.failures.append("%s: Xid %d%s since boot (%s)" % (where, xid, times, text or "no message"))


def gpufleet_node_health(gpu, probes=None, thresholds=None):
    """``{"failures": [...], "warnings": [...]}`` for one node, from its gpu facts, probes and health thresholds."""
    if not isinstance(gpu, dict) or "state" not in gpu:
        raise AnsibleFilterError("gpufleet_node_health expects the gpu facts of gpufleet.node.gpu_facts")
    limits = gpufleet_health_thresholds(thresholds)
    probes = probes or {}
    out = _Assessment()
    if gpu["state"] != "ok" and not _only_pci_short(gpu):
        out.failures.append("driver: %s (%s)" % (gpu["state"], gpu.get("message") or "no message"))
        _check_xids(gpu, probes, limits, out)   # a GPU off the bus leaves its Xid 79 behind
        return out.result()
    topology = gpu.get("topology") or {}
    _check_count(gpu, limits, out)
    _check_nvlink(topology, limits, out)
    utilisation = gpu.get("utilization") or {}
    for device in gpu.get("devices") or []:
        label = "GPU%s" % device.get("index")
        if device.get("utilization_gpu_pct") is None and isinstance(utilisation.get(label), dict):
            # the NVML backend's node-level utilisation ({"GPU0": {"gpu_pct": 0, ...}}), where the facts carry it
            device = dict(device, utilization_gpu_pct=utilisation[label].get("gpu_pct"))
        if device.get("persistence_mode") is False and probes.get("persistence_expected", True):
            out.failures.append("%s: persistence mode off" % label)
        _check_memory(device, label, limits, out)
        _check_reset(device, label, limits, out)
        _check_fabric(device, label, limits, out)
        _check_clocks(device, label, limits, out)
        _check_pcie(device, label, limits, out)
        _check_compute_mode(device, label, limits, out)
    _check_xids(gpu, probes, limits, out)
    if topology.get("nvswitch"):
        active = probes.get("fabricmanager_active")
        if active is False:
            out.failures.append("fabric manager not active on an NVSwitch system")
        elif active is None:
            out.not_checked("fabric manager state", "node")
    return out.result()


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
    """The URL a scraper uses for a node's metrics, from what node_probe.py read (listen address, path, whether the
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
            "gpu": gpu,
        }
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("gpufleet_report_node needs a host's vars after fleet_facts.yml (missing %s)" % exc)


class FilterModule(object):
    """gpufleet.node fleet filters."""

    def filters(self):
        return {
            "gpufleet_node_health": gpufleet_node_health,
            "gpufleet_health_thresholds": gpufleet_health_thresholds,
            "gpufleet_version_drift": gpufleet_version_drift,
            "gpufleet_topology_svg": gpufleet_topology_svg,
            "gpufleet_report_node": gpufleet_report_node,
        }
