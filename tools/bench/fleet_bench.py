"""Benchmark of fact gathering plus the fleet report, and of the report from the fact cache (make bench).

1. playbooks/report.yml gathers and reports on simulated fleets (tools/bench/simulated_fleet.py: local connections,
   each host's nvidia-smi the emulator's output for one of three profiles replayed after a per-call delay, its PCI
   tree an emulated one), with a jsonfile fact cache, which the run fills.
2. report.yml -e gpufleet_report_from_cache=true writes the report of 500 and 5,000 hosts from a fact cache made
   of the gathered one (each host the cached facts of a gathered host, in turn), reaching no host.

Each run is timed (wall, and the CPU time of ansible-playbook and everything it started); the report's JSON is
checked to list every host. Prints a Markdown section; exits 1 when a target is missed:
gather and report 500 hosts < 120 s; the report of 5,000 cached hosts < 60 s; its cost per host at 5,000 within
1.1 of that at 500.
"""
import argparse
import json
import os
import pathlib
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = pathlib.Path(__file__).resolve().parents[2]
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import simulated_fleet  # noqa: E402  pylint: disable=wrong-import-position

TARGET_GATHER_S = {500: 120.0}
TARGET_CACHED_S = {5000: 60.0}
TARGET_GROWTH = 1.1


def children_cpu():
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_report(inventory, forks, report_dir, cache_dir, from_cache=False, playbooks=ROOT / "playbooks"):
    """(wall seconds, CPU seconds) of one report.yml run."""
    env = dict(os.environ, ANSIBLE_INJECT_FACT_VARS="false", ANSIBLE_FORKS=str(forks), ANSIBLE_PIPELINING="true",
               ANSIBLE_HOST_KEY_CHECKING="false", ANSIBLE_CACHE_PLUGIN="jsonfile",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache_dir))
    argv = ["ansible-playbook", "-i", str(inventory), str(pathlib.Path(playbooks) / "report.yml"),
            "-e", "gpufleet_report_dir=%s" % report_dir]
    if from_cache:
        argv += ["-e", "gpufleet_report_from_cache=true"]
    cpu = children_cpu()
    started = time.perf_counter()
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if result.returncode != 0:
        raise SystemExit("report.yml failed:\n" + result.stdout[-3000:] + result.stderr[-2000:])
    return wall, children_cpu() - cpu


def check_report(report_dir, size, source):
    data = json.loads((report_dir / "fleet-report.json").read_text())
    assert len(data["nodes"]) == size and not data.get("missing"), \
        "the report lists %d of %d hosts (missing: %s)" % (len(data["nodes"]), size, data.get("missing", [])[:5])
    assert data.get("facts", source) == source, data["facts"]    # (reports before the cache have no "facts")
    return (report_dir / "fleet-report.html").stat().st_size / 1024, (report_dir / "fleet-report.json").stat().st_size / 1024


def spread(values):
    return "%.1f (%.1f-%.1f)" % (statistics.median(values), min(values), max(values))


