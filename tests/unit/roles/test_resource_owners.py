"""Every resource on a node has one owner.

The paths each role's tasks write (files, directories, templates, unit files), rendered from the role's own data as
Ansible renders them for Ubuntu 22.04, must be the table "Who writes what" of docs/architecture.md, and no path may
have two owners there or in the tasks. Holds and upgrade guards are written by the Debian package role only,
behind the package seam."""
import collections
import pathlib
import re

import pytest
import yaml

from .platform import facts_for, load, role_variables, templar, trusted

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"
ARCHITECTURE = ROOT / "docs" / "architecture.md"
# The modules that write a path on the node, and the option that names it.
WRITERS = {
    "ansible.builtin.copy": "dest",
    "ansible.builtin.template": "dest",
    "ansible.builtin.file": "path",
    "ansible.builtin.lineinfile": "path",
    "ansible.builtin.blockinfile": "path",
    "ansible.builtin.get_url": "dest",
    "ansible.builtin.unarchive": "dest",
}
FACTS = facts_for("Ubuntu", "22.04")


def tasks_of(node):
    if isinstance(node, list):
        for item in node:
            yield from tasks_of(item)
    elif isinstance(node, dict):
        for key in ("block", "rescue", "always"):
            yield from tasks_of(node.get(key))
        yield node


def variables_of(role):
    """The role's data as Ansible has it for FACTS (internal roles without platform files: defaults and vars)."""
    try:
        return role_variables(role.name, FACTS)
    except AssertionError:
        variables = {"ansible_facts": FACTS}
        for path in (role / "defaults" / "main.yml", role / "vars" / "main.yml"):
            if path.is_file():
                variables.update(trusted(load(path)))
        return variables


def rendered(expression, variables):
    """The path as rendered; the expression itself where it depends on what a caller or a run passes."""
    try:
        value = templar(variables).template(trusted(expression))
    except Exception:  # pylint: disable=broad-except  # a caller's input or a registered result
        return expression
    return str(value)


def writes(role):
    """{path: [task file, ...]} of what ``role``'s tasks write."""
    found = collections.defaultdict(list)
    base = variables_of(role)
    for path in sorted((role / "tasks").glob("*.yml")):
        for task in tasks_of(load(path) or []):
            for module, option in WRITERS.items():
                arguments = task.get(module)
                if not isinstance(arguments, dict) or option not in arguments:
                    continue
                variables = dict(base)
                variables.update(trusted(task.get("vars") or {}))
                if isinstance(task.get("loop"), list):
                    items = [rendered(item, variables) if isinstance(item, str) else item for item in task["loop"]]
                else:  # no loop, or one over a run's results: the path stays an expression where it names item
                    items = [None]
                for item in items:
                    if item is not None:
                        variables["item"] = item
                    found[rendered(arguments[option], variables)].append(path.name)
    return found


ALL_ROLES = sorted(path for path in ROLES.iterdir() if path.is_dir())
WRITES = {role.name: writes(role) for role in ALL_ROLES}


def documented_owners():
    """The rows of docs/architecture.md's table "Who writes what": [(path, owner)]."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("## Who writes what", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"^\| `([^`]+)` \| `([^`]+)` \|", section, re.M)


def test_no_path_is_written_by_two_roles():
    owners = collections.defaultdict(set)
    for role, paths in WRITES.items():
        for path in paths:
            owners[path].add(role)
    # Paths that stay expressions (a caller's input, a loop over a run's results) are not compared across roles.
    assert {path: sorted(roles) for path, roles in owners.items() if len(roles) > 1 and "{{" not in path} == {}


def test_the_table_names_each_path_once():
    rows = documented_owners()
    assert rows, "no table 'Who writes what' in docs/architecture.md"
    paths = [path for path, _owner in rows if "{{" not in path]
    assert sorted(path for path in set(paths) if paths.count(path) > 1) == []
    assert len(set(rows)) == len(rows)


def test_the_table_is_what_the_tasks_write():
    """A role that starts writing a path, or stops, changes the table with it."""
    in_tasks = {(path, role) for role, paths in WRITES.items() for path in paths}
    assert in_tasks == set(documented_owners())


def test_the_scan_sees_a_second_writer(tmp_path):
    """The scan itself: a role creating /etc/gpufleet on its own, as five roles once did, is found."""
    role = tmp_path / "gpu_power"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(yaml.safe_dump([{
        "name": "Create /etc/gpufleet",
        "ansible.builtin.file": {"path": "/etc/gpufleet", "state": "directory"}}]))
    assert "/etc/gpufleet" in writes(role)
    assert "/etc/gpufleet" in WRITES["_common"]


@pytest.mark.parametrize("needle", ["ansible.builtin.dpkg_selections", "Unattended-Upgrade::Package-Blacklist"])
def test_holds_and_upgrade_guards_have_one_writer(needle):
    writers = {path.relative_to(ROLES).parts[0] for path in ROLES.rglob("*")
               if path.is_file() and path.suffix in (".yml", ".j2") and needle in path.read_text(encoding="utf-8")}
    assert writers == {"_apt"}
