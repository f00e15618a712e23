"""Where the two backends of gpu_facts disagree (test and device-check code, not shipped in the collection).

``differences(nvml_facts, smi_facts)`` lists every fact the NVML backend and the nvidia-smi backend both report
and report differently, as ``"path: nvml=... nvidia_smi=..."``. Left out, because only one side can know them:
the NVML-only fields (``compute_capability``, the average and instant power before driver 570, each link's ``remote_pci_bus_id`` and ``remote_device_type``,
``topology.p2p``, ``nvml_version``), what only nvidia-smi sees (``topology.nics`` and ``topology.gpu_nic``:
NVML does not see NICs), and what says how the facts were read (``source``, ``timings``, the paths, ``errors``).
With ``strict`` (the default, for emulated hardware where both sides read the same profile) a None against a
value is a disagreement too; without it (a real machine, where one tool may print N/A for what the other reads)
only a value against a different value is.
"""

IGNORED_TOP = ("source", "timings", "nvidia_smi", "nvml_library", "nvml_missing", "nvml_version", "errors")
IGNORED_TOPOLOGY = ("nics", "gpu_nic", "p2p")
NVML_ONLY_DEVICE = ("compute_capability",)
NVML_ONLY_LINK = ("remote_pci_bus_id", "remote_device_type")
# NVML has answered these since driver 535 (field values 185 and 186, nvml.h of NVML 12.2); nvidia-smi -q -x prints
# them only from driver 570 (<average_power_draw>, <instant_power_draw>; the 535 capture has <power_draw> alone).
NVML_ONLY_BEFORE_570 = ("power_draw_average_w", "power_draw_instant_w")


def _walk(path, first, second, found, strict):
    if first is None or second is None:
        if strict and (first is None) != (second is None):
            found.append("%s: nvml=%r nvidia_smi=%r" % (path, first, second))
        return
    if isinstance(first, dict) and isinstance(second, dict):
        for key in sorted(set(first) | set(second)):
            if key not in first or key not in second:
                found.append("%s.%s: only in %s" % (path, key, "nvml" if key in first else "nvidia_smi"))
                continue
            _walk("%s.%s" % (path, key), first[key], second[key], found, strict)
    elif isinstance(first, list) and isinstance(second, list):
        if len(first) != len(second):
            found.append("%s: %d items from nvml, %d from nvidia_smi" % (path, len(first), len(second)))
            return
        for position, (one, other) in enumerate(zip(first, second)):
            _walk("%s[%d]" % (path, position), one, other, found, strict)
    elif isinstance(first, float) or isinstance(second, float):
        if abs(float(first) - float(second)) > 0.011:
            found.append("%s: nvml=%r nvidia_smi=%r" % (path, first, second))
    elif first != second:
        found.append("%s: nvml=%r nvidia_smi=%r" % (path, first, second))


def _branch(version):
    try:
        return int(str(version).split(".", 1)[0])
    except ValueError:
        return None


def comparable(facts):
    """A copy of the facts without what only one backend can report."""
    only_nvml = NVML_ONLY_DEVICE
    branch = _branch(facts.get("driver_version"))
    if branch is not None and branch < 570:
        only_nvml += NVML_ONLY_BEFORE_570
    facts = dict((key, value) for key, value in facts.items() if key not in IGNORED_TOP)
    facts["devices"] = [dict((key, value) for key, value in device.items() if key not in only_nvml)
                        for device in facts.get("devices", [])]
    topology = dict((key, value) for key, value in facts.get("topology", {}).items() if key not in IGNORED_TOPOLOGY)
    # A GPU whose links are all down: nvidia-smi prints one line instead of its links, NVML still lists them.
    # Both name the GPU in nvlink_gpus_all_inactive; its links and their count are compared through that.
    all_down = set(topology.get("nvlink_gpus_all_inactive") or [])
    topology["nvlink"] = dict(
        (label, [] if label in all_down else
         [dict((key, value) for key, value in link.items() if key not in NVML_ONLY_LINK) for link in links])
        for label, links in (topology.get("nvlink") or {}).items())
    topology["nvlink_links_inactive"] = sum(
        1 for links in topology["nvlink"].values() for link in links if link.get("active") is False)
    facts["topology"] = topology
    return facts


def differences(nvml_facts, smi_facts, strict=True):
    found = []
    _walk("gpu", comparable(nvml_facts), comparable(smi_facts), found, strict)
    return found
