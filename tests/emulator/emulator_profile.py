"""Chooses the hardware profile the emulated GPUs replay on a test node (test-only code).

    gpufleet-emulator-profile NAME     choose a profile
    gpufleet-emulator-profile          render the current profile again (after a change of faults.json)

With NAME it writes NAME to /etc/gpufleet-emulator/profile and lays out the profile's PCI devices (its GPUs and
NVSwitches, vendor, device and class as the kernel shows them) at /sys/bus/pci/devices, where gpu_facts and the
roles read them. It writes there only when that path is a mount of something other than sysfs: the host directory
every test, demo and bench node container has bound there (extensions/molecule/create.yml, tools/lib.sh
run_node). On a real machine it is the kernel's own tree, and the script refuses, changing nothing.

Both forms then render /etc/gpufleet-emulator/nvml.conf for the fake libnvidia-ml.so.1 (tests/emulator/fake_nvml):
the profile, its real ``topo -m`` capture, the planted faults (/etc/gpufleet-emulator/faults.json and the older
inactive_links file) and the power limits ``nvidia-smi -pl`` set (settings.json, which the nvidia-smi emulator
writes and after which it renders nvml.conf again) as flat ``key value`` lines. This renderer is the only reader of the JSON; the library parses
the lines (fake_nvml/README.md describes them). The nvidia-smi emulator reads the same profile and faults itself.
"""
import json
import os
import re
import shutil
import sys
import uuid as uuid_module

HERE = os.path.dirname(os.path.abspath(__file__))
PROFILES = os.path.join(HERE, "profiles")
CONFIG_DIR = os.environ.get("GPUFLEET_EMULATOR_CONFIG", "/etc/gpufleet-emulator")
PCI_DEVICES = "/sys/bus/pci/devices"

NVIDIA_VENDOR = "0x10de"
GPU_DEVICE = "0x20b2"           # A100-SXM4-80GB
GPU_CLASS = "0x030200"          # 3D controller
NVSWITCH_CLASS = "0x068000"     # bridge (other)

# Values of NVML's enums and #defines, from nvml.h (github.com/NVIDIA/go-nvml, gen/nvml/nvml.h: NVML 12.2.140 of
# the 535 driver branch, commit 075f45f; unchanged in 13.3.29).
NVML_SUCCESS = 0
NVML_ERROR_DRIVER_NOT_LOADED = 9
NVML_ERROR_LIB_RM_VERSION_MISMATCH = 18
NVML_ERROR_UNKNOWN = 999
# nvmlErrorString's texts (pynvml's table), as nvidia-smi prints a fabric status.
NVML_RETURN_TEXTS = {
    "Success": 0, "Uninitialized": 1, "Invalid Argument": 2, "Not Supported": 3, "Insufficient Permissions": 4,
    "Already Initialized": 5, "Not Found": 6, "Insufficient Size": 7, "Insufficient External Power": 8,
    "Driver Not Loaded": 9, "Timeout": 10, "Interrupt Request Issue": 11, "NVML Shared Library Not Found": 12,
    "Function Not Found": 13, "Corrupted infoROM": 14, "GPU is lost": 15, "GPU requires restart": 16,
    "In use by another client": 19, "Insufficient Memory": 20, "No data": 21, "Not Ready": 27,
    "Unknown Error": 999,
}
ARCHITECTURES = {"kepler": 2, "maxwell": 3, "pascal": 4, "volta": 5, "turing": 6, "ampere": 7, "ada": 8,
                 "ada lovelace": 8, "hopper": 9, "blackwell": 10}
NVML_DEVICE_ARCH_UNKNOWN = 0xFFFFFFFF
COMPUTE_MODES = {"default": 0, "exclusive_thread": 1, "prohibited": 2, "exclusive_process": 3}
# nvmlClocksEventReason* bits, named as nvidia-smi -q -x names the elements (without clocks_event_reason_).
CLOCK_EVENT_REASONS = {
    "gpu_idle": 0x1, "applications_clocks_setting": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
    "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
    "hw_power_brake_slowdown": 0x80, "display_clocks_setting": 0x100,
}
FABRIC_STATES = {"not supported": 0, "not started": 1, "in progress": 2, "completed": 3}
# nvmlDeviceGpuRecoveryAction_t (nvml.h; RECOVER_IMEX_DOMAIN from NVML 595): a GPU's "recovery_action" names one, as
# a driver from 570 reports it (null: a driver before, which has the reset status only).
RECOVERY_ACTIONS = {"none": 0, "gpu_reset": 1, "node_reboot": 2, "drain_p2p": 3, "drain_and_reset": 4,
                    "recover_imex_domain": 5}
