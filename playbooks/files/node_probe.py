"""Reads what a node runs, for playbooks/fleet_facts.yml: CUDA (/usr/local/cuda), NCCL (dpkg), torch (the
gpufleet.node.pytorch virtualenv, argv[1]), whether fabric manager is active, the container runtime for GPUs
(gpufleet.node.nvidia_container_toolkit), the metrics endpoint (gpufleet.node.gpu_monitoring) and the driver's Xid
lines in the kernel log since boot (the health gate gpufleet_health_critical_xids reads them). Prints JSON; never
fails.

The runtime and the endpoint come from the records those roles write under /etc/gpufleet, each checked against
the evidence on the node: an engine counts only while its configuration still names the nvidia runtime, the
endpoint only with the exporter's service active, the GPU metrics only with their file fresh."""
import glob
import json
import os
import subprocess
import sys
import time

RUNTIME_RECORD = "/etc/gpufleet/container-runtime.json"
MONITORING_RECORD = "/etc/gpufleet/monitoring.json"


def run(argv, timeout=20):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False, errors="replace")
    except (OSError, subprocess.TimeoutExpired):
        return None


def cuda():
    try:
        with open("/usr/local/cuda/version.json") as stream:
            return json.load(stream)["cuda"]["version"]
    except (OSError, ValueError, KeyError):
        return None


def nccl():
    result = run(["dpkg-query", "--show", "--showformat", "${db:Status-Abbrev} ${Version}", "libnccl2"])
    if result is None or result.returncode != 0 or not result.stdout.startswith(("ii", "hi")):
        return None
    return result.stdout.split()[-1].split("-")[0]


def torch(venv):
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch-*.dist-info"))
    return os.path.basename(found[0])[len("torch-"):-len(".dist-info")] if found else None


def fabricmanager():
    result = run(["systemctl", "is-active", "nvidia-fabricmanager"])
    return None if result is None else result.stdout.strip() == "active"


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
    """{toolkit, engines: {name: {default}}, cdi}, or None without the toolkit role's record."""
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
    result = run(["systemctl", "is-active", "prometheus-node-exporter"])
    try:
        age = round(time.time() - os.stat(record.get("textfile") or "").st_mtime)
    except OSError:
        age = None
    return {"listen_address": exporter.get("listen_address"), "metrics_path": exporter.get("metrics_path") or "/metrics",
            "active": None if result is None else result.stdout.strip() == "active",
            "textfile_age_s": age, "interval_s": record.get("interval_s")}


# The kernel log since boot, from the journal, else the kernel's ring buffer. A source counts only when it shows
# kernel messages at all: a container's journal has none (its kernel is the host's), and dmesg may be refused
# (kernel.dmesg_restrict without CAP_SYSLOG). Only the driver's Xid lines are kept, the newest XID_LINES_KEPT.
KERNEL_LOGS = (("journal", ["journalctl", "-k", "-b", "-q", "--no-pager", "-o", "short-iso"]), ("dmesg", ["dmesg"]))
XID_MARK = "NVRM: Xid"
XID_LINES_KEPT = 1000


def kernel_xids():
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


def main(argv):
    print(json.dumps({"cuda": cuda(), "nccl": nccl(), "torch": torch(argv[1] if len(argv) > 1 else "/opt/gpufleet/pytorch"),
                      "fabricmanager_active": fabricmanager(), "container_runtime": container_runtime(),
                      "monitoring": monitoring(), "kernel_xids": kernel_xids()}))


if __name__ == "__main__":
    main(sys.argv)
