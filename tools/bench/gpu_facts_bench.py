"""Benchmark of gpu_facts (make bench): parser speed, the nvidia-smi backend's wall time against its calls, and
the NVML backend's gather time and its wall time in a playbook against ansible.builtin.ping.

Uses the emulated GPUs of tests/emulator: the nvidia-smi emulator with a per-call delay that models a real 8-GPU
node's NVML start-up, and the fake libnvidia-ml.so.1 (built by tools/fake-nvml.sh into $CACHE/fake-nvml).
Every figure is the median of several runs with the spread (min-max); ratios come from the same run.
Prints a Markdown section on stdout.
"""
import argparse
import datetime
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
FIXTURES = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "nvidia-smi"

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi  # noqa: E402
from ansible_collections.gpufleet.node.plugins.module_utils import nvml  # noqa: E402
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts  # noqa: E402


def spread(values, scale=1.0, unit=""):
    values = [v * scale for v in values]
    return "%.2f%s (%.2f-%.2f)" % (statistics.median(values), unit, min(values), max(values))


def emulator_output(profile, argv):
    env = dict(os.environ, GPUFLEET_EMULATOR_PROFILE=profile, GPUFLEET_EMULATOR_DELAY_MS="0")
    return subprocess.run([sys.executable, str(EMULATOR)] + argv, env=env, check=True, capture_output=True,
                          text=True).stdout


def time_call(function, *args, repeat=200):
    """Median seconds per call over `repeat` calls, measured in 7 batches: [batch medians]."""
    batches = []
    for _batch in range(7):
        started = time.perf_counter()
        for _call in range(repeat):
            function(*args)
        batches.append((time.perf_counter() - started) / repeat)
    return batches


def parser_section():
    xml = emulator_output("hgx-a100-8gpu", ["-q", "-x"])
    topo = emulator_output("hgx-a100-8gpu", ["topo", "-m"])
    nvlink = emulator_output("hgx-a100-8gpu", ["nvlink", "-s"])

    def all_three():
        nvidia_smi.parse_query_xml(xml)
        nvidia_smi.nvlink_summary(nvidia_smi.parse_topology(topo)["matrix"])
        nvidia_smi.parse_nvlink_status(nvlink)

    rows = [("8-GPU node, all three outputs (-q -x, topo -m, nvlink -s)", len(xml) + len(topo) + len(nvlink),
             time_call(all_three, repeat=100))]
    largest = [
        ("topo -m, 8 GPUs + 11 NICs (capture 18)", nvidia_smi.parse_topology,
         FIXTURES / "18-a100-8gpu-11nic-mlx5-columns-numa-range" / "topo-m.txt"),
        ("nvlink -s, 8 GPUs x 18 links (capture 56)", nvidia_smi.parse_nvlink_status,
         FIXTURES / "56-aws-p5-h100-8gpu-nvlink-status-full" / "nvlink-s.txt"),
        ("-q -x, A100 with 4 MIG devices (capture 31)", nvidia_smi.parse_query_xml,
         FIXTURES / "31-a100-sxm4-80gb-mig-4x1g-xml" / "q-x.xml"),
    ]
    for label, parser, path in largest:
        text = path.read_text(encoding="utf-8")
        rows.append((label, len(text), time_call(parser, text)))
    lines = ["### Parsers", "", "| input | bytes | time per parse, ms | MB/s |", "|---|---:|---:|---:|"]
    for label, size, batches in rows:
        throughput = size / statistics.median(batches) / 1e6
        lines.append("| %s | %d | %s | %.1f |" % (label, size, spread(batches, 1000), throughput))
    return lines, statistics.median(rows[0][2]) * 1000


