"""The device check for a machine with real NVIDIA GPUs (issue 15, item 7): one command, a few minutes at most.

    python3 tools/device_check.py OUTDIR [--runs N]

Run from the repository root (the `device` tool runs commands there; OUTDIR is then "$OUT"). It needs Python 3
and the driver; no Ansible (gpu_facts' gather() does not use AnsibleModule, so a stand-in for that one import is
put on the path when Ansible is absent) and nothing from the network. It writes:

* ``captures/``: what the real tools print, byte for byte, as fixtures: ``nvidia-smi -q -x``, ``topo -m``,
  ``nvlink -s`` (with its exit code: GPUs without NVLink print nothing), ``-L``, ``--version``,
  ``systemctl cat nvidia-persistenced``, ``/proc/driver/nvidia/version``, and ``meta.json`` with every command's
  exit code, stderr and seconds;
* ``facts-nvml.json`` and ``facts-nvidia_smi.json``: gpu_facts' facts from each backend;
* ``summary.md``: the backends' disagreements (compare_backends, not strict: one tool may print N/A for what
  the other reads) and the timings of both backends against one ``nvidia-smi -L``, median of N runs.
"""
import argparse
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[1]
COMMANDS = (
    ("q-x.xml", ["nvidia-smi", "-q", "-x"]),
    ("topo-m.txt", ["nvidia-smi", "topo", "-m"]),
    ("nvlink-s.txt", ["nvidia-smi", "nvlink", "-s"]),
    ("L.txt", ["nvidia-smi", "-L"]),
    ("version.txt", ["nvidia-smi", "--version"]),
    ("q.txt", ["nvidia-smi", "-q"]),
    ("persistenced-unit.txt", ["systemctl", "cat", "nvidia-persistenced"]),
    ("proc-driver-version.txt", ["cat", "/proc/driver/nvidia/version"]),
)


def run(argv, timeout=120):
    env = dict(os.environ, LC_ALL="C", LANG="C")
    started = time.monotonic()
    try:
        done = subprocess.run(argv, capture_output=True, timeout=timeout, env=env, check=False)
        return done.returncode, done.stdout, done.stderr, time.monotonic() - started
    except (OSError, subprocess.TimeoutExpired) as exc:
        return None, b"", str(exc).encode(), time.monotonic() - started


def import_gpu_facts():
    """gpu_facts and compare_backends from this checkout, as the collection gpufleet.node."""
    shim = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-device-check-"))
    (shim / "ansible_collections" / "gpufleet").mkdir(parents=True)
    (shim / "ansible_collections" / "gpufleet" / "node").symlink_to(ROOT)
    sys.path.insert(0, str(shim))
    try:
        import ansible.module_utils.basic  # noqa: F401  pylint: disable=unused-import,import-outside-toplevel
    except ImportError:
        basic = shim / "ansible" / "module_utils"
        basic.mkdir(parents=True)
        (shim / "ansible" / "__init__.py").write_text("")
        (basic / "__init__.py").write_text("")
        (basic / "basic.py").write_text("AnsibleModule = None  # no Ansible here; gather() does not use it\n")
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    from ansible_collections.gpufleet.node.plugins.modules import gpu_facts  # pylint: disable=import-outside-toplevel
    import compare_backends  # pylint: disable=import-outside-toplevel
    return gpu_facts, compare_backends


def spread(values):
    return "%.3f s (%.3f-%.3f)" % (statistics.median(values), min(values), max(values))


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("outdir")
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    out = pathlib.Path(args.outdir)
    captures = out / "captures"
    captures.mkdir(parents=True, exist_ok=True)

    meta = {}
    for name, argv in COMMANDS:
        rc, stdout, stderr, seconds = run(argv)
        (captures / name).write_bytes(stdout)
        meta[name] = {"argv": argv, "rc": rc, "stderr": stderr.decode("utf-8", "replace"), "seconds": round(seconds, 3)}
    (captures / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")

    gpu_facts, compare_backends = import_gpu_facts()
    params = {"nvidia_smi_path": None, "nvml_library": None, "timeout": 60, "gather_subset": ["all"],
              "pci_devices_path": "/sys/bus/pci/devices"}
    facts, times = {}, {"nvml": [], "nvidia_smi": [], "nvidia-smi -L": []}
    for _run in range(args.runs):
        for backend in ("nvml", "nvidia_smi"):
            started = time.monotonic()
            facts[backend] = gpu_facts.gather(dict(params, backend=backend))
            times[backend].append(time.monotonic() - started)
        times["nvidia-smi -L"].append(run(["nvidia-smi", "-L"])[3])
    for backend, gathered in facts.items():
        (out / ("facts-%s.json" % backend)).write_text(json.dumps(gathered, indent=2, sort_keys=True) + "\n")
    found = compare_backends.differences(facts["nvml"], facts["nvidia_smi"], strict=False)
    lines = [
        "# gpu_facts on a real machine",
        "",
        "GPUs: %s; driver %s; states: nvml %s (%s), nvidia_smi %s (%s)." % (
            facts["nvidia_smi"]["count"], facts["nvidia_smi"]["driver_version"], facts["nvml"]["state"],
            facts["nvml"]["message"], facts["nvidia_smi"]["state"], facts["nvidia_smi"]["message"]),
        "`nvidia-smi nvlink -s`: exit %s, %d bytes." % (
            meta["nvlink-s.txt"]["rc"], (captures / "nvlink-s.txt").stat().st_size),
        "",
        "| what (%d runs) | median (min-max) |" % args.runs,
        "|---|---:|",
    ]
    for name, values in times.items():
        lines.append("| %s | %s |" % (name, spread(values)))
    lines += ["", "NVML backend phases (last run): %s" % json.dumps(facts["nvml"]["timings"]), "",
              "## Disagreements between the backends (%d)" % len(found), ""]
    lines += ["- " + line for line in found] or ["none"]
    (out / "summary.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