# A planted "fabric_health" ({"summary": "Unhealthy", "degraded_bandwidth": true, ..., "version": 3}) as
# nvmlGpuFabricInfo_v3_t's healthSummary (NVML_GPU_FABRIC_HEALTH_SUMMARY_*) and healthMask (each field at its
# NVML_GPU_FABRIC_HEALTH_MASK_SHIFT_*: 1 TRUE, 2 FALSE, absent 0 NOT_SUPPORTED; incorrect_configuration by name).
FABRIC_HEALTH_SUMMARIES = {"healthy": 1, "unhealthy": 2, "limited capacity": 3}
FABRIC_HEALTH_SHIFTS = {"degraded_bandwidth": 0, "route_recovery_in_progress": 2, "route_unhealthy": 4,
                        "access_timeout_recovery": 6, "incorrect_configuration": 8, "partition_assigned": 12}
FABRIC_CONFIGURATIONS = {"none": 1, "incorrect_sysguid": 2, "incorrect_chassis_sn": 3, "no_partition": 4,
                         "insufficient_nvlinks": 5, "incompatible_gpu_fw": 6, "invalid_location": 7, "gpu_state_invalid": 8}
# nvmlGpuTopologyLevel_t for the relations of a topo -m matrix.
TOPOLOGY_LEVELS = {"PIX": 10, "PXB": 20, "PHB": 30, "NODE": 40, "SYS": 50, "SOC": 50}
NVML_TOPOLOGY_NODE = 40
NVML_TOPOLOGY_SYSTEM = 50
# nvmlGpuP2PStatus_t
P2P_OK = 0
P2P_CHIPSET_NOT_SUPPORTED = 1
P2P_NOT_SUPPORTED = 5
# nvmlIntNvLinkDeviceType_t
NVLINK_REMOTE_GPU = 0
NVLINK_REMOTE_SWITCH = 2
NVML_NVLINK_MAX_LINKS = 18
MIB = 1024 * 1024
RESERVED_MIB = 512      # what the nvidia-smi emulator prints as fb_memory_usage/reserved
# nvml.h (go-nvml gen/nvml/nvml.h at 2f9e261) on nvmlDeviceGetPowerUsage: "On Ampere (except GA100) or newer GPUs,
# the API returns power averaged over 1 sec interval. On GA100 and older architectures, instantaneous power is
# returned"; NVML_FI_DEV_POWER_AVERAGE (185) is "supported on Ampere (except GA100) or newer architectures".
AVERAGING_ARCHITECTURES = ("ampere", "ada", "ada lovelace", "hopper", "blackwell")
GA100_PRODUCTS = re.compile(r"\b(A100|A800|A30)\b")     # the products of the GA100 chip

# The per-GPU keys of a profile, with their defaults (the shared contract of tests/emulator/profiles).
GPU_DEFAULTS = {
    "architecture": "Ampere", "compute_capability": "8.0", "temperature_c": 33, "power_draw_w": 60.0,
    "compute_mode": "Default", "pcie_replay_counter": 0, "clock_event_reasons": [],
    "ecc_dram_uncorrectable_volatile": 0, "ecc_sram_uncorrectable_volatile": 0,
    "ecc_dram_correctable_volatile": 0, "ecc_sram_correctable_volatile": 0,
    "ecc_dram_uncorrectable_aggregate": 0, "ecc_sram_uncorrectable_aggregate": 0,
    "ecc_dram_correctable_aggregate": 0, "ecc_sram_correctable_aggregate": 0,
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "retired_pages_pending": False,
    "reset_required": False, "drain_and_reset_recommended": False, "recovery_action": None,
    "fabric_state": None, "fabric_status": None,
    "module_id": None, "utilization_gpu_pct": 0, "memory_used_mib": 0,
}
# Names of MIG-capable products (nvmlDeviceGetMaxMigDeviceCount answers 7 for them, NOT_SUPPORTED otherwise).
MIG_CAPABLE = re.compile(r"\b(A100|A800|A30|H100|H800|H200|H20|GH200|B200|GB200)\b")


