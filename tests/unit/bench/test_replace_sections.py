"""tools/bench/replace_sections.py: tools/bench.sh run on a subset replaces only those sections of
docs/benchmarks.md, matched by their heading up to its details, and keeps the rest byte for byte."""
import importlib.util
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
_SPEC = importlib.util.spec_from_file_location("replace_sections", ROOT / "tools" / "bench" / "replace_sections.py")
replace_sections = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(replace_sections)

DOC = """# Benchmarks

Written by make bench.

## gpu_facts

parsers: 2 ms

## site.yml on one node (emulated 8-GPU node)

no-op: 50 s

## Fact gathering and the fleet report at scale

500 hosts: 195 s
"""


def test_a_section_is_replaced_and_the_others_kept():
    new = "## Fact gathering and the fleet report at scale\n\n500 hosts: 90 s\n\nThis section: today.\n"
    out = replace_sections.replace(DOC, [new])
    assert out == DOC.replace("500 hosts: 195 s\n", "500 hosts: 90 s\n\nThis section: today.\n")


def test_headings_match_up_to_their_details():
    new = "## site.yml on one node (an H100 node: other details)\n\nno-op: 30 s\n"
    out = replace_sections.replace(DOC, [new])
    assert "## site.yml on one node (an H100 node: other details)\n\nno-op: 30 s\n" in out
    assert "no-op: 50 s" not in out and out.count("## ") == 3 and out.startswith("# Benchmarks\n\nWritten by")


def test_a_new_section_is_appended():
    out = replace_sections.replace(DOC, ["## Something new\n\nfigures\n"])
    assert out == DOC + "\n## Something new\n\nfigures\n"


@pytest.mark.parametrize("bad", ["no heading\n", "## one\n\n## two\n", "text\n## one\n"])
def test_a_section_file_holds_one_section(bad):
    with pytest.raises(ValueError):
        replace_sections.replace(DOC, [bad])


def test_the_real_document_keeps_its_sections(tmp_path):
    doc = tmp_path / "benchmarks.md"
    doc.write_text((ROOT / "docs" / "benchmarks.md").read_text())
    section = tmp_path / "fleet.md"
    section.write_text("## Fact gathering and the fleet report at scale\n\nnew figures\n")
    assert replace_sections.main([str(doc), str(tmp_path / "fleet"), "--suffix", ".md"]) == 0
    text = doc.read_text()
    before = (ROOT / "docs" / "benchmarks.md").read_text()
    assert "## Fact gathering and the fleet report at scale\n\nnew figures\n\n## " in text or \
        text.endswith("## Fact gathering and the fleet report at scale\n\nnew figures\n")
    # Every other section is kept, in its place, byte for byte.
    headings = [line for line in before.splitlines() if line.startswith("## ")]
    assert [line for line in text.splitlines() if line.startswith("## ")] == headings
    for heading in headings:
        if not heading.startswith("## Fact gathering"):
            section = before.split(heading + "\n", 1)[1].split("\n## ", 1)[0].rstrip("\n")
            assert heading + "\n" + section in text
