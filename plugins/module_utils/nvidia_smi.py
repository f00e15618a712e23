# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure parsers for the output of ``nvidia-smi``.

Every function takes the text a command printed and returns plain data (dicts, lists, strings, numbers,
``None``); none runs a command or touches ``AnsibleModule``. Real output is messy (tabs or spaces, columns
that run into each other, old and new drivers), so the parsers read tokens, never fixed column widths, and
answer ``None`` where a value cannot be read with certainty.

Anything they cannot parse at all raises :class:`NvidiaSmiParseError`; no other exception escapes.

Interface:

* ``parse_topology(text)``: ``nvidia-smi topo -m``
* ``parse_nvlink_status(text)``: ``nvidia-smi nvlink -s``
* ``parse_query_xml(text)``: ``nvidia-smi -q -x``
* ``classify_error(text)``: what a failing ``nvidia-smi`` printed, as ``(state, message)``
* ``nvlink_summary(matrix)``: pairs, bond widths and all-to-all from a topology matrix
* ``parse_gpu_list(text)``: ``nvidia-smi -L``
* ``parse_query_gpu_csv(text)``: ``nvidia-smi --query-gpu=... --format=csv[,noheader]``
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.etree import ElementTree

__all__ = [
    "NvidiaSmiParseError",
    "ERROR_STATES",
    "classify_error",
    "nvlink_summary",
    "parse_gpu_list",
    "parse_nvlink_status",
    "parse_query_gpu_csv",
    "parse_query_xml",
    "parse_topology",
]


class NvidiaSmiParseError(ValueError):
    """The text is not output of the nvidia-smi subcommand the parser reads."""


# --- topo -m ----------------------------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_GPU_LABEL = re.compile(r"^GPU\d+$")
_NVLINK_RELATION = re.compile(r"^NV(\d+)$")
# Relations nvidia-smi prints between two devices (SOC is the old name of SYS).
_RELATION = re.compile(r"^(X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A)$")
# The affinity columns, as printed in the header; older drivers print fewer of them.
_AFFINITY_COLUMNS = (
    ("cpu_affinity", ("CPU", "Affinity")),
    ("numa_affinity", ("NUMA", "Affinity")),
    ("gpu_numa_id", ("GPU", "NUMA", "ID")),
)
_AFFINITY_VALUE = {
    "cpu_affinity": re.compile(r"^(\d+(-\d+)?(,\d+(-\d+)?)*|N/A)$"),
    "numa_affinity": re.compile(r"^(\d+(-\d+)?(,\d+(-\d+)?)*|N/A)$"),
    "gpu_numa_id": re.compile(r"^(\d+|N/A)$"),
}
_NIC_LEGEND_ENTRY = re.compile(r"^\s*(NIC\d+)\s*:\s*(\S+)\s*$")


def _clean_lines(text):
    """Lines of text with ANSI escapes removed and line ends normalised.

    Output pasted into shell scripts often has every line commented out; a '#' that starts every non-blank
    line is removed.
    """
    if not isinstance(text, str):
        raise NvidiaSmiParseError("expected text, got %s" % type(text).__name__)
    lines = _ANSI.sub("", text).replace("\r\n", "\n").replace("\r", "\n").split("\n")
    content = [line for line in lines if line.strip()]
    if content and all(line.startswith("#") for line in content):
        lines = [line[1:] if line.startswith("#") else line for line in lines]
    return lines


def _split_header(tokens):
    """Split header tokens into device column names and the affinity column keys, in order."""
    devices, affinity = [], []
    i = 0
    while i < len(tokens):
        for key, words in _AFFINITY_COLUMNS:
            if tuple(tokens[i:i + len(words)]) == words:
                affinity.append(key)
                i += len(words)
                break
        else:
            if affinity:
                # A device column after the affinity columns: not a header nvidia-smi prints.
                raise NvidiaSmiParseError("unexpected header column %r after the affinity columns" % tokens[i])
            devices.append(tokens[i])
            i += 1
    return devices, affinity


