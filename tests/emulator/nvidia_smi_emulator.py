"""A stand-in ``nvidia-smi`` that replays a hardware profile (test-only code).

It answers the subcommands gpufleet.node uses exactly as the real tool of the 535 branch prints them: ``-q -x``
(DTD nvsmi_device_v12), ``topo -m``, ``nvlink -s``, ``-L``, ``--query-gpu=... --format=csv[,noheader][,nounits]``
and ``--version``; where newer drivers print the frame buffer and power readings differently, ``-q -x`` follows
the profile's ``driver_version`` (``<fb_memory_usage><reserved>`` from 510, ``<average_power_draw>`` and
``<instant_power_draw>`` instead of ``<power_draw>`` from 570, as the real 570 and 590 captures print them; the
optional per-GPU ``power_draw_instant_w`` plants an instant reading apart from the averaged ``power_draw_w``, see
emulator_profile.power_readings). Profiles are JSON files beside this one (``profiles/<name>.json``; their sources are in
``profiles/SOURCES.md``); the topology matrix of each is a real capture.

Configuration, read at every call:

* the profile: ``$GPUFLEET_EMULATOR_PROFILE``, else the first line of ``/etc/gpufleet-emulator/profile``;
* a per-call delay in milliseconds that models a real node's NVML start-up:
  ``$GPUFLEET_EMULATOR_DELAY_MS``, else ``/etc/gpufleet-emulator/delay_ms``, else 0;
* faults: ``/etc/gpufleet-emulator/faults.json`` (absent: none), ``{"inactive_links": [[gpu, link], ...],
  "all_links_inactive": [gpu, ...], "lost_gpus": [gpu, ...], "gpus": {"<index>": {<per-GPU profile key>: value}}}``,
  and the older ``/etc/gpufleet-emulator/inactive_links`` (lines of ``<gpu index> <link>``), which keeps working.
  ``$GPUFLEET_EMULATOR_CONFIG`` replaces the directory ``/etc/gpufleet-emulator``.

A profile's ``gpu`` holds what every GPU shares; ``per_gpu`` (``{"<index>": {...}}``) and the faults' ``gpus``
override it per GPU, in that order. Per-GPU keys and their defaults are ``GPU_DEFAULTS`` below; ``pci_device_id``
(``"0x20b2"``) and ``row_remapper_banks`` (the bank count of the remapping histogram) are optional and printed
only where a profile gives them. Health faults of newer drivers, printed only where planted: ``sram_threshold_exceeded``
(a bool: ``<aggregate><sram_threshold_exceeded>``, drivers from 555), ``repair_pending`` (``{"channel": bool, "tpc":
bool}``: ``<channel_repair_pending>``/``<tpc_repair_pending>`` as capture 65 of driver 590 prints them),
``row_remapper_banks_exhausted`` (banks moved to the histogram's ``none``) and ``mig`` (MIG Enabled, and
``<remapped_rows>N/A</remapped_rows>`` as the A100 MIG capture 31 prints it). A planted ``fabric_health`` reaches only
the fake NVML: no capture prints ``<fabric><health>`` values other than N/A, so the emulator prints none.

How a fault shows, as on real machines: an inactive link is ``Link N: <inactive>``; a GPU with every link down
prints ``NVML: Unable to retrieve NVLink information as all links are inActive`` under its ``nvlink -s`` header
(https://github.com/leptonai/gpud/issues/1085); a GPU without NVLink prints nothing at all and ``nvlink -s`` exits
0. A lost GPU (fallen off the bus) is missing from every listing while ``attached_gpus`` still counts it, and
each command that meets it writes ``Unable to determine the device handle for GPU 0000:07:00.0: GPU is lost.
Reboot the system to recover this GPU`` (two spaces after the full stop, as published) to stderr and exits 15,
NVML_ERROR_GPU_IS_LOST, the code nvidia-smi returns for it; ``topo -m`` prints no matrix then.

Persistence mode is reported as the real daemon leaves it: "Enabled" while an ``nvidia-persistenced`` process
runs without ``--no-persistence-mode`` (the daemon turns persistence mode on for every device at start unless
given that option, which forces it off: github.com/NVIDIA/nvidia-persistenced, option-table.h and the manual page
nvidia-persistenced.1.m4; options.c parses ``--persistence-mode`` / ``--no-persistence-mode`` in order, so the
last one given wins), "Disabled" otherwise. The processes are read from ``/proc/*/cmdline`` (``$GPUFLEET_EMULATOR_PROC``
in tests, where the host's /proc shows the daemons of other test nodes' containers),
so a unit that runs the daemon with the option (Ubuntu's nvidia-compute-utils package does) reports "Disabled".
``/etc/gpufleet-emulator/persistence`` (non-empty) forces "Enabled", as ``nvidia-smi -pm 1`` would.

Settings, as root may change them on a real GPU (``[-i ID] -pl WATTS``, ``[-i ID] -lgc MIN,MAX``, ``[-i ID] -rgc``;
``-i`` takes an index, a PCI bus id or a UUID, or a comma-separated list of them; none: every GPU): kept in
``/etc/gpufleet-emulator/settings.json`` (``{"gpus": {"<index>": {"power_limit_w": 500.0,
"locked_clocks_mhz": [1200, 1980]}}}``), layered over the profile and the faults, so that ``--query-gpu
power.limit``, ``-q -x`` and, after the emulator renders nvml.conf again, the fake NVML's enforced power limit report
them. Messages as the real tool prints them: ``Power limit for GPU 00000000:53:00.0 was set to 500.00 W from
700.00 W.``, ``GPU clocks set to "(gpuClkMin 1200, gpuClkMax 1980)" for GPU 00000000:53:00.0``, then ``All done.``;
a limit outside the GPU's min/max: ``Provided power limit 800.00 W is not a valid power limit which should be
between 200.00 W and 700.00 W for GPU 00000000:53:00.0`` and ``Terminating early due to previous errors.``
(published outputs of the real tool; tests/unit/stand_ins/test_emulator.py names them). Exit codes follow the man
page's RETURN VALUE list: 2 for an invalid argument, 4 for a user without permission (not root, worded as below), 6
when -i names no GPU (the wording for 2 and 6 is this emulator's; the real one is not published verbatim). The
min/max power limits are the profile's ``power_min_limit_w`` / ``power_max_limit_w`` (absent: the default limit
for both, so no other value is accepted); ``default_power_limit`` stays the profile's
``power_limit_w``. The profile's and the faults' per-GPU ``compute_apps`` (``[{"pid": 4242, "process_name":
"python3", "used_memory_mib": 1024}]``) are what ``--query-compute-apps`` lists (a busy GPU); ``-q -x`` keeps its
``<processes />`` empty.

The setters' other answers, as the real tool prints them:
* A GPU that does not support a setting (per-GPU keys ``power_limit_supported`` / ``locked_clocks_supported``
  false, in a profile or the faults): ``Changing power management limit is not supported for GPU:
  00000000:01:00.0.`` (laptop GPUs; published logs of drivers 535 to 595) or ``Setting locked GPU clocks is not
  supported for GPU 00000000:05:00.0.`` (a Tesla K80 on 470.42.01), each followed by ``Treating as warning and
  moving on.``, then ``All done.`` and exit 0: the setting is not made.
* Without root: ``Failed to set power management limit for GPU 00000000:01:00.0: Insufficient Permissions``
  (github.com/NVIDIA/nvidia-docker/issues/495 and later captures), exit 4; for -lgc and -rgc ``The current user
  does not have permission to change clocks for GPU 00000000:01:00.0.`` then ``Terminating early due to previous
  errors.``, exit 4 (captures of drivers 565.57.01, 580.173.02 and 595.78 in public benchmark logs; -rgc fails
  "identically" there).
* Persistence mode: a power limit (software power cap) and locked clocks are state of the "GPU initialization
  lifecycle" (NVIDIA's Driver Persistence guide, "Data Persistence"): the driver deinitialises a GPU after its
  last client exits and the state "reverts back to defaults" unless persistence mode keeps it initialised. So with
  persistence mode Disabled a setter prints what the real tool prints (the change is made while nvidia-smi holds
  the GPU, then the persistence warning) but nothing outlives the nvidia-smi process: settings.json is not
  written, and settings kept from a time with persistence on are dropped by the next call that finds it off.
"""
import copy
import json
import math
import os
import re
import sys
import time
import uuid as uuid_module
from xml.sax.saxutils import escape

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_DIR = os.environ.get("GPUFLEET_EMULATOR_CONFIG", "/etc/gpufleet-emulator")

