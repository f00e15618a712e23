"""Property-based tests: every parser, fed random text and mutated real output, either returns plain data
or raises NvidiaSmiParseError; no other exception escapes."""
import json
import re
import pathlib

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_smi
from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import NvidiaSmiParseError

FIXTURES = pathlib.Path(__file__).parent / "fixtures" / "nvidia-smi"
CAPTURES = sorted(
    path.read_text(encoding="utf-8")
    for pattern in ("*/topo-m*.txt", "*/nvlink-s.txt", "*/q-x.xml", "*/error.txt", "*/L.txt", "*/query-gpu.csv")
    for path in FIXTURES.glob(pattern)
)
PARSERS = [
    nvidia_smi.parse_topology,
    nvidia_smi.parse_nvlink_status,
    nvidia_smi.parse_query_xml,
    nvidia_smi.parse_gpu_list,
    nvidia_smi.parse_query_gpu_csv,
]
# Characters real output is made of, plus the ones that break naive parsers.
TOKENS = st.sampled_from(list("GPUNVX0123456789 \t\n:-,/<>()=.#\r") + ["\x1b[1m", "\x1b[0m", "NV12", "GPU", "Link",
                                                                       "<inactive>", "N/A", "SOC", "mlx5_0"])


def output_text(max_size):
    """Text made of the characters and tokens of real nvidia-smi output."""
    return st.lists(TOKENS, max_size=max_size).map("".join)


def is_plain(value):
    """JSON-compatible data (with int keys allowed): what Ansible can return as facts."""
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


def check_all_parsers(text):
    for parser in PARSERS:
        try:
            result = parser(text)
        except NvidiaSmiParseError:
            continue
        assert is_plain(result), parser.__name__
    state, message = nvidia_smi.classify_error(text)
    assert state in nvidia_smi.ERROR_STATES
    assert isinstance(message, str)


@st.composite
def mutated_capture(draw):
    """A real capture with random edits: deleted, duplicated or swapped lines, cut short, characters changed."""
    lines = draw(st.sampled_from(CAPTURES)).split("\n")
    for _edit in range(draw(st.integers(0, 6))):
        if not lines:
            break
        position = draw(st.integers(0, len(lines) - 1))
        action = draw(st.sampled_from(["delete", "duplicate", "swap", "truncate", "edit", "merge", "insert"]))
        if action == "delete":
            del lines[position]
        elif action == "duplicate":
            lines.insert(position, lines[position])
        elif action == "swap":
            other = draw(st.integers(0, len(lines) - 1))
            lines[position], lines[other] = lines[other], lines[position]
        elif action == "truncate":
            lines = lines[:position]
        elif action == "merge" and position + 1 < len(lines):
            lines[position:position + 2] = [lines[position] + lines[position + 1]]
        elif action == "insert":
            lines.insert(position, draw(output_text(40)))
        else:
            line = lines[position]
            cut = draw(st.integers(0, len(line)))
            lines[position] = line[:cut] + draw(output_text(8)) + line[cut + 1:]
    return "\n".join(lines)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_capture())
def test_mutated_real_output(text):
    check_all_parsers(text)


@settings(max_examples=300, deadline=None)
@given(output_text(400))
def test_random_text_from_the_output_alphabet(text):
    check_all_parsers(text)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200))
def test_random_unicode(text):
    check_all_parsers(text)


@settings(max_examples=100, deadline=None)
@given(st.one_of(st.none(), st.integers(), st.binary(max_size=20), st.lists(st.text(max_size=5), max_size=3)))
def test_non_text_input(value):
    for parser in PARSERS + [nvidia_smi.classify_error]:
        try:
            parser(value)
        except NvidiaSmiParseError:
            pass


# --- "never wrong, at worst None": generated machines, their output as nvidia-smi prints it, then glued, cut
# short or partial. Every value a parser returns equals the generated machine's or is None.