def module_section(delay_ms, runs):
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-bench-"))
    script = tmp / "nvidia-smi"
    script.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, EMULATOR))
    script.chmod(0o755)
    os.environ.update(GPUFLEET_EMULATOR_PROFILE="hgx-a100-8gpu", GPUFLEET_EMULATOR_DELAY_MS=str(delay_ms),
                      GPUFLEET_EMULATOR_CONFIG=str(tmp))
    params = {"backend": "nvidia_smi", "nvidia_smi_path": str(script), "timeout": 30, "gather_subset": ["all"],
              "pci_devices_path": str(tmp / "none")}
    alone = {name: [] for name in gpu_facts.SUBCOMMANDS}
    walls, ratios, sums, together, over_floor = [], [], [], [], []
    for _run in range(runs):
        for name, argv in gpu_facts.SUBCOMMANDS.items():
            started = time.perf_counter()
            subprocess.run([str(script)] + argv, check=True, capture_output=True)
            alone[name].append(time.perf_counter() - started)
        slowest = max(alone[name][-1] for name in alone)
        sums.append(sum(alone[name][-1] for name in alone))
        # The three calls at once with nothing else: what the emulator itself costs when its processes share
        # the cores, the floor gpu_facts' concurrent calls cannot go under.
        started = time.perf_counter()
        running = [subprocess.Popen([str(script)] + argv, stdout=subprocess.DEVNULL)
                   for argv in gpu_facts.SUBCOMMANDS.values()]
        for process in running:
            process.wait()
        together.append(time.perf_counter() - started)
        started = time.perf_counter()
        facts = gpu_facts.gather(params)
        wall = time.perf_counter() - started
        assert facts["state"] == "ok", facts["message"]
        walls.append(wall)
        ratios.append(wall / slowest)
        over_floor.append(wall / together[-1])
    lines = [
        "### gpu_facts against its nvidia-smi calls (emulated 8-GPU node, %d ms per call, %d runs)" % (delay_ms, runs),
        "",
        "| what | seconds |",
        "|---|---:|",
    ]
    for name, argv in gpu_facts.SUBCOMMANDS.items():
        lines.append("| `nvidia-smi %s` alone | %s |" % (" ".join(argv), spread(alone[name])))
    lines += [
        "| the three run one after another | %s |" % spread(sums),
        "| the three run at once, output discarded | %s |" % spread(together),
        "| gpu_facts (three concurrent calls, parsing, PCI scan) | %s |" % spread(walls),
        "",
        "gpu_facts wall time / slowest single call, per run: median **%.2f** (%.2f-%.2f); target < 1.2."
        % (statistics.median(ratios), min(ratios), max(ratios)),
        "gpu_facts wall time / the three calls run at once with nothing else (what gpu_facts adds to them), per run: "
        "median **%.2f** (%.2f-%.2f)." % (statistics.median(over_floor), min(over_floor), max(over_floor)),
    ]
    return lines, statistics.median(ratios)


SETUP_PLAY = """
- name: setup against gpu_facts, alternately
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
%s
"""
SETUP_TASKS = """
    - name: setup {n}
      ansible.builtin.setup:
    - name: gpu_facts {n}
      gpufleet.node.gpu_facts:
        backend: nvidia_smi
        nvidia_smi_path: {script}
        pci_devices_path: {pci}
"""


def setup_section(delay_ms, runs):
    """gpu_facts against Ansible's own setup module, on the same host, in one playbook run (json callback)."""
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-bench-setup-"))
    script = tmp / "nvidia-smi"
    script.write_text("#!/bin/sh\nGPUFLEET_EMULATOR_PROFILE=hgx-a100-8gpu GPUFLEET_EMULATOR_DELAY_MS=%d "
                      "GPUFLEET_EMULATOR_CONFIG=%s exec %s %s \"$@\"\n" % (delay_ms, tmp, sys.executable, EMULATOR))
    script.chmod(0o755)
    playbook = tmp / "play.yml"
    playbook.write_text(SETUP_PLAY % "".join(SETUP_TASKS.format(n=n, script=script, pci=tmp / "none")
                                             for n in range(runs)))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_INJECT_FACT_VARS="false",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    result = subprocess.run(["ansible-playbook", str(playbook)], env=env, capture_output=True, text=True, check=True)
    timings = {"setup": [], "gpu_facts": []}
    for task in json.loads(result.stdout)["plays"][0]["tasks"]:
        duration = task["task"]["duration"]
        seconds = (_stamp(duration["end"]) - _stamp(duration["start"]))
        timings[task["task"]["name"].split()[0]].append(seconds)
    ratios = [g / s for g, s in zip(timings["gpu_facts"], timings["setup"])]
    return [
        "### gpu_facts against setup (the same host, one playbook, %d alternating runs each)" % runs,
        "",
        "| task | seconds, including Ansible's per-task overhead |",
        "|---|---:|",
        "| `ansible.builtin.setup` (all facts) | %s |" % spread(timings["setup"]),
        "| `gpufleet.node.gpu_facts` (emulated 8-GPU node, %d ms per nvidia-smi call) | %s |"
        % (delay_ms, spread(timings["gpu_facts"])),
        "",
        "gpu_facts / setup, per pair of runs: median **%.2f** (%.2f-%.2f)." % (
            statistics.median(ratios), min(ratios), max(ratios)),
    ]


FAKE_NVML = pathlib.Path(os.environ.get("GPUFLEET_CACHE", str(ROOT / ".cache"))) / "fake-nvml" / "libnvidia-ml.so.1"
PING_PLAY = """
- name: ping against gpu_facts with the NVML backend, alternately
  hosts: localhost
  connection: local
  gather_facts: false
  tasks:
%s
"""
PING_TASKS = """
    - name: ping {n}
      ansible.builtin.ping:
    - name: gpu_facts {n}
      gpufleet.node.gpu_facts:
        backend: nvml
        nvml_library: {library}
        pci_devices_path: {pci}
"""


