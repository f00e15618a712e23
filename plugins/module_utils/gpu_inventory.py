# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The GPU inventory of a host from NVML or nvidia-smi: the gathering and assembling behind gpufleet.node.gpu_facts.

Standard library and this collection's module_utils only, no Ansible: the module gpu_facts calls ``gather(params)``
and so does the GPU metrics collector of the role gpufleet.node.gpu_monitoring, which runs on nodes without
Ansible (the role copies this file, nvml.py, nvidia_smi.py and process.py under
/usr/local/lib/gpufleet/ansible_collections/gpufleet/node/plugins/module_utils/, so these imports work unchanged).

``params`` are the module's options: ``backend``, ``nvidia_smi_path``, ``nvml_library``, ``timeout``,
``gather_subset`` and ``pci_devices_path``. ``gather`` returns the ``gpu`` facts the module documents (RETURN of
plugins/modules/gpu_facts.py); ``assemble`` and ``assemble_nvml`` are the pure assembly of each backend's results.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import glob
import os
import threading
import time

from ansible_collections.gpufleet.node.plugins.module_utils import nvml
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import (
    NvidiaSmiParseError,
    classify_error,
    lost_gpus,
    nvlink_summary,
    parse_nvlink_status,
    parse_query_xml,
    parse_topology,
)
from ansible_collections.gpufleet.node.plugins.module_utils.process import run_command

BACKENDS = ("auto", "nvml", "nvidia_smi")
PARTS = ("inventory", "topology", "nvlink")
SEARCH_DIRS = ("/usr/bin", "/usr/local/nvidia/bin", "/usr/local/cuda/bin", "/opt/nvidia/bin")
SUBCOMMANDS = {
    "inventory": ["-q", "-x"],
    "topology": ["topo", "-m"],
    "nvlink": ["nvlink", "-s"],
}
NVIDIA_VENDOR = "0x10de"
NVSWITCH_DEVICE_IDS = ("0x1af1", "0x22a3")
GPU_CLASS_PREFIXES = ("0x0300", "0x0302")
PROC_VERSION = "/proc/driver/nvidia/version"
NVML_LIBRARY = "libnvidia-ml.so.1"
NVML_LIBRARY_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib64/libnvidia-ml.so.*.*",
    "/usr/lib/libnvidia-ml.so.*.*",
)
# Fields only NVML reports; nvidia-smi's text has no place for them, so that backend gives None.
NVML_ONLY_DEVICE_FIELDS = ("compute_capability",)
NVML_ONLY_LINK_FIELDS = ("remote_pci_bus_id", "remote_device_type")
# NVML states that end the gathering: nothing about the devices can be read.
NVML_FATAL_STATES = ("driver_library_mismatch", "driver_not_loaded", "no_devices", "timeout", "error")


# --- I/O at the edges -------------------------------------------------------------------------------------

def run_concurrently(binary, parts, timeout):
    """Run the nvidia-smi subcommand of each part at once; ``({part: result}, {part: seconds}, wall)``."""
    results, timings = {}, {}

    def worker(part):
        started = time.monotonic()
        results[part] = run_command([binary] + SUBCOMMANDS[part], timeout)
        timings[part] = round(time.monotonic() - started, 3)

    started = time.monotonic()
    threads = [threading.Thread(target=worker, args=(part,)) for part in parts]
    for thread in threads:
        thread.daemon = True
        thread.start()
    for thread in threads:
        thread.join(timeout + 5)
    for part in parts:
        results.setdefault(part, (None, "", "", True))
    return results, timings, round(time.monotonic() - started, 3)


def find_nvidia_smi(path):
    """The nvidia-smi to run: the given path, else PATH, else the usual install locations; or None."""
    if path:
        return path if os.path.isfile(path) and os.access(path, os.X_OK) else None
    dirs = [d for d in os.environ.get("PATH", "").split(os.pathsep) if d] + list(SEARCH_DIRS)
    for directory in dirs:
        candidate = os.path.join(directory, "nvidia-smi")
        if os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    return None


