"""tools/role-docs.py: the variables of a role's README rendered from its argument spec, and the README's shape."""
import importlib.util
import io
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("role_docs", ROOT / "tools" / "role-docs.py")
role_docs = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(role_docs)

SPEC = {
    "argument_specs": {
        "main": {
            "short_description": "A role for the tests",
            "options": {
                "demo_source": {
                    "type": "str",
                    "choices": ["distro", "cuda_repo"],
                    "default": "distro",
                    "description": ["Where it comes from: C(distro) or O(demo_source=cuda_repo).", "Second paragraph."],
                },
                "demo_branch": {"type": "str", "default": "580", "description": "A branch, I(three) B(digits)."},
                "demo_args": {"type": "list", "elements": "str", "default": ["-b", "2"], "description": "Arguments."},
                "demo_template": {"type": "str", "default": "{{ cuda_version | default('12.1') }}", "description": "x"},
                "demo_name": {"type": "str", "required": True, "description": "Names NCCL_* and <bus id> and _private."},
                "demo_limits": {
                    "type": "dict",
                    "default": {},
                    "description": "See U(https://example.com/a) and L(the guide, https://example.com/b).",
                    "options": {"watts": {"type": "int", "description": "Per GPU."}},
                },
            },
        }
    }
}

EXPECTED = """\
The role's interface is `meta/argument_specs.yml`: Ansible checks every value against it before the role runs, and
`ansible-doc -t role gpufleet.node.demo` shows the same text. The defaults are those of `defaults/main.yml`.

- **`demo_source`**: str; one of `distro`, `cuda_repo`; default `distro`

  Where it comes from: `distro` or `demo_source=cuda_repo`.

  Second paragraph.

- **`demo_branch`**: str; default `'580'`

  A branch, *three* **digits**.

- **`demo_args`**: list of str; default `[-b, '2']`

  Arguments.

- **`demo_template`**: str; default `"{{ cuda_version | default('12.1') }}"`

  x

- **`demo_name`**: str; required

  Names NCCL\\_\\* and \\<bus id> and \\_private.

- **`demo_limits`**: dict; default `{}`

  See <https://example.com/a> and [the guide](https://example.com/b).

  - **`watts`**: int; no default

    Per GPU."""

README = """\
# gpufleet.node.demo

What the demo role is for.

## Requirements

Nothing.

## Variables

{begin}
stale text
{end}

## Example playbook

```yaml
## not a heading: inside a code block
- hosts: all
```

## What it does

Things.

## Testing

The `demo` scenario.
"""


def make_collection(tmp_path, readme, with_spec=True, role="demo"):
    role_dir = tmp_path / "roles" / role
    (role_dir / "meta").mkdir(parents=True)
    if with_spec:
        (role_dir / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(SPEC, sort_keys=False), encoding="utf-8")
    if readme is not None:
        (role_dir / "README.md").write_text(readme, encoding="utf-8")
    return role_dir


def run(tmp_path, check):
    out = io.StringIO()
    problems = role_docs.process(tmp_path, check=check, out=out)
    return problems, out.getvalue()


def test_render_variables():
    assert "\n".join(role_docs.render_variables("demo", SPEC["argument_specs"])) == EXPECTED


def test_several_entry_points_get_a_heading_each():
    specs = {"source": {"short_description": "One C(deb822) source", "options": {"_x_name": {"type": "str", "required": True}}},
             "packages": {"options": {}}}
    text = "\n".join(role_docs.render_variables("_x", specs))
    assert "### Entry point `source`\n\nOne `deb822` source\n\n- **`_x_name`**: str; required" in text
    assert text.endswith("### Entry point `packages`\n\nNo variables.")


@pytest.mark.parametrize("source, markdown", [
    ("C(a) and V(b) and E(HOME) and RV(rc)", "`a` and `b` and `HOME` and `rc`"),
    ("M(ansible.builtin.apt) and P(gpufleet.node.apt_plan#module)", "`ansible.builtin.apt` and `gpufleet.node.apt_plan`"),
    ("C(uses `ticks`)", "`` uses `ticks` ``"),
    ("a*b, <tag> and 1 < 2", "a\\*b, \\<tag> and 1 < 2"),
    ("nvidia_driver_mig stays, _lead and trail_ do not", "nvidia_driver_mig stays, \\_lead and trail\\_ do not"),
    ("ABC(x) is not markup", "ABC(x) is not markup"),
])
def test_markup_to_markdown(source, markdown):
    assert role_docs.markup_to_markdown(source) == markdown