def _find_header(lines):
    """Index and tokens of the matrix header: the first line that starts with the column GPU0.

    The GPU0 row also starts with GPU0, but its next token is a relation (X, GPU0 to itself).
    """
    for number, line in enumerate(lines):
        tokens = line.split()
        if tokens and tokens[0] == "GPU0" and (len(tokens) == 1 or not _RELATION.match(tokens[1])):
            return number, tokens
    raise NvidiaSmiParseError("no topology matrix header (a line of column names starting with GPU0)")


def _nic_legend(lines):
    """NIC# -> device name from the 'NIC Legend:' block, when one is printed."""
    legend = {}
    in_legend = False
    for line in lines:
        stripped = line.strip()
        if stripped.lower().startswith("nic legend"):
            in_legend = True
            continue
        if in_legend:
            match = _NIC_LEGEND_ENTRY.match(line)
            if match:
                legend[match.group(1)] = match.group(2)
            elif stripped and legend:
                break
    return legend


def _affinity_values(keys, tokens):
    """Map the affinity tokens of a GPU row to their columns.

    When the row holds as many tokens as there are affinity columns, each token is its column's value (or
    None where it is not a CPU/NUMA list or number). Otherwise two columns ran into each other with no space
    between them, and no value of the row can be read with certainty: all are None.
    """
    if len(tokens) != len(keys):
        return dict((key, None) for key in keys)
    return dict(
        (key, token if _AFFINITY_VALUE[key].match(token) else None) for key, token in zip(keys, tokens)
    )


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict with
    ``gpus`` (labels in order), ``matrix`` (GPU label -> GPU label -> relation as printed, self omitted),
    ``nics`` (NIC names through the NIC Legend when printed, else the column names as printed),
    ``gpu_nic`` (GPU label -> NIC name -> relation), and ``cpu_affinity``, ``numa_affinity``,
    ``gpu_numa_id`` (GPU label -> the string as printed, or ``None`` where the column is absent or the
    value cannot be read with certainty).
    """
    lines = _clean_lines(text)
    header_index, header = _find_header(lines)
    columns, affinity_keys = _split_header(header)
    gpus = [name for name in columns if _GPU_LABEL.match(name)]
    if not gpus:
        raise NvidiaSmiParseError("the matrix header names no GPU column")
    legend = _nic_legend(lines[header_index + 1:])
    nic_columns = [name for name in columns if not _GPU_LABEL.match(name)]
    nic_name = dict((column, legend.get(column, column)) for column in nic_columns)

    result = {
        "gpus": gpus,
        "matrix": {},
        "nics": [nic_name[column] for column in nic_columns],
        "gpu_nic": {},
        "cpu_affinity": {},
        "numa_affinity": {},
        "gpu_numa_id": {},
    }
    seen_rows = set()
    for line in lines[header_index + 1:]:
        tokens = line.split()
        if not tokens or tokens[0] not in columns or tokens[0] in seen_rows:
            if tokens and tokens[0].rstrip(":").lower() == "legend":
                break
            continue
        label = tokens[0]
        seen_rows.add(label)
        if not _GPU_LABEL.match(label):
            continue  # NIC rows repeat what the GPU rows say
        relations = tokens[1:1 + len(columns)]
        relations = [token if _RELATION.match(token) else None for token in relations]
        relations += [None] * (len(columns) - len(relations))
        result["matrix"][label] = dict(
            (other, relation) for other, relation in zip(columns, relations)
            if _GPU_LABEL.match(other) and other != label
        )
        result["gpu_nic"][label] = dict(
            (nic_name[other], relation) for other, relation in zip(columns, relations) if other in nic_name
        )
        values = _affinity_values(affinity_keys, tokens[1 + len(columns):])
        for key, _words in _AFFINITY_COLUMNS:
            result[key][label] = values.get(key)
    if not result["matrix"]:
        raise NvidiaSmiParseError("the topology matrix has no GPU rows")
    return result


def nvlink_summary(matrix):
    """Summarise the NVLink bonds of a topology matrix (as returned in ``parse_topology()['matrix']``).

    Returns ``pairs`` (GPU pairs joined by NVLink), ``pair_list`` (``[["GPU0", "GPU1", 12], ...]``),
    ``max_links`` (widest bond, 0 without NVLink), ``bond_widths`` (sorted distinct widths) and
    ``all_to_all`` (every GPU pair joined by NVLink; False for a single GPU).
    """
    gpus = list(matrix)
    pair_list = []
    for position, first in enumerate(gpus):
        for second in gpus[position + 1:]:
            relation = matrix.get(first, {}).get(second) or matrix.get(second, {}).get(first)
            match = _NVLINK_RELATION.match(relation or "")
            if match:
                pair_list.append([first, second, int(match.group(1))])
    total_pairs = len(gpus) * (len(gpus) - 1) // 2
    widths = sorted(set(width for _a, _b, width in pair_list))
    return {
        "pairs": len(pair_list),
        "pair_list": pair_list,
        "max_links": max(widths) if widths else 0,
        "bond_widths": widths,
        "all_to_all": total_pairs > 0 and len(pair_list) == total_pairs,
    }


# --- nvlink -s --------------------------------------------------------------------------------------------

_NVLINK_GPU = re.compile(r"^\s*GPU\s+(\d+)\s*:\s*(.*?)\s*(?:\(UUID:\s*([^)\s]*)\s*\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*?)\s*$")
_NVLINK_SPEED = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GB/s$")


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s`` (or ``--status``).

    Returns ``{index: {"name", "uuid", "links": [{"link", "active", "speed_gbps"}], "all_inactive"}}`` keyed
    by GPU index (int). An inactive link has ``active: False`` and ``speed_gbps: None``; a link state that is
    neither a speed nor inactive has ``active: None``. ``all_inactive`` is True where nvidia-smi said that all
    links of the GPU are inactive instead of listing them.
    """
    gpus = {}
    current = None
    for line in _clean_lines(text):
        if not line.strip():
            continue
        match = _NVLINK_GPU.match(line)
        if match and not line[:1].isspace():
            index = int(match.group(1))
            current = {
                "name": match.group(2) or None,
                "uuid": match.group(3) or None,
                "links": [],
                "all_inactive": False,
            }
            gpus[index] = current
            continue
        match = _NVLINK_LINK.match(line)
        if match and current is not None:
            state = match.group(2)
            speed = _NVLINK_SPEED.match(state)
            if speed:
                link = {"link": int(match.group(1)), "active": True, "speed_gbps": float(speed.group(1))}
            elif "inactive" in state.lower():
                link = {"link": int(match.group(1)), "active": False, "speed_gbps": None}
            else:
                link = {"link": int(match.group(1)), "active": None, "speed_gbps": None}
            current["links"].append(link)
            continue
        if current is not None and "inactive" in line.lower():
            current["all_inactive"] = True
    if not gpus:
        if "inactive" in text.lower():
            return {}
        raise NvidiaSmiParseError("no 'GPU <index>: <name>' line in the NVLink status")
    return gpus