USAGE_ERROR = 2
GPU_IS_LOST = 15        # nvidia-smi exits with the NVML return code: NVML_ERROR_GPU_IS_LOST (nvml.h)
NA = "N/A"

# Per-GPU profile keys and their values where a profile does not give them (the shared profile contract).
GPU_DEFAULTS = {
    "architecture": "Ampere",
    "compute_capability": "8.0",
    "temperature_c": 33,
    "power_draw_w": 60.0,
    "compute_mode": "Default",
    "pcie_replay_counter": 0,
    "pcie_gen_current": None,           # None: the profile's pcie_gen
    "pcie_width_current": None,         # None: the profile's pcie_width
    "clock_event_reasons": [],
    "ecc_dram_uncorrectable_volatile": 0,
    "ecc_sram_uncorrectable_volatile": 0,
    "ecc_dram_correctable_volatile": 0,
    "ecc_sram_correctable_volatile": 0,
    "ecc_dram_uncorrectable_aggregate": 0,
    "ecc_sram_uncorrectable_aggregate": 0,
    "ecc_dram_correctable_aggregate": 0,
    "ecc_sram_correctable_aggregate": 0,
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "retired_pages_pending": False,
    "reset_required": False,
    "drain_and_reset_recommended": False,
    "recovery_action": None,            # a name of nvmlDeviceGpuRecoveryAction_t: -q -x as a driver from 570 prints it
    "fabric_state": None,
    "fabric_status": None,
    "module_id": None,
    "utilization_gpu_pct": 0,
    "memory_used_mib": 0,
    "power_min_limit_w": None,          # None: the default limit (power_limit_w)
    "power_max_limit_w": None,          # None: the default limit (power_limit_w)
    "compute_apps": [],
    "locked_clocks_mhz": None,          # set by -lgc, cleared by -rgc (settings.json)
    "power_limit_supported": True,      # False: -pl answers "... is not supported ..." (exit 0), nothing changes
    "locked_clocks_supported": True,    # False: -lgc answers "... is not supported ..." (exit 0), nothing changes
}

# Clock event reasons as -q -x of the 535 branch names and orders them (clocks_event_reason_<name>), with their
# bits in --query-gpu's clocks_event_reasons.active (nvmlClocksEventReason* / nvmlClocksThrottleReason* in nvml.h,
# github.com/NVIDIA/go-nvml gen/nvml/nvml.h).
CLOCK_EVENT_REASONS = (
    ("gpu_idle", 0x1),
    ("applications_clocks_setting", 0x2),
    ("sw_power_cap", 0x4),
    ("hw_slowdown", 0x8),
    ("hw_thermal_slowdown", 0x40),
    ("hw_power_brake_slowdown", 0x80),
    ("sync_boost", 0x10),
    ("sw_thermal_slowdown", 0x20),
    ("display_clocks_setting", 0x100),
)
RESERVED_MIB = 512


def read_config(name, default=None):
    try:
        with open(os.path.join(CONFIG_DIR, name), encoding="utf-8") as handle:
            return handle.read().strip() or default
    except OSError:
        return default


PROC = os.environ.get("GPUFLEET_EMULATOR_PROC") or "/proc"    # another directory in tests, as GPUFLEET_NVML_PROC
DAEMON = "nvidia-persistenced"


def daemon_arguments(proc=PROC):
    """The arguments of every running nvidia-persistenced (the program, or a script run through its interpreter)."""
    found = []
    try:
        entries = os.listdir(proc)
    except OSError:
        return found
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(os.path.join(proc, entry, "cmdline"), "rb") as handle:
                argv = [part.decode("utf-8", "replace") for part in handle.read().split(b"\0") if part]
        except OSError:
            continue
        for position in (0, 1):   # argv[0], or argv[1] after an interpreter (the stand-in is a script)
            if len(argv) > position and os.path.basename(argv[position]) == DAEMON:
                found.append(argv[position + 1:])
                break
    return found


