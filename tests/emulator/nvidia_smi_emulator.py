"""A stand-in ``nvidia-smi`` that replays a hardware profile (test-only code).

It answers the subcommands gpufleet.node uses exactly as the real tool prints them: ``-q -x``, ``topo -m``,
``nvlink -s``, ``-L``, ``--query-gpu=... --format=csv[,noheader]`` and ``--version``. Profiles are JSON
files beside this one (``profiles/<name>.json``); the topology matrix of each is a real capture.

Configuration, read at every call:

* the profile: ``$GPUFLEET_EMULATOR_PROFILE``, else the first line of ``/etc/gpufleet-emulator/profile``;
* a per-call delay in milliseconds that models a real node's NVML start-up:
  ``$GPUFLEET_EMULATOR_DELAY_MS``, else ``/etc/gpufleet-emulator/delay_ms``, else 0;
* faults: ``/etc/gpufleet-emulator/inactive_links``, lines of ``<gpu index> <link>`` to report inactive.

Persistence mode is reported as the real daemon leaves it: "Enabled" while an ``nvidia-persistenced`` process
runs without ``--no-persistence-mode`` (the daemon turns persistence mode on for every device at start unless
given that option, which forces it off: github.com/NVIDIA/nvidia-persistenced, option-table.h and the manual page
nvidia-persistenced.1.m4; options.c parses ``--persistence-mode`` / ``--no-persistence-mode`` in order, so the
last one given wins), "Disabled" otherwise. The processes are read from ``/proc/*/cmdline``,
so a unit that runs the daemon with the option (Ubuntu's nvidia-compute-utils package does) reports "Disabled".
``/etc/gpufleet-emulator/persistence`` (non-empty) forces "Enabled", as ``nvidia-smi -pm 1`` would.
"""
import json
import os
import sys
import time
import uuid as uuid_module

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_DIR = os.environ.get("GPUFLEET_EMULATOR_CONFIG", "/etc/gpufleet-emulator")

USAGE_ERROR = 2


def read_config(name, default=None):
    try:
        with open(os.path.join(CONFIG_DIR, name), encoding="utf-8") as handle:
            return handle.read().strip() or default
    except OSError:
        return default


PROC = "/proc"
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


def inactive_links():
    faults = set()
    for line in (read_config("inactive_links") or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0].isdigit() and parts[1].isdigit():
            faults.add((int(parts[0]), int(parts[1])))
    return faults


def gpus(profile):
    """The profile's GPUs with stable, profile-specific identities."""
    result = []
    for index, bus in enumerate(profile["bus_ids"]):
        ident = uuid_module.uuid5(uuid_module.NAMESPACE_DNS, "%s-%d" % (profile["name"], index))
        result.append(dict(profile["gpu"], index=index, bus_id="00000000:" + bus, uuid="GPU-%s" % ident,
                           serial="1650%09d" % (index + 1), minor_number=index))
    return result


def query_xml(profile):
    lines = [
        '<?xml version="1.0" ?>',
        '<!DOCTYPE nvidia_smi_log SYSTEM "nvsmi_device_v12.dtd">',
        "<nvidia_smi_log>",
        "\t<timestamp>%s</timestamp>" % time.strftime("%a %b %d %H:%M:%S %Y"),
        "\t<driver_version>%s</driver_version>" % profile["driver_version"],
        "\t<cuda_version>%s</cuda_version>" % profile["cuda_version"],
        "\t<attached_gpus>%d</attached_gpus>" % len(profile["bus_ids"]),
    ]
    persistence = persistence_mode()
    for gpu in gpus(profile):
        lines += [
            '\t<gpu id="%s">' % gpu["bus_id"],
            "\t\t<product_name>%s</product_name>" % gpu["name"],
            "\t\t<persistence_mode>%s</persistence_mode>" % persistence,
            "\t\t<mig_mode>",
            "\t\t\t<current_mig>Disabled</current_mig>",
            "\t\t\t<pending_mig>Disabled</pending_mig>",
            "\t\t</mig_mode>",
            "\t\t<mig_devices>",
            "\t\t\tNone",
            "\t\t</mig_devices>",
            "\t\t<serial>%s</serial>" % gpu["serial"],
            "\t\t<uuid>%s</uuid>" % gpu["uuid"],
            "\t\t<minor_number>%d</minor_number>" % gpu["minor_number"],
            "\t\t<vbios_version>%s</vbios_version>" % gpu["vbios_version"],
            "\t\t<pci>",
            "\t\t\t<pci_bus>%s</pci_bus>" % gpu["bus_id"][9:11],
            "\t\t\t<pci_bus_id>%s</pci_bus_id>" % gpu["bus_id"],
            "\t\t\t<pci_gpu_link_info>",
            "\t\t\t\t<pcie_gen>",
            "\t\t\t\t\t<max_link_gen>%d</max_link_gen>" % gpu["pcie_gen"],
            "\t\t\t\t\t<current_link_gen>%d</current_link_gen>" % gpu["pcie_gen"],
            "\t\t\t\t</pcie_gen>",
            "\t\t\t\t<link_widths>",
            "\t\t\t\t\t<max_link_width>%dx</max_link_width>" % gpu["pcie_width"],
            "\t\t\t\t\t<current_link_width>%dx</current_link_width>" % gpu["pcie_width"],
            "\t\t\t\t</link_widths>",
            "\t\t\t</pci_gpu_link_info>",
            "\t\t</pci>",
            "\t\t<fb_memory_usage>",
            "\t\t\t<total>%d MiB</total>" % gpu["memory_total_mib"],
            "\t\t\t<reserved>%d MiB</reserved>" % 512,
            "\t\t\t<used>0 MiB</used>",
            "\t\t\t<free>%d MiB</free>" % (gpu["memory_total_mib"] - 512),
            "\t\t</fb_memory_usage>",
            "\t\t<ecc_mode>",
            "\t\t\t<current_ecc>Enabled</current_ecc>",
            "\t\t\t<pending_ecc>Enabled</pending_ecc>",
            "\t\t</ecc_mode>",
            "\t\t<ecc_errors>",
            "\t\t\t<volatile>",
            "\t\t\t\t<dram_uncorrectable>0</dram_uncorrectable>",
            "\t\t\t</volatile>",
            "\t\t</ecc_errors>",
            "\t\t<retired_pages>",
            "\t\t\t<multiple_single_bit_retirement><retired_count>0</retired_count></multiple_single_bit_retirement>",
            "\t\t\t<double_bit_retirement><retired_count>0</retired_count></double_bit_retirement>",
            "\t\t\t<pending_retirement>No</pending_retirement>",
            "\t\t</retired_pages>",
            "\t\t<gpu_power_readings>",
            "\t\t\t<power_state>P0</power_state>",
            "\t\t\t<current_power_limit>%.2f W</current_power_limit>" % gpu["power_limit_w"],
            "\t\t\t<default_power_limit>%.2f W</default_power_limit>" % gpu["power_limit_w"],
            "\t\t</gpu_power_readings>",
            "\t</gpu>",
        ]
    lines.append("</nvidia_smi_log>")
    return "\n".join(lines) + "\n"


