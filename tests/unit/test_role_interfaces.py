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


def options_of(role):
    """The options of every entry point of the role (main, and helpers' others such as apt_source's packages)."""
    options = {}
    for entry in load(role / "meta/argument_specs.yml")["argument_specs"].values():
        options.update(entry.get("options") or {})
    return options


def test_every_role_has_an_argument_spec():
    roles = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())
    assert roles, "no roles found"
    assert [r.name for r in roles] == [r.name for r in ROLES]


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_and_defaults_name_the_same_options(role):
    """Defaults hold every optional option, and no required one (a default would hide a missing value)."""
    options = options_of(role)
    defaults = load(role / "defaults/main.yml")
    assert sorted(name for name, spec in options.items() if not spec.get("required")) == sorted(defaults)


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_defaults_equal_defaults_file(role):
    defaults = load(role / "defaults/main.yml")
    for name, spec in options_of(role).items():
        if not spec.get("required"):
            assert spec.get("default") == defaults[name], name


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_every_option_is_typed_described_and_prefixed(role):
    for name, spec in options_of(role).items():
        assert name.startswith(role.name + "_"), name
        assert spec.get("type"), name
        assert spec.get("description"), name
        if "choices" in spec and spec.get("default") is not None:
            assert spec["default"] in spec["choices"], name


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_internal_vars_are_double_underscored(role):
    for path in sorted((role / "vars").glob("*.yml")):
        for name in load(path):
            assert name.startswith("__%s_" % role.name), "%s: %s" % (path.name, name)


def test_the_cuda_repository_has_one_entry_name():
    """nvidia_driver (cuda_repo), cuda and nccl add NVIDIA's repository under one name: one entry, one keyring."""
    names = {
        load(ROOT / "roles/nvidia_driver/vars/main.yml")["__nvidia_driver_sources"]["cuda_repo"]["file"],
        load(ROOT / "roles/cuda/vars/main.yml")["__cuda_repo_name"],
        load(ROOT / "roles/nccl/vars/main.yml")["__nccl_repo_name"],
    }
    assert names == {"gpufleet-nvidia-cuda"}