def read_file(path):
    try:
        with open(path) as handle:
            return handle.read().strip()
    except (IOError, OSError, UnicodeError):
        return None


def read_pci(devices_path):
    """NVIDIA GPUs and NVSwitches on the PCI bus: ``{"nvidia_gpus", "nvswitches"}`` (None when unreadable)."""
    if not os.path.isdir(devices_path):
        return {"nvidia_gpus": None, "nvswitches": None}
    gpus = switches = 0
    for device in sorted(os.listdir(devices_path)):
        base = os.path.join(devices_path, device)
        if read_file(os.path.join(base, "vendor")) != NVIDIA_VENDOR:
            continue
        if read_file(os.path.join(base, "device")) in NVSWITCH_DEVICE_IDS:
            switches += 1
        elif (read_file(os.path.join(base, "class")) or "").startswith(GPU_CLASS_PREFIXES):
            gpus += 1
    return {"nvidia_gpus": gpus, "nvswitches": switches}


def loaded_module_version():
    """Version of the loaded NVIDIA kernel module, or None when no module is loaded."""
    text = read_file(PROC_VERSION)
    if not text:
        return None
    for word in text.split():
        if word.count(".") >= 1 and word.replace(".", "").isdigit():
            return word
    return None


def nvml_library_version():
    """Version of the installed user-space NVML library (from its file name), or None."""
    for pattern in NVML_LIBRARY_GLOBS:
        for path in sorted(glob.glob(pattern)):
            version = path.rsplit(".so.", 1)[-1]
            if version.replace(".", "").isdigit():
                return version
    return None


# --- assembling the facts (pure) --------------------------------------------------------------------------

def empty_facts():
    return {
        "state": "error",
        "message": "",
        "source": None,
        "errors": {},
        "nvidia_smi": None,
        "nvml_library": None,
        "nvml_missing": [],
        "driver_version": None,
        "cuda_driver_version": None,
        "nvml_version": None,
        "loaded_module_version": None,
        "count": 0,
        "attached_gpus": None,
        "lost_gpus": [],
        "devices": [],
        "topology": {
            "gpus": [], "matrix": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {},
            "nics": [], "gpu_nic": {}, "p2p": None, "nvlink": {}, "nvlink_links_active": 0,
            "nvlink_links_inactive": 0, "nvlink_gpus_all_inactive": [], "nvlink_pairs": 0, "nvlink_pair_list": [],
            "nvlink_max_links": 0, "nvlink_all_to_all": False, "nvswitch": False, "shape": "",
        },
        "pci": {"nvidia_gpus": None, "nvswitches": None},
        "summary": {"models": {}, "total_memory_mib": 0, "homogeneous": True},
        "timings": {},
    }


def failure(part, result):
    """``(state, message)`` for a command that did not produce parseable output."""
    _rc, stdout, stderr, timed_out = result
    if timed_out:
        return "timeout", "nvidia-smi %s did not finish in time and was killed" % " ".join(SUBCOMMANDS[part])
    return classify_error((stdout + "\n" + stderr).strip())


def gpus_phrase(count):
    return "%d GPU%s" % (count, "" if count == 1 else "s")


def shape(count, summary, nvswitch):
    """The NVLink shape in words, e.g. '8 GPUs, NV12 all-to-all' or '4 GPUs, 2 NV4 pairs'."""
    gpus = gpus_phrase(count)
    if not summary.get("complete", True) and not summary["pairs"]:
        return gpus + ", NVLink unknown (the matrix could not be read whole)"
    if not summary["pairs"]:
        return gpus + ", no NVLink"
    widths = "/".join("NV%d" % width for width in summary["bond_widths"])
    if summary["all_to_all"]:
        return "%s, %s all-to-all%s" % (gpus, widths, " (NVSwitch)" if nvswitch else "")
    pairs = "%s, %d %s pair%s" % (gpus, summary["pairs"], widths, "" if summary["pairs"] == 1 else "s")
    if summary["all_to_all"] is None or not summary.get("complete", True):
        return pairs + " known (the matrix could not be read whole)"
    return pairs