def test_wrapped_lines_never_start_a_markdown_block():
    text = "word " * 21 + "- not a list item, 1. nor a numbered one"
    for width in range(40, 120):
        role_docs.WIDTH, saved = width, role_docs.WIDTH
        try:
            lines = role_docs.wrap(text, "  ")
        finally:
            role_docs.WIDTH = saved
        assert all(not role_docs.BLOCK_START.match(line.strip()) for line in lines[1:]), (width, lines)


def test_write_then_check_passes(tmp_path):
    role_dir = make_collection(tmp_path, README.format(begin=role_docs.BEGIN, end=role_docs.END))
    assert run(tmp_path, check=True)[0] == 1  # the stale text differs
    assert run(tmp_path, check=False) == (0, "roles/demo/README.md: written\n")
    text = (role_dir / "README.md").read_text(encoding="utf-8")
    assert "%s\n\n%s\n\n%s" % (role_docs.BEGIN, EXPECTED, role_docs.END) in text
    assert text.endswith("## Testing\n\nThe `demo` scenario.\n")
    assert run(tmp_path, check=True)[0] == 0


def test_check_fails_when_the_spec_changed(tmp_path):
    role_dir = make_collection(tmp_path, README.format(begin=role_docs.BEGIN, end=role_docs.END))
    run(tmp_path, check=False)
    spec = yaml.safe_load((role_dir / "meta" / "argument_specs.yml").read_text(encoding="utf-8"))
    spec["argument_specs"]["main"]["options"]["demo_branch"]["default"] = "595"
    (role_dir / "meta" / "argument_specs.yml").write_text(yaml.safe_dump(spec), encoding="utf-8")
    problems, out = run(tmp_path, check=True)
    assert problems == 1
    assert "-- **`demo_branch`**: str; default `'580'`" in out and "+- **`demo_branch`**: str; default `'595'`" in out


def test_missing_markers_are_added_at_the_end_of_variables(tmp_path):
    readme = README.format(begin="", end="").replace("\n\n\n\n", "\n\n")
    role_dir = make_collection(tmp_path, readme)
    assert run(tmp_path, check=False)[0] == 0
    text = (role_dir / "README.md").read_text(encoding="utf-8")
    assert text.index("## Variables") < text.index(role_docs.BEGIN) < text.index(role_docs.END) < text.index("## Example playbook")


@pytest.mark.parametrize("change, problem", [
    (lambda t: t.replace("# gpufleet.node.demo", "# demo"), "the first line must be the title '# gpufleet.node.demo'"),
    (lambda t: t.replace("What the demo role is for.\n", ""), "a paragraph that says what the role is for"),
    (lambda t: t.replace("## Testing", "## Tests"), "found Requirements, Variables, Example playbook, What it does, Tests"),
    (lambda t: t.replace("## Requirements\n\nNothing.\n\n", "") + "\n## Requirements\n\nNothing.\n",
     "found Variables, Example playbook, What it does, Testing, Requirements"),
    (lambda t: t.replace("## What it does", "## What it does\n\n## Platforms"), "found Requirements, Variables, Example playbook, What it does, Platforms"),
])
def test_shape_problems_fail_the_check(tmp_path, change, problem):
    make_collection(tmp_path, change(README.format(begin=role_docs.BEGIN, end=role_docs.END)))
    problems, out = run(tmp_path, check=True)
    assert problems >= 1 and problem in out, out


def test_role_without_spec_or_readme(tmp_path):
    internal = README.format(begin="", end="").replace("gpufleet.node.demo", "gpufleet.node._helper (internal)")
    make_collection(tmp_path, internal.replace("\n\n\n\n", "\n\n"), with_spec=False, role="_helper")
    assert run(tmp_path, check=True)[0] == 0
    make_collection(tmp_path, None, with_spec=False, role="_other")
    problems, out = run(tmp_path, check=True)
    assert problems == 1 and "roles/_other/README.md: missing" in out


def test_markers_without_a_spec_are_a_problem(tmp_path):
    make_collection(tmp_path, README.format(begin=role_docs.BEGIN, end=role_docs.END), with_spec=False)
    problems, out = run(tmp_path, check=True)
    assert problems == 1 and "has no meta/argument_specs.yml" in out


def test_main_exit_codes(tmp_path, capsys):
    make_collection(tmp_path, README.format(begin=role_docs.BEGIN, end=role_docs.END))
    assert role_docs.main(["--check", "--root", str(tmp_path)]) == 1
    assert "run: python tools/role-docs.py" in capsys.readouterr().out
    assert role_docs.main(["--root", str(tmp_path)]) == 0
    assert role_docs.main(["--check", "--root", str(tmp_path), "demo"]) == 0
    assert role_docs.main(["--check", "--root", str(tmp_path), "nosuchrole"]) == 1