def nvml_conf(tmp, profile_name):
    """Renders the fake library's configuration for a profile (tests/emulator/emulator_profile.py)."""
    sys.path.insert(0, str(ROOT / "tests" / "emulator"))
    import emulator_profile  # pylint: disable=import-outside-toplevel
    profile = json.loads((ROOT / "tests" / "emulator" / "profiles" / (profile_name + ".json")).read_text())
    conf = tmp / "nvml.conf"
    conf.write_text(emulator_profile.render_nvml_conf(profile, profile_name, None))
    return conf


def nvml_section(runs):
    """NVML backend: the child's phases (library initialisation, then the gather) and the module in a playbook."""
    if not FAKE_NVML.exists():
        raise SystemExit("no %s: build it with tools/fake-nvml.sh" % FAKE_NVML)
    tmp = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-bench-nvml-"))
    os.environ["GPUFLEET_NVML_CONF"] = str(nvml_conf(tmp, "hgx-a100-8gpu"))
    # No modelled start-up delay here: the targets are about what the backend adds beyond the library's own
    # initialisation, which the fake would otherwise spend sleeping.
    os.environ["GPUFLEET_EMULATOR_DELAY_MS"] = "0"
    init, gathered, total = [], [], []
    for _run in range(runs):
        result = nvml.gather(30, library=str(FAKE_NVML))
        assert result["state"] == "ok" and len(result["devices"]) == 8, result["message"]
        init.append(result["timings"]["init"])
        gathered.append(result["timings"]["gather"])
        total.append(result["timings"]["total"])
    playbook = tmp / "play.yml"
    playbook.write_text(PING_PLAY % "".join(PING_TASKS.format(n=n, library=FAKE_NVML, pci=tmp / "none")
                                            for n in range(runs)))
    env = dict(os.environ, ANSIBLE_STDOUT_CALLBACK="ansible.posix.json", ANSIBLE_INJECT_FACT_VARS="false",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false")
    done = subprocess.run(["ansible-playbook", str(playbook)], env=env, capture_output=True, text=True, check=True)
    timings = {"ping": [], "gpu_facts": []}
    for task in json.loads(done.stdout)["plays"][0]["tasks"]:
        duration = task["task"]["duration"]
        timings[task["task"]["name"].split()[0]].append(_stamp(duration["end"]) - _stamp(duration["start"]))
        if task["task"]["name"].startswith("gpu_facts"):
            facts = task["hosts"]["localhost"]["ansible_facts"]["gpu"]
            assert facts["source"] == "nvml" and facts["state"] == "ok", facts["message"]
    extra = [g - p for g, p in zip(timings["gpu_facts"], timings["ping"])]
    lines = [
        "### NVML backend (fake libnvidia-ml.so.1 of the emulated 8-GPU HGX node, %d runs)" % runs,
        "",
        "| what | milliseconds |",
        "|---|---:|",
        "| child process: `nvmlInit_v2` | %s |" % spread(init, 1000),
        "| child process: the gather after initialisation (8 GPUs, every field, links, pairs) | %s |"
        % spread(gathered, 1000),
        "| `nvml.gather()` wall time in the caller (fork, gather, JSON back) | %s |" % spread(total, 1000),
        "",
        "| task, in one playbook (%d alternating runs each) | seconds |" % runs,
        "|---|---:|",
        "| `ansible.builtin.ping` | %s |" % spread(timings["ping"]),
        "| `gpufleet.node.gpu_facts` with `backend: nvml` | %s |" % spread(timings["gpu_facts"]),
        "",
        "Gather beyond initialisation: median **%.1f ms** (target < 50 ms). gpu_facts minus ping, per pair of runs: "
        "median **%.3f s** (%.3f-%.3f; target within 0.1 s)." % (
            statistics.median(gathered) * 1000, statistics.median(extra), min(extra), max(extra)),
        "",
        "The fake library answers from memory and models no start-up delay here, so its initialisation costs "
        "next to nothing; a real driver's takes longer (tools/device_check.py measures it on a lent GPU).",
    ]
    return lines, statistics.median(gathered), statistics.median(extra)


def _stamp(text):
    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--delay-ms", type=int, default=300)
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    parser_lines, parse_ms = parser_section()
    module_lines, ratio = module_section(args.delay_ms, args.runs)
    setup_lines = setup_section(args.delay_ms, args.runs)
    # Four times the runs, 30 at least: a tenth of a second is within the noise of one Ansible task on two cores.
    nvml_lines, nvml_gather, nvml_extra = nvml_section(max(4 * args.runs, 30))
    print("\n".join(["## gpu_facts", ""] + parser_lines + [
        "", "Parsing an 8-GPU node's three outputs: %.2f ms (target < 20 ms)." % parse_ms, ""] + module_lines
        + [""] + setup_lines + [""] + nvml_lines))
    return 0 if parse_ms < 20 and ratio < 1.2 and nvml_gather < 0.05 and nvml_extra < 0.1 else 1


if __name__ == "__main__":
    sys.exit(main())