def refine(state, message, module_version, library_version):
    """Correct what an error text alone says with what the host shows.

    'Failed to initialize NVML: Unknown Error' says little: no loaded module means the driver is not loaded, a
    library of another version than the module means a mismatch. "Couldn't communicate with the NVIDIA driver"
    (driver_not_loaded by its text) while a kernel module IS loaded is not an unloaded driver: the driver does not
    answer (device nodes missing, permissions, a wedged GPU), so it becomes ``error`` and says so.
    """
    if state == "driver_not_loaded" and module_version is not None:
        return "error", "%s (yet kernel module %s is loaded: the driver does not answer)" % (message, module_version)
    if state != "error":
        return state, message
    if module_version is None:
        return "driver_not_loaded", "%s (no NVIDIA kernel module is loaded: %s is absent)" % (message, PROC_VERSION)
    if library_version and library_version != module_version:
        return "driver_library_mismatch", "%s (kernel module %s, NVML library %s)" % (
            message, module_version, library_version)
    return state, message


def parse_part(part, result, parser, problems):
    """Parse one command's output, or record why it failed and return None.

    A subcommand other than ``-q -x`` (which exits 0 even when it prints an error) must also have exited 0.
    """
    rc, stdout, _stderr, timed_out = result
    try:
        if timed_out or (part != "inventory" and rc != 0):
            raise NvidiaSmiParseError("nvidia-smi %s failed" % " ".join(SUBCOMMANDS[part]))
        return parser(stdout)
    except NvidiaSmiParseError:
        problems.append((part,) + failure(part, result))
        return None


def reindex(devices, lost, attached):
    """Indexes of the listed GPUs when the XML does not list them all.

    ``-q -x`` prints no index: a GPU's index is its position, which holds only when every attached GPU is
    listed. nvidia-smi numbers GPUs in PCI bus order, so with the lost GPUs' bus ids (from its "GPU is lost"
    lines) the positions can be recomputed; without them, or when the numbers do not add up, indexes are None.
    """
    if attached is None or len(devices) == attached:
        return
    buses = [device.get("pci_bus_id") for device in devices]
    if lost and None not in buses and len(devices) + len(lost) == attached:
        order = sorted(buses + list(lost), key=lambda bus: bus.upper())
        for device in devices:
            device["index"] = order.index(device["pci_bus_id"])
        return
    for device in devices:
        device["index"] = None


def complete_device(device):
    """A device in the one schema of both backends: the NVML-only fields are None where nvidia-smi gave it."""
    for field in NVML_ONLY_DEVICE_FIELDS:
        device.setdefault(field, None)
    return device


def complete_links(links):
    for link in links:
        for field in NVML_ONLY_LINK_FIELDS:
            link.setdefault(field, None)
    return links


def set_nvlink_status(topology, status):
    """``topology.nvlink`` and its counts from per-GPU link lists ({label: {"links", "all_inactive"}})."""
    topology["nvlink"] = dict((label, complete_links(gpu["links"])) for label, gpu in sorted(status.items()))
    all_links = [link for gpu in status.values() for link in gpu["links"]]
    topology["nvlink_links_active"] = sum(1 for link in all_links if link["active"])
    topology["nvlink_links_inactive"] = sum(1 for link in all_links if link["active"] is False)
    # nvidia-smi prints one line instead of the links of a GPU whose links are all down: how many there are
    # is not printed, so the GPU is named here rather than its links counted.
    topology["nvlink_gpus_all_inactive"] = sorted(
        (label for label, gpu in status.items() if gpu.get("all_inactive")), key=label_order)


def label_order(label):
    digits = label[3:]
    return int(digits) if digits.isdigit() else -1


