# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a node runs on its GPUs, for gpu_facts' ``stack`` option (``ansible_facts.gpu_stack``): CUDA
(/usr/local/cuda), NCCL (dpkg), torch (the gpufleet.node.pytorch virtualenv), whether fabric manager is active, the
container runtime for GPUs (gpufleet.node.nvidia_container_toolkit), the metrics endpoint
(gpufleet.node.gpu_monitoring), the last run of gpufleet.node.self_converge's timer, and the driver's Xid lines in
the kernel log since boot (the health gate gpufleet_health_critical_xids reads them). Never raises: what cannot be
read is None, or says why.

The runtime and the endpoint come from the records those roles write under /etc/gpufleet, each checked against
the evidence on the node: an engine counts only while its configuration still names the nvidia runtime, the
endpoint only with the exporter's service active, the GPU metrics only with their file fresh.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import collections
import glob
import json
import os
import time

from ansible_collections.gpufleet.node.plugins.module_utils.process import run_command

RUNTIME_RECORD = "/etc/gpufleet/container-runtime.json"
MONITORING_RECORD = "/etc/gpufleet/monitoring.json"
SELF_CONVERGE_RECORD = "/etc/gpufleet/self-converge.json"
# What the fleet report and the health gates take of the self-converge runner's record (roles/self_converge/README.md,
# "The record").
SELF_CONVERGE_FIELDS = ("ok", "time", "message", "commit", "changed", "last_ok")
CUDA_VERSION_FILE = "/usr/local/cuda/version.json"
DEFAULT_VENV = "/opt/gpufleet/pytorch"

Ran = collections.namedtuple("Ran", "returncode stdout stderr")


def run(argv, timeout=20):
    """A command's Ran, or None when it did not run or did not finish in time."""
    returncode, stdout, stderr, timed_out = run_command(argv, timeout)
    if timed_out or returncode == 127 and not stdout:
        return None
    return Ran(returncode, stdout, stderr)


def cuda():
    try:
        with open(CUDA_VERSION_FILE) as stream:
            return json.load(stream)["cuda"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def nccl():
    result = run(["dpkg-query", "--show", "--showformat", "${db:Status-Abbrev} ${Version}", "libnccl2"])
    if result is None or result.returncode != 0 or not result.stdout.startswith(("ii", "hi")):
        return None
    return result.stdout.split()[-1].split("-")[0]


def torch(venv):
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch-*.dist-info"))
    return os.path.basename(found[0])[len("torch-"):-len(".dist-info")] if found else None


def service_active(unit):
    """True when systemctl is-active prints "active", False when it prints another state (inactive, failed,
    activating, ...: systemctl(1)), None when it prints none: missing, too slow, or no systemd to ask ("System has
    not been booted with systemd", "Failed to connect to bus" go to stderr)."""
    result = run(["systemctl", "is-active", unit])
    state = result.stdout.strip() if result is not None else ""
    return (state == "active") if state else None


def fabricmanager():
    return service_active("nvidia-fabricmanager")


def read_json(path):
    try:
        with open(path) as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path) as stream:
            return stream.read()
    except OSError:
        return None


def engine_configured(name, engine):
    """Whether the engine's configuration file still names the runtime the record says it was given."""
    text = read_text(engine.get("config") or "")
    runtime = engine.get("runtime") or "nvidia"
    if text is None:
        return False
    if name == "docker":
        try:
            return runtime in (json.loads(text).get("runtimes") or {})
        except (ValueError, AttributeError):
            return False
    return ("runtimes.%s]" % runtime) in text or ("runtimes.\"%s\"]" % runtime) in text


def container_runtime():
    """{toolkit, engines: {name: {runtime, default, restart_pending}}, cdi}, or None without the toolkit role's
    record."""
    record = read_json(RUNTIME_RECORD)
    if not isinstance(record, dict):
        return None
    engines = {}
    for name, engine in sorted((record.get("engines") or {}).items()):
        if isinstance(engine, dict) and engine_configured(name, engine):
            engines[name] = {"runtime": engine.get("runtime") or "nvidia", "default": bool(engine.get("default")),
                             "restart_pending": bool(engine.get("restart_pending"))}
    cdi = record.get("cdi_spec")
    return {"toolkit": record.get("toolkit_version"), "engines": engines,
            "cdi": cdi if cdi and os.path.isfile(cdi) else None}


