"""The package seam holds for a family the collection does not implement yet.

A fake RedHat family (Rocky 9) is given each role's platform data under the family's name; the roles' data then
renders for it as it does for Debian, _pkg hands its entry points to the family's package role by name, and the
tasks outside install-<family>.yml name no package manager. No dnf implementation exists: this shows where one
would plug in (docs/platforms.md)."""
import re
import shutil

import pytest

from . import platform
from .platform import ROLES, facts_for, load, templar, trusted

ROCKY = facts_for("Rocky", "9.4")
DEBIAN = facts_for("Debian", "12")
FAMILY_ROLES = sorted(path.parent.parent.name for path in ROLES.glob("*/vars/Debian.yml"))
PACKAGE_MANAGER = re.compile(r"ansible\.builtin\.(apt|apt_key|apt_repository|deb822_repository|dpkg_selections)\b"
                             r"|gpufleet\.node\.apt_plan|gpufleet\.node\._apt\b|\bapt-get\b|\bdpkg\b|/etc/apt/")


def pkg_dispatch():
    """dispatch.yml's check and include, by their modules (the facts it may gather come first)."""
    tasks = load(ROLES / "_pkg" / "tasks" / "dispatch.yml")
    return [next(task for task in tasks if module in task)
            for module in ("ansible.builtin.fail", "ansible.builtin.include_role")]


def test_a_play_without_facts_gets_the_family_first():
    first = load(ROLES / "_pkg" / "tasks" / "dispatch.yml")[0]
    assert first["ansible.builtin.setup"] == {"gather_subset": ["min"]}
    assert first["when"] == "ansible_facts['os_family'] is not defined"


def pkg_variables(facts, **overrides):
    variables = dict(trusted(load(ROLES / "_pkg" / "vars" / "main.yml")), ansible_facts=facts,
                     ansible_parent_role_names=["gpufleet.node.nvidia_driver"])
    variables.update(overrides)
    return variables


def refused(facts, **overrides):
    check = pkg_dispatch()[0]
    variables = pkg_variables(facts, **overrides)
    fires = templar(variables).template(trusted("{{ (%s) }}" % check["when"]))
    message = " ".join(str(templar(variables).template(trusted(check["ansible.builtin.fail"]["msg"]))).split())
    return fires in (True, "True"), message


def test_a_family_without_a_package_role_is_refused_by_name():
    fires, message = refused(ROCKY)
    assert fires
    assert "no package manager role for the RedHat family" in message and "Debian" in message


def test_the_debian_family_goes_to_apt():
    assert refused(DEBIAN)[0] is False
    include = pkg_dispatch()[1]["ansible.builtin.include_role"]
    assert templar(pkg_variables(DEBIAN)).template(trusted(include["name"])) == "gpufleet.node._apt"


def test_a_family_with_a_package_role_is_handed_to_it():
    backends = {"Debian": "_apt", "RedHat": "_dnf"}
    assert refused(ROCKY, __pkg_backends=backends)[0] is False
    include = pkg_dispatch()[1]["ansible.builtin.include_role"]
    assert templar(pkg_variables(ROCKY, __pkg_backends=backends)).template(trusted(include["name"])) == \
        "gpufleet.node._dnf"


def test_every_entry_point_the_roles_use_is_the_seam_s():
    entries = set(load(ROLES / "_pkg" / "vars" / "main.yml")["__pkg_entry_points"])
    assert entries == {path.stem for path in (ROLES / "_pkg" / "tasks").glob("*.yml")} - {"dispatch"}
    assert entries <= {path.stem for path in (ROLES / "_apt" / "tasks").glob("*.yml")}
    used = set()
    for path in ROLES.glob("*/tasks/*.yml"):
        used.update(re.findall(r"name: gpufleet\.node\._pkg\s+tasks_from: (\w+)", path.read_text(encoding="utf-8")))
    assert used and used <= entries


@pytest.mark.parametrize("role", sorted(path.name for path in ROLES.iterdir() if path.is_dir()
                                        and path.name not in ("_apt", "_pkg")))
def test_tasks_outside_the_family_files_name_no_package_manager(role):
    for path in sorted((ROLES / role / "tasks").glob("*.yml")):
        if path.stem.endswith("-Debian"):
            continue
        code = "\n".join(line for line in path.read_text(encoding="utf-8").splitlines()
                         if not line.lstrip().startswith("#"))
        assert not PACKAGE_MANAGER.search(code), path


@pytest.fixture(name="fake_redhat_roles")
def fixture_fake_redhat_roles(tmp_path, monkeypatch):
    """A copy of the roles' data where every role with Debian family data has the same data as vars/RedHat.yml."""
    roles = tmp_path / "roles"
    shutil.copytree(ROLES, roles, ignore=shutil.ignore_patterns("*.md", "files", "templates", "__pycache__"))
    for name in FAMILY_ROLES:
        shutil.copy(roles / name / "vars" / "Debian.yml", roles / name / "vars" / "RedHat.yml")
    monkeypatch.setattr(platform, "ROLES", roles)
    return roles


def renders(role, facts):
    """The names of vars/main.yml and the platform file that render (those that need a run's results do not)."""
    variables = platform.role_variables(role, facts)
    rendered = set()
    for name in variables:
        if name == "ansible_facts":
            continue
        try:
            templar(variables).template(variables[name])
        except Exception:  # pylint: disable=broad-except  # a registered result or a caller's input
            continue
        rendered.add(name)
    return rendered


@pytest.mark.parametrize("role", FAMILY_ROLES)
def test_a_fake_redhat_family_s_data_renders_as_debian_s(role, fake_redhat_roles):
    assert platform.platform_file(role, ROCKY) == fake_redhat_roles / role / "vars" / "RedHat.yml"
    # Rocky is not Debian: names that read the distribution's own tables (NVIDIA's paths, branches per release)
    # may not render; everything the family data feeds does.
    debian = renders(role, DEBIAN)
    missing = debian - renders(role, ROCKY)
    distribution_specific = {name for name in missing
                             if re.search(r"distribution|_distro|release|_nvidia_repo_path|branches|kernel",
                                          str(platform.role_variables(role, ROCKY).get(name)))}
    assert missing - distribution_specific == set()