def set_matrix(topology, parsed):
    for key in ("gpus", "matrix", "cpu_affinity", "numa_affinity", "gpu_numa_id", "nics", "gpu_nic"):
        topology[key] = parsed[key]
    links = nvlink_summary(parsed["matrix"])
    topology["nvlink_pairs"] = links["pairs"]
    topology["nvlink_pair_list"] = links["pair_list"]
    topology["nvlink_max_links"] = links["max_links"]
    topology["nvlink_all_to_all"] = links["all_to_all"]
    return links


def summarise(facts):
    models = {}
    for device in facts["devices"]:
        models[device["name"]] = models.get(device["name"], 0) + 1
    facts["summary"] = {
        "models": models,
        "total_memory_mib": sum(device["memory_total_mib"] or 0 for device in facts["devices"]),
        "homogeneous": len(models) <= 1,
    }


def count_problem(facts, inventory):
    """``(state, message)`` when the counts disagree (a lost GPU, a GPU the driver does not list), else None."""
    count, attached, on_bus = facts["count"], facts["attached_gpus"], facts["pci"].get("nvidia_gpus")
    if facts["lost_gpus"]:
        return "gpu_lost", "GPU %s lost: the driver answers for %d of %s GPUs (reset the GPU or reboot the node)" % (
            ", ".join(bus or "(bus id unknown)" for bus in facts["lost_gpus"]), count,
            attached if attached is not None else "its")
    if not inventory:
        return None
    if attached is not None and attached != count:
        return "device_error", "the driver says %d GPUs are attached but lists %d" % (attached, count)
    if on_bus is not None and on_bus > count:
        return "device_error", "the PCI bus shows %s NVIDIA GPUs, the driver lists %d" % (on_bus, count)
    return None


def nvswitch_evidence(pci, devices, nvlink):
    """Whether the node has NVSwitches, from any evidence: an NVSwitch on the PCI bus (gen 2, 10de:1af1, A100; gen
    3, 10de:22a3, H100), a GPU that reports a fabric state (NVML and -q -x answer NOT_SUPPORTED / N/A where no
    fabric exists; the 4th generation of HGX B200/B300 sits behind the GPUs' NVLink with no PCI function), or an
    NVLink whose far end is a switch (NVML's remote device type)."""
    if (pci or {}).get("nvswitches"):
        return True
    if any((device.get("fabric") or {}).get("state") for device in devices or []):
        return True
    return any(link.get("remote_device_type") == "switch" for links in (nvlink or {}).values() for link in links)


def conclude(facts, parts, problems, links, module_version, library_version):
    """The state and message, from the failures and the counts; and the summary."""
    summarise(facts)
    topology = facts["topology"]
    topology["nvswitch"] = nvswitch_evidence(facts["pci"], facts["devices"], topology["nvlink"])
    if links is not None:
        topology["shape"] = shape(len(topology["gpus"]), links, topology["nvswitch"])
    for part, state, message in problems:
        facts["errors"][" ".join(SUBCOMMANDS[part])] = message
    counted = count_problem(facts, "inventory" in parts)
    if problems:
        # The inventory failing says most; otherwise the first command that failed.
        _part, state, message = problems[0]
        facts["state"], facts["message"] = refine(state, message, module_version, library_version)
    elif counted:
        facts["state"], facts["message"] = counted
    elif "inventory" in parts and facts["count"] == 0:
        facts["state"], facts["message"] = "no_devices", "the driver lists no GPU"
    else:
        facts["state"] = "ok"
        # The count is the driver's list; the shape describes the matrix, which may have other rows.
        if topology["shape"] and len(topology["gpus"]) == facts["count"]:
            details = [topology["shape"]]
        elif topology["shape"]:
            details = [gpus_phrase(facts["count"]), "a topology matrix of %d" % len(topology["gpus"])]
        else:
            details = [gpus_phrase(facts["count"]) if facts["count"] else ""]
        if facts["driver_version"]:
            details.append("driver %s" % facts["driver_version"])
        facts["message"] = ", ".join(detail for detail in details if detail) or "ok"
    return facts


