"""The role READMEs' variable documentation, made from each role's meta/argument_specs.yml, and their common shape.

    python tools/role-docs.py            write the generated section of every roles/*/README.md
    python tools/role-docs.py --check    write nothing; exit 1 when a README differs from what would be written or
                                         does not have the common shape

Every roles/<role>/README.md has the same shape: the title `# gpufleet.node.<role>` (internal roles, whose names
start with `_`, add ` (internal)`), a paragraph that says what the role is for, then exactly the sections
Requirements, Variables, Example playbook, What it does and Testing, in that order. In a role with an argument spec
the Variables section holds the generated part between the two marker lines (BEGIN and END below); everything else
is written by hand. A README whose markers are missing gets them at the end of its Variables section.

The generated part lists each option of each entry point: its name, type, default (as YAML, the way an inventory
writes it), choices and description, with Ansible's markup (C(), I(), B(), U(), L(), M(), O(), V(), E(), RV(), P())
turned into Markdown. `make docs` (tools/run.sh docs) runs the check.
"""
import argparse
import difflib
import pathlib
import re
import sys
import textwrap

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
COLLECTION = "gpufleet.node"
BEGIN = "<!-- BEGIN generated variables (tools/role-docs.py, from meta/argument_specs.yml: edit the spec, then run it) -->"
END = "<!-- END generated variables -->"
SECTIONS = ("Requirements", "Variables", "Example playbook", "What it does", "Testing")
WIDTH = 116  # the READMEs' prose is wrapped at about this width

# Ansible's documentation markup (the forms ansible-doc renders). A markup's content ends at the first ")".
MARKUP = re.compile(r"\b(?:(?P<link>L)\((?P<text>[^,)]+),\s*(?P<url>[^)]+)\)|(?P<kind>RV|[CIBUMVOEP])\((?P<value>[^)]+)\))")
# A continuation line that starts like this would begin a Markdown block (a list, a heading, a quote, a setext
# underline or a table) instead of going on with the paragraph.
BLOCK_START = re.compile(r"^(?:[-+*#>=|]|\d+[.)](?:\s|$))")


def code(text):
    """An inline code span holding text as it is."""
    if "`" not in text:
        return "`%s`" % text
    return "`` %s ``" % text


def escape(text):
    """Plain text made safe for Markdown: characters that would start emphasis, code, a tag or an escape."""
    text = text.replace("\\", "\\\\").replace("`", "\\`").replace("*", "\\*")
    text = re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)


def markup_to_markdown(text):
    """One paragraph of Ansible documentation markup as Markdown."""
    out = []
    position = 0
    for match in MARKUP.finditer(text):
        out.append(escape(text[position:match.start()]))
        position = match.end()
        if match.group("link"):
            out.append("[%s](%s)" % (escape(match.group("text").strip()), match.group("url").strip()))
            continue
        kind, value = match.group("kind"), match.group("value")
        if kind == "I":
            out.append("*%s*" % escape(value))
        elif kind == "B":
            out.append("**%s**" % escape(value))
        elif kind == "U":
            out.append("<%s>" % value)
        elif kind == "P":
            out.append(code(value.split("#", 1)[0]))  # P(fqcn#type): the plugin's name
        else:  # C, V, O, E, RV: code, values, options, environment variables, return values; M: a module's name
            out.append(code(value))
    out.append(escape(text[position:]))
    return "".join(out)


def wrap(text, indent):
    """text wrapped at WIDTH, each line indented; a line that would start a Markdown block stays on the line before."""
    lines = textwrap.wrap(text, width=WIDTH - len(indent), break_long_words=False, break_on_hyphens=False)
    merged = []
    for line in lines:
        if merged and BLOCK_START.match(line):
            merged[-1] += " " + line
        else:
            merged.append(line)
    return [indent + line for line in merged]