def persistence_on(arguments):
    """Whether the daemon run with these arguments keeps persistence mode on (its default)."""
    enabled = True
    for argument in arguments:
        if argument == "--persistence-mode":
            enabled = True
        elif argument == "--no-persistence-mode":
            enabled = False
    return enabled


def persistence_mode(proc=PROC):
    """'Enabled' while nvidia-persistenced runs without --no-persistence-mode (or the config forces it)."""
    if read_config("persistence"):
        return "Enabled"
    return "Enabled" if any(persistence_on(arguments) for arguments in daemon_arguments(proc)) else "Disabled"


def load_profile():
    name = os.environ.get("GPUFLEET_EMULATOR_PROFILE") or (read_config("profile") or "").split("\n")[0]
    if not name:
        sys.exit("nvidia-smi emulator: no profile set (%s/profile)" % CONFIG_DIR)
    path = os.path.join(HERE, "profiles", name + ".json")
    with open(path, encoding="utf-8") as handle:
        profile = json.load(handle)
    profile["name"] = name
    return profile


# --- faults ----------------------------------------------------------------------------------------------

def inactive_links():
    """The older fault file: lines of '<gpu index> <link>'."""
    faults = set()
    for line in (read_config("inactive_links") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            faults.add((int(parts[0]), int(parts[1])))
    return faults


def read_faults():
    """The planted faults: faults.json (absent: none) merged with the older inactive_links file."""
    text = read_config("faults.json")
    try:
        data = json.loads(text) if text else {}
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
        faults = {
            "inactive_links": set((int(gpu), int(link)) for gpu, link in data.get("inactive_links", [])),
            "all_links_inactive": set(int(gpu) for gpu in data.get("all_links_inactive", [])),
            "lost_gpus": set(int(gpu) for gpu in data.get("lost_gpus", [])),
            "gpus": dict((str(index), dict(values)) for index, values in (data.get("gpus") or {}).items()),
        }
    except (TypeError, ValueError) as error:
        sys.exit("nvidia-smi emulator: %s/faults.json: %s" % (CONFIG_DIR, error))
    faults["inactive_links"] |= inactive_links()
    return faults


SETTINGS_KEYS = ("power_limit_w", "locked_clocks_mhz")


def read_settings():
    """What -pl / -lgc / -rgc left: {"<index>": {"power_limit_w": W, "locked_clocks_mhz": [min, max] or None}}."""
    text = read_config("settings.json")
    try:
        data = json.loads(text) if text else {}
        return dict((str(index), dict((key, value) for key, value in dict(values).items() if key in SETTINGS_KEYS))
                    for index, values in (data.get("gpus") or {}).items())
    except (TypeError, ValueError, AttributeError) as error:
        sys.exit("nvidia-smi emulator: %s/settings.json: %s" % (CONFIG_DIR, error))


def write_settings(settings):
    path = os.path.join(CONFIG_DIR, "settings.json")
    with open(path + ".new", "w", encoding="utf-8") as handle:
        json.dump({"gpus": settings}, handle, indent=1, sort_keys=True)
        handle.write("\n")
    os.rename(path + ".new", path)


def live_settings():
    """What -pl / -lgc / -rgc left and still holds: nothing once persistence mode is off, since then the GPU was
    deinitialised after its last client and its software state went back to the defaults (the file is emptied, where
    this user may write it, so that turning persistence mode on later does not bring old settings back)."""
    settings = read_settings()
    if settings and persistence_mode() == "Disabled":
        try:
            write_settings({})
        except OSError:
            pass
        return {}
    return settings


def gpus(profile, faults=None, settings=None):
    """The profile's GPUs with stable, profile-specific identities, the planted faults and the settings applied."""
    if faults is None:
        faults = read_faults()
    if settings is None:
        settings = live_settings()
    result = []
    for index, bus in enumerate(profile["bus_ids"]):
        gpu = copy.deepcopy(GPU_DEFAULTS)
        for layer in (profile["gpu"], (profile.get("per_gpu") or {}).get(str(index)), faults["gpus"].get(str(index))):
            gpu.update(copy.deepcopy(layer or {}))
        gpu["default_power_limit_w"] = gpu["power_limit_w"]
        for key in ("power_min_limit_w", "power_max_limit_w"):
            if gpu[key] is None:
                gpu[key] = gpu["power_limit_w"]
        gpu.update(copy.deepcopy(settings.get(str(index)) or {}))
        if gpu["pcie_gen_current"] is None:
            gpu["pcie_gen_current"] = gpu["pcie_gen"]
        if gpu["pcie_width_current"] is None:
            gpu["pcie_width_current"] = gpu["pcie_width"]
        unknown = set(gpu["clock_event_reasons"] or ()) - set(name for name, _bit in CLOCK_EVENT_REASONS)
        if unknown:
            sys.exit("nvidia-smi emulator: unknown clock event reason(s) %s" % ", ".join(sorted(unknown)))
        ident = uuid_module.uuid5(uuid_module.NAMESPACE_DNS, "%s-%d" % (profile["name"], index))
        gpu.update(index=index, bus_id="00000000:" + bus, uuid="GPU-%s" % ident, serial="1650%09d" % (index + 1),
                   minor_number=index, lost=index in faults["lost_gpus"],
                   links_all_inactive=index in faults["all_links_inactive"])
        result.append(gpu)
    return result


def lost_message(gpu):
    """What nvidia-smi writes for a GPU whose handle cannot be had because it fell off the bus."""
    return ("Unable to determine the device handle for GPU 0000:%s: GPU is lost.  "
            "Reboot the system to recover this GPU\n" % gpu["bus_id"][9:])


def report_lost(listed):
    """Writes the message of every lost GPU to stderr; the exit status for the call."""
    lost = [gpu for gpu in listed if gpu["lost"]]
    for gpu in lost:
        sys.stderr.write(lost_message(gpu))
    return GPU_IS_LOST if lost else 0


# --- -q -x -----------------------------------------------------------------------------------------------

def _na(value, form="%s"):
    return NA if value is None else form % value


def _yes_no(value):
    if value is None:
        return NA
    return "Yes" if value else "No"


def _ecc(gpu, kind):
    """The volatile or aggregate ECC counters as the v12 schema prints them."""
    return [(name, _na(gpu["ecc_%s_%s" % (name, kind)]))
            for name in ("sram_correctable", "sram_uncorrectable", "dram_correctable", "dram_uncorrectable")]


def _ecc_errors(gpu):
    """<ecc_errors>: the v12 counters, with the threshold and repair flags of newer drivers where planted."""
    aggregate = _ecc(gpu, "aggregate")
    if gpu.get("sram_threshold_exceeded") is not None:
        aggregate.append(("sram_threshold_exceeded", _yes_no(gpu["sram_threshold_exceeded"])))
    children = [("volatile", _ecc(gpu, "volatile")), ("aggregate", aggregate)]
    repair = gpu.get("repair_pending")
    if repair is not None:
        children += [("channel_repair_pending", _yes_no(repair.get("channel"))),
                     ("tpc_repair_pending", _yes_no(repair.get("tpc")))]
    return children


def _remapped_rows(gpu):
    rows = gpu["remapped_rows"]
    if rows is None or gpu.get("mig"):
        return NA
    children = [
        ("remapped_row_corr", _na(rows.get("correctable"))),
        ("remapped_row_unc", _na(rows.get("uncorrectable"))),
        ("remapped_row_pending", _yes_no(rows.get("pending"))),
        ("remapped_row_failure", _yes_no(rows.get("failure"))),
    ]
    banks = gpu.get("row_remapper_banks")
    if banks is not None:
        # Every bank starts with all its spare rows ("max"); a remapped row moves one bank to "high" (an A100 with
        # one correctable remap shows Max 639 / High 1 of 640).
        exhausted = min(banks, gpu.get("row_remapper_banks_exhausted") or 0)
        used = min(banks - exhausted, (rows.get("correctable") or 0) + (rows.get("uncorrectable") or 0))
        histogram = [("max", banks - exhausted - used), ("high", used), ("partial", 0), ("low", 0), ("none", exhausted)]
        children.append(("row_remapper_histogram", [("row_remapper_histogram_%s" % name, "%d bank(s)" % count)
                                                    for name, count in histogram]))
    return children


def _retired_count(gpu):
    """No page is ever retired on the emulated GPUs: 0 where page retirement is reported at all."""
    return NA if gpu["retired_pages_pending"] is None else "0"


# The words -q -x prints under <gpu_recovery_action> for each action: NVIDIA's Xid catalog names the actions so
# (Xid 154) and capture 64 (driver 570) shows "None". RECOVER_IMEX_DOMAIN has no published wording: not emulated.
RECOVERY_ACTION_WORDS = {"none": "None", "gpu_reset": "GPU Reset Required", "node_reboot": "Node Reboot Required",
                         "drain_p2p": "Drain P2P", "drain_and_reset": "Drain and Reset"}
DEPRECATED = "Requested functionality has been deprecated"


def _reset_status(gpu):
    """<gpu_reset_status> as the 535 branch prints it; with a recovery action, as a driver from 570 does (capture 64):
    the reset status deprecated, then <gpu_recovery_action>."""
    action = gpu["recovery_action"]
    if action is None:
        return [("gpu_reset_status", [("reset_required", _yes_no(gpu["reset_required"])),
                                      ("drain_and_reset_recommended", _yes_no(gpu["drain_and_reset_recommended"]))])]
    if action not in RECOVERY_ACTION_WORDS:
        raise SystemExit("nvidia-smi emulator: no published -q -x wording for the recovery action %r" % action)
    return [("gpu_reset_status", [("reset_required", DEPRECATED), ("drain_and_reset_recommended", DEPRECATED)]),
            ("gpu_recovery_action", RECOVERY_ACTION_WORDS[action])]


def _clock_event_reasons(gpu):
    active = gpu["clock_event_reasons"]
    return [("clocks_event_reason_%s" % name,
             NA if active is None else ("Active" if name in active else "Not Active"))
            for name, _bit in CLOCK_EVENT_REASONS]


def _pci(gpu):
    bus = gpu["bus_id"]
    children = [("pci_bus", bus[9:11]), ("pci_device", bus[12:14]), ("pci_domain", bus[4:8])]
    if gpu.get("pci_device_id"):
        children.append(("pci_device_id", "%04X10DE" % int(gpu["pci_device_id"], 16)))
    children += [
        ("pci_bus_id", bus),
        ("pci_gpu_link_info", [
            ("pcie_gen", [
                ("max_link_gen", _na(gpu["pcie_gen"])),
                ("current_link_gen", _na(gpu["pcie_gen_current"])),
                ("device_current_link_gen", _na(gpu["pcie_gen_current"])),
                ("max_device_link_gen", _na(gpu["pcie_gen"])),
                ("max_host_link_gen", _na(gpu["pcie_gen"])),
            ]),
            ("link_widths", [
                ("max_link_width", _na(gpu["pcie_width"], "%dx")),
                ("current_link_width", _na(gpu["pcie_width_current"], "%dx")),
            ]),
        ]),
        ("replay_counter", _na(gpu["pcie_replay_counter"])),
        ("replay_rollover_counter", "0"),
        ("tx_util", "0 KB/s"),
        ("rx_util", "0 KB/s"),
    ]
    return children


def driver_branch(version):
    """The branch (major) of a driver version, 0 when it is not one."""
    match = re.match(r"^(\d+)\.", str(version or ""))
    return int(match.group(1)) if match else 0


def fb_memory_usage_children(gpu, branch):
    """<fb_memory_usage>: total, reserved (printed from driver 510, as NVML's nvmlMemory_v2_t came: the 515, 525,
    535 and 570 captures have it, the 470 one and the v10 one not), used without it, free."""
    used = gpu["memory_used_mib"]
    reserved = RESERVED_MIB if branch >= 510 else 0
    children = [("total", "%d MiB" % gpu["memory_total_mib"])]
    if branch >= 510:
        children.append(("reserved", "%d MiB" % reserved))
    return children + [
        ("used", _na(used, "%d MiB")),
        ("free", NA if used is None else "%d MiB" % (gpu["memory_total_mib"] - reserved - used)),
    ]


def power_draws(gpu, branch):
    """The draws of <gpu_power_readings>: <power_draw> (nvmlDeviceGetPowerUsage) before driver 570, as the 535
    capture prints it; from 570 <average_power_draw> and <instant_power_draw> instead (capture 64, driver 570.124.04,
    and the 590 captures), the average N/A on a GPU without one (emulator_profile.power_readings)."""
    if branch < 570:
        return [("power_draw", _na(gpu["power_draw_w"], "%.2f W"))]
    sys.path.insert(0, HERE)
    import emulator_profile  # pylint: disable=import-outside-toplevel
    average, instant = emulator_profile.power_readings(gpu)
    return [("average_power_draw", _na(average, "%.2f W")), ("instant_power_draw", _na(instant, "%.2f W"))]


def gpu_element(gpu, persistence, driver_version):
    """The children of one <gpu> element, in the order the 535 branch prints them (and what newer drivers print
    differently in the memory and power readings)."""
    branch = driver_branch(driver_version)
    return [
        ("product_name", gpu["name"]),
        ("product_architecture", _na(gpu["architecture"])),
        ("persistence_mode", persistence),
        ("mig_mode", [("current_mig", "Enabled" if gpu.get("mig") else "Disabled"),
                      ("pending_mig", "Enabled" if gpu.get("mig") else "Disabled")]),
        ("mig_devices", None),
        ("accounting_mode", "Disabled"),
        ("accounting_mode_buffer_size", "4000"),
        ("driver_model", [("current_dm", NA), ("pending_dm", NA)]),
        ("serial", gpu["serial"]),
        ("uuid", gpu["uuid"]),
        ("minor_number", str(gpu["minor_number"])),
        ("vbios_version", gpu["vbios_version"]),
        ("multigpu_board", "No"),
        ("gpu_module_id", _na(gpu["module_id"])),
        ("gpu_virtualization_mode", [("virtualization_mode", "None"), ("host_vgpu_mode", NA)]),
    ] + _reset_status(gpu) + [
        ("pci", _pci(gpu)),
        ("performance_state", "P0"),
        ("clocks_event_reasons", _clock_event_reasons(gpu)),
        ("fb_memory_usage", fb_memory_usage_children(gpu, branch)),
        ("compute_mode", _na(gpu["compute_mode"])),
        ("utilization", [
            ("gpu_util", _na(gpu["utilization_gpu_pct"], "%d %%")),
            ("memory_util", "0 %"),
            ("encoder_util", "0 %"),
            ("decoder_util", "0 %"),
            ("jpeg_util", "0 %"),
            ("ofa_util", "0 %"),
        ]),
        ("ecc_mode", [("current_ecc", "Enabled"), ("pending_ecc", "Enabled")]),
        ("ecc_errors", _ecc_errors(gpu)),
        ("retired_pages", [
            ("multiple_single_bit_retirement", [("retired_count", _retired_count(gpu))]),
            ("double_bit_retirement", [("retired_count", _retired_count(gpu))]),
            ("pending_blacklist", _yes_no(gpu["retired_pages_pending"])),
            ("pending_retirement", _yes_no(gpu["retired_pages_pending"])),
        ]),
        ("remapped_rows", _remapped_rows(gpu)),
        ("temperature", [("gpu_temp", _na(gpu["temperature_c"], "%d C"))]),
        ("gpu_power_readings", [
            ("power_state", "P0"),
        ] + power_draws(gpu, branch) + [
            ("current_power_limit", "%.2f W" % gpu["power_limit_w"]),
            ("requested_power_limit", "%.2f W" % gpu["power_limit_w"]),
            ("default_power_limit", "%.2f W" % gpu["default_power_limit_w"]),
            ("min_power_limit", "%.2f W" % gpu["power_min_limit_w"]),
            ("max_power_limit", "%.2f W" % gpu["power_max_limit_w"]),
        ]),
        ("fabric", [("state", _na(gpu["fabric_state"])), ("status", _na(gpu["fabric_status"]))]),
        ("processes", []),
        ("accounted_processes", []),
    ]


def xml_lines(tag, content, depth):
    """One element, indented with tabs like nvidia-smi: text, children (a list of (tag, content)), or, for None,
    the 'None' placeholder nvidia-smi writes inside an empty <mig_devices>."""
    pad = "\t" * depth
    if content is None:
        return [pad + "<%s>" % tag, pad + "\tNone", pad + "</%s>" % tag]
    if isinstance(content, list):
        lines = [pad + "<%s>" % tag]
        for child_tag, child in content:
            lines += xml_lines(child_tag, child, depth + 1)
        return lines + [pad + "</%s>" % tag]
    return [pad + "<%s>%s</%s>" % (tag, escape(content), tag)]


def timestamp(now=None):
    """As nvidia-smi writes it, the day padded with a space: 'Fri Aug  4 11:44:30 2023'."""
    now = time.localtime() if now is None else now
    return "%s %2d %s" % (time.strftime("%a %b", now), now.tm_mday, time.strftime("%H:%M:%S %Y", now))


def query_xml(profile, listed=None):
    if listed is None:
        listed = gpus(profile)
    lines = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        "\t<timestamp>%s</timestamp>" % timestamp(),
        "\t<driver_version>%s</driver_version>" % profile["driver_version"],
        "\t<cuda_version>%s</cuda_version>" % profile["cuda_version"],
        "\t<attached_gpus>%d</attached_gpus>" % len(profile["bus_ids"]),
    ]
    persistence = persistence_mode()
    for gpu in listed:
        if gpu["lost"]:
            continue
        lines.append('\t<gpu id="%s">' % gpu["bus_id"])
        for tag, content in gpu_element(gpu, persistence, profile["driver_version"]):
            lines += xml_lines(tag, content, 2)
        lines.append("\t</gpu>")
    lines.append("</nvidia_smi_log>")
    return "\n".join(lines) + "\n"