def assemble(parts, results, pci, module_version, library_version):
    """Build ``ansible_facts.gpu`` from nvidia-smi's results (pure: no I/O)."""
    facts = empty_facts()
    facts["source"] = "nvidia_smi"
    facts["pci"] = pci
    facts["loaded_module_version"] = module_version
    topology = facts["topology"]
    topology["nvswitch"] = bool(pci.get("nvswitches"))
    problems = []

    query = parse_part("inventory", results["inventory"], parse_query_xml, problems) if "inventory" in parts else None
    if query is not None:
        facts["driver_version"] = query["driver_version"]
        facts["cuda_driver_version"] = query["cuda_version"]
        facts["attached_gpus"] = query["attached_gpus"]
        facts["devices"] = [complete_device(device) for device in query["gpus"]]
        facts["count"] = len(query["gpus"])
        _rc, stdout, stderr, _timed_out = results["inventory"]
        facts["lost_gpus"] = lost_gpus(stdout + "\n" + stderr)
        reindex(facts["devices"], facts["lost_gpus"], facts["attached_gpus"])

    parsed = parse_part("topology", results["topology"], parse_topology, problems) if "topology" in parts else None
    links = None
    if parsed is not None:
        links = set_matrix(topology, parsed)
        if "inventory" not in parts:
            facts["count"] = len(parsed["gpus"])

    status = parse_part("nvlink", results["nvlink"], parse_nvlink_status, problems) if "nvlink" in parts else None
    if status is not None:
        set_nvlink_status(topology, dict(("GPU%d" % index, gpu) for index, gpu in status.items()))
    return conclude(facts, parts, problems, links, module_version, library_version)


def assemble_nvml(parts, result, pci, module_version):
    """Build ``ansible_facts.gpu`` from what the NVML backend gathered (pure: no I/O)."""
    facts = empty_facts()
    facts["source"] = "nvml"
    facts["pci"] = pci
    facts["loaded_module_version"] = module_version
    facts["nvml_missing"] = sorted(result.get("missing") or [])
    for key in ("driver_version", "cuda_driver_version", "nvml_version"):
        facts[key] = result.get(key)
    topology = facts["topology"]
    topology["nvswitch"] = bool(pci.get("nvswitches"))
    if result["state"] in NVML_FATAL_STATES or result.get("topology") is None:
        facts["state"], facts["message"] = refine(result["state"], result["message"], module_version, None)
        if result["state"] == "no_devices":
            facts["attached_gpus"] = 0
        return facts
    devices = [complete_device(device) for device in result["devices"]]
    facts["count"] = len(devices)
    facts["attached_gpus"] = result.get("count")
    # Lost means GPU_IS_LOST; a handle that fails otherwise (no permission, insufficient power) is a device
    # error, kept in the state below. NVML cannot name a lost GPU whose handle fails: its bus id is then null.
    lost = [entry for entry in result.get("lost") or [] if entry.get("nvml_return") == "NVML_ERROR_GPU_IS_LOST"]
    facts["lost_gpus"] = sorted((entry.get("pci_bus_id") for entry in lost), key=lambda bus: bus or "")
    if "inventory" in parts:
        facts["devices"] = devices
    links = None
    if "topology" in parts:
        links = set_matrix(topology, result["topology"])
        topology["p2p"] = result["topology"].get("p2p")
    if "nvlink" in parts:
        # As nvidia-smi: GPUs without NVLink are not listed, and a GPU whose links are all down is flagged.
        set_nvlink_status(topology, dict(
            (label, {"links": gpu_links, "all_inactive": all(link["active"] is False for link in gpu_links)})
            for label, gpu_links in result["topology"]["nvlink"].items() if gpu_links))
    conclude(facts, parts, [], links, module_version, None)
    if facts["state"] == "ok" and result["state"] != "ok":
        facts["state"], facts["message"] = result["state"], result["message"]
    return facts


