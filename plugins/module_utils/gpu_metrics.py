# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU metrics in Prometheus' text exposition format, from the ``gpu`` facts of gpufleet.node.gpu_facts.

Standard library and this collection's module_utils only, no Ansible: the collector of the role
gpufleet.node.gpu_monitoring (a systemd timer on the node) gathers the facts with ``gpu_inventory.gather``, judges
them with the health gates (the filter gpufleet.node.gpufleet_node_health) and writes ``render(...)`` into node
exporter's textfile collector directory with ``write_atomically``.

Names and labels follow NVIDIA's dcgm-exporter, so that its dashboards and alerts work unchanged:

* metric names are DCGM field names, as dcgm-exporter exports them: github.com/NVIDIA/dcgm-exporter,
  ``etc/default-counters.csv`` and ``etc/dcp-metrics-included.csv`` (name, Prometheus type, help text), and for the
  fields those files do not list the field identifiers of DCGM's ``dcgm_fields.h`` as NVIDIA's Go bindings carry them
  (github.com/NVIDIA/go-dcgm, ``pkg/dcgm/const_fields.go``: DCGM_FI_DEV_ENFORCED_POWER_LIMIT 164,
  DCGM_FI_DEV_CLOCKS_EVENT_REASONS 112, DCGM_FI_DEV_ROW_REMAP_PENDING 396, DCGM_FI_DEV_RETIRED_PENDING 392,
  DCGM_FI_DEV_POWER_USAGE_INSTANT 157);
* labels are those of dcgm-exporter's GPU template (``internal/pkg/rendermetrics/render_metrics.go``,
  ``gpuMetricsFormat``): ``gpu`` (the index), ``UUID``, ``pci_bus_id``, ``device`` (``nvidia<index>``, as its
  collectors set ``GPUDevice``), ``modelName``, ``Hostname`` when known, then label fields such as
  ``DCGM_FI_DRIVER_VERSION`` (a ``label`` line of dcp-metrics-included.csv);
* what DCGM has no field for (NVLink links up and down per GPU, the health verdict of the collection's gates, one
  gauge per clock event reason, whether the facts could be read) carries the ``gpufleet_`` prefix.

A GPU without a value for a metric gets no sample for it: never a made-up 0.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import math
import os
import re
import tempfile

from ansible_collections.gpufleet.node.plugins.module_utils.nvml import CLOCK_EVENT_REASONS

