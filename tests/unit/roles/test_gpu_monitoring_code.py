"""The code the gpu_monitoring role puts on a node: its collector (files/gpufleet-gpu-metrics.py) runs with no Ansible
installed, from the collection's files the role copies beside it (vars/main.yml, ``__gpu_monitoring_code``).

Read with ast, never imported: the collector imports the collection's module_utils directly (no stand-in for an
Ansible module in ``sys.modules``, nothing from plugins/filter, which is controller code), and the copy list is
exactly the collection's files it imports, directly or through each other, none of which imports Ansible or
anything else the node's standard library does not have.
"""
import ast
import pathlib
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLE = ROOT / "roles" / "gpu_monitoring"
COLLECTOR = ROLE / "files" / "gpufleet-gpu-metrics.py"
PACKAGE = "ansible_collections.gpufleet.node"


def imported_modules(path):
    """``[(line, dotted name)]`` of every module a file imports, at any depth (a lazy import inside a function
    counts); ``from package import name`` gives ``package.name`` as well as ``package``, since the name may be a
    module."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found.extend((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "%s:%d: a relative import" % (path, node.lineno)
            found.append((node.lineno, node.module))
            found.extend((node.lineno, "%s.%s" % (node.module, alias.name)) for alias in node.names)
    return found


def collection_file(name):
    """The file of the collection a dotted module name is (relative to the collection root), or None where the
    name is not a module file of this collection (a package directory, a function imported from a module)."""
    if not name.startswith(PACKAGE + "."):
        return None
    relative = pathlib.Path(*name[len(PACKAGE) + 1:].split(".")).with_suffix(".py")
    return relative.as_posix() if (ROOT / relative).is_file() else None


def outside_imports(path):
    """What a file imports that a node without Ansible may not have: ``[(line, name)]`` of imports neither of the
    standard library nor of this collection."""
    return [(line, name) for line, name in imported_modules(path)
            if name.split(".")[0] not in sys.stdlib_module_names and not name.startswith(PACKAGE)]


def collector_closure():
    """``{file: [files it imports]}`` over the collection's files the collector imports, transitively."""
    graph, todo = {}, [COLLECTOR]
    while todo:
        path = todo.pop()
        key = path.relative_to(ROOT).as_posix()
        if key in graph:
            continue
        graph[key] = sorted(set(filter(None, (collection_file(name) for _line, name in imported_modules(path)))))
        todo.extend(ROOT / found for found in graph[key])
    return graph


def copy_list():
    return yaml.safe_load((ROLE / "vars" / "main.yml").read_text(encoding="utf-8"))["__gpu_monitoring_code"]


def test_the_collector_stands_in_for_nothing():
    """No module planted in ``sys.modules`` (the old stand-in for ansible.errors) and no import of Ansible."""
    tree = ast.parse(COLLECTOR.read_text(encoding="utf-8"))
    planted = [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute) and node.attr == "modules"
               and isinstance(node.value, ast.Name) and node.value.id == "sys"]
    assert planted == [], "sys.modules used on line(s) %s of %s" % (planted, COLLECTOR.name)
    assert [name for _line, name in imported_modules(COLLECTOR) if name.split(".")[0] == "ansible"] == []


def test_the_collector_imports_module_utils_only():
    """Its health gates come from module_utils/health.py, never from a filter plugin (controller code)."""
    ours = [name for _line, name in imported_modules(COLLECTOR) if name.startswith(PACKAGE + ".")]
    assert ours, "the collector imports nothing of the collection"
    assert [name for name in ours if not name.startswith(PACKAGE + ".plugins.module_utils")] == []
    assert "plugins/module_utils/health.py" in collector_closure()[COLLECTOR.relative_to(ROOT).as_posix()]


def test_the_role_copies_exactly_what_the_collector_imports():
    closure = collector_closure()
    needed = sorted(name for name in closure if name != COLLECTOR.relative_to(ROOT).as_posix())
    listed = copy_list()
    assert len(listed) == len(set(listed)), "a file listed twice in __gpu_monitoring_code"
    assert {"missing from __gpu_monitoring_code": sorted(set(needed) - set(listed)),
            "listed but not imported": sorted(set(listed) - set(needed))} == {
        "missing from __gpu_monitoring_code": [], "listed but not imported": []}


def test_nothing_the_node_runs_imports_ansible_or_a_third_party_module():
    found = dict((name, outside_imports(ROOT / name)) for name in collector_closure())
    assert dict((name, imports) for name, imports in found.items() if imports) == {}
