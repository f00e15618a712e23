"""The parser of nccl-tests' all_reduce_perf output: over the stand-in's output (the real format), a capture with
wrong values, and text it cannot read."""
import pathlib
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils.nccl_tests import (
    NcclTestsParseError, parse_all_reduce_perf)

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE / "fixtures" / "nccl-tests"
STANDIN = HERE.parents[3] / "tests" / "mirror" / "nccl-tests-standin" / "src" / "all_reduce_perf.py"


def wrong_capture():
    return (FIXTURES / "all_reduce_perf-4gpu-wrong.txt").read_text(encoding="utf-8")


def test_parse_the_stand_in_output():
    """The stand-in the nccl scenario builds prints the real format; the parser reads every row of it."""
    text = subprocess.run([sys.executable, str(STANDIN), "-b", "8", "-e", "128M", "-f", "2", "-g", "8"],
                          check=True, capture_output=True, text=True).stdout
    result = parse_all_reduce_perf(text)
    assert len(result["rows"]) == 25                       # 8 B .. 128 MiB, factor 2
    assert result["largest_size_bytes"] == 134217728
    assert result["rows"][-1]["out_of_place"]["busbw_gbps"] == result["peak_busbw_gbps"]
    assert [r["rank"] for r in result["ranks"]] == list(range(8))
    assert result["ranks"][0]["bus"] == "0x07"
    assert result["wrong"] == 0
    assert 0 < result["avg_busbw_gbps"] < result["peak_busbw_gbps"]


def test_the_whole_structure():
    """Other code (the nccl role, its Molecule scenario) reads these keys: the structure is an interface."""
    result = parse_all_reduce_perf(wrong_capture())
    assert sorted(result) == ["avg_busbw_gbps", "largest_size_bytes", "peak_busbw_gbps", "ranks", "rows", "wrong"]
    assert result["rows"][0] == {
        "size_bytes": 33554432, "count": 8388608, "type": "float", "redop": "sum",
        "out_of_place": {"time_us": 312.4, "algbw_gbps": 107.41, "busbw_gbps": 161.11, "wrong": 0},
        "in_place": {"time_us": 311.9, "algbw_gbps": 107.58, "busbw_gbps": 161.37, "wrong": 0},
    }
    assert [row["size_bytes"] for row in result["rows"]] == [33554432, 67108864, 134217728]
    assert result["ranks"] == [{"rank": rank, "device": rank, "bus": bus, "name": "NVIDIA A100-SXM4-80GB"}
                               for rank, bus in enumerate(["0x07", "0x0a", "0x44", "0x4a"])]


def test_wrong_values_and_in_place_peak():
    result = parse_all_reduce_perf(wrong_capture())
    assert result["wrong"] == 4                             # 3 out of place at 64 MiB, 1 in place at 128 MiB
    assert result["rows"][1]["out_of_place"]["wrong"] == 3
    assert result["peak_busbw_gbps"] == 176.64              # in-place beat out-of-place at 128 MiB
    assert result["avg_busbw_gbps"] == 169.805


def test_the_largest_size_wherever_it_is_printed():
    lines = wrong_capture().splitlines()
    rows = [i for i, line in enumerate(lines) if line[:1] == " "]
    lines[rows[0]], lines[rows[-1]] = lines[rows[-1]], lines[rows[0]]
    result = parse_all_reduce_perf("\n".join(lines))
    assert result["largest_size_bytes"] == 134217728
    assert result["peak_busbw_gbps"] == 176.64


@pytest.mark.parametrize("text", [
    pytest.param("", id="empty"),
    pytest.param("NCCL failure common.cu:1000 'unhandled cuda error'\n", id="nccl-error"),
    pytest.param("\n".join(line for line in wrong_capture().splitlines() if "Avg bus bandwidth" not in line),
                 id="no-average"),
    pytest.param("\n".join(line for line in wrong_capture().splitlines() if line.startswith("#")), id="no-rows"),
    pytest.param(wrong_capture().replace("312.4", "31.2.4").replace("587.2", "58.7.2").replace("1140.7", "11.40.7"),
                 id="malformed-numbers"),
])
def test_text_it_cannot_read_is_a_parse_error(text):
    with pytest.raises(NcclTestsParseError, match="no result table or no 'Avg bus bandwidth' line"):
        parse_all_reduce_perf(text)


def test_the_error_quotes_the_last_line():
    with pytest.raises(NcclTestsParseError, match="unhandled cuda error"):
        parse_all_reduce_perf("# nThread 1 nGpus 8\nNCCL failure common.cu:1000 'unhandled cuda error'\n")


@pytest.mark.parametrize("value", [None, b"# Avg bus bandwidth : 1.0", ["a", "b"]])
def test_not_text_is_a_parse_error(value):
    with pytest.raises(NcclTestsParseError, match="expected the text all_reduce_perf printed"):
        parse_all_reduce_perf(value)


def test_the_error_is_a_value_error():
    """Callers outside Ansible can catch ValueError."""
    assert issubclass(NcclTestsParseError, ValueError)