def power_readings(settings):
    """(average, instant) power in W of one GPU, from its profile keys: ``power_draw_w`` is what
    nvmlDeviceGetPowerUsage and nvidia-smi's power_draw read, so on a GPU that averages (AVERAGING_ARCHITECTURES, not
    GA100) it is the 1 s average, and elsewhere the instant reading with no average (None). The optional
    ``power_draw_instant_w`` (a planted spike) sets the instant reading of an averaging GPU apart; absent, the two
    readings are equal (a steady load). A value None: not reported."""
    draw = settings.get("power_draw_w")
    averages = (str(settings.get("architecture") or "").lower() in AVERAGING_ARCHITECTURES
                and not GA100_PRODUCTS.search(str(settings.get("name") or "")))
    if not averages:
        if settings.get("power_draw_instant_w") not in (None, draw):
            raise ValueError("%s: power_draw_instant_w differs from power_draw_w on a GPU whose power draw is the "
                             "instant reading" % settings.get("name"))
        return None, draw
    return draw, settings.get("power_draw_instant_w", draw)


def pci_devices(profile):
    """The profile's NVIDIA PCI functions: {address: (device id, class)}."""
    devices = {}
    for index, bus in enumerate(profile.get("bus_ids", [])):
        devices["0000:" + bus.lower()] = (gpu_settings(profile, index, {})["pci_device_id"], GPU_CLASS)
    for address in switch_addresses(profile):
        devices[address] = (profile["nvswitches"]["device_id"], NVSWITCH_CLASS)
    return devices


def switch_addresses(profile):
    """The NVSwitches' PCI addresses as sysfs names them (0000:10:00.0, 0000:11:00.0, ...); none for switches
    without a PCI function ("pci_function": false: the 4th generation of HGX B200/B300 and the NVLink switch trays
    of GB200 NVL72, which sit behind the GPUs' NVLink only)."""
    switches = profile.get("nvswitches") or {}
    if switches.get("pci_function") is False:
        return []
    return link_switch_addresses(profile)


def link_switch_addresses(profile):
    """The NVSwitches the GPUs' NVLinks end at, by the address the stand-ins give them (0000:10:00.0, ...). What
    NVML answers for the remote PCI info of a link to a switch without a PCI function is not published: the
    stand-ins keep this numbering for it too."""
    switches = profile.get("nvswitches") or {}
    return ["0000:%02x:00.0" % (0x10 + number) for number in range(switches.get("count", 0))]


def lay_out_pci(profile, root):
    """Empties the directory root and writes the profile's PCI functions into it, one directory each."""
    for entry in os.listdir(root):
        path = os.path.join(root, entry)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    for address, (device, klass) in sorted(pci_devices(profile).items()):
        os.mkdir(os.path.join(root, address))
        for name, value in (("vendor", NVIDIA_VENDOR), ("device", device), ("class", klass)):
            with open(os.path.join(root, address, name), "w", encoding="ascii") as handle:
                handle.write(value + "\n")


def mount_type(path):
    """The file system type mounted exactly at path (the topmost mount), or None when nothing is."""
    found = None
    with open("/proc/self/mountinfo", encoding="utf-8") as mountinfo:
        for line in mountinfo:
            fields, _separator, rest = line.partition(" - ")
            mount_point = fields.split()[4].replace("\\040", " ")
            if mount_point == path:
                found = rest.split()[0]
    return found


