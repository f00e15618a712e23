# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The health verdict of a GPU node and its thresholds: pure functions over gpu facts and probes.

One definition of a healthy node, run where the facts are: on the controller through the filters
``gpufleet.node.gpufleet_node_health`` and ``gpufleet.node.gpufleet_health_thresholds`` (plugins/filter/fleet.py,
which turn HealthError into AnsibleFilterError), and on each node by the collector of the role
gpufleet.node.gpu_monitoring, which imports this module with no Ansible installed. So nothing here imports Ansible:
standard library and this collection's module_utils only. docs/health-gates.md explains the gates.

Interface:

* ``gpufleet_node_health(gpu, probes=None, thresholds=None)``: ``{"failures": [...], "warnings": [...]}``
* ``gpufleet_health_thresholds(overrides=None)``: the thresholds, defaults and overrides checked
* ``THRESHOLDS``: each threshold's kind and default; ``PREFIX``: the variables' prefix
* ``xid_events(lines)``: the NVRM Xid lines of a kernel log
* ``HealthError``: raised for input the verdict cannot judge (a bad threshold, facts that are not gpu_facts')

Names checked at the source:
- clock event reasons: the ``clocks_event_reason_*`` elements of ``nvidia-smi -q -x`` (535 and later;
  ``clocks_throttle_reason_*`` before), as in the real captures under tests/unit/plugins/module_utils/fixtures/nvidia-smi,
  and the ``nvmlClocksEventReason*`` bits of nvml.h (NVIDIA/go-nvml, gen/nvml/nvml.h);
- fabric states: ``NVML_GPU_FABRIC_STATE_NOT_SUPPORTED / NOT_STARTED / IN_PROGRESS / COMPLETED`` of nvml.h
  (https://docs.nvidia.com/deploy/nvml-api/group__nvmlFabricDefs.html); nvidia-smi prints "Completed" or "N/A".
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible_collections.gpufleet.node.plugins.module_utils.nvml_constants import (
    CLOCK_EVENT_REASONS as NVML_CLOCK_EVENT_REASONS)


class HealthError(ValueError):
    """Input the health verdict cannot judge: an unknown or badly valued ``gpufleet_health_*`` threshold, or facts
    that are not gpu_facts'. The message names the variable or the input."""


# The clock event reasons nvidia-smi names (without the clocks_event_reason_ / clocks_throttle_reason_ prefix), in
# the order of nvml.h's nvmlClocksEventReason* bits: the names nvml_constants gives those bits.
CLOCK_EVENT_REASONS = tuple(name for _bit, name in NVML_CLOCK_EVENT_REASONS)

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
        raise HealthError("%s must be true or false, not %r" % (full, value))
    if kind == "count":
        if value is None or (isinstance(value, str) and value.strip().lower() in ("", "null", "none")):
            return None
        if isinstance(value, str) and value.strip().isdigit():
            return int(value.strip())
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise HealthError("%s must be a whole number >= 0 (or null to turn the gate off), not %r" % (full, value))
    if isinstance(value, str):
        value = [item.strip() for item in value.split(",") if item.strip()]
    if kind == "xids":
        if isinstance(value, (list, tuple)) and all(
                _known_int(item) and item > 0 or isinstance(item, str) and item.isdigit() for item in value):
            return sorted(set(int(item) for item in value))
        raise HealthError("%s must be a list of Xid numbers (whole numbers > 0; [] turns the gate off), not %r"
                          % (full, value))
    if not isinstance(value, (list, tuple)) or not all(isinstance(item, str) for item in value):
        raise HealthError("%s must be a list of clock event reasons, not %r" % (full, value))
    unknown = [item for item in value if item not in CLOCK_EVENT_REASONS]
    if unknown:
        raise HealthError("%s: unknown clock event reason %s (known: %s)"
                          % (full, ", ".join(unknown), ", ".join(CLOCK_EVENT_REASONS)))
    return sorted(set(value))


def gpufleet_health_thresholds(overrides=None):
    """The health gates' thresholds: the defaults, with ``overrides`` (keys with or without the
    ``gpufleet_health_`` prefix) checked and applied. Raises HealthError naming the bad variable."""
    if overrides is None:
        overrides = {}
    if not isinstance(overrides, dict):
        raise HealthError("gpufleet_health_thresholds expects a mapping of gpufleet_health_* variables, not %r"
                          % (overrides,))
    resolved = dict((name, _threshold_value(name, kind, default)) for name, (kind, default) in THRESHOLDS.items())
    for key, value in overrides.items():
        name = key[len(PREFIX):] if isinstance(key, str) and key.startswith(PREFIX) else key
        if name not in THRESHOLDS:
            raise HealthError("unknown health threshold %s (known: %s)"
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
    """Critical Xids in the kernel log since boot (``kernel_xids`` of gpu_facts' stack: its source and the Xid lines),
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


def _check_self_converge(probes, out):
    """A node that converges itself (gpu_facts' stack found the runner's record) and whose last run failed: a
    warning with when and why, as the node's software may have drifted from the infra repository since."""
    run = probes.get("self_converge")
    if isinstance(run, dict) and run.get("ok") is False:
        last_ok = run.get("last_ok") or {}
        out.warnings.append("self-converge: the last run%s failed (%s)%s" % (
            " (%s)" % run["time"] if run.get("time") else "", run.get("message") or "no message",
            "; last converged %s" % last_ok["time"] if isinstance(last_ok, dict) and last_ok.get("time")
            else "; never converged"))


def gpufleet_node_health(gpu, probes=None, thresholds=None):
    """``{"failures": [...], "warnings": [...]}`` for one node, from its gpu facts, probes and health thresholds."""
    if not isinstance(gpu, dict) or "state" not in gpu:
        raise HealthError("gpufleet_node_health expects the gpu facts of gpufleet.node.gpu_facts")
    limits = gpufleet_health_thresholds(thresholds)
    probes = probes or {}
    out = _Assessment()
    _check_self_converge(probes, out)
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
