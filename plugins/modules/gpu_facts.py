#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: NVIDIA GPU inventory and NVLink topology as facts
version_added: "0.1.0"
description:
  - Runs C(nvidia-smi -q -x), C(nvidia-smi topo -m) and C(nvidia-smi nvlink -s) concurrently, each at most
    once, with the C locale and a timeout, and returns what they report under C(ansible_facts.gpu).
  - Reads the PCI IDs of the host to count NVIDIA GPUs and to find NVSwitches (C(10de:1af1) for the A100
    generation, C(10de:22a3) for the H100 generation), and C(/proc/driver/nvidia/version) for the loaded
    kernel module.
  - A missing C(nvidia-smi), an unloaded driver, a driver/library mismatch or a lost GPU are reported in
    C(gpu.state) and C(gpu.message); the module does not fail for them.
  - Needs nothing on the node beyond the Python standard library.
author:
  - gpufleet.node maintainers (@gpufleet)
options:
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). By default it is looked up on C(PATH) and then in C(/usr/bin),
        C(/usr/local/nvidia/bin), C(/usr/local/cuda/bin) and C(/opt/nvidia/bin).
    type: path
  timeout:
    description:
      - Seconds each nvidia-smi command may run. A command still running then is killed and the state is
        C(timeout).
    type: int
    default: 30
  gather_subset:
    description:
      - What to gather. C(inventory) runs C(nvidia-smi -q -x) (devices, driver, counts), C(topology) runs
        C(nvidia-smi topo -m), C(nvlink) runs C(nvidia-smi nvlink -s). C(all) is all three.
    type: list
    elements: str
    choices: [all, inventory, topology, nvlink]
    default: [all]
  pci_devices_path:
    description:
      - Directory of PCI devices to read vendor and device IDs from (one subdirectory per device with
        C(vendor), C(device) and C(class) files). Change it only for a chroot or a test tree.
    type: path
    default: /sys/bus/pci/devices
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  facts:
    support: full
    description: Everything is returned under C(ansible_facts.gpu).
notes:
  - Use it in C(gather_facts) with C(ansible_facts_modules), or as a task.
  - A command that cannot be parsed leaves its part of the facts empty and says why in C(gpu.errors).
seealso:
  - name: nvidia-smi documentation
    description: The NVIDIA System Management Interface.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.node.gpu_facts:

- name: Only the inventory, quickly
  gpufleet.node.gpu_facts:
    gather_subset: [inventory]
    timeout: 10

- name: Stop unless every GPU is up
  ansible.builtin.assert:
    that:
      - ansible_facts['gpu']['state'] == 'ok'
      - ansible_facts['gpu']['count'] == ansible_facts['gpu']['pci']['nvidia_gpus']
    fail_msg: "{{ ansible_facts['gpu']['message'] }}"