RELATIONS = ["PIX", "PXB", "PHB", "NODE", "SYS"] + ["NV%d" % width for width in (1, 2, 4, 6, 12, 18)]
AFFINITY_SETS = [("cpu_affinity",), ("cpu_affinity", "numa_affinity"), ("cpu_affinity", "numa_affinity", "gpu_numa_id")]
AFFINITY_HEADER = {"cpu_affinity": "CPU Affinity", "numa_affinity": "NUMA Affinity", "gpu_numa_id": "GPU NUMA ID"}
CPU_LISTS = ["0-31", "32-63", "0-47,96-143", "48-95,144-191", "0,2,4,6", "N/A"]


@st.composite
def topology_machine(draw):
    gpus = ["GPU%d" % index for index in range(draw(st.integers(1, 8)))]
    nic_count = draw(st.integers(0, 4))
    with_legend = draw(st.booleans())
    columns = ["NIC%d" % index if with_legend else "mlx5_%d" % index for index in range(nic_count)]
    names = dict((column, "mlx5_%d" % index) for index, column in enumerate(columns))
    relation = {}
    for position, first in enumerate(gpus):
        for second in gpus[position + 1:]:
            relation[first, second] = relation[second, first] = draw(st.sampled_from(RELATIONS))
        for column in columns:
            relation[first, column] = draw(st.sampled_from(RELATIONS[:5]))
    affinity = draw(st.sampled_from(AFFINITY_SETS))
    values = {}
    for gpu in gpus:
        values[gpu] = {
            "cpu_affinity": draw(st.sampled_from(CPU_LISTS)),
            "numa_affinity": draw(st.sampled_from(["0", "1", "3", "N/A"])),
            "gpu_numa_id": draw(st.sampled_from(["N/A", "4", "12"])),
        }
    return {"gpus": gpus, "columns": columns, "names": names, "relation": relation, "affinity": affinity,
            "values": values, "legend": with_legend}


def render_topology(machine):
    """The matrix as nvidia-smi prints it: tab separated, ' X ' on the diagonal, a Legend and a NIC Legend."""
    devices = machine["gpus"] + machine["columns"]
    lines = ["\t" + "\t".join(devices + [AFFINITY_HEADER[key] for key in machine["affinity"]])]
    for gpu in machine["gpus"]:
        cells = [" X " if other == gpu else machine["relation"][gpu, other] for other in devices]
        lines.append("\t".join([gpu] + cells + [machine["values"][gpu][key] for key in machine["affinity"]]))
    for column in machine["columns"]:
        cells = [machine["relation"][gpu, column] for gpu in machine["gpus"]]
        cells += [" X " if other == column else "SYS" for other in machine["columns"]]
        lines.append("\t".join([column] + cells))
    lines += ["", "Legend:", "", "  X    = Self", "  NV#  = Connection traversing a bonded set of # NVLinks"]
    if machine["legend"] and machine["columns"]:
        lines += ["", "NIC Legend:", ""] + ["  %s: %s" % (column, machine["names"][column]) for column in machine["columns"]]
    return "\n".join(lines) + "\n"


@st.composite
def damaged(draw, text, partial_lines=None, glue_lines=None):
    """Text glued (the space between two words of a line taken out), cut short, or with lines missing (those
    ``partial_lines`` allows; glue only in lines ``glue_lines`` allows)."""
    lines = text.split("\n")
    for _edit in range(draw(st.integers(0, 3))):
        kind = draw(st.sampled_from(["glue", "glue", "drop", "cut"]))
        position = draw(st.integers(0, len(lines) - 1))
        if kind == "glue":
            gaps = list(re.finditer(r"(?<=\S)\s+(?=\S)", lines[position]))
            if gaps and (glue_lines is None or glue_lines(lines[position])):
                gap = draw(st.sampled_from(gaps))
                lines[position] = lines[position][:gap.start()] + lines[position][gap.end():]
        elif kind == "drop" and (partial_lines is None or partial_lines(lines[position])):
            del lines[position]
            if not lines:
                return ""
        elif kind == "cut":
            joined = "\n".join(lines)
            return joined[:draw(st.integers(0, len(joined)))]
    return "\n".join(lines)