def yaml_value(value):
    """A default as an inventory writes it: YAML in flow style on one line."""
    if isinstance(value, str) and "'" in value and '"' not in value and "\\" not in value and "\n" not in value:
        return '"%s"' % value  # "{{ x | default('1') }}" reads better than YAML's '{{ x | default(''1'') }}'
    text = yaml.safe_dump(value, default_flow_style=True, width=1_000_000, allow_unicode=True, sort_keys=False)
    text = text.strip()
    if text.endswith("\n..."):
        text = text[:-4].rstrip()
    elif text.endswith("..."):
        text = text[:-3].rstrip()
    return text


def paragraphs(description):
    """A description (a string or a list of strings) as a list of paragraphs."""
    if description is None:
        return []
    if isinstance(description, str):
        description = [description]
    return [" ".join(str(part).split()) for part in description if str(part).strip()]


def summary(spec):
    """The line under an option's name: type, choices, default or required, aliases."""
    kind = spec.get("type", "str")
    if kind == "list" and spec.get("elements"):
        kind = "list of %s" % spec["elements"]
    parts = [kind]
    if spec.get("choices"):
        parts.append("one of " + ", ".join(code(yaml_value(choice)) for choice in spec["choices"]))
    if spec.get("required"):
        parts.append("required")
    elif "default" in spec:
        parts.append("default " + code(yaml_value(spec["default"])))
    else:
        parts.append("no default")
    if spec.get("aliases"):
        parts.append("aliases " + ", ".join(code(alias) for alias in spec["aliases"]))
    return "; ".join(parts)


def render_options(options, indent=""):
    """The options of one entry point (or an option's suboptions) as a Markdown list."""
    lines = []
    for name, spec in (options or {}).items():
        spec = spec or {}
        if lines:
            lines.append("")
        lines.append("%s- **%s**: %s" % (indent, code(name), summary(spec)))
        for paragraph in paragraphs(spec.get("description")):
            lines.append("")
            lines.extend(wrap(markup_to_markdown(paragraph), indent + "  "))
        if spec.get("options"):
            lines.append("")
            lines.extend(render_options(spec["options"], indent + "  "))
    return lines


def render_variables(role, argument_specs):
    """The generated part of the Variables section (the lines between the markers, without them)."""
    fqcn = "%s.%s" % (COLLECTION, role)
    entries = argument_specs or {}
    lines = wrap("The role's interface is %s: Ansible checks every value against it before the role runs, and %s "
                 "shows the same text. The defaults are those of %s."
                 % (code("meta/argument_specs.yml"), code("ansible-doc -t role " + fqcn), code("defaults/main.yml")), "")
    for entry, spec in entries.items():
        spec = spec or {}
        lines.append("")
        if len(entries) > 1 or entry != "main":
            lines.append("### Entry point %s" % code(entry))
            lines.append("")
            short = spec.get("short_description")
            if short:
                lines.extend(wrap(markup_to_markdown(" ".join(str(short).split())), ""))
                lines.append("")
        if spec.get("options"):
            lines.extend(render_options(spec["options"]))
        else:
            lines.append("No variables.")
    return lines


def headings(text):
    """The level-2 headings of a Markdown text, outside fenced code blocks."""
    found = []
    fence = None
    for line in text.splitlines():
        stripped = line.lstrip()
        if fence:
            if stripped.startswith(fence):
                fence = None
            continue
        if stripped.startswith("```") or stripped.startswith("~~~"):
            fence = stripped[:3]
            continue
        if line.startswith("## "):
            found.append(line[3:].strip())
    return found