# --- topo -m, nvlink -s, -L --------------------------------------------------------------------------------

def topology(profile, faults=None):
    """`nvidia-smi topo -m`: the profile's real capture, its NV# cells recounted where links are down.

    nvidia-smi counts the ACTIVE links it finds from the row's GPU: to a peer GPU the links whose remote end is
    that GPU; on an NVSwitch board the row GPU's links to switches, towards every GPU that also reaches a switch.
    With none left, the cell shows the PCIe relation instead. The fake NVML library gives the same (its link ends
    come from emulator_profile.nvlink_ends over the same capture).
    """
    with open(os.path.join(HERE, "profiles", profile["topology"]), encoding="utf-8") as handle:
        text = handle.read()
    down = set(faults["inactive_links"]) if faults else set()
    all_down = set(faults["all_links_inactive"]) if faults else set()
    if not down and not all_down:
        return text
    sys.path.insert(0, HERE)
    import emulator_profile  # pylint: disable=import-outside-toplevel
    matrix = emulator_profile.read_topology(text)
    ends = emulator_profile.nvlink_ends(profile, matrix)
    level_names = dict((level, name) for name, level in emulator_profile.TOPOLOGY_LEVELS.items() if name != "SOC")

    def active(gpu):
        return [end for link, end in enumerate(ends[gpu]) if gpu not in all_down and (gpu, link) not in down]

    switch = emulator_profile.NVLINK_REMOTE_SWITCH
    buses = ["00000000:" + bus.upper() for bus in profile["bus_ids"]]

    def cell(row, column):
        relation = matrix["relation"][(row, column)]
        if not relation.startswith("NV"):
            return relation
        mine = active(row)
        if any(end[0] == switch for end in ends[row]):
            count = len(mine) if any(end[0] == switch for end in active(column)) else 0
        else:
            count = sum(1 for end in mine if end[1] == buses[column])
        return "NV%d" % count if count else level_names[emulator_profile.pair_level(matrix, row, column)]

    lines = []
    for line in text.splitlines(True):
        parts = re.split(r"(\s+)", line)
        if parts and re.match(r"^GPU\d+$", parts[0]):
            row = int(parts[0][3:])
            for column in range(matrix["gpus"]):
                position = 2 * (1 + column)   # tokens sit at even positions, separators between them
                if column != row and position < len(parts):
                    parts[position] = cell(row, column)
            line = "".join(parts)
        lines.append(line)
    return "".join(lines)