def fill_missing(facts, query):
    """Fill the device fields NVML left None (calls missing from an older driver) from nvidia-smi's inventory.

    Devices are matched by PCI bus id, never by position; a field NVML did read is kept.
    """
    by_bus = dict((device["pci_bus_id"], device) for device in query["gpus"] if device.get("pci_bus_id"))
    filled = set()
    for device in facts["devices"]:
        other = by_bus.get(device.get("pci_bus_id"))
        if other is None:
            continue
        for key, value in other.items():
            if key in NVML_ONLY_DEVICE_FIELDS or value is None:
                continue
            if device.get(key) is None:
                device[key] = value
                filled.add(key)
            elif isinstance(value, dict) and isinstance(device.get(key), dict):
                for inner, inner_value in value.items():
                    if device[key].get(inner) is None and inner_value is not None:
                        device[key][inner] = inner_value
                        filled.add("%s.%s" % (key, inner))
    return sorted(filled)


def gather_nvidia_smi(params, parts, binary, pci, module_version):
    results, timings, wall = run_concurrently(binary, parts, params["timeout"])
    library_version = nvml_library_version() if any(r[0] != 0 for r in results.values()) else None
    facts = assemble(parts, results, pci, module_version, library_version)
    facts["nvidia_smi"] = binary
    facts["timings"] = dict((" ".join(SUBCOMMANDS[part]), seconds) for part, seconds in timings.items())
    facts["timings"]["wall"] = wall
    return facts


def gather(params, read_module_version=None):
    """Everything the module does, with I/O: returns the ``gpu`` facts.

    ``read_module_version`` replaces ``loaded_module_version`` (the module passes its own name for it, so that
    tests can replace it there).
    """
    subset = params["gather_subset"]
    parts = [part for part in PARTS if "all" in subset or part in subset]
    backend = params.get("backend") or "auto"
    binary = find_nvidia_smi(params.get("nvidia_smi_path"))
    pci = read_pci(params["pci_devices_path"])
    module_version = (read_module_version or loaded_module_version)()
    library = params.get("nvml_library") or NVML_LIBRARY
    nvml_why = None
    if backend in ("auto", "nvml"):
        started = time.monotonic()
        result = nvml.gather(params["timeout"], library=library)
        # auto also falls back when the gather itself broke (a crash or exception in the child, with no NVML
        # return code to say what the driver thinks): nvidia-smi may still answer.
        broken = result["state"] == "error" and result.get("nvml_return") is None
        if result["state"] != "library_not_found" and not (backend == "auto" and broken and binary):
            facts = assemble_nvml(parts, result, pci, module_version)
            facts["nvml_library"] = library
            facts["nvidia_smi"] = binary
            facts["timings"] = dict(("nvml " + name, seconds) for name, seconds in (result.get("timings") or {}).items())
            # Only calls the library lacks send auto to nvidia-smi; NOT_SUPPORTED (no fabric on an A100) is an
            # answer, and nvidia-smi, on the same library, prints N/A for it too.
            if backend == "auto" and result.get("absent") and binary and "inventory" in parts and facts["devices"]:
                smi = run_concurrently(binary, ["inventory"], params["timeout"])
                try:
                    filled = fill_missing(facts, parse_query_xml(smi[0]["inventory"][1]))
                except NvidiaSmiParseError:
                    filled = []
                if filled:
                    facts["source"] = "nvml+nvidia_smi"
                facts["timings"]["-q -x"] = smi[1].get("inventory")
            facts["timings"]["wall"] = round(time.monotonic() - started, 3)
            return facts
        nvml_why = result["message"]
    if binary is None or backend == "nvml":
        facts = empty_facts()
        facts["state"] = "not_installed"
        facts["pci"] = pci
        facts["loaded_module_version"] = module_version
        where = params.get("nvidia_smi_path") or "PATH or in " + ", ".join(SEARCH_DIRS)
        reasons = []
        if nvml_why:
            reasons.append("NVML: %s" % nvml_why)
        if backend != "nvml":
            reasons.append("nvidia-smi not found (looked on %s)" % where)
        facts["message"] = "; ".join(reasons)
        return facts
    facts = gather_nvidia_smi(params, parts, binary, pci, module_version)
    if nvml_why:
        facts["errors"]["nvml"] = nvml_why
    return facts
