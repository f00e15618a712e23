"""Simulated GPU hosts for the fleet benchmark and the report tests: no container, one local connection per host.

Each host is a local connection (``ansible_connection: local``) with an interpreter of its own:

- its nvidia-smi answers with the output the emulator of tests/emulator prints for one of three hardware profiles
  (8-GPU NVSwitch, NVLink pairs, PCIe), rendered once per profile by the emulator itself and replayed, after a
  per-call delay that stands for a real node's NVML start-up (with ``replay=False``, the emulator runs at every
  call, as before);
- gpu_facts reads the profile's emulated PCI tree from the directory ``gpu_facts_pci_devices_path`` names (which
  playbooks/fleet_facts.yml passes on), or, with ``namespace=True``, at /sys/bus/pci/devices in a private mount
  namespace of each module run (root only; for playbooks that pass no path). The machine's own tree is untouched;
- its Python loads the compiled-code cache the bench's node images carry (tools/node-image/gpufleet_zipcache.py),
  as a node of the bench does (``zipcache=False`` leaves it out).

Why replay, no namespace and the cache: on the controller of a real fleet a node's nvidia-smi, the setup of its
process and the compilation of each module payload cost nothing (they happen on the node); here every host's share
runs on the same two cores as Ansible. The emulator is a Python program reading its profile and /proc at every call,
about 0.1 s of CPU; the real nvidia-smi's cost to the fleet is its delay, which the replay keeps. The bytes gpu_facts
reads are the same.

``jsonfile_cache_copies`` turns the fact cache of a gathered fleet into one of any size, for the report from the
cache: each new host gets the cached facts of a gathered host, in turn, byte for byte.
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
EMULATOR = ROOT / "tests" / "emulator" / "nvidia_smi_emulator.py"
ZIPCACHE = ROOT / "tools" / "node-image" / "gpufleet_zipcache.py"
PROFILES = ["hgx-a100-8gpu", "pairs-4gpu", "pcie-4gpu"]
# What gpu_facts' nvidia_smi backend runs (plugins/module_utils/gpu_inventory.py, SUBCOMMANDS).
REPLAYED = {"q-x": ["-q", "-x"], "topo-m": ["topo", "-m"], "nvlink-s": ["nvlink", "-s"]}
# tests/emulator's emulator_profile lays out the PCI tree of a profile.
sys.path.insert(0, str(EMULATOR.parent))
import emulator_profile  # noqa: E402  pylint: disable=wrong-import-position

# The interpreter of a simulated host: Python in a mount namespace of its own, with the host's PCI tree at the real
# path. Arguments: the tree, the environment setting, then Python.
PLAIN_INTERPRETER = """#!/bin/sh
exec env %s %s "$@"
"""
INTERPRETER = """#!/bin/sh
exec unshare --mount --propagation private /bin/sh -c \\
  'mount --bind "$0" /sys/bus/pci/devices && settings=$1 && python=$2 && shift 2 && exec env $settings "$python" "$@"' \\
  %s %s %s "$@"
"""

REPLAY = """#!/bin/sh
# nvidia-smi of profile %(profile)s: the emulator's output, rendered once, after the per-call delay.
case "$*" in
%(cases)s
  *) exec env GPUFLEET_EMULATOR_PROFILE=%(profile)s GPUFLEET_EMULATOR_DELAY_MS=%(delay)d GPUFLEET_EMULATOR_CONFIG=%(config)s \\
       GPUFLEET_EMULATOR_PROC=%(proc)s %(python)s %(emulator)s "$@" ;;