def loadavg():
    return os.getloadavg()[0]


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="+", default=[100, 500], help="fleets gathered and reported")
    parser.add_argument("--cached-sizes", type=int, nargs="*", default=[500, 5000], help="reports from the cache")
    parser.add_argument("--forks", type=int, default=25)
    parser.add_argument("--delay-ms", type=int, default=300)
    parser.add_argument("--runs", type=int, default=3, help="runs of each gathered fleet under 500, cached report")
    parser.add_argument("--emulator", action="store_true", help="run the emulator at every nvidia-smi call and no "
                        "compiled-code cache (the simulation before replay)")
    parser.add_argument("--namespace", action="store_true", help="give each host's modules its PCI tree at "
                        "/sys/bus/pci/devices in a mount namespace (for playbooks that do not pass gpu_facts_pci_devices_path)")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--playbooks", default=str(ROOT / "playbooks"), help="another playbooks directory with "
                        "report.yml (an earlier version, to compare; give --cached-sizes nothing when it has no cache)")
    args = parser.parse_args()
    if (args.namespace or args.emulator) and os.geteuid() != 0:
        raise SystemExit("--namespace needs root: each simulated host's modules run in a mount namespace with "
                         "its emulated PCI tree bound at /sys/bus/pci/devices")
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-fleet-bench-"))
    gathered_rows, cached_rows, failures, loads = [], [], [], []
    gathered_cache = None
    try:
        for size in args.sizes:
            inventory = simulated_fleet.write_fleet(work, size, args.delay_ms, replay=not args.emulator,
                                                    zipcache=not args.emulator, namespace=args.namespace or args.emulator)
            runs = args.runs if size < 500 else max(1, args.runs - 2)
            walls, cpus = [], []
            for run in range(runs):
                cache = work / ("cache-gathered-%d-%d" % (size, run))
                loads.append(loadavg())
                wall, cpu = run_report(inventory, args.forks, work / ("report-%d" % size), cache, playbooks=args.playbooks)
                walls.append(wall)
                cpus.append(cpu)
                html_kb, json_kb = check_report(work / ("report-%d" % size), size, "gathered")
                gathered_cache = (cache, size)
            gathered_rows.append((size, walls, cpus, html_kb, json_kb))
            target = TARGET_GATHER_S.get(size)
            if target and statistics.median(walls) >= target:
                failures.append("gathering and reporting %d hosts took %.0f s (target < %.0f s)"
                                % (size, statistics.median(walls), target))
        cache_dir, cache_size = gathered_cache
        gathered_hosts = ["node-%04d" % (i + 1) for i in range(cache_size)]
        per_host = {}
        for size in args.cached_sizes:
            cache = simulated_fleet.jsonfile_cache_copies(cache_dir, work / ("cache-%d" % size), gathered_hosts, size)
            inventory = simulated_fleet.cache_inventory(work / ("cached-%d.json" % size), size)
            walls, cpus = [], []
            for _run in range(args.runs):
                loads.append(loadavg())
                wall, cpu = run_report(inventory, args.forks, work / ("cached-report-%d" % size), cache, from_cache=True,
                                       playbooks=args.playbooks)
                walls.append(wall)
                cpus.append(cpu)
                html_kb, json_kb = check_report(work / ("cached-report-%d" % size), size, "fact cache")
            cached_rows.append((size, walls, cpus, html_kb, json_kb))
            per_host[size] = statistics.median(walls) / size
            target = TARGET_CACHED_S.get(size)
            if target and statistics.median(walls) >= target:
                failures.append("the report of %d cached hosts took %.0f s (target < %.0f s)"
                                % (size, statistics.median(walls), target))
            shutil.rmtree(cache)
        sizes = sorted(per_host)
        growth = per_host[sizes[-1]] / per_host[sizes[0]] if len(sizes) > 1 else None
        if growth is not None and growth > TARGET_GROWTH:
            failures.append("the cost per cached host grew %.2f times from %d to %d hosts (target <= %.1f)"
                            % (growth, sizes[0], sizes[-1], TARGET_GROWTH))
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)
    lines = [
        "## Fact gathering and the fleet report at scale",
        "",
        "`tools/bench/fleet_bench.py`: playbooks/report.yml against simulated fleets (tools/bench/simulated_fleet.py):",
        "local connections; nvidia-smi: %s, %d ms per call;"
        % ("the emulator" if args.emulator else "the emulator's output for one of three profiles, replayed",
           args.delay_ms),
        "PCI tree: the profile's emulated one%s%s; forks %d; a jsonfile fact cache." % (
            ", bound in a mount namespace per module run" if args.namespace or args.emulator else "",
            "" if args.emulator else "; the node images' compiled-code cache", args.forks),
        "Median of the runs with the spread (min-max); CPU is ansible-playbook's and all it started, user and system.",
        "",
        "Gathered and reported (gpu_facts with the stack, health and drift, HTML and JSON), the cache filled:",
        "",
        "| hosts | runs | wall, s | CPU, s | ms per host (wall) | report HTML / JSON, KiB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size, walls, cpus, html_kb, json_kb in gathered_rows:
        lines.append("| %d | %d | %s | %s | %.0f | %.0f / %.0f |" % (
            size, len(walls), spread(walls), spread(cpus), statistics.median(walls) / size * 1000, html_kb, json_kb))
    lines += [
        "",
        "From the fact cache (`-e gpufleet_report_from_cache=true`: nothing gathered, no host reached):",
        "",
        "| hosts | runs | wall, s | CPU, s | ms per host (wall) | report HTML / JSON, KiB |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for size, walls, cpus, html_kb, json_kb in cached_rows:
        lines.append("| %d | %d | %s | %s | %.1f | %.0f / %.0f |" % (
            size, len(walls), spread(walls), spread(cpus), statistics.median(walls) / size * 1000, html_kb, json_kb))
    gathered = dict((size, statistics.median(walls)) for size, walls, _c, _h, _j in gathered_rows)
    cached = dict((size, statistics.median(walls)) for size, walls, _c, _h, _j in cached_rows)
    growth_text = ("cost per cached host at %d / at %d: **%.2f** (target <= %.1f)" % (
        sizes[-1], sizes[0], growth, TARGET_GROWTH)) if growth is not None else "no cost per cached host compared"
    gathered_text = "; ".join("%d hosts gathered and reported in **%.0f s** (< %.0f s)" % (size, gathered[size], target)
                              for size, target in TARGET_GATHER_S.items() if size in gathered) or "no gathering target run"
    cached_text = "; ".join("%d cached hosts reported in **%.1f s** (< %.0f s)" % (size, cached[size], target)
                            for size, target in TARGET_CACHED_S.items() if size in cached) or "no cached target run"
    lines += [
        "",
        "Targets: %s;" % gathered_text,
        "%s;" % cached_text,
        "%s." % growth_text,
        "The machine's load average (1 min) at the start of the runs: %s." % spread(loads),
    ]
    if pathlib.Path(args.playbooks).resolve() != (ROOT / "playbooks").resolve():
        lines.append("Playbooks: %s, not this checkout's." % args.playbooks)
    print("\n".join(lines))
    for failure in failures:
        print("MISSED: " + failure, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