@st.composite
def damaged_topology(draw):
    machine = draw(topology_machine())
    return machine, draw(damaged(render_topology(machine)))


def is_known(truth, value):
    return value is None or value == truth


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(damaged_topology())
def test_topology_is_never_wrong(case):
    machine, text = case
    try:
        topology = nvidia_smi.parse_topology(text)
    except NvidiaSmiParseError:
        return
    gpus = machine["gpus"]
    assert topology["gpus"] == gpus[:len(topology["gpus"])]
    for first, row in topology["matrix"].items():
        for second, relation in row.items():
            assert is_known(machine["relation"][first, second], relation), (first, second)
    by_name = dict((machine["names"][column], column) for column in machine["columns"])
    by_name.update((column, column) for column in machine["columns"])
    for nic in topology["nics"]:
        assert nic in by_name, nic
    for gpu, row in topology["gpu_nic"].items():
        for nic, relation in row.items():
            assert is_known(machine["relation"][gpu, by_name[nic]], relation), (gpu, nic)
    for key in ("cpu_affinity", "numa_affinity", "gpu_numa_id"):
        for gpu, value in topology[key].items():
            assert value is None or (key in machine["affinity"] and value == machine["values"][gpu][key]), (gpu, key)
    summary = nvidia_smi.nvlink_summary(topology["matrix"])
    listed = topology["gpus"]
    truth_pairs = [[a, b, int(machine["relation"][a, b][2:])] for position, a in enumerate(listed)
                   for b in listed[position + 1:] if machine["relation"][a, b].startswith("NV")]
    assert all(pair in truth_pairs for pair in summary["pair_list"])
    if summary["complete"]:
        assert summary["pair_list"] == truth_pairs
    truth_all = len(listed) > 1 and len(truth_pairs) == len(listed) * (len(listed) - 1) // 2
    assert is_known(truth_all, summary["all_to_all"])


@st.composite
def nvlink_machine(draw):
    gpus = []
    for index in range(draw(st.integers(1, 8))):
        state = draw(st.sampled_from(["links", "links", "all_inactive"]))
        links = [draw(st.sampled_from([None, 25.781, 26.562, 50.0])) for _link in range(draw(st.integers(1, 18)))]
        name = draw(st.sampled_from(["NVIDIA A100-SXM4-80GB", "NVIDIA H100 80GB HBM3", "Tesla V100-SXM2-32GB"]))
        gpus.append({"index": index, "name": name,
                     "uuid": "GPU-%08x-0000" % draw(st.integers(0, 2 ** 32 - 1)),
                     "all_inactive": state == "all_inactive", "links": [] if state == "all_inactive" else links})
    return gpus


def render_nvlink(gpus):
    lines = []
    for gpu in gpus:
        lines.append("GPU %d: %s (UUID: %s)" % (gpu["index"], gpu["name"], gpu["uuid"]))
        if gpu["all_inactive"]:
            lines.append("\t NVML: Unable to retrieve NVLink information as all links are inActive")
        for number, speed in enumerate(gpu["links"]):
            lines.append("\t Link %d: %s" % (number, "<inactive>" if speed is None else "%s GB/s" % speed))
    return "\n".join(lines) + "\n"


@st.composite
def damaged_nvlink(draw):
    gpus = draw(nvlink_machine())
    # Partial: whole GPUs missing (their header and their lines), then glued or cut short.
    shown = [gpu for gpu in gpus if draw(st.booleans()) or gpu is gpus[0]]
    # A GPU's name is free text: one with a space taken out is another name, which nothing could tell apart.
    return gpus, draw(damaged(render_nvlink(shown), partial_lines=lambda line: False,
                              glue_lines=lambda line: not line.startswith("GPU")))