# In a play's fact gathering, next to setup:
#   - hosts: gpu_nodes
#     vars:
#       ansible_facts_modules: [ansible.builtin.setup, gpufleet.node.gpu_facts]
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu:
      description: The GPU facts of the host.
      returned: always
      type: dict
      contains:
        state:
          description:
            - C(ok), C(not_installed) (no nvidia-smi), C(driver_not_loaded), C(driver_library_mismatch),
              C(no_devices), C(gpu_lost), C(device_error), C(timeout) or C(error).
          returned: always
          type: str
          sample: ok
        message:
          description: The line that explains the state.
          returned: always
          type: str
          sample: 8 GPUs, driver 535.183.01
        errors:
          description: Per command that failed or could not be parsed, what it printed or why.
          returned: always
          type: dict
          sample: {"topo -m": "Failed to initialize NVML: Unknown Error"}
        nvidia_smi:
          description: Path of the nvidia-smi used, or null when none was found.
          returned: always
          type: str
          sample: /usr/bin/nvidia-smi
        driver_version:
          description: Driver version reported by nvidia-smi.
          returned: always
          type: str
          sample: 535.183.01
        cuda_driver_version:
          description: The newest CUDA version the driver supports.
          returned: always
          type: str
          sample: "12.2"
        loaded_module_version:
          description: Version of the loaded kernel module, from /proc/driver/nvidia/version; null when none is loaded.
          returned: always
          type: str
          sample: 535.183.01
        count:
          description: Number of GPUs nvidia-smi lists.
          returned: always
          type: int
          sample: 8
        attached_gpus:
          description: The number of attached GPUs the XML states; can differ from C(count).
          returned: always
          type: int
          sample: 8
        devices:
          description: One entry per GPU, in nvidia-smi's index order.
          returned: always
          type: list
          elements: dict
          contains:
            index:
              description: nvidia-smi index.
              type: int
              sample: 0
            name:
              description: Product name.
              type: str
              sample: NVIDIA A100-SXM4-80GB
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-513536b6-7d19-9063-b049-1e69664bb298
            serial:
              description: Board serial number.
              type: str
              sample: "1650522003820"
            pci_bus_id:
              description: PCI address with domain.
              type: str
              sample: "00000000:07:00.0"
            minor_number:
              description: Minor number of /dev/nvidiaN (need not equal the index).
              type: int
              sample: 0
            module_id:
              description: Module (SXM slot) ID where reported.
              type: int
              sample: 1
            memory_total_mib:
              description: Frame buffer size in MiB.
              type: int
              sample: 81920
            mig_mode:
              description: MIG mode, C(current) and C(pending) (true, false, or null where unsupported).
              type: dict
              sample: {"current": false, "pending": false}
            mig_devices:
              description: MIG devices with C(index), C(gpu_instance_id), C(compute_instance_id),
                C(memory_total_mib) and C(multiprocessor_count).
              type: list
              elements: dict
              sample: []
            persistence_mode:
              description: Whether persistence mode is on.
              type: bool
              sample: true
            ecc_mode:
              description: ECC mode, C(current) and C(pending).
              type: dict
              sample: {"current": true, "pending": true}
            ecc_errors_uncorrected_volatile:
              description: Uncorrectable ECC errors since the driver loaded, where reported.
              type: int
              sample: 0
            retired_pages:
              description: Retired pages (C(single_bit_ecc), C(double_bit_ecc), C(pending)) where reported.
              type: dict
              sample: {"single_bit_ecc": 0, "double_bit_ecc": 0, "pending": false}
            pcie:
              description: PCIe link C(gen_current), C(gen_max), C(width_current) and C(width_max).
              type: dict
              sample: {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16}
            power_limit_w:
              description: Enforced power limit in watts.
              type: float
              sample: 400.0
            vbios_version:
              description: VBIOS version.
              type: str
              sample: 92.00.36.00.02
        topology:
          description: The GPU interconnect, from C(topo -m), C(nvlink -s) and the PCI IDs.
          returned: always
          type: dict
          contains:
            gpus:
              description: GPU labels in matrix order.
              type: list
              elements: str
              sample: ["GPU0", "GPU1"]
            matrix:
              description: GPU label to GPU label to the relation exactly as printed (C(NV12), C(SYS), ...); self omitted.
              type: dict
              sample: {"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "NV12"}}
            cpu_affinity:
              description: Per GPU label, the CPU affinity as printed, or null where absent or unreadable.
              type: dict
              sample: {"GPU0": "0-23,48-71"}
            numa_affinity:
              description: Per GPU label, the NUMA affinity as printed, or null.
              type: dict
              sample: {"GPU0": "0"}
            gpu_numa_id:
              description: Per GPU label, the GPU NUMA ID as printed (C(N/A) included), or null.
              type: dict
              sample: {"GPU0": "N/A"}
            nics:
              description: NIC names (through the NIC Legend where printed).
              type: list
              elements: str
              sample: ["mlx5_0"]
            gpu_nic:
              description: GPU label to NIC name to relation.
              type: dict
              sample: {"GPU0": {"mlx5_0": "PXB"}}
            nvlink:
              description: Per GPU label, its NVLink links (C(link), C(active), C(speed_gbps)).
              type: dict
              sample: {"GPU0": [{"link": 0, "active": true, "speed_gbps": 26.562}]}
            nvlink_links_active:
              description: Active NVLink links over all GPUs.
              type: int
              sample: 96
            nvlink_links_inactive:
              description: Inactive NVLink links over all GPUs.
              type: int
              sample: 0
            nvlink_pairs:
              description: Number of GPU pairs joined by NVLink.
              type: int
              sample: 28
            nvlink_pair_list:
              description: The NVLink pairs as C([first, second, links]).
              type: list
              elements: list
              sample: [["GPU0", "GPU1", 12]]
            nvlink_max_links:
              description: The widest NVLink bond (0 without NVLink).
              type: int
              sample: 12
            nvlink_all_to_all:
              description: Whether every GPU pair is joined by NVLink.
              type: bool
              sample: true
            nvswitch:
              description: Whether NVSwitches are on the PCI bus.
              type: bool
              sample: true
            shape:
              description: The NVLink shape in words.
              type: str
              sample: 8 GPUs, NV12 all-to-all
        pci:
          description: NVIDIA devices on the PCI bus.
          returned: always
          type: dict
          contains:
            nvidia_gpus:
              description: NVIDIA display and 3D controllers (GPUs) on the bus; null when the bus cannot be read.
              type: int
              sample: 8
            nvswitches:
              description: NVSwitches on the bus.
              type: int
              sample: 6
        summary:
          description: The node at a glance.
          returned: always
          type: dict
          contains:
            models:
              description: Product name to count.
              type: dict
              sample: {"NVIDIA A100-SXM4-80GB": 8}
            total_memory_mib:
              description: Frame buffer of all GPUs in MiB.
              type: int
              sample: 655360
            homogeneous:
              description: Whether every GPU is the same model.
              type: bool
              sample: true
        timings:
          description: Seconds each command took and the module's wall time for them (C(wall)).
          returned: always
          type: dict
          sample: {"-q -x": 0.31, "topo -m": 0.29, "nvlink -s": 0.3, "wall": 0.32}
"""

import glob
import os
import threading
import time

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import (
    NvidiaSmiParseError,
    classify_error,
    nvlink_summary,
    parse_nvlink_status,
    parse_query_xml,
    parse_topology,
)
from ansible_collections.gpufleet.node.plugins.module_utils.process import run_command

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
NVML_LIBRARY_GLOBS = (
    "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib/aarch64-linux-gnu/libnvidia-ml.so.*.*",
    "/usr/lib64/libnvidia-ml.so.*.*",
    "/usr/lib/libnvidia-ml.so.*.*",
)


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
        "errors": {},
        "nvidia_smi": None,
        "driver_version": None,
        "cuda_driver_version": None,
        "loaded_module_version": None,
        "count": 0,
        "attached_gpus": None,
        "devices": [],
        "topology": {
            "gpus": [], "matrix": {}, "cpu_affinity": {}, "numa_affinity": {}, "gpu_numa_id": {},
            "nics": [], "gpu_nic": {}, "nvlink": {}, "nvlink_links_active": 0, "nvlink_links_inactive": 0,
            "nvlink_pairs": 0, "nvlink_pair_list": [], "nvlink_max_links": 0, "nvlink_all_to_all": False,
            "nvswitch": False, "shape": "",
        },
        "pci": {"nvidia_gpus": None, "nvswitches": None},
        "summary": {"models": {}, "total_memory_mib": 0, "homogeneous": True},
        "timings": {},
    }


def failure(part, result):
    """``(state, message)`` for a command that did not produce parseable output."""
    rc, stdout, stderr, timed_out = result
    if timed_out:
        return "timeout", "nvidia-smi %s did not finish in time and was killed" % " ".join(SUBCOMMANDS[part])
    return classify_error((stdout + "\n" + stderr).strip())


def shape(count, summary, nvswitch):
    """The NVLink shape in words, e.g. '8 GPUs, NV12 all-to-all' or '4 GPUs, 2 NV4 pairs'."""
    gpus = "%d GPU%s" % (count, "" if count == 1 else "s")
    if not summary["pairs"]:
        return gpus + ", no NVLink"
    widths = "/".join("NV%d" % width for width in summary["bond_widths"])
    if summary["all_to_all"]:
        return "%s, %s all-to-all%s" % (gpus, widths, " (NVSwitch)" if nvswitch else "")
    return "%s, %d %s pair%s" % (gpus, summary["pairs"], widths, "" if summary["pairs"] == 1 else "s")


def refine_unknown(state, message, module_version, library_version):
    """'Failed to initialize NVML: Unknown Error' says little; the loaded module tells more."""
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


def assemble(parts, results, pci, module_version, library_version):
    """Build ``ansible_facts.gpu`` from the command results (pure: no I/O)."""
    facts = empty_facts()
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
        facts["devices"] = query["gpus"]
        facts["count"] = len(query["gpus"])

    parsed = parse_part("topology", results["topology"], parse_topology, problems) if "topology" in parts else None
    if parsed is not None:
        for key in ("gpus", "matrix", "cpu_affinity", "numa_affinity", "gpu_numa_id", "nics", "gpu_nic"):
            topology[key] = parsed[key]
        links = nvlink_summary(parsed["matrix"])
        topology["nvlink_pairs"] = links["pairs"]
        topology["nvlink_pair_list"] = links["pair_list"]
        topology["nvlink_max_links"] = links["max_links"]
        topology["nvlink_all_to_all"] = links["all_to_all"]
        topology["shape"] = shape(len(parsed["gpus"]), links, topology["nvswitch"])
        if "inventory" not in parts:
            facts["count"] = len(parsed["gpus"])

    status = parse_part("nvlink", results["nvlink"], parse_nvlink_status, problems) if "nvlink" in parts else None
    if status is not None:
        topology["nvlink"] = dict(("GPU%d" % index, gpu["links"]) for index, gpu in sorted(status.items()))
        all_links = [link for gpu in status.values() for link in gpu["links"]]
        topology["nvlink_links_active"] = sum(1 for link in all_links if link["active"])
        topology["nvlink_links_inactive"] = sum(1 for link in all_links if link["active"] is False)

    models = {}
    for device in facts["devices"]:
        models[device["name"]] = models.get(device["name"], 0) + 1
    facts["summary"] = {
        "models": models,
        "total_memory_mib": sum(device["memory_total_mib"] or 0 for device in facts["devices"]),
        "homogeneous": len(models) <= 1,
    }

    for part, state, message in problems:
        facts["errors"][" ".join(SUBCOMMANDS[part])] = message
    if problems:
        # The inventory failing says most; otherwise the first command that failed.
        _part, state, message = problems[0]
        facts["state"], facts["message"] = refine_unknown(state, message, module_version, library_version)
    elif "inventory" in parts and facts["count"] == 0:
        facts["state"], facts["message"] = "no_devices", "nvidia-smi lists no GPU"
    else:
        facts["state"] = "ok"
        details = ["driver %s" % facts["driver_version"]] if facts["driver_version"] else []
        if topology["shape"]:
            details.insert(0, topology["shape"])
        elif facts["count"]:
            details.insert(0, "%d GPU%s" % (facts["count"], "" if facts["count"] == 1 else "s"))
        facts["message"] = ", ".join(details) or "ok"
    return facts


def gather(params):
    """Everything the module does, with I/O: returns the ``gpu`` facts."""
    subset = params["gather_subset"]
    parts = [part for part in ("inventory", "topology", "nvlink") if "all" in subset or part in subset]
    binary = find_nvidia_smi(params["nvidia_smi_path"])
    if binary is None:
        facts = empty_facts()
        facts["state"] = "not_installed"
        where = params["nvidia_smi_path"] or "PATH or in " + ", ".join(SEARCH_DIRS)
        facts["message"] = "nvidia-smi not found (looked on %s)" % where
        facts["pci"] = read_pci(params["pci_devices_path"])
        return facts
    results, timings, wall = run_concurrently(binary, parts, params["timeout"])
    module_version = loaded_module_version()
    library_version = nvml_library_version() if any(r[0] != 0 for r in results.values()) else None
    facts = assemble(parts, results, read_pci(params["pci_devices_path"]), module_version, library_version)
    facts["nvidia_smi"] = binary
    facts["timings"] = dict((" ".join(SUBCOMMANDS[part]), seconds) for part, seconds in timings.items())
    facts["timings"]["wall"] = wall
    return facts


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi_path=dict(type="path"),
            timeout=dict(type="int", default=30),
            gather_subset=dict(type="list", elements="str", default=["all"],
                               choices=["all", "inventory", "topology", "nvlink"]),
            pci_devices_path=dict(type="path", default="/sys/bus/pci/devices"),
        ),
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % module.params["timeout"])
    try:
        facts = gather(module.params)
    except Exception as exc:  # pylint: disable=broad-except
        # Never a traceback: an unexpected failure is a state to report like any other.
        facts = empty_facts()
        facts["message"] = "gpu_facts could not gather: %s: %s" % (type(exc).__name__, exc)
    module.exit_json(changed=False, ansible_facts={"gpu": facts})


if __name__ == "__main__":
    main()
