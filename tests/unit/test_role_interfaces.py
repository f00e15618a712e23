"""Every role's interface has one source: meta/argument_specs.yml, whose defaults equal defaults/main.yml."""
import pathlib

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
ROLES = sorted(p.parent.parent for p in ROOT.glob("roles/*/meta/argument_specs.yml"))


def load(path):
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream) or {}


def role_id(role):
    return role.name


def entry_points(role):
    return load(role / "meta/argument_specs.yml")["argument_specs"]


def options_of(role):
    """The options of every entry point of the role (main, and the internal roles' others such as _apt's packages)."""
    options = {}
    for entry in entry_points(role).values():
        options.update(entry.get("options") or {})
    return options


def prefix(role):
    """Public roles prefix their options with their name; _nvidia_repo owns the collection-wide nvidia_repo_*;
    other internal roles keep their leading underscore (_apt_*)."""
    return "nvidia_repo_" if role.name == "_nvidia_repo" else role.name + "_"


INTERNAL_WITHOUT_SPEC = ("_apt", "_common", "_pkg")


def test_every_role_has_an_argument_spec():
    """Every role a user applies or configures has one; _apt and _common are not applied (ansible-doc does not list
    them) and document their entry points in their README."""
    roles = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir() and p.name not in INTERNAL_WITHOUT_SPEC)
    assert roles, "no roles found"
    assert [r.name for r in roles] == [r.name for r in ROLES]
    for name in INTERNAL_WITHOUT_SPEC:
        assert (ROOT / "roles" / name / "README.md").is_file()


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_and_defaults_name_the_same_options(role):
    """Defaults hold every option some entry point has as optional, and none that every entry point requires (a
    default would hide a missing value)."""
    optional = set()
    for entry in entry_points(role).values():
        optional.update(name for name, spec in (entry.get("options") or {}).items() if not spec.get("required"))
    defaults_file = role / "defaults/main.yml"
    defaults = load(defaults_file) if defaults_file.is_file() else {}
    assert sorted(optional) == sorted(defaults)


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_defaults_equal_defaults_file(role):
    defaults_file = role / "defaults/main.yml"
    defaults = load(defaults_file) if defaults_file.is_file() else {}
    for entry in entry_points(role).values():
        for name, spec in (entry.get("options") or {}).items():
            if not spec.get("required"):
                assert spec.get("default") == defaults[name], name


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_no_default_depends_on_facts(role):
    """Argument validation templates the defaults: one that reads facts fails in a play with gather_facts false."""
    defaults_file = role / "defaults/main.yml"
    text = defaults_file.read_text(encoding="utf-8") if defaults_file.is_file() else ""
    assert "ansible_facts" not in text and "__" not in text.replace("# ", "")


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_every_option_is_typed_described_and_prefixed(role):
    for name, spec in options_of(role).items():
        assert name.startswith(prefix(role)), name
        assert spec.get("type"), name
        assert spec.get("description"), name
        if "choices" in spec and spec.get("default") is not None:
            assert spec["default"] in spec["choices"], name


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_internal_vars_are_double_underscored(role):
    for path in sorted((role / "vars").glob("*.yml")):
        for name in load(path):
            assert name.startswith("__%s_" % role.name.lstrip("_")), "%s: %s" % (path.name, name)


def test_nvidia_repository_has_one_owner():
    """Only _nvidia_repo writes NVIDIA's repository: no other role names its entry or the repository variables'
    old per-role forms (nvidia_driver_cuda_repo_*, cuda_repo_*, nccl_repo_*)."""
    for path in sorted((ROOT / "roles").rglob("*.yml")):
        if path.parts[-3] == "_nvidia_repo" or "_nvidia_repo" in path.parts:
            continue
        text = path.read_text(encoding="utf-8")
        assert "gpufleet-nvidia-cuda" not in text, path
        for old in ("nvidia_driver_cuda_repo_", "cuda_repo_url", "cuda_repo_key", "nccl_repo_", "cuda_repo_manage"):
            assert old not in text, (path, old)


INTERNAL_ENTRY_POINTS = {"_apt": ["source", "packages", "change", "holds", "upgrade_guard"], "_common": ["platform"],
                         "_nvidia_repo": ["main"], "_pkg": ["dispatch"]}


@pytest.mark.parametrize("role", sorted(INTERNAL_ENTRY_POINTS), ids=str)
def test_internal_roles_refuse_to_run_alone(role):
    """Every entry point of an internal role checks that a public gpufleet.node role called it, before any change."""
    for entry in INTERNAL_ENTRY_POINTS[role]:
        text = (ROOT / "roles" / role / "tasks" / ("%s.yml" % entry)).read_text(encoding="utf-8")
        assert any(check in text for check in ("ansible_parent_role_names", "caller.yml", "called_by_role")), \
            (role, entry)


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_no_role_sets_run_wide_facts_for_another(role):
    """Roles hand results back through registered variables: no set_fact of another role's or a helper's name."""
    for path in sorted((role / "tasks").glob("*.yml")):
        for task in load(path) or []:
            for name in (task.get("ansible.builtin.set_fact") or {}):
                assert name.lstrip("_").startswith(role.name.lstrip("_")), (path.name, name)