@settings(max_examples=300, deadline=None)
@given(damaged_nvlink())
def test_nvlink_status_is_never_wrong(case):
    gpus, text = case
    try:
        status = nvidia_smi.parse_nvlink_status(text)
    except NvidiaSmiParseError:
        return
    for index, entry in status.items():
        truth = gpus[index]
        assert is_known(truth["name"], entry["name"])
        assert is_known(truth["uuid"], entry["uuid"])
        assert entry["all_inactive"] is False or truth["all_inactive"]
        for link in entry["links"]:
            speed = truth["links"][link["link"]]
            assert is_known(speed is not None, link["active"])
            assert is_known(speed, link["speed_gbps"])


XML_SCHEMAS = ("v11", "v12-535", "v12-570", "v13")
REASONS = ("gpu_idle", "sw_power_cap", "hw_slowdown", "sw_thermal_slowdown")
NO_VALUES = ["N/A", "[N/A]", "Not Supported", "[Unknown Error]", "Unknown Error"]


@st.composite
def xml_machine(draw):
    schema = draw(st.sampled_from(XML_SCHEMAS))
    gpus = []
    for index in range(draw(st.integers(1, 4))):
        gpus.append({
            "bus_id": "00000000:%02X:00.0" % (index * 16 + 7),
            "uuid": "GPU-%04d" % index,
            "module_id": index + 1,
            "temperature_c": draw(st.integers(20, 95)),
            "power_draw_w": draw(st.sampled_from([61.5, 300.25, 699.0])),
            "average_w": draw(st.sampled_from([60.0, 298.5])),
            "dram": draw(st.integers(0, 3)), "sram": draw(st.integers(0, 3)), "secded": draw(st.integers(0, 3)),
            "reasons": sorted(draw(st.sets(st.sampled_from(REASONS)))),
            "pending": draw(st.booleans()),
            "replay": draw(st.integers(0, 1000)),
        })
    blank = draw(st.sets(st.sampled_from(["temperature_c", "power_draw_w", "dram", "sram", "reasons", "pending",
                                          "replay", "module_id"])))
    return schema, gpus, blank, draw(st.sampled_from(NO_VALUES))