def load_profile(name, profiles_dir=PROFILES):
    with open(os.path.join(profiles_dir, name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


# ---------------------------------------------------------------------------------------------------- topology


AFFINITY_COLUMNS = ("CPU Affinity", "NUMA Affinity", "GPU NUMA ID")


def read_topology(text):
    """The GPU part of a ``nvidia-smi topo -m`` capture: {"gpus": n, "relation": {(i, j): "NV12"|"SYS"|...},
    "cpu_affinity": [...], "numa_affinity": [...], "gpu_numa_id": [...], "columns": [the affinity columns printed]}
    (affinity values as printed, None where the capture has no such column). A reader for the emulator's own clean profiles: it raises ValueError on
    anything it does not recognise rather than guess."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = lines[0]
    columns = header.split()
    devices = []
    for token in columns:
        if token in ("CPU", "NUMA", "GPU") and any(label.startswith(token) for label in AFFINITY_COLUMNS):
            break
        devices.append(token)
    labels = sorted((label for label in AFFINITY_COLUMNS if label in header), key=header.index)
    gpu_columns = [position for position, device in enumerate(devices) if re.match(r"^GPU\d+$", device)]
    if [devices[position] for position in gpu_columns] != ["GPU%d" % index for index in range(len(gpu_columns))]:
        raise ValueError("topology: GPU columns out of order in %r" % header)
    result = {"gpus": len(gpu_columns), "relation": {}, "columns": labels}
    for label in AFFINITY_COLUMNS:
        result[label.lower().replace(" ", "_")] = [None] * len(gpu_columns)
    rows = [line.split() for line in lines[1:] if re.match(r"^GPU\d+\s", line)]
    if len(rows) != len(gpu_columns):
        raise ValueError("topology: %d GPU rows for %d GPU columns" % (len(rows), len(gpu_columns)))
    for index, row in enumerate(rows):
        if row[0] != "GPU%d" % index or len(row) != 1 + len(devices) + len(labels):
            raise ValueError("topology: cannot read the row %r" % " ".join(row))
        for column, position in enumerate(gpu_columns):
            relation = row[1 + position]
            if column == index:
                if relation != "X":
                    raise ValueError("topology: GPU%d's own column reads %r" % (index, relation))
                continue
            if relation not in TOPOLOGY_LEVELS and not re.match(r"^NV\d+$", relation):
                raise ValueError("topology: unknown relation %r between GPU%d and GPU%d" % (relation, index, column))
            result["relation"][(index, column)] = relation
        for label, value in zip(labels, row[1 + len(devices):]):
            result[label.lower().replace(" ", "_")][index] = None if value == "N/A" else value
    return result


def cpu_list_words(text):
    """A CPU list ("0-23,48-71") as 64-bit words of a cpu set, lowest CPU first ('0x...' strings)."""
    cpus = set()
    for part in text.split(","):
        first, _dash, last = part.partition("-")
        cpus.update(range(int(first), int(last or first) + 1))
    words = [0] * (max(cpus) // 64 + 1)
    for cpu in cpus:
        words[cpu // 64] |= 1 << (cpu % 64)
    return ["0x%x" % word for word in words]


# ---------------------------------------------------------------------------------------------------- faults


def load_faults(config_dir=CONFIG_DIR):
    """faults.json (absent: none) with the older inactive_links file ("<gpu> <link>" lines) folded in."""
    faults = {"inactive_links": [], "all_links_inactive": [], "lost_gpus": [], "gpus": {}}
    try:
        with open(os.path.join(config_dir, "faults.json"), encoding="utf-8") as handle:
            faults.update(json.load(handle))
    except (OSError, ValueError):
        pass
    try:
        with open(os.path.join(config_dir, "inactive_links"), encoding="utf-8") as handle:
            for line in handle:
                parts = line.split()
                if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
                    faults["inactive_links"] = list(faults["inactive_links"]) + [[int(parts[0]), int(parts[1])]]
    except OSError:
        pass
    return faults


def load_settings(config_dir=CONFIG_DIR):
    """settings.json, what the nvidia-smi emulator's -pl / -lgc left: {"<index>": {"power_limit_w": W, ...}}."""
    try:
        with open(os.path.join(config_dir, "settings.json"), encoding="utf-8") as handle:
            return dict((str(index), dict(values)) for index, values in (json.load(handle).get("gpus") or {}).items())
    except (OSError, ValueError, AttributeError, TypeError):
        return {}


# ---------------------------------------------------------------------------------------------------- nvml.conf


def gpu_settings(profile, index, faults):
    """One GPU's keys: the defaults, the profile's "gpu", its "per_gpu" entry, then the planted faults."""
    settings = dict(GPU_DEFAULTS, pci_device_id=GPU_DEVICE)
    settings.update(profile.get("gpu", {}))
    settings.update(profile.get("per_gpu", {}).get(str(index), {}))
    settings.update(faults.get("gpus", {}).get(str(index), {}))
    # what nvidia-smi -pl left (settings.json, written by the nvidia-smi emulator): the enforced power limit
    power = (faults.get("settings", {}).get(str(index)) or {}).get("power_limit_w")
    if power is not None:
        settings["power_limit_w"] = power
    for key in ("pcie_gen", "pcie_width"):
        if settings.get(key + "_current") is None:
            settings[key + "_current"] = settings[key]
    return settings


def init_return(profile):
    """What nvmlInit_v2 returns for an error profile, from the text the real nvidia-smi prints for it."""
    text = profile["error"]["text"]
    if "version mismatch" in text:
        return NVML_ERROR_LIB_RM_VERSION_MISMATCH
    if "No devices were found" in text:
        return NVML_SUCCESS                     # the library starts and counts no device
    if "couldn't communicate with the NVIDIA driver" in text or "Driver Not Loaded" in text:
        return NVML_ERROR_DRIVER_NOT_LOADED
    return NVML_ERROR_UNKNOWN


def nvlink_ends(profile, topology):
    """Per GPU, its links' remote ends: [(type, remote PCI bus id, its PCI device id)] in link order, from the matrix's NV# bonds.
    With NVSwitches every link goes to a switch, round-robin over them; else NV<n> to a GPU is n links to it."""
    links_per_gpu = (profile.get("nvlink") or {}).get("links_per_gpu", 0)
    switches = ["0000" + address.upper() for address in link_switch_addresses(profile)]
    switch_device = (profile.get("nvswitches") or {}).get("device_id")
    switch_id = "0x%s10de" % switch_device[2:] if switch_device else "0x00000000"
    ends = []
    for index in range(topology["gpus"]):
        bonds = [(peer, int(topology["relation"][(index, peer)][2:])) for peer in range(topology["gpus"])
                 if peer != index and topology["relation"][(index, peer)].startswith("NV")]
        if switches:
            if any(width > links_per_gpu for _peer, width in bonds):
                raise ValueError("GPU%d: an NV# bond wider than its %d links" % (index, links_per_gpu))
            ends.append([(NVLINK_REMOTE_SWITCH, switches[link % len(switches)], switch_id)
                         for link in range(links_per_gpu)])
            continue
        links = []
        for peer, width in bonds:
            gpu_id = "0x%s10de" % gpu_settings(profile, peer, {})["pci_device_id"][2:]
            links += [(NVLINK_REMOTE_GPU, "00000000:" + profile["bus_ids"][peer].upper(), gpu_id)] * width
        if len(links) != links_per_gpu:
            raise ValueError("GPU%d: the matrix bonds %d links, the profile says %d" % (index, len(links), links_per_gpu))
        ends.append(links)
    return ends


def pair_level(topology, first, second):
    """nvmlGpuTopologyLevel_t between two GPUs. Where the matrix shows an NVLink bond it hides the PCIe path:
    then NODE when both GPUs have the same NUMA affinity, SYSTEM otherwise (the capture cannot say more)."""
    relation = topology["relation"][(first, second)]
    if relation in TOPOLOGY_LEVELS:
        return TOPOLOGY_LEVELS[relation]
    numa = topology["numa_affinity"]
    return NVML_TOPOLOGY_NODE if numa[first] is not None and numa[first] == numa[second] else NVML_TOPOLOGY_SYSTEM


def active_ends(ends, faults):
    """Per GPU, the remote ends of its active links: [set of remote PCI bus ids]."""
    inactive = {(int(gpu), int(link)) for gpu, link in faults.get("inactive_links", [])}
    all_inactive = {int(gpu) for gpu in faults.get("all_links_inactive", [])}
    return [{end[1] for link, end in enumerate(links) if index not in all_inactive and (index, link) not in inactive}
            for index, links in enumerate(ends)]


def p2p_line(profile, topology, active, first, second):
    """p2p statuses (read, write, nvlink, atomics, prop) between two GPUs: all OK over NVLink (an active link
    between them, or both with an active link to the NVSwitches), else over PCIe read/write/prop OK up to PXB and
    CHIPSET_NOT_SUPPORTED beyond."""
    if profile.get("nvswitches"):
        nvlink = bool(active[first]) and bool(active[second])
    else:
        buses = ["00000000:" + bus.upper() for bus in profile["bus_ids"]]
        nvlink = buses[second] in active[first] and buses[first] in active[second]
    if nvlink:
        return [P2P_OK] * 5
    pcie = P2P_OK if pair_level(topology, first, second) <= 20 else P2P_CHIPSET_NOT_SUPPORTED
    return [pcie, pcie, P2P_NOT_SUPPORTED, P2P_NOT_SUPPORTED, pcie]


def _flag(value):
    return "1" if value else "0"


def _text(value, what):
    if any(character in str(value) for character in "\r\n"):
        raise ValueError("%s: a line break in %r" % (what, value))
    return str(value)


def fabric_health_line(health):
    """The nvml.conf line of a planted fabric health: "fabric_health MASK SUMMARY VERSION"."""
    mask = 0
    for key, shift in FABRIC_HEALTH_SHIFTS.items():
        value = health.get(key)
        if value is None:
            continue
        code = FABRIC_CONFIGURATIONS[value] if key == "incorrect_configuration" else (1 if value else 2)
        mask |= code << shift
    summary = FABRIC_HEALTH_SUMMARIES[health["summary"].lower()] if health.get("summary") else 0
    return "fabric_health 0x%x %d %d" % (mask, summary, health.get("version", 3))


def row_remapper_histogram(settings):
    """(max, high, partial, low, none) banks where the profile gives its bank count (row_remapper_banks), as the
    nvidia-smi emulator prints them: remapped rows move banks from max to high, a planted
    row_remapper_banks_exhausted moves banks to none. None without a bank count."""
    banks, rows = settings.get("row_remapper_banks"), settings.get("remapped_rows")
    if banks is None or rows is None:
        return None
    exhausted = min(banks, settings.get("row_remapper_banks_exhausted") or 0)
    used = min(banks - exhausted, (rows.get("correctable") or 0) + (rows.get("uncorrectable") or 0))
    return (banks - exhausted - used, used, 0, 0, exhausted)


def gpu_lines(profile, name, index, settings, topology, ends, faults):
    """The nvml.conf block of one GPU."""
    inactive = {(int(gpu), int(link)) for gpu, link in faults.get("inactive_links", [])}
    all_inactive = {int(gpu) for gpu in faults.get("all_links_inactive", [])}
    lost = {int(gpu) for gpu in faults.get("lost_gpus", [])}
    bus = profile["bus_ids"][index].upper()
    out = ["gpu %d" % index, "lost %s" % _flag(index in lost), "hang %s" % _flag(settings.get("hang"))]
    out.append("name %s" % _text(settings["name"], "name"))
    out.append("uuid GPU-%s" % uuid_module.uuid5(uuid_module.NAMESPACE_DNS, "%s-%d" % (name, index)))
    out.append("serial 1650%09d" % (index + 1))
    out.append("pci_bus_id 00000000:%s" % bus)
    out.append("pci_device_id 0x%s10de" % settings["pci_device_id"][2:])
    out.append("minor_number %d" % index)
    if settings["module_id"] is not None:
        out.append("module_id %d" % settings["module_id"])
    if settings["architecture"] is not None:
        out.append("architecture %d" % ARCHITECTURES.get(settings["architecture"].lower(), NVML_DEVICE_ARCH_UNKNOWN))
    if settings["compute_capability"] is not None:
        major, minor = str(settings["compute_capability"]).split(".")
        out.append("compute_capability %d %d" % (int(major), int(minor)))
    out.append("vbios_version %s" % _text(settings["vbios_version"], "vbios_version"))
    # total, reserved (nvidia-smi's fb_memory_usage/reserved) and allocated (its used), as nvmlMemory_v2_t has them
    out.append("memory %d %d %d" % (settings["memory_total_mib"] * MIB, RESERVED_MIB * MIB,
                                    (settings["memory_used_mib"] or 0) * MIB))
    out.append("persistence_mode daemon")   # the library reads it from the running nvidia-persistenced
    out.append("ecc_mode 1 1")
    if settings["compute_mode"] is not None:
        out.append("compute_mode %d" % COMPUTE_MODES[settings["compute_mode"].lower()])
    out.append("mig_max_devices %d" % (7 if MIG_CAPABLE.search(settings["name"]) else -1))
    if settings.get("mig"):     # a planted MIG GPU: remapped rows and their histogram answer NOT_SUPPORTED
        out.append("mig_mode 1 1")
    for kind, error_type in (("uncorrectable", 1), ("correctable", 0)):
        for counter, counter_type in (("volatile", 0), ("aggregate", 1)):
            for location, location_type in (("dram", 2), ("sram", 7)):
                value = settings["ecc_%s_%s_%s" % (location, kind, counter)]
                if value is not None:
                    out.append("ecc_counter %d %d %d %d" % (error_type, counter_type, location_type, value))
    if settings["retired_pages_pending"] is not None:    # no page is ever retired on the emulated GPUs
        out += ["retired_pages 0 0", "retired_pages 1 0"]
        out.append("retired_pages_pending %s" % _flag(settings["retired_pages_pending"]))
    rows = settings["remapped_rows"]
    if rows is not None:
        out.append("remapped_rows %d %d %s %s" % (rows["correctable"], rows["uncorrectable"], _flag(rows["pending"]),
                                                  _flag(rows["failure"])))
    out.append("pcie %d %d %d %d" % (settings["pcie_gen_current"], settings["pcie_gen"],
                                     settings["pcie_width_current"], settings["pcie_width"]))
    for key, line, scale in (("pcie_replay_counter", "pcie_replay_counter", 1), ("power_limit_w", "power_limit_mw", 1000),
                             ("power_draw_w", "power_usage_mw", 1000), ("temperature_c", "temperature_c", 1)):
        if settings[key] is not None:       # None: the call answers NOT_SUPPORTED (nvidia-smi prints N/A)
            out.append("%s %d" % (line, round(settings[key] * scale)))
    average, instant = power_readings(settings)
    for line, watts in (("power_average_mw", average), ("power_instant_mw", instant)):
        if watts is not None:           # fields 185 and 186; the library answers them from driver 535
            out.append("%s %d" % (line, round(watts * 1000)))
    if settings["clock_event_reasons"] is not None:
        reasons = 0
        for reason in settings["clock_event_reasons"]:
            reasons |= CLOCK_EVENT_REASONS[reason]
        out.append("clocks_event_reasons 0x%x" % reasons)
    if settings["utilization_gpu_pct"] is not None:
        out.append("utilization %d 0" % settings["utilization_gpu_pct"])
    if settings["fabric_state"] is not None:
        status = settings["fabric_status"]
        out.append("fabric %d %d" % (FABRIC_STATES[settings["fabric_state"].lower()],
                                     NVML_RETURN_TEXTS[status] if status is not None else NVML_ERROR_UNKNOWN))
    if settings["reset_required"] is not None:
        out.append("reset_required %s" % _flag(settings["reset_required"]))
    if settings["drain_and_reset_recommended"] is not None:
        out.append("drain_and_reset_recommended %s" % _flag(settings["drain_and_reset_recommended"]))
    if settings["recovery_action"] is not None:
        out.append("recovery_action %d" % RECOVERY_ACTIONS[settings["recovery_action"]])
    histogram = row_remapper_histogram(settings)
    if histogram is not None:
        out.append("row_remapper_histogram %d %d %d %d %d" % histogram)
    if settings.get("sram_threshold_exceeded") is not None:     # drivers from 555
        out.append("sram_threshold_exceeded %s" % _flag(settings["sram_threshold_exceeded"]))
    if settings.get("repair_pending") is not None:              # drivers from 590: {"channel": bool, "tpc": bool}
        out.append("repair_status %s %s" % (_flag(settings["repair_pending"].get("channel")),
                                            _flag(settings["repair_pending"].get("tpc"))))
    if settings.get("fabric_health") is not None:
        out.append(fabric_health_line(settings["fabric_health"]))
    if ends[index]:
        out.append("nvlink_speed_mbps %d" % round(profile["nvlink"]["speed_gbps"] * 1000))
    for link, (remote_type, remote_bus, remote_id) in enumerate(ends[index]):
        active = index not in all_inactive and (index, link) not in inactive
        out.append("link %d %s %d %s %s" % (link, _flag(active), remote_type, remote_bus, remote_id))
    for peer in range(topology["gpus"]):
        if peer != index:
            out.append("ancestor %d %d" % (peer, pair_level(topology, index, peer)))
            statuses = p2p_line(profile, topology, active_ends(ends, faults), index, peer)
            out.append("p2p %d %s" % (peer, " ".join(str(value) for value in statuses)))
    if topology["cpu_affinity"][index] is not None:
        out.append("cpu_affinity %s" % ",".join(cpu_list_words(topology["cpu_affinity"][index])))
    if topology["numa_affinity"][index] is not None:
        out.append("memory_affinity %s" % ",".join(cpu_list_words(topology["numa_affinity"][index])))
    if "GPU NUMA ID" not in topology["columns"]:
        # nvidia-smi of drivers before nvmlDeviceGetNumaNodeId (NVML 12.4) prints no such column
        out.append("numa_node unimplemented")
    elif topology["gpu_numa_id"][index] is not None:
        out.append("numa_node %d" % int(topology["gpu_numa_id"][index]))
    out.append("end")
    return out


def render_nvml_conf(profile, name, faults=None, profiles_dir=PROFILES):
    """The nvml.conf text of a profile (its name gives the GPUs' UUIDs, as the nvidia-smi emulator makes them)."""
    faults = faults or {}
    out = ["# nvml.conf for the fake libnvidia-ml.so.1, rendered by gpufleet-emulator-profile from profile %s"
           % name, "profile %s" % name]
    if profile.get("hang"):
        return "\n".join(out + ["hang 1"]) + "\n"
    if "error" in profile:
        code = init_return(profile)
        return "\n".join(out + ["init %d" % code, "device_count 0"]) + "\n"
    driver = profile["driver_version"]
    major, minor = profile["cuda_version"].split(".")[:2]
    out += ["init 0", "hang 0", "driver_version %s" % driver,
            "nvml_version %s.%s" % (major, driver),
            "cuda_driver_version %d" % (int(major) * 1000 + int(minor) * 10)]
    with open(os.path.join(profiles_dir, profile["topology"]), encoding="utf-8") as handle:
        topology = read_topology(handle.read())
    if topology["gpus"] != len(profile["bus_ids"]):
        raise ValueError("profile %s: %d bus ids, %d GPUs in its topology"
                         % (name, len(profile["bus_ids"]), topology["gpus"]))
    if (profile.get("nvlink") or {}).get("links_per_gpu", 0) > NVML_NVLINK_MAX_LINKS:
        raise ValueError("profile %s: more links than NVML_NVLINK_MAX_LINKS" % name)
    ends = nvlink_ends(profile, topology)
    out.append("device_count %d" % topology["gpus"])
    for index in range(topology["gpus"]):
        out += gpu_lines(profile, name, index, gpu_settings(profile, index, faults), topology, ends, faults)
    return "\n".join(out) + "\n"


def write_nvml_conf(name, config_dir=CONFIG_DIR, profiles_dir=PROFILES):
    """Renders the profile with the faults planted in config_dir into config_dir/nvml.conf (replaced at once)."""
    faults = load_faults(config_dir)
    faults["settings"] = load_settings(config_dir)
    text = render_nvml_conf(load_profile(name, profiles_dir), name, faults, profiles_dir)
    path = os.path.join(config_dir, "nvml.conf")
    with open(path + ".new", "w", encoding="utf-8") as handle:
        handle.write(text)
    os.rename(path + ".new", path)
    return path


def current_profile(config_dir=CONFIG_DIR):
    try:
        with open(os.path.join(config_dir, "profile"), encoding="ascii") as handle:
            return handle.read().split("\n")[0].strip()
    except OSError:
        return ""


def main(argv):
    if len(argv) > 1:
        sys.exit("usage: gpufleet-emulator-profile [NAME] (a profiles/*.json name; none: render the current one "
                 "again with faults.json)")
    kind = mount_type(PCI_DEVICES)
    if kind is None or kind == "sysfs":
        sys.exit("gpufleet-emulator-profile: %s is %s, not a test directory bound there; refusing to write "
                 "emulated devices into it" % (PCI_DEVICES, "the kernel's sysfs" if kind else "not a mount"))
    if not argv:
        name = current_profile()
        if not name:
            sys.exit("gpufleet-emulator-profile: no profile chosen yet (%s/profile)" % CONFIG_DIR)
        print("profile %s: %s rendered again" % (name, write_nvml_conf(name)))
        return
    name = argv[0]
    profile = load_profile(name)
    lay_out_pci(profile, PCI_DEVICES)
    os.makedirs(CONFIG_DIR, exist_ok=True)
    with open(os.path.join(CONFIG_DIR, "profile"), "w", encoding="ascii") as handle:
        handle.write(name + "\n")
    try:        # other hardware: what nvidia-smi -pl / -lgc set on the previous profile's GPUs is gone
        os.unlink(os.path.join(CONFIG_DIR, "settings.json"))
    except FileNotFoundError:
        pass
    write_nvml_conf(name)
    print("profile %s: %d NVIDIA PCI functions at %s (%s)" % (name, len(pci_devices(profile)), PCI_DEVICES, kind))


if __name__ == "__main__":
    main(sys.argv[1:])