def shape_problems(role, text, has_spec):
    """What keeps a README from the common shape: title, purpose paragraph, sections, markers."""
    problems = []
    lines = text.splitlines()
    title = "# %s.%s%s" % (COLLECTION, role, " (internal)" if role.startswith("_") else "")
    if not lines or lines[0] != title:
        problems.append("the first line must be the title %r" % title)
    body = []
    for line in lines[1:]:
        if line.startswith("## "):
            break
        body.append(line)
    if not any(line.strip() for line in body):
        problems.append("a paragraph that says what the role is for must follow the title")
    found = headings(text)
    if tuple(found) != SECTIONS:
        problems.append("the sections must be exactly %s, in this order; found %s"
                        % (", ".join(SECTIONS), ", ".join(found) or "none"))
    markers = (lines.count(BEGIN), lines.count(END))
    if has_spec and markers != (1, 1):
        problems.append("the Variables section must hold the generated part between one %r line and one %r line"
                        % (BEGIN, END))
    if not has_spec and markers != (0, 0):
        problems.append("the role has no meta/argument_specs.yml, so its README has no generated part")
    return problems


def with_markers(text):
    """The README with empty markers at the end of its Variables section, where they are missing."""
    lines = text.splitlines()
    if BEGIN in lines or END in lines:
        return text
    try:
        start = lines.index("## Variables")
    except ValueError:
        return text
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    while end > start + 1 and not lines[end - 1].strip():
        end -= 1
    lines[end:end] = ["", BEGIN, END]
    return "\n".join(lines) + "\n"


def render_readme(role, text, argument_specs):
    """The README with its generated part made anew; text unchanged where it has no (or broken) markers."""
    lines = text.splitlines()
    if lines.count(BEGIN) != 1 or lines.count(END) != 1:
        return text
    start, end = lines.index(BEGIN), lines.index(END)
    if end < start:
        return text
    new = lines[:start + 1] + [""] + render_variables(role, argument_specs) + [""] + lines[end:]
    return "\n".join(new) + "\n"


def load_specs(role_dir):
    path = role_dir / "meta" / "argument_specs.yml"
    if not path.is_file():
        return None
    with open(path, encoding="utf-8") as stream:
        return (yaml.safe_load(stream) or {}).get("argument_specs") or {}


def process(root, roles=None, check=False, out=sys.stdout):
    """Renders (or, with check, compares) the README of each role; returns the number of problems found."""
    problems = 0
    role_dirs = sorted(p for p in (root / "roles").iterdir() if p.is_dir())
    if roles:
        unknown = sorted(set(roles) - {p.name for p in role_dirs})
        if unknown:
            out.write("no such role: %s\n" % ", ".join(unknown))
            return len(unknown)
        role_dirs = [p for p in role_dirs if p.name in roles]
    for role_dir in role_dirs:
        role = role_dir.name
        readme = role_dir / "README.md"
        specs = load_specs(role_dir)
        if not readme.is_file():
            out.write("roles/%s/README.md: missing; every role has one (see tools/role-docs.py)\n" % role)
            problems += 1
            continue
        text = readme.read_text(encoding="utf-8")
        new = render_readme(role, with_markers(text), specs) if specs is not None else text
        for problem in shape_problems(role, new, specs is not None):
            out.write("roles/%s/README.md: %s\n" % (role, problem))
            problems += 1
        if new == text:
            continue
        if check:
            out.write("roles/%s/README.md: differs from what tools/role-docs.py writes from meta/argument_specs.yml:\n" % role)
            diff = difflib.unified_diff(text.splitlines(), new.splitlines(), "README.md (now)", "README.md (generated)", lineterm="")
            out.write("\n".join(list(diff)[:60]) + "\n")
            problems += 1
        else:
            readme.write_text(new, encoding="utf-8")
            out.write("roles/%s/README.md: written\n" % role)
    return problems


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--check", action="store_true", help="write nothing; fail when a README is not as it would be written")
    parser.add_argument("--root", type=pathlib.Path, default=ROOT, help="the collection's root (default: this checkout)")
    parser.add_argument("roles", nargs="*", help="only these roles (default: every role)")
    args = parser.parse_args(argv)
    problems = process(args.root, args.roles, check=args.check)
    if problems:
        sys.stdout.write("%d problem(s)%s\n" % (problems, "; run: python tools/role-docs.py" if args.check else ""))
        return 1
    if args.check:
        sys.stdout.write("role READMEs: the common shape, and variables as meta/argument_specs.yml says\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