# The prefix of the DCGM field names; monitoring.json records it for the fleet report.
DCGM_PREFIX = "DCGM_FI_"
LABEL_NAMES = ("gpu", "UUID", "pci_bus_id", "device", "modelName", "Hostname", "DCGM_FI_DRIVER_VERSION")
_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_LABEL = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def _count(value):
    """An int value as is; a bool as 1/0; anything else (None, text) as unknown."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)) and not (isinstance(value, float) and math.isnan(value)):
        return value
    return None


def _inner(key, inner):
    return lambda device: _count((device.get(key) or {}).get(inner)) if isinstance(device.get(key), dict) else None


def clock_event_mask(reasons):
    """The NVML/DCGM clock event reason bitmask of the reason names gpu_facts gives; None when they are unknown."""
    if not isinstance(reasons, list):
        return None
    bits = dict((name, bit) for bit, name in CLOCK_EVENT_REASONS)
    return sum(bits.get(name, 0) for name in set(reasons))


# (name, type, help, value of one device). Names, types and help texts of the DCGM fields as dcgm-exporter's CSV
# files give them (the help of fields absent there: dcgm_fields.h's description).
DEVICE_METRICS = (
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda d: _count(d.get("utilization_gpu_pct"))),
    # DCGM reads the frame buffer with nvmlDeviceGetMemoryInfo_v2 from driver 510 (DcgmCacheManager.cpp,
    # ReadAndCacheFBMemoryInfo): FB_USED is nvmlMemory_v2_t's used, the reserved memory apart in FB_RESERVED (253).
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", lambda d: _count(d.get("memory_free_mib"))),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", lambda d: _count(d.get("memory_used_mib"))),
    ("DCGM_FI_DEV_FB_RESERVED", "gauge", "Framebuffer memory reserved (in MiB).",
     lambda d: _count(d.get("memory_reserved_mib"))),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda d: _count(d.get("temperature_c"))),
    # POWER_USAGE (155) is nvmlDeviceGetPowerUsage (averaged over 1 s on Ampere except GA100 and newer), and
    # POWER_USAGE_INSTANT (157) NVML field NVML_FI_DEV_POWER_INSTANT (186): DcgmCacheManager.cpp, BOARD_POWER_WATTS
    # and BOARD_POWER_RAW_WATTS, the names dcgm_fields.h gives them since 2026 (the old ones kept as aliases).
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda d: _count(d.get("power_draw_w"))),
    ("DCGM_FI_DEV_POWER_USAGE_INSTANT", "gauge", "Current instantaneous power usage of the device in Watts",
     lambda d: _count(d.get("power_draw_instant_w"))),
    ("DCGM_FI_DEV_ENFORCED_POWER_LIMIT", "gauge",
     "Effective power limit that the driver enforces after taking into account all limiters (in W).",
     lambda d: _count(d.get("power_limit_w"))),
    ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask of DCGM_CLOCKS_EVENT_REASON_*).",
     lambda d: clock_event_mask(d.get("clock_event_reasons_active"))),
    ("DCGM_FI_DEV_ECC_SBE_VOL_TOTAL", "counter", "Total number of single-bit volatile ECC errors.",
     lambda d: _count(d.get("ecc_errors_corrected_volatile"))),
    ("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL", "counter", "Total number of double-bit volatile ECC errors.",
     lambda d: _count(d.get("ecc_errors_uncorrected_volatile"))),
    ("DCGM_FI_DEV_ECC_DBE_AGG_TOTAL", "counter", "Total number of double-bit persistent ECC errors.",
     lambda d: _count(d.get("ecc_errors_uncorrected_aggregate"))),
    ("DCGM_FI_DEV_RETIRED_SBE", "counter", "Total number of retired pages due to single-bit errors.",
     _inner("retired_pages", "single_bit_ecc")),
    ("DCGM_FI_DEV_RETIRED_DBE", "counter", "Total number of retired pages due to double-bit errors.",
     _inner("retired_pages", "double_bit_ecc")),
    ("DCGM_FI_DEV_RETIRED_PENDING", "counter", "Total number of pages pending retirement.",
     _inner("retired_pages", "pending")),
    ("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for uncorrectable errors",
     _inner("remapped_rows", "uncorrectable")),
    ("DCGM_FI_DEV_CORRECTABLE_REMAPPED_ROWS", "counter", "Number of remapped rows for correctable errors",
     _inner("remapped_rows", "correctable")),
    ("DCGM_FI_DEV_ROW_REMAP_FAILURE", "gauge", "Whether remapping of rows has failed", _inner("remapped_rows", "failure")),
    ("DCGM_FI_DEV_ROW_REMAP_PENDING", "gauge", "Whether remapping of rows is pending", _inner("remapped_rows", "pending")),
    ("DCGM_FI_DEV_PCIE_REPLAY_COUNTER", "counter", "Total number of PCIe retries.", _inner("pcie", "replay_counter")),
)


def escape_label_value(value):
    """A label value as the exposition format writes it: backslash, double quote and line feed escaped."""
    return str(value).replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def escape_help(text):
    """A HELP text: backslash and line feed escaped."""
    return str(text).replace("\\", "\\\\").replace("\n", "\\n")


def format_value(value):
    if isinstance(value, bool):
        return "1" if value else "0"
    if isinstance(value, int):
        return str(value)
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


class Exposition(object):
    """Metric families in order, each with its HELP and TYPE once, then its samples."""

    def __init__(self):
        self.families = []
        self.samples = {}

    def add(self, name, kind, help_text, labels, value):
        if value is None:
            return
        if not _NAME.match(name) or any(not _LABEL.match(key) for key, _value in labels):
            raise ValueError("not a valid metric or label name: %s %r" % (name, labels))
        if name not in self.samples:
            self.families.append((name, kind, help_text))
            self.samples[name] = []
        label_text = ",".join('%s="%s"' % (key, escape_label_value(val)) for key, val in labels if val is not None)
        self.samples[name].append("%s{%s} %s" % (name, label_text, format_value(value)) if label_text
                                  else "%s %s" % (name, format_value(value)))

    def text(self):
        lines = []
        for name, kind, help_text in self.families:
            lines.append("# HELP %s %s" % (name, escape_help(help_text)))
            lines.append("# TYPE %s %s" % (name, kind))
            lines.extend(self.samples[name])
        return "\n".join(lines) + "\n" if lines else ""


def device_labels(device, gpu, hostname):
    index = device.get("index")
    return [
        ("gpu", index),
        ("UUID", device.get("uuid")),
        ("pci_bus_id", device.get("pci_bus_id")),
        ("device", "nvidia%d" % index if isinstance(index, int) else None),
        ("modelName", device.get("name")),
        ("Hostname", hostname or None),
        ("DCGM_FI_DRIVER_VERSION", gpu.get("driver_version")),
    ]


def nvlink_counts(gpu, label):
    """(up, down) links of one GPU (topology label GPU<index>); None, None when the GPU has no NVLink reported.

    A GPU whose links are all down is listed by nvidia-smi in one line, without its links (NVML lists them): its
    count of down links is left unknown with both backends, so that they give the same metrics, and
    ``gpufleet_nvlink_all_links_down`` says so."""
    topology = gpu.get("topology") or {}
    links = (topology.get("nvlink") or {}).get(label)
    if label in (topology.get("nvlink_gpus_all_inactive") or []):
        return 0, None
    if not links:
        return None, None
    return (sum(1 for link in links if link.get("active") is True),
            sum(1 for link in links if link.get("active") is False))


def failures_of(health, label):
    """The failures of the node's health verdict that name this GPU (``GPU3: ...``, ``NVLink inactive: GPU3 link``)."""
    pattern = re.compile(r"\b%s\b" % re.escape(label))
    return [failure for failure in (health or {}).get("failures") or [] if pattern.search(failure)]