def render_xml(schema, gpus, blank, no_value):
    def value(gpu, key, text):
        return no_value if key in blank else text
    reasons_tag = "clocks_throttle_reasons" if schema == "v11" else "clocks_event_reasons"
    prefix = "clocks_throttle_reason_" if schema == "v11" else "clocks_event_reason_"
    parts = ['<?xml version="1.0" ?>\n<nvidia_smi_log>\n<driver_version>550.54.15</driver_version>',
             "<attached_gpus>%d</attached_gpus>" % len(gpus)]
    for gpu in gpus:
        module = value(gpu, "module_id", str(gpu["module_id"]))
        states = dict((name, "Active" if name in gpu["reasons"] else "Not Active") for name in REASONS)
        reasons = "".join("<%s%s>%s</%s%s>" % (prefix, name, value(gpu, "reasons", states[name]), prefix, name)
                          for name in REASONS)
        if schema == "v13":
            sram = "<sram_uncorrectable_parity>%s</sram_uncorrectable_parity><sram_uncorrectable_secded>%s" \
                   "</sram_uncorrectable_secded>" % (value(gpu, "sram", str(gpu["sram"])), gpu["secded"])
        else:
            sram = "<sram_uncorrectable>%s</sram_uncorrectable>" % value(gpu, "sram", str(gpu["sram"]))
        power = "%.2f W" % gpu["power_draw_w"]
        if schema in ("v12-570", "v13"):
            power_block = "<gpu_power_readings><average_power_draw>%.2f W</average_power_draw><instant_power_draw>%s" \
                          "</instant_power_draw></gpu_power_readings>" % (gpu["average_w"], value(gpu, "power_draw_w", power))
        elif schema == "v12-535":
            power_block = "<gpu_power_readings><power_draw>%s</power_draw></gpu_power_readings>" % value(
                gpu, "power_draw_w", power)
        else:
            power_block = "<power_readings><power_draw>%s</power_draw></power_readings>" % value(
                gpu, "power_draw_w", power)
        module_block = ("<gpu_module_id>%s</gpu_module_id>" % module if schema in ("v11", "v12-535")
                        else "<platformInfo><module_id>%s</module_id></platformInfo>" % module)
        parts.append(
            '<gpu id="%s"><uuid>%s</uuid>%s<pci><pci_bus_id>%s</pci_bus_id><replay_counter>%s</replay_counter></pci>'
            "<%s>%s</%s><ecc_errors><volatile><dram_uncorrectable>%s</dram_uncorrectable>%s</volatile></ecc_errors>"
            "<remapped_rows><remapped_row_corr>0</remapped_row_corr><remapped_row_unc>0</remapped_row_unc>"
            "<remapped_row_pending>%s</remapped_row_pending><remapped_row_failure>No</remapped_row_failure>"
            "</remapped_rows><temperature><gpu_temp>%s</gpu_temp></temperature>%s</gpu>" % (
                gpu["bus_id"], gpu["uuid"], module_block, gpu["bus_id"], value(gpu, "replay", str(gpu["replay"])),
                reasons_tag, reasons, reasons_tag, value(gpu, "dram", str(gpu["dram"])), sram,
                value(gpu, "pending", "Yes" if gpu["pending"] else "No"),
                value(gpu, "temperature_c", "%d C" % gpu["temperature_c"]), power_block))
    parts.append("</nvidia_smi_log>\n")
    return "\n".join(parts)


@st.composite
def damaged_xml(draw):
    schema, gpus, blank, no_value = draw(xml_machine())
    # Partial: a lost GPU is missing from the document.
    shown = [gpu for gpu in gpus if draw(st.booleans()) or gpu is gpus[0]]
    text = render_xml(schema, shown, blank, no_value)
    if draw(st.booleans()):
        text = text[:draw(st.integers(0, len(text)))]
    return gpus, text


@settings(max_examples=300, deadline=None)
@given(damaged_xml())
def test_query_xml_is_never_wrong(case):
    gpus, text = case
    try:
        query = nvidia_smi.parse_query_xml(text)
    except NvidiaSmiParseError:
        return
    by_bus = dict((gpu["bus_id"], gpu) for gpu in gpus)
    for parsed in query["gpus"]:
        truth = by_bus[parsed["pci_bus_id"]]
        assert is_known(truth["uuid"], parsed["uuid"])
        assert is_known(truth["module_id"], parsed["module_id"])
        assert is_known(truth["temperature_c"], parsed["temperature_c"])
        # nvmlDeviceGetPowerUsage's reading: <power_draw> where printed; from 570 the average, the instant apart.
        if "<average_power_draw>" in text:
            assert parsed["power_draw_w"] == parsed["power_draw_average_w"] == truth["average_w"]
            assert is_known(truth["power_draw_w"], parsed["power_draw_instant_w"])
        else:
            assert is_known(truth["power_draw_w"], parsed["power_draw_w"])
            assert parsed["power_draw_average_w"] is None and parsed["power_draw_instant_w"] is None
        assert is_known(truth["dram"] + truth["sram"] + (truth["secded"] if "secded" in text else 0),
                        parsed["ecc_errors_uncorrected_volatile"])
        assert is_known(truth["reasons"], parsed["clock_event_reasons_active"])
        assert is_known(truth["replay"], parsed["pcie"]["replay_counter"])
        if parsed["remapped_rows"] is not None:
            assert is_known(truth["pending"], parsed["remapped_rows"]["pending"])