# --- -q -x ------------------------------------------------------------------------------------------------

_NUMBER = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)")


def _text(element, path):
    """Stripped text at path, or None where absent, empty or N/A."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or value in ("N/A", "[N/A]", "Not Supported", "[Not Supported]", "Unknown Error"):
        return None
    return value


def _int(value):
    match = _NUMBER.match(value or "")
    if not match or "." in match.group(1):
        return None
    return int(match.group(1))


def _float(value):
    match = _NUMBER.match(value or "")
    return float(match.group(1)) if match else None


def _bool_mode(value):
    """'Enabled'/'Disabled' as True/False; anything else None."""
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered == "enabled":
        return True
    if lowered == "disabled":
        return False
    return None


def _first(element, paths):
    for path in paths:
        value = _text(element, path)
        if value is not None:
            return value
    return None


def _mig_device(element):
    return {
        "index": _int(_text(element, "index")),
        "gpu_instance_id": _int(_text(element, "gpu_instance_id")),
        "compute_instance_id": _int(_text(element, "compute_instance_id")),
        "memory_total_mib": _int(_text(element, "fb_memory_usage/total")),
        "multiprocessor_count": _int(_text(element, "device_attributes/shared/multiprocessor_count")),
    }


def _retired_pages(gpu):
    pages = gpu.find("retired_pages")
    if pages is None:
        return None
    return {
        "single_bit_ecc": _int(_text(pages, "multiple_single_bit_retirement/retired_count")),
        "double_bit_ecc": _int(_text(pages, "double_bit_retirement/retired_count")),
        "pending": _bool_mode({"Yes": "Enabled", "No": "Disabled"}.get(_text(pages, "pending_retirement") or "")),
    }


def _gpu(index, gpu):
    pci = gpu.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    mig = gpu.find("mig_devices")
    return {
        "index": index,
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "serial": _text(gpu, "serial"),
        "pci_bus_id": _text(pci, "pci_bus_id") or gpu.get("id"),
        "minor_number": _int(_text(gpu, "minor_number")),
        "module_id": _int(_text(gpu, "module_id")),
        "memory_total_mib": _int(_text(gpu, "fb_memory_usage/total")),
        "mig_mode": {
            "current": _bool_mode(_text(gpu, "mig_mode/current_mig")),
            "pending": _bool_mode(_text(gpu, "mig_mode/pending_mig")),
        },
        "mig_devices": [_mig_device(device) for device in mig.findall("mig_device")] if mig is not None else [],
        "persistence_mode": _bool_mode(_text(gpu, "persistence_mode")),
        "ecc_mode": {
            "current": _bool_mode(_text(gpu, "ecc_mode/current_ecc")),
            "pending": _bool_mode(_text(gpu, "ecc_mode/pending_ecc")),
        },
        "ecc_errors_uncorrected_volatile": _int(_text(gpu, "ecc_errors/volatile/dram_uncorrectable"))
        if gpu.find("ecc_errors/volatile/dram_uncorrectable") is not None
        else _int(_text(gpu, "ecc_errors/volatile/double_bit/total")),
        "retired_pages": _retired_pages(gpu),
        "pcie": {
            "gen_current": _int(_text(link, "pcie_gen/current_link_gen")),
            "gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
            "width_current": _int(_text(link, "link_widths/current_link_width")),
            "width_max": _int(_text(link, "link_widths/max_link_width")),
        },
        "power_limit_w": _float(_first(gpu, (
            "gpu_power_readings/current_power_limit",
            "gpu_power_readings/enforced_power_limit",
            "power_readings/enforced_power_limit",
            "power_readings/power_limit",
        ))),
        "vbios_version": _text(gpu, "vbios_version"),
    }


def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``driver_version``, ``cuda_version`` (the CUDA version the driver supports), ``attached_gpus``
    (as the document states it; it may differ from the GPUs listed) and ``gpus``: one dict per ``<gpu>``
    element in document order, with the keys of ``gpu.devices`` (``index`` is the position).
    """
    if not isinstance(text, str) or "<nvidia_smi_log" not in text:
        raise NvidiaSmiParseError("not nvidia-smi XML: no <nvidia_smi_log> element")
    start = text.index("<nvidia_smi_log")
    try:
        root = ElementTree.fromstring(text[start:].encode("utf-8", "replace"))
    except (ElementTree.ParseError, ValueError, UnicodeError) as exc:
        raise NvidiaSmiParseError("malformed nvidia-smi XML: %s" % exc)
    if root.tag != "nvidia_smi_log":
        raise NvidiaSmiParseError("not nvidia-smi XML: root element is <%s>" % root.tag)
    return {
        "driver_version": _text(root, "driver_version"),
        "cuda_version": _text(root, "cuda_version"),
        "attached_gpus": _int(_text(root, "attached_gpus")),
        "gpus": [_gpu(index, gpu) for index, gpu in enumerate(root.findall("gpu"))],
    }