esac
"""


def emulator_env(work, profile, delay_ms):
    return dict(os.environ, GPUFLEET_EMULATOR_PROFILE=profile, GPUFLEET_EMULATOR_DELAY_MS=str(delay_ms),
                GPUFLEET_EMULATOR_CONFIG=str(work / "config"), GPUFLEET_EMULATOR_PROC=str(work / "proc"))


def write_nvidia_smi(work, profile, delay_ms, replay):
    """The nvidia-smi of a profile's hosts: a replay of the emulator's answers, or the emulator itself."""
    path = work / ("nvidia-smi-%s" % profile)
    if not replay:
        env = emulator_env(work, profile, delay_ms)
        path.write_text("#!/bin/sh\nexec env %s %s %s \"$@\"\n" % (
            " ".join("%s=%s" % (key, env[key]) for key in ("GPUFLEET_EMULATOR_PROFILE", "GPUFLEET_EMULATOR_DELAY_MS",
                                                           "GPUFLEET_EMULATOR_CONFIG", "GPUFLEET_EMULATOR_PROC")),
            sys.executable, EMULATOR))
        path.chmod(0o755)
        return path
    cases = []
    for name, argv in REPLAYED.items():
        result = subprocess.run([sys.executable, str(EMULATOR)] + argv, env=emulator_env(work, profile, 0),
                                capture_output=True, check=False)
        out = work / "replay" / profile / name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.with_suffix(".out").write_bytes(result.stdout)
        out.with_suffix(".err").write_bytes(result.stderr)
        if result.stderr or result.returncode:
            cases.append('  "%s") sleep %.3f; cat %s; cat %s >&2; exit %d ;;'
                         % (" ".join(argv), delay_ms / 1000.0, out.with_suffix(".out"), out.with_suffix(".err"),
                            result.returncode))
        else:
            cases.append('  "%s") sleep %.3f; exec cat %s ;;' % (" ".join(argv), delay_ms / 1000.0, out.with_suffix(".out")))
    path.write_text(REPLAY % {"profile": profile, "cases": "\n".join(cases), "delay": delay_ms,
                              "config": work / "config", "proc": work / "proc", "python": sys.executable,
                              "emulator": EMULATOR})
    path.chmod(0o755)
    return path


def write_fleet(work, size, delay_ms, replay=True, zipcache=True, name=None, profiles=None, namespace=False):
    """An inventory (JSON) of ``size`` simulated hosts in group gpu_nodes, node-0001 on, the profiles (PROFILES by
    default) in turn. Returns its path. Each host's gpu_facts reads its profile's PCI tree where
    ``gpu_facts_pci_devices_path`` (which playbooks/fleet_facts.yml passes on) says, or, with ``namespace``, at
    /sys/bus/pci/devices in a mount namespace of its own (root only), for playbooks that pass no path."""
    profiles = profiles or PROFILES
    work = pathlib.Path(work)
    for directory in ("config", "proc"):
        (work / directory).mkdir(parents=True, exist_ok=True)
    setting = "GPUFLEET_ZIPCACHE_OFF=1"
    if zipcache:
        site = work / "site"
        site.mkdir(exist_ok=True)
        shutil.copy2(ZIPCACHE, site / ZIPCACHE.name)
        (site / "sitecustomize.py").write_text("import gpufleet_zipcache  # noqa: F401\n")
        setting = "PYTHONPATH=%s GPUFLEET_PYCODE_CACHE=%s" % (site, work / "pycode")
    smis, interpreters, trees = {}, {}, {}
    for profile in sorted(set(profiles)):
        smis[profile] = str(write_nvidia_smi(work, profile, delay_ms, replay))
        pci = work / "pci" / profile
        trees[profile] = str(pci)
        if not pci.exists():
            pci.mkdir(parents=True)
            emulator_profile.lay_out_pci(emulator_profile.load_profile(profile), str(pci))
        interpreter = work / ("python-%s" % profile)
        if namespace:
            interpreter.write_text(INTERPRETER % (pci, "'%s'" % setting, sys.executable))
        else:
            interpreter.write_text(PLAIN_INTERPRETER % (setting, sys.executable))
        interpreter.chmod(0o755)
        interpreters[profile] = str(interpreter)
    hosts = {}
    for i in range(size):
        profile = profiles[i % len(profiles)]
        hosts["node-%04d" % (i + 1)] = {"gpu_facts_nvidia_smi_path": smis[profile], "gpu_facts_pci_devices_path": trees[profile],
                                        "ansible_python_interpreter": interpreters[profile]}
    inventory = {"gpu_nodes": {"hosts": hosts, "vars": {"ansible_connection": "local", "ansible_become": False}}}
    path = work / (name or "fleet-%d.json" % size)
    path.write_text(json.dumps(inventory))
    return path


def cache_inventory(path, size):
    """An inventory of ``size`` hosts named as write_fleet names them, with nothing to connect to: for reports from
    the fact cache, which reach no host."""
    hosts = dict(("node-%04d" % (i + 1), {}) for i in range(size))
    pathlib.Path(path).write_text(json.dumps({"gpu_nodes": {"hosts": hosts}}))
    return pathlib.Path(path)


def jsonfile_cache_copies(source, dest, gathered, size):
    """Fills ``dest`` with the jsonfile fact cache of ``size`` hosts (node-0001 on), host i holding the cached facts
    of ``gathered[i % len(gathered)]`` from ``source``, a cache directory that gathered hosts filled. The files'
    names keep whatever prefix ansible-core gave them (``s1_`` for the schema of 2.19)."""
    source, dest = pathlib.Path(source), pathlib.Path(dest)
    contents = []
    for host in gathered:
        matches = [entry for entry in os.listdir(source) if entry.endswith(host) and not entry.startswith(".")]
        if len(matches) != 1:
            raise RuntimeError("the cache %s holds %s for %s, not one file" % (source, matches or "nothing", host))
        contents.append((matches[0][:-len(host)], (source / matches[0]).read_bytes()))
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    for i in range(size):
        prefix, content = contents[i % len(contents)]
        (dest / ("%snode-%04d" % (prefix, i + 1))).write_bytes(content)
    return dest