def nvlink_status(profile, listed=None, faults=None):
    """`nvidia-smi nvlink -s`: per GPU with NVLink its header and links; nothing for GPUs without NVLink."""
    if faults is None:
        faults = read_faults()
    if listed is None:
        listed = gpus(profile, faults)
    links_per_gpu = (profile.get("nvlink") or {}).get("links_per_gpu") or 0
    if not links_per_gpu:
        return ""
    out = []
    for gpu in listed:
        if gpu["lost"]:
            continue
        out.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        if gpu["links_all_inactive"]:
            out.append("NVML: Unable to retrieve NVLink information as all links are inActive")
            continue
        for link in range(links_per_gpu):
            if (gpu["index"], link) in faults["inactive_links"]:
                out.append("\t Link %d: <inactive>" % link)
            else:
                out.append("\t Link %d: %s GB/s" % (link, _speed(profile["nvlink"]["speed_gbps"])))
    return "\n".join(out) + "\n" if out else ""


def _speed(value):
    return ("%.3f" % value).rstrip("0").rstrip(".")


def gpu_list(profile, listed=None):
    if listed is None:
        listed = gpus(profile)
    return "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in listed if not g["lost"])


# --- --query-gpu ------------------------------------------------------------------------------------------

def _reasons_mask(gpu):
    active = gpu["clock_event_reasons"]
    if active is None:
        return None
    mask = 0
    for name, bit in CLOCK_EVENT_REASONS:
        if name in active:
            mask |= bit
    return "0x%016X" % mask


