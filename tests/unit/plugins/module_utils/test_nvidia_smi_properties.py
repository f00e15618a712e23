"""Property-based tests: every parser, fed random text and mutated real output, either returns plain data
or raises NvidiaSmiParseError; no other exception escapes."""
import json
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
