"""Chooses the hardware profile the nvidia-smi emulator replays on a test node (test-only code).

    gpufleet-emulator-profile NAME

writes NAME to /etc/gpufleet-emulator/profile and lays out the profile's PCI devices (its GPUs and NVSwitches,
vendor, device and class as the kernel shows them) at /sys/bus/pci/devices, where gpu_facts and the roles read
them. It writes there only when that path is a mount of something other than sysfs: the host directory every
test, demo and bench node container has bound there (extensions/molecule/create.yml, tools/lib.sh run_node).
On a real machine it is the kernel's own tree, and the script refuses, changing nothing.
"""
import json
import os
import shutil
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
CONFIG_DIR = os.environ.get("GPUFLEET_EMULATOR_CONFIG", "/etc/gpufleet-emulator")
PCI_DEVICES = "/sys/bus/pci/devices"

NVIDIA_VENDOR = "0x10de"
GPU_DEVICE = "0x20b2"           # A100-SXM4-80GB
GPU_CLASS = "0x030200"          # 3D controller
NVSWITCH_CLASS = "0x068000"     # bridge (other)


def pci_devices(profile):
    """The profile's NVIDIA PCI functions: {address: (device id, class)}."""
    devices = {}
    for bus in profile.get("bus_ids", []):
        devices["0000:" + bus.lower()] = (GPU_DEVICE, GPU_CLASS)
    switches = profile.get("nvswitches") or {}
    for number in range(switches.get("count", 0)):
        devices["0000:%02x:00.0" % (0x10 + number)] = (switches["device_id"], NVSWITCH_CLASS)
    return devices


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


def load_profile(name):
    with open(os.path.join(HERE, "profiles", name + ".json"), encoding="utf-8") as handle:
        return json.load(handle)


def main(argv):
    if len(argv) != 1:
        sys.exit("usage: gpufleet-emulator-profile NAME (a profiles/*.json name)")
    name = argv[0]
    profile = load_profile(name)
    kind = mount_type(PCI_DEVICES)
    if kind is None or kind == "sysfs":
        sys.exit("gpufleet-emulator-profile: %s is %s, not a test directory bound there; refusing to write "
                 "emulated devices into it" % (PCI_DEVICES, "the kernel's sysfs" if kind else "not a mount"))
    lay_out_pci(profile, PCI_DEVICES)
    os.makedirs(CONFIG_DIR, exist_ok=True)
    with open(os.path.join(CONFIG_DIR, "profile"), "w", encoding="ascii") as handle:
        handle.write(name + "\n")
    print("profile %s: %d NVIDIA PCI functions at %s (%s)" % (name, len(pci_devices(profile)), PCI_DEVICES, kind))


if __name__ == "__main__":
    main(sys.argv[1:])