def _sum(*values):
    return None if any(value is None for value in values) else sum(values)


# name: (unit printed after the value and in the header, or None; value as text, or None for [N/A])
QUERY_FIELDS = {
    "index": (None, lambda p, g: str(g["index"])),
    "name": (None, lambda p, g: g["name"]),
    "uuid": (None, lambda p, g: g["uuid"]),
    "serial": (None, lambda p, g: g["serial"]),
    "vbios_version": (None, lambda p, g: g["vbios_version"]),
    "pci.bus_id": (None, lambda p, g: g["bus_id"]),
    "driver_version": (None, lambda p, g: p["driver_version"]),
    "persistence_mode": (None, lambda p, g: persistence_mode()),
    "compute_mode": (None, lambda p, g: g["compute_mode"]),
    "compute_cap": (None, lambda p, g: g["compute_capability"]),
    "pstate": (None, lambda p, g: "P0"),
    "memory.total": ("MiB", lambda p, g: "%d" % g["memory_total_mib"]),
    "memory.used": ("MiB", lambda p, g: _na(g["memory_used_mib"], "%d")),
    "temperature.gpu": (None, lambda p, g: _na(g["temperature_c"], "%d")),
    "power.draw": ("W", lambda p, g: _na(g["power_draw_w"], "%.2f")),
    "power.limit": ("W", lambda p, g: "%.2f" % g["power_limit_w"]),
    "enforced.power.limit": ("W", lambda p, g: "%.2f" % g["power_limit_w"]),
    "power.default_limit": ("W", lambda p, g: "%.2f" % g["default_power_limit_w"]),
    "power.min_limit": ("W", lambda p, g: "%.2f" % g["power_min_limit_w"]),
    "power.max_limit": ("W", lambda p, g: "%.2f" % g["power_max_limit_w"]),
    "utilization.gpu": ("%", lambda p, g: _na(g["utilization_gpu_pct"], "%d")),
    "clocks_event_reasons.active": (None, lambda p, g: _reasons_mask(g)),
    "clocks_throttle_reasons.active": (None, lambda p, g: _reasons_mask(g)),
    "pcie.link.gen.current": (None, lambda p, g: _na(g["pcie_gen_current"])),
    "pcie.link.gen.max": (None, lambda p, g: _na(g["pcie_gen"])),
    "pcie.link.width.current": (None, lambda p, g: _na(g["pcie_width_current"])),
    "pcie.link.width.max": (None, lambda p, g: _na(g["pcie_width"])),
    "ecc.errors.corrected.volatile.total": (None, lambda p, g: _na(_sum(
        g["ecc_dram_correctable_volatile"], g["ecc_sram_correctable_volatile"]))),
    "ecc.errors.uncorrected.volatile.total": (None, lambda p, g: _na(_sum(
        g["ecc_dram_uncorrectable_volatile"], g["ecc_sram_uncorrectable_volatile"]))),
    "ecc.errors.corrected.aggregate.total": (None, lambda p, g: _na(_sum(
        g["ecc_dram_correctable_aggregate"], g["ecc_sram_correctable_aggregate"]))),
    "ecc.errors.uncorrected.aggregate.total": (None, lambda p, g: _na(_sum(
        g["ecc_dram_uncorrectable_aggregate"], g["ecc_sram_uncorrectable_aggregate"]))),
    "retired_pages.pending": (None, lambda p, g: _yes_no(g["retired_pages_pending"])),
}