def render(gpu, health=None, hostname=None, timestamp=None):
    """The exposition text of one node's GPU facts (and its health verdict, ``{"failures", "warnings"}`` of
    gpufleet_node_health, when given). Pure: facts in, text out."""
    out = Exposition()
    state = gpu.get("state") or "error"
    out.add("gpufleet_gpu_facts_ok", "gauge",
            "Whether the GPU facts could be read (1) or not (0, the state says why); gpufleet.node.gpu_facts.",
            [("state", state), ("source", gpu.get("source") or "none"), ("Hostname", hostname or None)],
            1 if state == "ok" else 0)
    out.add("gpufleet_gpu_count", "gauge", "GPUs the driver answers for.", [("Hostname", hostname or None)],
            _count(gpu.get("count")))
    if timestamp is not None:
        out.add("gpufleet_gpu_metrics_timestamp_seconds", "gauge", "When these GPU metrics were gathered (Unix time).",
                [("Hostname", hostname or None)], timestamp)
    devices = gpu.get("devices") or []
    for name, kind, help_text, value_of in DEVICE_METRICS:
        for device in devices:
            out.add(name, kind, help_text, device_labels(device, gpu, hostname), value_of(device))
    for device in devices:
        reasons = device.get("clock_event_reasons_active")
        if not isinstance(reasons, list):
            continue
        for _bit, reason in CLOCK_EVENT_REASONS:
            out.add("gpufleet_clock_event_reason_active", "gauge",
                    "Whether a clock event (throttle) reason is active (nvidia-smi's clocks_event_reasons names).",
                    device_labels(device, gpu, hostname) + [("reason", reason)], 1 if reason in reasons else 0)
    for field, help_text in ((0, "NVLink links of the GPU that are up."), (1, "NVLink links of the GPU that are down.")):
        name = "gpufleet_nvlink_links_up" if field == 0 else "gpufleet_nvlink_links_down"
        for device in devices:
            out.add(name, "gauge", help_text, device_labels(device, gpu, hostname),
                    nvlink_counts(gpu, "GPU%s" % device.get("index"))[field])
    inactive = (gpu.get("topology") or {}).get("nvlink_gpus_all_inactive") or []
    for device in devices:
        label = "GPU%s" % device.get("index")
        if label in ((gpu.get("topology") or {}).get("nvlink") or {}) or label in inactive:
            out.add("gpufleet_nvlink_all_links_down", "gauge", "Whether every NVLink link of the GPU is down.",
                    device_labels(device, gpu, hostname), 1 if label in inactive else 0)
    if health is not None:
        for device in devices:
            out.add("gpufleet_gpu_healthy", "gauge",
                    "1 when no failure of the node's health verdict (gpufleet.node.gpufleet_node_health) names the GPU.",
                    device_labels(device, gpu, hostname),
                    0 if failures_of(health, "GPU%s" % device.get("index")) else 1)
        labels = [("Hostname", hostname or None)]
        out.add("gpufleet_node_healthy", "gauge",
                "1 when the node passes the health gates of gpufleet.node (gpufleet_node_health: no failure).",
                labels, 0 if health.get("failures") else 1)
        out.add("gpufleet_node_health_failures", "gauge", "Failures of the node's health verdict.", labels,
                len(health.get("failures") or []))
        out.add("gpufleet_node_health_warnings", "gauge", "Warnings of the node's health verdict.", labels,
                len(health.get("warnings") or []))
    return out.text()


def write_atomically(path, text, mode=0o644):
    """Write text to path through a temporary file in the same directory and a rename: node exporter never reads a
    half-written file (its textfile collector reads every *.prom file at each scrape)."""
    directory = os.path.dirname(os.path.abspath(path))
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "w") as stream:
            stream.write(text)
            stream.flush()
            os.fsync(stream.fileno())
        os.chmod(temporary, mode)
        os.rename(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