def topology(profile):
    with open(os.path.join(HERE, "profiles", profile["topology"]), encoding="utf-8") as handle:
        return handle.read()


def nvlink_status(profile):
    faults = inactive_links()
    out = []
    for gpu in gpus(profile):
        out.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        for link in range(profile["nvlink"]["links_per_gpu"]):
            if (gpu["index"], link) in faults:
                out.append("\t Link %d: <inactive>" % link)
            else:
                out.append("\t Link %d: %s GB/s" % (link, _speed(profile["nvlink"]["speed_gbps"])))
    return "\n".join(out) + "\n"


def _speed(value):
    return ("%.3f" % value).rstrip("0").rstrip(".")


def gpu_list(profile):
    return "".join("GPU %d: %s (UUID: %s)\n" % (g["index"], g["name"], g["uuid"]) for g in gpus(profile))


QUERY_FIELDS = {
    "index": lambda p, g: str(g["index"]),
    "name": lambda p, g: g["name"],
    "uuid": lambda p, g: g["uuid"],
    "pci.bus_id": lambda p, g: g["bus_id"],
    "memory.total": lambda p, g: "%d MiB" % g["memory_total_mib"],
    "driver_version": lambda p, g: p["driver_version"],
    "persistence_mode": lambda p, g: persistence_mode(),
    "compute_mode": lambda p, g: "Default",
}


def query_gpu(profile, fields, header):
    names = [name.strip() for name in fields.split(",") if name.strip()]
    unknown = [name for name in names if name not in QUERY_FIELDS]
    if unknown:
        sys.stdout.write('Field "%s" is not a valid field to query.\n\n' % unknown[0])
        return USAGE_ERROR
    rows = [", ".join(names)] if header else []
    rows += [", ".join(QUERY_FIELDS[name](profile, gpu) for name in names) for gpu in gpus(profile)]
    sys.stdout.write("\n".join(rows) + "\n")
    return 0


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
    if argv[:2] == ["-q", "-x"]:
        sys.stdout.write(query_xml(profile))
    elif argv[:2] == ["topo", "-m"]:
        sys.stdout.write(topology(profile))
    elif argv[:1] == ["nvlink"] and argv[1:2] in (["-s"], ["--status"]):
        sys.stdout.write(nvlink_status(profile))
    elif argv == ["-L"]:
        sys.stdout.write(gpu_list(profile))
    elif argv == ["--version"]:
        sys.stdout.write("NVIDIA-SMI version  : %s\nNVML version        : %s\nDRIVER version      : %s\n"
                         "CUDA Version        : %s\n" % ((profile["driver_version"],) * 3 + (profile["cuda_version"],)))
    elif argv and argv[0].startswith("--query-gpu=") and argv[1:2] and argv[1].startswith("--format=csv"):
        return query_gpu(profile, argv[0].split("=", 1)[1], "noheader" not in argv[1])
    else:
        sys.stdout.write("nvidia-smi emulator (%s): unsupported arguments %s\n" % (profile["name"], " ".join(argv)))
        return USAGE_ERROR
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
