"""Roles hand each other data only through documented outputs.

A role's internal names (``__<name>``) are its own: values another role loaded with include_vars, registered or
set stay visible for the rest of a run, and reading them couples two roles through a name neither documents. The
only names that cross a role's border are the internal roles' inputs and outputs (single underscore,
``_<role>_*``), each listed here and in docs/architecture.md."""
import collections
import pathlib
import re

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = ROOT / "roles"
INTERNAL_NAME = re.compile(r"(?<![\w.])(__[a-z][a-z0-9_]*)")
INTERFACE_NAME = re.compile(r"(?<![\w.])(_(?:pkg|common|nvidia_repo|apt)_[a-z0-9_]+)")

# The documented outputs of the internal roles: what a caller may read after including them.
# name: (the role callers include, the role that sets it: a family's package manager role behind the seam _pkg).
OUTPUTS = {
    "_pkg_plan": ("_pkg", "_apt"),     # entry points packages and change: what was planned and what dpkg has
    "_common_host": ("_common", "_common"),  # entry point platform: what kind of host this is
    "_common_state_dir": ("_common", "_common"),  # entry point state_dir: whether the records' directory was made
    "_nvidia_repo_path": ("_nvidia_repo", "_nvidia_repo"),  # entry points path and main: its path for this host
}
# Keys that set a name in a task.
SETTERS = ("register", "loop_var", "index_var")


def role_files(role):
    return sorted(path for path in role.rglob("*") if path.is_file() and path.suffix in (".yml", ".yaml", ".j2"))


def names_defined(role):
    """The internal names a role defines: its vars and defaults files' keys, and what its tasks register, set with
    set_fact, or bind with task/block vars and loop variables."""
    defined = set()

    def walk(node):
        if isinstance(node, dict):
            for key, value in node.items():
                if key in SETTERS and isinstance(value, str):
                    defined.add(value)
                if key in ("vars", "ansible.builtin.set_fact") and isinstance(value, dict):
                    defined.update(name for name in value if isinstance(name, str))
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    for path in role_files(role):
        if path.suffix == ".j2":
            continue
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if path.parent.name in ("vars", "defaults") and isinstance(data, dict):
            defined.update(data)
        walk(data)
    return defined


def names_read(role):
    """Every internal name a role's files mention, with the files that mention it."""
    found = collections.defaultdict(set)
    for path in role_files(role):
        for name in INTERNAL_NAME.findall(path.read_text(encoding="utf-8")):
            found[name].add(str(path.relative_to(ROOT) if path.is_relative_to(ROOT) else path))
    return found


ALL_ROLES = sorted(path for path in ROLES.iterdir() if path.is_dir())
DEFINED = {role.name: names_defined(role) for role in ALL_ROLES}


def other_roles_reads(role):
    """The internal names of other roles that ``role`` reads, with where."""
    own = DEFINED[role.name]
    others = {name: owner for owner, names in DEFINED.items() if owner != role.name for name in names}
    return {name: (others[name], sorted(paths)) for name, paths in names_read(role).items()
            if name not in own and name in others}


@pytest.mark.parametrize("role", ALL_ROLES, ids=lambda role: role.name)
def test_no_role_reads_another_role_s_internal_names(role):
    assert other_roles_reads(role) == {}


def test_the_check_sees_a_cross_role_read(tmp_path, monkeypatch):
    """The scan itself: a role mentioning another role's internal name is caught (nccl reading cuda's first release
    was such a read)."""
    fake = tmp_path / "nccl"
    (fake / "tasks").mkdir(parents=True)
    (fake / "tasks" / "preflight.yml").write_text("- name: Read it\n  ansible.builtin.debug:\n"
                                                  "    msg: \"{{ __cuda_repo_first_release }}\"\n")
    monkeypatch.setitem(DEFINED, "nccl", names_defined(fake))
    assert "__cuda_repo_first_release" in other_roles_reads(fake)


def interface_names_read_outside(owner):
    """The ``_<owner>_*`` names that other roles mention."""
    prefix = owner + "_"
    found = set()
    for role in ALL_ROLES:
        if role.name == owner:
            continue
        for path in role_files(role):
            found.update(name for name in INTERFACE_NAME.findall(path.read_text(encoding="utf-8"))
                         if name.startswith(prefix))
    return found


def documented_inputs(owner):
    """An internal role's inputs: the keys of its defaults and the names its README's tables list."""
    names = set()
    defaults = ROLES / owner / "defaults" / "main.yml"
    if defaults.is_file():
        names.update(yaml.safe_load(defaults.read_text(encoding="utf-8")) or {})
    readme = ROLES / owner / "README.md"
    if readme.is_file():
        names.update(INTERFACE_NAME.findall(readme.read_text(encoding="utf-8")))
    return names


@pytest.mark.parametrize("owner", ["_pkg", "_common", "_nvidia_repo"])
def test_internal_roles_are_used_only_through_documented_names(owner):
    outputs = {name for name, (role, _setter) in OUTPUTS.items() if role == owner}
    undocumented = interface_names_read_outside(owner) - outputs - documented_inputs(owner)
    assert undocumented == set()


def test_apt_is_reached_only_through_the_package_seam():
    """No role names _apt's inputs or includes _apt: they go through gpufleet.node._pkg."""
    for role in ALL_ROLES:
        if role.name in ("_apt", "_pkg"):
            continue
        for path in role_files(role):
            text = path.read_text(encoding="utf-8")
            assert "gpufleet.node._apt" not in text, path
            assert not re.search(r"(?<![\w.])_apt_[a-z]", text), path


@pytest.mark.parametrize("name", sorted(OUTPUTS))
def test_each_output_is_set_by_its_role_and_documented(name):
    setter = OUTPUTS[name][1]
    assert name in DEFINED[setter], (setter, name)
    assert name in (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8"), name
