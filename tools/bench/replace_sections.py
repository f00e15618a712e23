"""Replaces sections of a Markdown document (docs/benchmarks.md) with new ones, for tools/bench.sh run on a subset.

    python3 tools/bench/replace_sections.py DOC SECTION_FILE... [--suffix .md]

Each SECTION_FILE (SECTION_FILE + suffix) begins with a level-2 heading ("## ..."); the section of DOC whose
heading begins with the same words up to the first parenthesis or colon (so that a heading may carry changing
details) is replaced, from its heading to the next level-2 heading or the end. A section DOC lacks is appended.
"""
import argparse
import pathlib
import re
import sys


def key(heading):
    return re.split(r"[(:]", heading[3:], maxsplit=1)[0].strip().lower()


def split(text):
    """(preamble, [(heading, body)]) of a Markdown text by its level-2 headings."""
    parts = re.split(r"(?m)^(?=## )", text)
    preamble, sections = parts[0], []
    for part in parts[1:]:
        heading, _newline, body = part.partition("\n")
        sections.append((heading, body))
    return preamble, sections


def replace(document, new_sections):
    preamble, sections = split(document)
    for new in new_sections:
        new_preamble, parsed = split(new.strip() + "\n")
        if new_preamble.strip() or len(parsed) != 1:
            raise ValueError("a section file must hold one level-2 section, heading first")
        heading, body = parsed[0]
        for index, (old_heading, _old_body) in enumerate(sections):
            if key(old_heading) == key(heading):
                sections[index] = (heading, body)
                break
        else:
            sections.append((heading, body))
    out = preamble
    for heading, body in sections:
        out += heading + "\n" + body.rstrip("\n") + "\n\n"
    return out.rstrip("\n") + "\n"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("document")
    parser.add_argument("sections", nargs="+")
    parser.add_argument("--suffix", default="")
    args = parser.parse_args(argv)
    path = pathlib.Path(args.document)
    path.write_text(replace(path.read_text(), [pathlib.Path(name + args.suffix).read_text() for name in args.sections]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