# --- -L and --query-gpu -----------------------------------------------------------------------------------

_LIST_GPU = re.compile(r"^GPU\s+(\d+)\s*:\s*(.*?)\s*(?:\(UUID:\s*([^)\s]*)\s*\))?\s*$")
_LIST_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+)\s*:\s*\(UUID:\s*([^)\s]*)\s*\)\s*$")


def parse_gpu_list(text):
    """Parse ``nvidia-smi -L``: ``[{"index", "name", "uuid", "mig_devices": [{"profile", "device", "uuid"}]}]``."""
    gpus = []
    for line in _clean_lines(text):
        match = _LIST_GPU.match(line)
        if match:
            gpus.append({"index": int(match.group(1)), "name": match.group(2) or None,
                         "uuid": match.group(3) or None, "mig_devices": []})
            continue
        match = _LIST_MIG.match(line)
        if match and gpus:
            gpus[-1]["mig_devices"].append({"profile": match.group(1), "device": int(match.group(2)),
                                            "uuid": match.group(3)})
    if not gpus:
        raise NvidiaSmiParseError("no 'GPU <index>: <name>' line in the GPU list")
    return gpus


def parse_query_gpu_csv(text, fields=None):
    """Parse ``--query-gpu ... --format=csv`` (with a header) or ``csv,noheader`` (then ``fields`` names the
    columns). Returns one dict per GPU; names keep nvidia-smi's field names, values are stripped strings."""
    rows = [line for line in _clean_lines(text) if line.strip()]
    if not rows:
        raise NvidiaSmiParseError("empty CSV")
    if fields is None:
        fields = [name.strip() for name in rows[0].split(",")]
        rows = rows[1:]
    fields = [re.sub(r"\s*\[.*\]$", "", name.strip()) for name in fields]
    result = []
    for row in rows:
        values = [value.strip() for value in row.split(",")]
        if len(values) != len(fields):
            raise NvidiaSmiParseError("CSV row has %d values for %d fields: %r" % (len(values), len(fields), row))
        result.append(dict(zip(fields, values)))
    return result


