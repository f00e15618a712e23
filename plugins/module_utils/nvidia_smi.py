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
* ``lost_gpus(text)``: PCI bus ids of the GPUs a failing nvidia-smi names as lost
* ``normalise_bus_id(text)``: a PCI bus id in the form ``parse_query_xml`` gives
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re
from xml.etree import ElementTree

from ansible_collections.gpufleet.node.plugins.module_utils.nvml import reset_status, row_remapper_histogram
from ansible_collections.gpufleet.node.plugins.module_utils.nvml_constants import ERROR_STATES

__all__ = [
    "NvidiaSmiParseError",
    "ERROR_STATES",
    "MESSAGE_LIMIT",
    "classify_error",
    "lost_gpus",
    "normalise_bus_id",
    "nvlink_summary",
    "nvml_library_version",
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
# One relation at the start of a glued token ("NV2NV2", "SYSSYS", "XNV12").
_RELATION_PREFIX = re.compile(r"X|NV\d+|PIX|PXB|PHB|NODE|SYS|SOC|N/A")
# Where two header names ran into each other: before a label that begins after a digit ("GPU6GPU7",
# "NIC7NIC8", "mlx5_1mlx5_2", "GPU7CPU") or after "Affinity" ("AffinityNUMA"), and between the words of the
# affinity column names ("CPUAffinity", "GPUNUMAID").
_HEADER_GLUE = re.compile(r"(?:(?<=\d)|(?<=Affinity))(?=GPU|NIC\d|mlx\d|CPU|NUMA)"
                          r"|(?<=CPU)(?=Affinity)|(?<=NUMA)(?=Affinity|ID)|(?<=GPU)(?=NUMA)")
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


def _header_tokens(line):
    """The names of a header line, with names that ran into each other split apart."""
    tokens = []
    for token in line.split():
        tokens.extend(part for part in _HEADER_GLUE.split(token) if part)
    return tokens


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
        tokens = _header_tokens(line)
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


def _split_relations(token):
    """The relations a glued token is made of ("NV2NV2" -> ["NV2", "NV2"]), or None where it is not made of
    relations only. Relations begin with a letter and NV# takes every digit, so a split is unique."""
    parts = []
    position = 0
    while position < len(token):
        match = _RELATION_PREFIX.match(token, position)
        if not match:
            return None
        parts.append(match.group(0))
        position = match.end()
    return parts


def _row_cells(label, columns, tokens):
    """The relation cells and the affinity tokens of one row, or ``(None, None)`` where they cannot be told.

    A token glued from several relations is split into them. The row must then hold one relation per column,
    ``X`` in its own column, and no further relation (that would mean a column the header does not name).
    A row cut short keeps the cells it has (the rest unknown).
    """
    cells = []
    rest = list(tokens)
    while rest and len(cells) < len(columns):
        token = rest.pop(0)
        if _RELATION.match(token):
            cells.append(token)
            continue
        parts = _split_relations(token)
        if parts is None:
            return None, None  # a cell that ran into something other than relations
        cells.extend(parts)
    if len(cells) > len(columns):
        return None, None
    if rest and _RELATION.match(rest[0]) and rest[0] != "N/A":
        return None, None  # more relations than columns
    if label in columns:
        own = columns.index(label)
        if own < len(cells) and cells[own] != "X":
            return None, None
    if any(cell == "X" for position, cell in enumerate(cells) if columns[position] != label):
        return None, None
    cells += [None] * (len(columns) - len(cells))
    return cells, rest


def parse_topology(text):
    """Parse ``nvidia-smi topo -m``.

    Returns a dict with
    ``gpus`` (labels in order), ``matrix`` (GPU label -> GPU label -> relation as printed, self omitted; every
    GPU of the header has an entry, ``None`` where its row is missing or cannot be read with certainty),
    ``nics`` (NIC names through the NIC Legend when printed, else the column names as printed),
    ``gpu_nic`` (GPU label -> NIC name -> relation), and ``cpu_affinity``, ``numa_affinity``,
    ``gpu_numa_id`` (GPU label -> the string as printed, or ``None`` where the column is absent or the
    value cannot be read with certainty).

    Columns that ran into each other in the header (``NIC7NIC8``, ``GPU6GPU7``) are split; cells that ran into
    each other in a row (``NV2NV2``) are split where that is unambiguous and gives the row exactly one cell per
    column, else the whole row is unknown (``None``) rather than shifted onto the wrong devices. A final line
    without its line end may have been cut mid-word: its last cell is unknown.
    """
    lines = _clean_lines(text)
    if lines and lines[-1].strip() and not text.endswith(("\n", "\r")):
        # The last line lost its end: whatever its last word says may be cut short.
        # Dropped, the row reads as one cut short (its last cells unknown).
        lines[-1] = " ".join(lines[-1].split()[:-1])
    header_index, header = _find_header(lines)
    columns, affinity_keys = _split_header(header)
    gpus = [name for name in columns if _GPU_LABEL.match(name)]
    if not gpus:
        raise NvidiaSmiParseError("the matrix header names no GPU column")
    if len(set(columns)) != len(columns):
        raise NvidiaSmiParseError("the matrix header names a column twice")
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
    rows = 0
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
        rows += 1
        cells, rest = _row_cells(label, columns, tokens[1:])
        if cells is None:
            cells, rest = [None] * len(columns), None
        result["matrix"][label] = dict(
            (other, relation) for other, relation in zip(columns, cells)
            if _GPU_LABEL.match(other) and other != label
        )
        result["gpu_nic"][label] = dict(
            (nic_name[other], relation) for other, relation in zip(columns, cells) if other in nic_name
        )
        values = _affinity_values(affinity_keys, rest) if rest is not None else {}
        for key, _words in _AFFINITY_COLUMNS:
            result[key][label] = values.get(key)
    if not rows:
        raise NvidiaSmiParseError("the topology matrix has no GPU rows")
    for label in gpus:
        # A GPU of the header without a row: its relations are unknown, not absent.
        if label not in result["matrix"]:
            result["matrix"][label] = dict((other, None) for other in gpus if other != label)
            result["gpu_nic"][label] = dict((nic_name[other], None) for other in nic_columns)
            for key, _words in _AFFINITY_COLUMNS:
                result[key][label] = None
    result["matrix"] = dict((label, result["matrix"][label]) for label in gpus)
    return result


def nvlink_summary(matrix):
    """Summarise the NVLink bonds of a topology matrix (as returned in ``parse_topology()['matrix']``).

    Returns ``pairs`` (GPU pairs known to be joined by NVLink), ``pair_list`` (``[["GPU0", "GPU1", 12], ...]``),
    ``max_links`` (widest known bond, 0 without NVLink), ``bond_widths`` (sorted distinct widths),
    ``complete`` (True when the relation of every GPU pair is known; where it is False the counts above are
    what is known, a lower bound) and ``all_to_all``: True when every GPU pair is joined by NVLink, False when
    a pair is known not to be (or for a single GPU), None when that cannot be told (a relation is unknown).
    """
    gpus = list(matrix)
    pair_list = []
    unknown = 0
    not_nvlink = 0
    for position, first in enumerate(gpus):
        for second in gpus[position + 1:]:
            relation = (matrix.get(first) or {}).get(second) or (matrix.get(second) or {}).get(first)
            match = _NVLINK_RELATION.match(relation or "")
            if match:
                pair_list.append([first, second, int(match.group(1))])
            elif relation is None or relation == "N/A":
                unknown += 1
            else:
                not_nvlink += 1
    widths = sorted(set(width for _a, _b, width in pair_list))
    if len(gpus) < 2 or not_nvlink:
        all_to_all = False
    elif unknown:
        all_to_all = None
    else:
        all_to_all = True
    return {
        "pairs": len(pair_list),
        "pair_list": pair_list,
        "max_links": max(widths) if widths else 0,
        "bond_widths": widths,
        "complete": not unknown,
        "all_to_all": all_to_all,
    }


# --- nvlink -s --------------------------------------------------------------------------------------------

_NVLINK_GPU = re.compile(r"^\s*GPU\s+(\d+)\s*:\s*(.*?)\s*(?:\(UUID:\s*([^)\s]*)\s*\))?\s*$")
_NVLINK_LINK = re.compile(r"^\s*Link\s+(\d+)\s*:\s*(.*?)\s*$")
_NVLINK_SPEED = re.compile(r"^([0-9]+(?:\.[0-9]+)?)\s*GB/s$")
# What nvidia-smi prints under a GPU whose links are all down, instead of its links: "NVML: Unable to retrieve
# NVLink information as all links are inActive" (also seen as "NVML:Unable to retrieve Nvlink ..."; e.g.
# https://github.com/NVIDIA/open-gpu-kernel-modules/issues/1150, Azure/azurehpc-health-checks pull 132).
_NVLINK_ALL_INACTIVE = re.compile(r"unable\s+to\s+retrieve\s+nvlink\s+information\s+as\s+all\s+links\s+are\s+inactive",
                                  re.I)


def parse_nvlink_status(text):
    """Parse ``nvidia-smi nvlink -s`` (or ``--status``).

    Returns ``{index: {"name", "uuid", "links": [{"link", "active", "speed_gbps"}], "all_inactive"}}`` keyed
    by GPU index (int). An inactive link has ``active: False`` and ``speed_gbps: None``; a link state that is
    neither a speed nor inactive has ``active: None``. ``all_inactive`` is True where nvidia-smi said that all
    links of the GPU are inactive instead of listing them (then ``links`` is empty: how many links the GPU has
    is not printed).

    GPUs without NVLink print nothing (and nvidia-smi exits 0): empty output gives ``{}``, no GPU with NVLink
    (https://github.com/canonical/checkbox/pull/431 relies on the same). A final line without its line end may
    have been cut: a GPU name there is not trusted.
    """
    lines = _clean_lines(text)
    if not any(line.strip() for line in lines):
        return {}
    unterminated = len(lines) - 1 if not text.endswith(("\n", "\r")) else None
    gpus = {}
    current = None
    for number, line in enumerate(lines):
        if not line.strip():
            continue
        match = _NVLINK_GPU.match(line)
        if match and not line[:1].isspace():
            index = int(match.group(1))
            current = {
                "name": (match.group(2) or None) if number != unterminated else None,
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
            elif state.strip().lower() == "<inactive>":
                link = {"link": int(match.group(1)), "active": False, "speed_gbps": None}
            else:
                link = {"link": int(match.group(1)), "active": None, "speed_gbps": None}
            current["links"].append(link)
            continue
        if _NVLINK_ALL_INACTIVE.search(line):
            if current is None or current["links"]:
                raise NvidiaSmiParseError("'all links are inactive' without the GPU it belongs to: %r" % line.strip())
            current["all_inactive"] = True
    if not gpus:
        raise NvidiaSmiParseError("no 'GPU <index>: <name>' line in the NVLink status")
    return gpus


# --- -q -x ------------------------------------------------------------------------------------------------
#
# Schemas seen (DTD named in the DOCTYPE; real captures under tests/unit/.../fixtures/nvidia-smi):
# * v10/v11 (drivers up to 515): <power_readings> with <power_draw>, <clocks_throttle_reasons>, ECC counters as
#   <dram_*>/<sram_*> or, on older GPUs, <single_bit>/<double_bit> with a <total>, <gpu_module_id>.
# * v12 (520 to 570): <gpu_power_readings>, <clocks_event_reasons> (535+), <gpu_module_id> (535) or
#   <platformInfo><module_id> (570), <gpu_reset_status> (deprecated text on 570), <instant_power_draw> and
#   <average_power_draw> (570).
# * v13 (575+): <sram_uncorrectable_parity> and <sram_uncorrectable_secded> instead of <sram_uncorrectable>,
#   <gpu_recovery_action>, <fabric> with more children.

_NUMBER_WITH_UNIT = re.compile(r"^\s*(-?[0-9]+(?:\.[0-9]+)?)\s*([A-Za-z%]+(?:\([a-z]\))?)?\s*$")
# Words nvidia-smi prints where it has no value (also in brackets): none of them is a value.
_NO_VALUE = (
    "n/a", "na", "not supported", "unknown error", "unknown", "not available", "insufficient permissions",
    "requested functionality has been deprecated", "gpu is lost", "gpu requires reset", "not found",
    "none",
)
_REASON_PREFIXES = ("clocks_event_reason_", "clocks_throttle_reason_")
# The SRAM uncorrectable counters of each schema (v13 splits the one counter in two).
_SRAM_UNCORRECTABLE = ("sram_uncorrectable", "sram_uncorrectable_parity", "sram_uncorrectable_secded")


def _text(element, path):
    """Stripped text at path, or None where absent, empty or a word that says there is no value."""
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    if not value or value.strip("[]").strip().lower() in _NO_VALUE:
        return None
    return value


def _int(value):
    """An integer as printed, with its unit if any ('16x', '19968 MiB', '42 C'); else None."""
    match = _NUMBER_WITH_UNIT.match(value or "")
    if not match or "." in match.group(1):
        return None
    return int(match.group(1))


def _float(value):
    match = _NUMBER_WITH_UNIT.match(value or "")
    return float(match.group(1)) if match else None


def _bool_mode(value):
    """'Enabled'/'Disabled' as True/False; anything else None."""
    return _bool_word(value, "enabled", "disabled")


def _yes_no(value):
    return _bool_word(value, "yes", "no")


def _bool_word(value, true, false):
    if value is None:
        return None
    lowered = value.strip().lower()
    if lowered == true:
        return True
    if lowered == false:
        return False
    return None


def _first(element, paths):
    for path in paths:
        value = _text(element, path)
        if value is not None:
            return value
    return None


def normalise_bus_id(value):
    """A PCI bus id as ``parse_query_xml`` gives it (``00000000:3B:00.0``: 8-digit domain, upper case), or None
    where ``value`` is not one (``0000:3b:00.0`` and ``3B:00.0`` are read; the domain then is 0)."""
    match = re.match(r"^\s*(?:([0-9A-Fa-f]{1,8}):)?([0-9A-Fa-f]{1,2}):([0-9A-Fa-f]{1,2})\.([0-7])\s*$", value or "")
    if not match:
        return None
    return "%08X:%02X:%02X.%s" % (int(match.group(1) or "0", 16), int(match.group(2), 16), int(match.group(3), 16),
                                  match.group(4))


def _power_draw(gpu):
    """The board's power draw as nvmlDeviceGetPowerUsage reads it, which DCGM exports as DCGM_FI_DEV_POWER_USAGE and
    nvidia-smi prints as ``<power_draw>`` (drivers before 570). Drivers from 570 print ``<average_power_draw>`` and
    ``<instant_power_draw>`` instead; nvml.h says which of them the call returns: "On Ampere (except GA100) or newer
    GPUs, the API returns power averaged over 1 sec interval. On GA100 and older architectures, instantaneous power
    is returned", and NVML_FI_DEV_POWER_AVERAGE is "supported on Ampere (except GA100) or newer". So the average
    where the GPU has one, else the instant reading."""
    return _float(_first(gpu, (
        "gpu_power_readings/power_draw",
        "power_readings/power_draw",
        "gpu_power_readings/average_power_draw",
        "gpu_power_readings/instant_power_draw",
    )))


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
        "pending": _yes_no(_text(pages, "pending_retirement")),
    }


def _counter_sum(counters, names):
    """The sum of the counters named that the element holds; None where one of them is unreadable or none is
    there (a sum with a part missing would be a wrong value)."""
    present = [counters.find(name) for name in names]
    present = [element for element in present if element is not None]
    if not present:
        return None
    total = 0
    for element in present:
        value = _int((element.text or "").strip()) if not list(element) else None
        if value is None:
            return None
        total += value
    return total


def _ecc_count(gpu, period, kind):
    """Uncorrectable (kind 'uncorrectable') or correctable ECC errors of a period ('volatile', 'aggregate'):
    DRAM plus every SRAM counter of the schema, or the old schema's double_bit (single_bit) total."""
    counters = gpu.find("ecc_errors/" + period)
    if counters is None:
        return None
    if kind == "uncorrectable":
        names = ("dram_uncorrectable",) + _SRAM_UNCORRECTABLE
        old = "double_bit/total"
    else:
        names = ("dram_correctable", "sram_correctable")
        old = "single_bit/total"
    if any(counters.find(name) is not None for name in names):
        return _counter_sum(counters, names)
    return _int(_text(counters, old))


def _clock_event_reasons(gpu):
    """Sorted names of the active clock event (throttle) reasons; [] when none is; None when not reported or
    when a reason's state cannot be read (the list would be incomplete)."""
    for container in ("clocks_event_reasons", "clocks_throttle_reasons"):
        element = gpu.find(container)
        if element is not None:
            break
    else:
        return None
    active = []
    seen = 0
    for child in element:
        prefix = [prefix for prefix in _REASON_PREFIXES if child.tag.startswith(prefix)]
        if not prefix:
            continue
        seen += 1
        state = (child.text or "").strip().lower()
        if state == "active":
            active.append(child.tag[len(prefix[0]):])
        elif state != "not active":
            return None
    return sorted(active) if seen else None


def _histogram(gpu):
    """<remapped_rows><row_remapper_histogram>: banks by spare rows left ("192 bank(s)", capture 65, driver 590), as
    nvml.row_remapper_histogram gives nvmlDeviceGetRowRemapperHistogram; None unless all five counts are printed."""
    element = gpu.find("remapped_rows/row_remapper_histogram")
    if element is None:
        return None
    values = [_int(_text(element, "row_remapper_histogram_" + name)) for name in ("max", "high", "partial", "low", "none")]
    return None if None in values else row_remapper_histogram(values)


def _repair_pending(gpu):
    """<ecc_errors><channel_repair_pending> and <tpc_repair_pending> (Yes/No, capture 65, driver 590), as
    nvmlDeviceGetRepairStatus reports them; None where neither is printed."""
    pending = {"channel": _yes_no(_text(gpu, "ecc_errors/channel_repair_pending")),
               "tpc": _yes_no(_text(gpu, "ecc_errors/tpc_repair_pending"))}
    return pending if any(value is not None for value in pending.values()) else None


# <fabric><health> (drivers from 570; capture 64 prints four children, capture 65 (590) six, all N/A on those PCIe
# GPUs). No capture with values was found: only words that can mean one thing are read (the names of nvml.h's
# NVML_GPU_FABRIC_HEALTH_SUMMARY_* and of its health mask comments), anything else is None.
_HEALTH_SUMMARIES = {"healthy": "Healthy", "unhealthy": "Unhealthy", "limited capacity": "Limited Capacity"}
_HEALTH_WORDS = {"yes": True, "true": True, "no": False, "false": False}
_CONFIGURATION_WORDS = (("sysguid", "incorrect_sysguid"), ("chassis", "incorrect_chassis_sn"),
                        ("partition", "no_partition"), ("nvlink", "insufficient_nvlinks"),
                        ("firmware", "incompatible_gpu_fw"), ("gpu_fw", "incompatible_gpu_fw"),
                        ("location", "invalid_location"), ("state", "gpu_state_invalid"))


def _fabric_health(gpu):
    """The fabric health as nvml.fabric_health gives it, from <fabric><health>; None where nothing is read."""
    element = gpu.find("fabric/health")
    if element is None:
        return None
    summary = (_text(element, "summary") or "").lower()
    bandwidth = (_text(element, "bandwidth") or "").lower()
    configuration = (_text(element, "incorrect_configuration") or "").lower().replace(" ", "_")
    incorrect = None
    if configuration in ("none", "no", "false") or configuration.startswith("correct"):
        incorrect = "none"
    elif configuration:
        incorrect = next((name for word, name in _CONFIGURATION_WORDS if word in configuration), None)
    health = {
        "summary": _HEALTH_SUMMARIES.get(summary),
        "degraded_bandwidth": True if bandwidth.startswith("degraded") else False if bandwidth in (
            "full", "not degraded") else None,
        "route_recovery_in_progress": _HEALTH_WORDS.get((_text(element, "route_recovery_in_progress") or "").lower()),
        "route_unhealthy": _HEALTH_WORDS.get((_text(element, "route_unhealthy") or "").lower()),
        "access_timeout_recovery": _HEALTH_WORDS.get((_text(element, "access_timeout_recovery") or "").lower()),
        "incorrect_configuration": incorrect,
        "partition_assigned": _HEALTH_WORDS.get((_text(element, "partition_assigned") or "").lower()),
    }
    return health if any(value is not None for value in health.values()) else None


def _remapped_rows(gpu):
    rows = gpu.find("remapped_rows")
    if rows is None or not list(rows):
        return None  # absent, or "N/A": no row remapping on this GPU
    result = {
        "correctable": _int(_text(rows, "remapped_row_corr")),
        "uncorrectable": _int(_text(rows, "remapped_row_unc")),
        "pending": _yes_no(_text(rows, "remapped_row_pending")),
        "failure": _yes_no(_text(rows, "remapped_row_failure")),
    }
    return result if any(value is not None for value in result.values()) else None


# The words nvidia-smi prints under <gpu_recovery_action> (570+) and Xid 154 names an action by, matched in this order
# to the names of nvmlDeviceGpuRecoveryAction_t (nvml.RECOVERY_ACTIONS). No capture with an action other than
# "None" was found: the words are NVIDIA's Xid catalog's ("GPU Reset Required", "Node Reboot Required", "Drain
# P2P", "Drain and Reset") and those of the enum.
_RECOVERY_ACTION_WORDS = ((("imex",), "recover_imex_domain"), (("drain", "p2p"), "drain_p2p"),
                          (("drain", "reset"), "drain_and_reset"), (("reboot",), "node_reboot"), (("reset",), "gpu_reset"))
# What the element holds where no action is reported.
_NO_ACTION_TEXTS = ("", "n/a", "not supported", "requested functionality has been deprecated", "unknown error")


def _recovery_action(gpu):
    """The driver's recovery action by nvml.RECOVERY_ACTIONS' names, from <gpu_recovery_action>; words this does not
    know are "unknown (<words>)", still an action the driver asks for; None where the element is absent or N/A."""
    action = gpu.find("gpu_recovery_action")
    text = " ".join((action.text or "").split()) if action is not None else ""
    words = text.lower()
    if words in _NO_ACTION_TEXTS:
        return None
    if words == "none":
        return "none"
    for needed, name in _RECOVERY_ACTION_WORDS:
        if all(word in words for word in needed):
            return name
    return "unknown (%s)" % text


def _reset_status(gpu, recovery_action):
    """``(reset_required, drain_and_reset_recommended)``: the recovery action answers first where it says so for
    sure (nvml.reset_status); <gpu_reset_status> (Yes/No; drivers from 570 print "Requested functionality has been
    deprecated" there) answers what it leaves open."""
    return reset_status(_yes_no(_text(gpu, "gpu_reset_status/reset_required")),
                        _yes_no(_text(gpu, "gpu_reset_status/drain_and_reset_recommended")), recovery_action)


def _module_id(gpu):
    """The module id (SXM/OAM slot, 1-based) from <platformInfo><module_id> (570+) or <gpu_module_id> (535).

    Drivers before 570 print 0 for a board without modules (a PCIe card: T4, A10G, GT 1030 captures) where
    570+ prints 1 for the same kind of card: 0 is no module id, so None.
    """
    value = _int(_first(gpu, ("platformInfo/module_id", "gpu_module_id", "module_id")))
    return value if value else None


def _temperature(gpu):
    """GPU temperature in degrees C; None where not printed. A vGPU guest prints "0 C" (GRID P4-1Q capture),
    which no running GPU reads: None."""
    value = _int(_text(gpu, "temperature/gpu_temp"))
    return value if value else None


def _gpu(index, gpu):
    pci = gpu.find("pci")
    link = pci.find("pci_gpu_link_info") if pci is not None else None
    mig = gpu.find("mig_devices")
    recovery_action = _recovery_action(gpu)
    reset_required, drain_and_reset = _reset_status(gpu, recovery_action)
    bus_id = _text(pci, "pci_bus_id") or gpu.get("id")
    return {
        "index": index,
        "name": _text(gpu, "product_name"),
        "uuid": _text(gpu, "uuid"),
        "serial": _text(gpu, "serial"),
        "pci_bus_id": normalise_bus_id(bus_id) or bus_id,
        "minor_number": _int(_text(gpu, "minor_number")),
        "module_id": _module_id(gpu),
        "architecture": _text(gpu, "product_architecture"),
        "compute_capability": None,  # not printed by nvidia-smi: NVML only
        "compute_mode": _text(gpu, "compute_mode"),
        "memory_total_mib": _int(_text(gpu, "fb_memory_usage/total")),
        # As NVML's nvmlMemory_v2_t, which DCGM reads from driver 510: used (allocated) without the memory the driver
        # and firmware reserve, printed apart as <reserved> (drivers from 510; absent before, as in captures 67, 69).
        "memory_used_mib": _int(_text(gpu, "fb_memory_usage/used")),
        "memory_reserved_mib": _int(_text(gpu, "fb_memory_usage/reserved")),
        "memory_free_mib": _int(_text(gpu, "fb_memory_usage/free")),
        "utilization_gpu_pct": _int(_text(gpu, "utilization/gpu_util")),
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
        "ecc_errors_uncorrected_volatile": _ecc_count(gpu, "volatile", "uncorrectable"),
        "ecc_errors_uncorrected_aggregate": _ecc_count(gpu, "aggregate", "uncorrectable"),
        "ecc_errors_corrected_volatile": _ecc_count(gpu, "volatile", "correctable"),
        "retired_pages": _retired_pages(gpu),
        "remapped_rows": _remapped_rows(gpu),
        "row_remapper_histogram": _histogram(gpu),
        # <sram_threshold_exceeded> (drivers from 555): NVIDIA's field diagnostic threshold of SRAM errors is exceeded
        "sram_threshold_exceeded": _yes_no(_text(gpu, "ecc_errors/aggregate/sram_threshold_exceeded")),
        "repair_pending": _repair_pending(gpu),
        "recovery_action": recovery_action,
        "reset_required": reset_required,
        "drain_and_reset_recommended": drain_and_reset,
        "fabric": {"state": _text(gpu, "fabric/state"), "status": _text(gpu, "fabric/status"),
                   "health": _fabric_health(gpu)},
        "pcie": {
            "gen_current": _int(_text(link, "pcie_gen/current_link_gen")),
            "gen_max": _int(_text(link, "pcie_gen/max_link_gen")),
            "width_current": _int(_text(link, "link_widths/current_link_width")),
            "width_max": _int(_text(link, "link_widths/max_link_width")),
            "replay_counter": _int(_text(pci, "replay_counter")),
        },
        "temperature_c": _temperature(gpu),
        "power_draw_w": _power_draw(gpu),
        # Drivers from 570 (capture 64): NVML_FI_DEV_POWER_AVERAGE (185) and NVML_FI_DEV_POWER_INSTANT (186). Not
        # <gpu_memory_power_readings> or <module_power_readings>, which hold the same names for other scopes.
        "power_draw_average_w": _float(_text(gpu, "gpu_power_readings/average_power_draw")),
        "power_draw_instant_w": _float(_text(gpu, "gpu_power_readings/instant_power_draw")),
        "power_limit_w": _float(_first(gpu, (
            "gpu_power_readings/current_power_limit",
            "gpu_power_readings/enforced_power_limit",
            "power_readings/enforced_power_limit",
            "power_readings/power_limit",
        ))),
        "clock_event_reasons_active": _clock_event_reasons(gpu),
        "vbios_version": _text(gpu, "vbios_version"),
    }


def parse_query_xml(text):
    """Parse ``nvidia-smi -q -x``.

    Returns ``driver_version``, ``cuda_version`` (the CUDA version the driver supports), ``attached_gpus``
    (as the document states it; it may differ from the GPUs listed) and ``gpus``: one dict per ``<gpu>``
    element in document order, with the keys of ``gpu.devices`` (``index`` is the position). Every value that
    is absent, "N/A", "Not Supported", an error text or not of the expected form is None.
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


# --- errors (the states are nvml_constants.ERROR_STATES, shared with the NVML backend) ---------------------

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
# "Unable to determine the device handle for GPU 0000:3B:00.0: GPU is lost.  Reboot the system to recover this
# GPU" (fixtures 42-error-gpu-lost, from https://github.com/marian-nmt/marian/issues/251).
_LOST_GPU = re.compile(
    r"unable\s+to\s+determine\s+the\s+device\s+handle\s+for\s+gpu\s*([0-9a-f]{0,8}:?[0-9a-f]{1,2}:[0-9a-f]{1,2}\.[0-7])"
    r"\s*:\s*gpu\s+is\s+lost", re.I)
# The longest message classify_error returns.
MESSAGE_LIMIT = 300


def _shorten(message):
    return message if len(message) <= MESSAGE_LIMIT else message[:MESSAGE_LIMIT - 3].rstrip() + "..."


def _meaningful_lines(text):
    """Lines with words in them: not blank, not table rules, not XML declarations."""
    for line in _ANSI.sub("", text).replace("\r", "\n").split("\n"):
        stripped = line.strip()
        if not re.search(r"[A-Za-z]{2}", stripped) or stripped.startswith(("<?xml", "<!DOCTYPE")):
            continue
        yield " ".join(stripped.split())


def classify_error(text):
    """Classify what a failing nvidia-smi printed: ``(state, message)``.

    ``state`` is one of ``ERROR_STATES``; ``message`` is the explaining text on one line (wrapped lines
    joined, whitespace collapsed, at most ``MESSAGE_LIMIT`` characters). Where a known failure is named, the
    message is the whole text when that is short, else the text from the line that names it; text that names
    no known failure gives ``error`` and its first meaningful line, not all the output.
    """
    if not isinstance(text, str):
        raise NvidiaSmiParseError("expected text, got %s" % type(text).__name__)
    message = " ".join(_ANSI.sub("", text).split())
    for state, pattern in _ERROR_PATTERNS:
        if pattern.search(message):
            if len(message) > MESSAGE_LIMIT:
                lines = list(_meaningful_lines(text))
                start = [number for number, line in enumerate(lines) if pattern.search(line)]
                message = " ".join(lines[start[0]:] if start else lines)
            return state, _shorten(message)
    first = next(_meaningful_lines(text), None)
    return "error", _shorten(first) if first else "nvidia-smi failed and printed nothing"


def lost_gpus(text):
    """PCI bus ids of the GPUs nvidia-smi names as lost ("Unable to determine the device handle for GPU
    0000:3B:00.0: GPU is lost"), normalised like ``pci_bus_id`` of ``parse_query_xml`` (``00000000:3B:00.0``),
    sorted, each once. Text that names none gives []."""
    if not isinstance(text, str):
        return []
    found = set()
    for match in _LOST_GPU.finditer(" ".join(_ANSI.sub("", text).split())):
        bus_id = normalise_bus_id(match.group(1))
        if bus_id:
            found.add(bus_id)
    return sorted(found)


def nvml_library_version(text):
    """The 'NVML library version: X' newer drivers print after a mismatch, or None."""
    match = _NVML_LIBRARY_VERSION.search(text or "")
    return match.group(1) if match else None
