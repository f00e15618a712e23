"""Benchmark of fact gathering plus the fleet report across simulated fleets (make bench).

Each simulated host is a local connection whose nvidia-smi is the emulator of tests/emulator replaying one of
the three hardware profiles in turn (8-GPU NVSwitch, NVLink pairs, PCIe), with a per-call delay that models a
real node, and whose modules run in a private mount namespace with the profile's emulated PCI tree bound at
/sys/bus/pci/devices, where gpu_facts reads it (so the bench needs root; the machine's own tree is untouched).
playbooks/report.yml runs against fleets of 10, 100 and 500 hosts (gpu_facts, the node probe, the assessment,
the drift comparison, the HTML and JSON report), with forks tuned. Prints a Markdown section.
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

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "tests" / "emulator" / "nvidia_smi_emulator.py"
PROFILES = ["hgx-a100-8gpu", "pairs-4gpu", "pcie-4gpu"]
sys.path.insert(0, str(EMULATOR.parent))
import emulator_profile  # noqa: E402  (tests/emulator: the PCI layout of a profile)

# The interpreter of a simulated host: python in a mount namespace of its own, with the host's PCI tree at the
# real path. Arguments: the tree, then python.
INTERPRETER = """#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c 'mount --bind "$0" /sys/bus/pci/devices && exec "$@"' %s %s "$@"
"""


def write_fleet(work, size, delay_ms):
    wrappers, interpreters = {}, {}
    for profile in PROFILES:
        wrapper = work / ("nvidia-smi-%s" % profile)
        wrapper.write_text("#!/bin/sh\nGPUFLEET_EMULATOR_PROFILE=%s GPUFLEET_EMULATOR_DELAY_MS=%d "
                           "GPUFLEET_EMULATOR_CONFIG=%s exec %s %s \"$@\"\n"
                           % (profile, delay_ms, work / "config", sys.executable, EMULATOR))
        wrapper.chmod(0o755)
        wrappers[profile] = str(wrapper)
        pci = work / "pci" / profile
        pci.mkdir(parents=True, exist_ok=True)
        emulator_profile.lay_out_pci(emulator_profile.load_profile(profile), str(pci))
        interpreter = work / ("python-%s" % profile)
        interpreter.write_text(INTERPRETER % (pci, sys.executable))
        interpreter.chmod(0o755)
        interpreters[profile] = str(interpreter)
    hosts = {}
    for i in range(size):
        profile = PROFILES[i % len(PROFILES)]
        hosts["node-%04d" % (i + 1)] = {"gpu_facts_nvidia_smi_path": wrappers[profile],
                                        "ansible_python_interpreter": interpreters[profile]}
    inventory = {"gpu_nodes": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_become": False}}}
    path = work / ("fleet-%d.json" % size)
    path.write_text(json.dumps(inventory))
    return path


def run_report(inventory, forks, report_dir):
    env = dict(os.environ, ANSIBLE_INJECT_FACT_VARS="false", ANSIBLE_FORKS=str(forks), ANSIBLE_PIPELINING="true",
               ANSIBLE_HOST_KEY_CHECKING="false")
    started = time.perf_counter()
    result = subprocess.run(["ansible-playbook", "-i", str(inventory), str(ROOT / "playbooks" / "report.yml"),
                             "-e", "gpufleet_report_dir=%s" % report_dir], env=env, capture_output=True, text=True,
                            check=False)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit("report.yml failed:\n" + result.stdout[-3000:] + result.stderr[-2000:])
    return wall


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", type=int, nargs="+", default=[10, 100, 500])
    parser.add_argument("--forks", type=int, default=25)
    parser.add_argument("--delay-ms", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    if os.geteuid() != 0:
        raise SystemExit("fleet_bench.py needs root: each simulated host's modules run in a mount namespace with "
                         "its emulated PCI tree bound at /sys/bus/pci/devices")
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-fleet-bench-"))
    (work / "config").mkdir()
    rows, per_host = [], {}
    for size in args.sizes:
        inventory = write_fleet(work, size, args.delay_ms)
        report_dir = work / ("report-%d" % size)
        runs = args.runs if size < 500 else max(1, args.runs - 1)
        walls = [run_report(inventory, args.forks, report_dir) for _run in range(runs)]
        nodes = json.loads((report_dir / "fleet-report.json").read_text())["nodes"]
        assert len(nodes) == size, "the report lists %d of %d hosts" % (len(nodes), size)
        html_kb = (report_dir / "fleet-report.html").stat().st_size / 1024
        median = statistics.median(walls)
        per_host[size] = median / size
        rows.append("| %d | %.1f (%.1f-%.1f) | %.1f | %.0f | %.0f |"
                    % (size, median, min(walls), max(walls), size / median, median / size * 1000, html_kb))
    sizes = sorted(per_host)
    # Growth is judged between the two largest fleets: the smallest one is dominated by start-up.
    base = sizes[-2] if len(sizes) > 1 else sizes[0]
    growth = per_host[sizes[-1]] / per_host[base]
    print("\n".join([
        "## Fact gathering and the fleet report at scale",
        "",
        "playbooks/report.yml (gpu_facts, the node probe, health and drift, HTML and JSON) against simulated fleets:",
        "local connections, each host's nvidia-smi the emulator replaying one of three profiles in turn with %d ms"
        % args.delay_ms,
        "per call and the profile's PCI tree bound at /sys/bus/pci/devices in a mount namespace of its own;",
        "forks %d; median of %d runs (500 hosts: %d) with the spread." % (args.forks, args.runs, max(1, args.runs - 1)),
        "",
        "| hosts | wall, s | hosts/s | ms per host | report, KiB |",
        "|---:|---:|---:|---:|---:|",
    ] + rows + [
        "",
        "Cost per host at %d hosts / at %d hosts: **%.2f** (1.0 is linear growth); %d hosts in %.0f s (target for 500: < 300 s)."
        % (sizes[-1], base, growth, sizes[-1], per_host[sizes[-1]] * sizes[-1]),
    ]))
    return 0 if per_host[sizes[-1]] * sizes[-1] < 300 else 1


if __name__ == "__main__":
    sys.exit(main())