def query_gpu(profile, fields, options, listed=None):
    """--query-gpu in CSV: the header names units in brackets ("power.draw [W]"), nounits drops them from the
    values only, and a value that cannot be read is "[N/A]"."""
    names = [name.strip() for name in fields.split(",") if name.strip()]
    unknown = [name for name in names if name not in QUERY_FIELDS]
    if unknown:
        sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % unknown[0])
        return USAGE_ERROR
    if listed is None:
        listed = gpus(profile)
    rows = []
    if "noheader" not in options:
        rows.append(", ".join(name + (" [%s]" % QUERY_FIELDS[name][0] if QUERY_FIELDS[name][0] else "")
                              for name in names))
    for gpu in listed:
        if gpu["lost"]:
            continue
        values = []
        for name in names:
            unit, value = QUERY_FIELDS[name]
            text = value(profile, gpu)
            if text is None or text == NA:
                values.append("[N/A]")
            elif unit and "nounits" not in options:
                values.append("%s %s" % (text, unit))
            else:
                values.append(text)
        rows.append(", ".join(values))
    if rows:
        sys.stdout.write("\n".join(rows) + "\n")
    return report_lost(listed)


# --- --query-compute-apps ---------------------------------------------------------------------------------

# name: (unit, value of one (gpu, app) pair as text); as the man page's --query-compute-apps fields
APP_FIELDS = {
    "pid": (None, lambda g, a: str(a["pid"])),
    "process_name": (None, lambda g, a: a.get("process_name", "python3")),
    "used_gpu_memory": ("MiB", lambda g, a: _na(a.get("used_memory_mib"), "%d")),
    "used_memory": ("MiB", lambda g, a: _na(a.get("used_memory_mib"), "%d")),
    "gpu_bus_id": (None, lambda g, a: g["bus_id"]),
    "gpu_uuid": (None, lambda g, a: g["uuid"]),
    "gpu_name": (None, lambda g, a: g["name"]),
    "gpu_serial": (None, lambda g, a: g["serial"]),
}


def query_compute_apps(fields, options, listed):
    """--query-compute-apps in CSV: one row per compute process on any GPU; only the header when none runs."""
    names = [name.strip() for name in fields.split(",") if name.strip()]
    unknown = [name for name in names if name not in APP_FIELDS]
    if unknown:
        sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % unknown[0])
        return USAGE_ERROR
    rows = []
    if "noheader" not in options:
        rows.append(", ".join(name + (" [%s]" % APP_FIELDS[name][0] if APP_FIELDS[name][0] else "") for name in names))
    for gpu in listed:
        if gpu["lost"]:
            continue
        for app in gpu["compute_apps"] or []:
            values = []
            for name in names:
                unit, value = APP_FIELDS[name]
                text = value(gpu, app)
                values.append("[N/A]" if text == NA else ("%s %s" % (text, unit) if unit and "nounits" not in options
                                                          else text))
            rows.append(", ".join(values))
    if rows:
        sys.stdout.write("\n".join(rows) + "\n")
    return report_lost(listed)


# --- -pl, -lgc, -rgc ----------------------------------------------------------------------------------------

NO_PERMISSION = 4       # man page, RETURN VALUE: "4 - The current user does not have permission to ..."
NOT_FOUND = 6           # man page, RETURN VALUE: "6 - A query to find an object was unsuccessful"
SETTERS = {"-pl": "-pl", "--power-limit": "-pl", "-lgc": "-lgc", "--lock-gpu-clocks": "-lgc",
           "-rgc": "-rgc", "--reset-gpu-clocks": "-rgc"}
PERSISTENCE_WARNING = ("\nWarning: persistence mode is disabled on device %s. See the Known Issues section of the "
                       "nvidia-smi(1) man page for more information. Run with [--help | -h] switch to get more "
                       "information on how to enable persistence mode.\n")


def parse_setter(argv):
    """(ids or None, setter, value) from [-i ID] -pl W | -lgc MIN,MAX | -rgc in any order (also --id=, --power-limit=,
    --lock-gpu-clocks=, --reset-gpu-clocks); None when argv is not such a command."""
    ids, setter, value = None, None, None
    position = 0
    while position < len(argv):
        argument = argv[position]
        name, equals, inline = argument.partition("=")
        if name in ("-i", "--id"):
            if not equals:
                position += 1
                if position >= len(argv):
                    return None
                inline = argv[position]
            ids = [part.strip() for part in inline.split(",") if part.strip()]
        elif name in SETTERS and setter is None:
            setter = SETTERS[name]
            if setter != "-rgc":
                if not equals:
                    position += 1
                    if position >= len(argv):
                        return None
                    inline = argv[position]
                value = inline
        else:
            return None
        position += 1
    return (ids, setter, value) if setter else None


def select(listed, ids):
    """The GPUs -i names (index, full or short PCI bus id, UUID); None when one names no GPU."""
    if ids is None:
        return [gpu for gpu in listed if not gpu["lost"]]
    chosen = []
    for ident in ids:
        wanted = ident.upper()
        found = [gpu for gpu in listed if not gpu["lost"] and (
            str(gpu["index"]) == ident or gpu["uuid"].upper() == wanted or gpu["bus_id"].upper() == wanted
            or gpu["bus_id"].upper().endswith(":" + wanted) or gpu["bus_id"][4:].upper() == wanted)]
        if not found:
            return None
        chosen += [gpu for gpu in found if gpu not in chosen]
    return chosen