def monitoring():
    """{listen_address, metrics_path, active, textfile_age_s, interval_s}, or None without the monitoring record."""
    record = read_json(MONITORING_RECORD)
    if not isinstance(record, dict):
        return None
    exporter = record.get("node_exporter") or {}
    try:
        age = round(time.time() - os.stat(record.get("textfile") or "").st_mtime)
    except OSError:
        age = None
    return {"listen_address": exporter.get("listen_address"), "metrics_path": exporter.get("metrics_path") or "/metrics",
            "active": service_active("prometheus-node-exporter"), "textfile_age_s": age,
            "interval_s": record.get("interval_s")}


def self_converge():
    """{ok, time, message, commit, changed, last_ok} of the last self-converge run, from the runner's record; None
    without a record (the node does not converge itself, or has not run yet). A record that is not the runner's
    (no boolean ok) is reported as a failed run that says so, never as a good one."""
    if not os.path.exists(SELF_CONVERGE_RECORD):
        return None
    record = read_json(SELF_CONVERGE_RECORD)
    if not isinstance(record, dict) or not isinstance(record.get("ok"), bool):
        return dict(dict.fromkeys(SELF_CONVERGE_FIELDS), ok=False,
                    message="%s is not a record of the self-converge runner" % SELF_CONVERGE_RECORD)
    return dict((field, record.get(field)) for field in SELF_CONVERGE_FIELDS)


# The kernel log since boot, from the journal, else the kernel's ring buffer. A source counts only when it shows
# kernel messages at all: a container's journal has none (its kernel is the host's), and dmesg may be refused
# (kernel.dmesg_restrict without CAP_SYSLOG). Only the driver's Xid lines are kept, the newest XID_LINES_KEPT.
KERNEL_LOGS = (("journal", ["journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-iso"]), ("dmesg", ["dmesg"]))
XID_MARK = "NVRM: Xid"
XID_LINES_KEPT = 1000


def kernel_xids():
    """{source, lines, lines_total, error}: the Xid lines of the first kernel log that shows kernel messages; with
    no source, the error says what each log gave."""
    tried = []
    for source, argv in KERNEL_LOGS:
        result = run(argv, timeout=60)
        if result is None:
            tried.append("%s did not run" % argv[0])
            continue
        lines = [line for line in result.stdout.splitlines() if line.strip() and not line.startswith("-- ")]
        if result.returncode != 0 or not lines:
            why = (result.stderr.strip().splitlines() or ["no kernel messages"])[-1]
            tried.append(why if why.startswith(argv[0] + ":") else "%s: %s" % (argv[0], why))
            continue
        xids = [line for line in lines if XID_MARK in line]
        return {"source": source, "lines": xids[-XID_LINES_KEPT:], "lines_total": len(xids), "error": None}
    return {"source": None, "lines": [], "lines_total": 0, "error": "; ".join(tried)}


FIELDS = ("cuda", "nccl", "torch", "fabricmanager_active", "container_runtime", "monitoring", "self_converge",
          "kernel_xids")


def gather(venv=None):
    """The ``gpu_stack`` facts. Never raises: an unexpected failure leaves every field None (no evidence) and says
    why where the health gates look for the kernel log."""
    try:
        return _gather(venv)
    except Exception as exc:  # pylint: disable=broad-except
        facts = dict.fromkeys(FIELDS)
        facts["kernel_xids"] = {"source": None, "lines": [], "lines_total": 0,
                                "error": "the stack could not be read: %s: %s" % (type(exc).__name__, exc)}
        return facts


def _gather(venv):
    return {"cuda": cuda(), "nccl": nccl(), "torch": torch(venv or DEFAULT_VENV),
            "fabricmanager_active": fabricmanager(), "container_runtime": container_runtime(),
            "monitoring": monitoring(), "self_converge": self_converge(), "kernel_xids": kernel_xids()}