# --- errors -----------------------------------------------------------------------------------------------

ERROR_STATES = (
    "driver_library_mismatch",
    "driver_not_loaded",
    "no_devices",
    "gpu_lost",
    "device_error",
    "error",
)

# (state, pattern over the whitespace-normalised text); the first match wins.
_ERROR_PATTERNS = (
    ("driver_library_mismatch", re.compile(r"driver/library version mismatch", re.I)),
    ("driver_not_loaded", re.compile(r"couldn't communicate with the nvidia driver", re.I)),
    ("driver_not_loaded", re.compile(r"nvidia kernel module (is )?not loaded|driver not loaded", re.I)),
    ("gpu_lost", re.compile(r"gpu is lost", re.I)),
    ("no_devices", re.compile(r"no devices were found", re.I)),
    ("device_error", re.compile(r"unable to determine the device handle", re.I)),
    ("device_error", re.compile(r"gpu requires reset|gpu has fallen off the bus", re.I)),
)
_NVML_LIBRARY_VERSION = re.compile(r"NVML library version:\s*(\S+)", re.I)


def classify_error(text):
    """Classify what a failing nvidia-smi printed: ``(state, message)``.

    ``state`` is one of ``ERROR_STATES``; ``message`` is the explaining text on one line (wrapped lines
    joined, whitespace collapsed). Text nvidia-smi does not print for a known failure gives ``error``.
    """
    if not isinstance(text, str):
        raise NvidiaSmiParseError("expected text, got %s" % type(text).__name__)
    message = " ".join(_ANSI.sub("", text).split())
    for state, pattern in _ERROR_PATTERNS:
        if pattern.search(message):
            return state, message
    return "error", message or "nvidia-smi failed and printed nothing"


def nvml_library_version(text):
    """The 'NVML library version: X' newer drivers print after a mismatch, or None."""
    match = _NVML_LIBRARY_VERSION.search(text or "")
    return match.group(1) if match else None