def _number(text):
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def set_settings(profile, listed, ids, setter, value, euid=None):
    """-pl / -lgc / -rgc on the GPUs -i names, as root only; the new values go to settings.json, and nvml.conf is
    rendered again where the fake NVML's is there."""
    chosen = select(listed, ids)
    if chosen is None:
        sys.stdout.write("No devices were found\n")
        return NOT_FOUND
    if setter == "-pl":
        watts = _number(value)
        if watts is None:
            sys.stdout.write('Invalid power limit "%s" provided.\n\n' % value)
            return USAGE_ERROR
    elif setter == "-lgc":
        parts = [part.strip() for part in (value or "").split(",")]
        clocks = [_number(part) for part in parts]
        if len(parts) not in (1, 2) or any(clock is None or clock != int(clock) or clock < 0 for clock in clocks):
            sys.stdout.write('Invalid clock values "%s" provided.\n\n' % value)
            return USAGE_ERROR
        clocks = [int(clock) for clock in clocks]
        if len(clocks) == 1:        # a single value locks min and max to it (man page: "a singular desired clock")
            clocks *= 2
    if (os.geteuid() if euid is None else euid) != 0:
        # The real tool's words (docstring): -pl names each GPU with NVML's "Insufficient Permissions"; -lgc and -rgc
        # stop at the first GPU with "Terminating early due to previous errors.".
        if setter == "-pl":
            for gpu in chosen:
                sys.stdout.write("Failed to set power management limit for GPU %s: Insufficient Permissions\n"
                                 % gpu["bus_id"])
        else:
            sys.stdout.write("The current user does not have permission to change clocks for GPU %s.\n"
                             "Terminating early due to previous errors.\n" % chosen[0]["bus_id"])
        return NO_PERMISSION
    if setter == "-pl":
        for gpu in chosen:
            if not gpu["power_min_limit_w"] <= watts <= gpu["power_max_limit_w"]:
                sys.stdout.write("Provided power limit %.2f W is not a valid power limit which should be between "
                                 "%.2f W and %.2f W for GPU %s\nTerminating early due to previous errors.\n"
                                 % (watts, gpu["power_min_limit_w"], gpu["power_max_limit_w"], gpu["bus_id"]))
                return USAGE_ERROR
    settings = live_settings()
    out = []
    warn = persistence_mode() == "Disabled"
    for gpu in chosen:
        unsupported = {"-pl": "Changing power management limit is not supported for GPU: %s.",
                       "-lgc": "Setting locked GPU clocks is not supported for GPU %s."}.get(setter)
        if unsupported and not gpu["power_limit_supported" if setter == "-pl" else "locked_clocks_supported"]:
            out.append((unsupported % gpu["bus_id"]) + "\nTreating as warning and moving on.\n")
            continue
        mine = settings.setdefault(str(gpu["index"]), {})
        if setter == "-pl":
            out.append("Power limit for GPU %s was set to %.2f W from %.2f W.\n"
                       % (gpu["bus_id"], watts, gpu["power_limit_w"]))
            mine["power_limit_w"] = watts
        elif setter == "-lgc":
            out.append('GPU clocks set to "(gpuClkMin %d, gpuClkMax %d)" for GPU %s\n'
                       % (clocks[0], clocks[1], gpu["bus_id"]))
            mine["locked_clocks_mhz"] = clocks[:2]
        else:
            mine["locked_clocks_mhz"] = None
        if warn:
            out.append(PERSISTENCE_WARNING % gpu["bus_id"])
    if not warn:
        # with persistence mode off the GPU is deinitialised once nvidia-smi exits: nothing is kept
        write_settings(settings)
        rerender_nvml_conf(profile)
    sys.stdout.write("".join(out) + "All done.\n")
    return 0


def rerender_nvml_conf(profile):
    """Renders nvml.conf again (with the new settings) where the fake NVML's one is installed."""
    if not os.path.exists(os.path.join(CONFIG_DIR, "nvml.conf")):
        return
    sys.path.insert(0, HERE)
    import emulator_profile  # pylint: disable=import-outside-toplevel
    emulator_profile.write_nvml_conf(profile["name"], CONFIG_DIR)


def main(argv):
    profile = load_profile()
    delay_ms = int(os.environ.get("GPUFLEET_EMULATOR_DELAY_MS") or read_config("delay_ms", "0"))
    if profile.get("hang"):
        while True:
            time.sleep(3600)
    time.sleep(delay_ms / 1000.0)
    if "error" in profile:
        sys.stdout.write(profile["error"]["text"])
        return profile["error"]["xml_rc" if argv[:2] == ["-q", "-x"] else "rc"]
    if argv == ["--version"]:
        sys.stdout.write("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\n"
                         "CUDA Version        : %s\n" % ((profile["driver_version"],) * 3 + (profile["cuda_version"],)))
        return 0
    faults = read_faults()
    listed = gpus(profile, faults)
    setting = parse_setter(argv)
    if argv[:2] == ["-q", "-x"]:
        sys.stdout.write(query_xml(profile, listed))
    elif argv[:2] == ["topo", "-m"]:
        if any(gpu["lost"] for gpu in listed):
            return report_lost([next(gpu for gpu in listed if gpu["lost"])])
        sys.stdout.write(topology(profile, faults))
    elif argv[:1] == ["nvlink"] and argv[1:2] in (["-s"], ["--status"]):
        sys.stdout.write(nvlink_status(profile, listed, faults))
    elif argv == ["-L"]:
        sys.stdout.write(gpu_list(profile, listed))
    elif argv and argv[0].startswith("--query-gpu=") and argv[1:2] and argv[1].startswith("--format=csv"):
        options = set(argv[1].split("=", 1)[1].split(",")[1:])
        return query_gpu(profile, argv[0].split("=", 1)[1], options, listed)
    elif argv and argv[0].startswith("--query-compute-apps=") and argv[1:2] and argv[1].startswith("--format=csv"):
        options = set(argv[1].split("=", 1)[1].split(",")[1:])
        return query_compute_apps(argv[0].split("=", 1)[1], options, listed)
    elif setting is not None:
        return set_settings(profile, listed, *setting)
    else:
        sys.stdout.write("nvidia-smi emulator (%s): unsupported arguments %s\n" % (profile["name"], " ".join(argv)))
        return USAGE_ERROR
    return report_lost(listed)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
