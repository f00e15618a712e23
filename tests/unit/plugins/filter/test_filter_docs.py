"""One documentation per filter: every filter the FilterModule classes of plugins/filter/*.py return has exactly one
sidecar plugins/filter/<name>.yml, no sidecar lacks a filter, no .py file keeps a DOCUMENTATION (ansible-doc would
show it for every filter of the file), and ``ansible-doc -t filter gpufleet.node.<name>`` shows the filter its own
text, with the options its function takes."""
import ast
import importlib
import inspect
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
FILTER_DIR = ROOT / "plugins" / "filter"
NAMESPACE, NAME = "gpufleet", "node"
PACKAGE = "ansible_collections.%s.%s.plugins.filter" % (NAMESPACE, NAME)
DOC_SUFFIXES = (".yml", ".yaml")
# What ansible-doc reads from a .py file instead of the sidecar beside it.
DOC_VARIABLES = ("DOCUMENTATION", "EXAMPLES", "RETURN")


def filter_files():
    return sorted(path for path in FILTER_DIR.glob("*.py") if path.name != "__init__.py")


def load_filters():
    """``{name: (function, file)}`` over every FilterModule of plugins/filter, and the names defined twice."""
    filters, twice = {}, []
    for path in filter_files():
        module = importlib.import_module("%s.%s" % (PACKAGE, path.stem))
        for name, function in module.FilterModule().filters().items():
            if name in filters:
                twice.append(name)
            filters[name] = (function, path)
    return filters, twice


FILTERS, DEFINED_TWICE = load_filters()


def sidecars():
    return sorted(path for suffix in DOC_SUFFIXES for path in FILTER_DIR.glob("*" + suffix))


def collections_path():
    """The collection path the unit tests import from (tools/lib.sh: GPUFLEET_SELF_PATH, by default .cache/self,
    where tools/collections.sh links this checkout in as ansible_collections/gpufleet/node)."""
    path = pathlib.Path(os.environ.get("GPUFLEET_SELF_PATH") or ROOT / ".cache" / "self")
    link = path / "ansible_collections" / NAMESPACE / NAME
    assert link.resolve() == ROOT, (
        "%s is not this checkout (%s): run tools/collections.sh, or set GPUFLEET_SELF_PATH" % (link, ROOT))
    return path


def ansible_doc():
    beside = pathlib.Path(sys.executable).parent / "ansible-doc"
    found = str(beside) if beside.exists() else shutil.which("ansible-doc")
    if not found:
        pytest.skip("ansible-doc is not installed beside %s nor on PATH" % sys.executable)
    return found


def test_every_filter_has_a_unique_name():
    assert FILTERS, "no filter found under %s" % FILTER_DIR
    assert not DEFINED_TWICE, "filters defined in more than one FilterModule: %s" % DEFINED_TWICE


def test_one_sidecar_per_filter_and_no_sidecar_without_a_filter():
    stems = [path.stem for path in sidecars()]
    problems = {
        "filters with more than one sidecar": sorted(set(stem for stem in stems if stems.count(stem) > 1)),
        "filters without a sidecar": sorted(set(FILTERS) - set(stems)),
        "sidecars without a filter": sorted(set(stems) - set(FILTERS)),
    }
    assert {what: names for what, names in problems.items() if names} == {}, "in %s" % FILTER_DIR


@pytest.mark.parametrize("path", filter_files(), ids=lambda path: path.name)
def test_no_documentation_in_the_filter_files(path):
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    assigned = [target.id for node in tree.body if isinstance(node, ast.Assign)
                for target in node.targets if isinstance(target, ast.Name)]
    assert [name for name in assigned if name in DOC_VARIABLES] == [], (
        "ansible-doc reads these instead of the sidecars beside %s" % path.name)


@pytest.mark.parametrize("name", sorted(FILTERS))
def test_ansible_doc_shows_the_filter_its_own_documentation(name):
    fqcn = "%s.%s.%s" % (NAMESPACE, NAME, name)
    command = [ansible_doc(), "-t", "filter", "--json", fqcn]
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path()), ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false",
               ANSIBLE_NOCOLOR="1")
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    assert fqcn in json.loads(done.stdout), "ansible-doc has no documentation for %s: %s" % (fqcn, done.stderr)
    entry = json.loads(done.stdout)[fqcn]
    doc = entry["doc"]
    assert doc["name"] == name
    assert isinstance(doc.get("short_description"), str) and doc["short_description"].strip()
    assert pathlib.Path(doc["filename"]).resolve().parent == FILTER_DIR
    assert pathlib.Path(doc["filename"]).stem == name
    assert fqcn in (entry.get("examples") or ""), "the EXAMPLES do not use %s" % fqcn
    assert "_value" in (entry.get("return") or {}), "RETURN does not describe _value"

    # The options are the function's arguments: _input, then the rest, in order for positional use.
    parameters = list(inspect.signature(FILTERS[name][0]).parameters)
    expected = ["_input"] + parameters[1:]
    assert sorted(doc.get("options") or {}) == sorted(expected)
    assert doc["options"]["_input"].get("required") is True
    if len(expected) > 1:
        assert [part.strip() for part in str(doc.get("positional", "")).split(",")] == expected
