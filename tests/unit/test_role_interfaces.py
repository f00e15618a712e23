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


def test_every_role_has_an_argument_spec():
    roles = sorted(p for p in (ROOT / "roles").iterdir() if p.is_dir())
    assert roles, "no roles found"
    assert [r.name for r in roles] == [r.name for r in ROLES]


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_and_defaults_name_the_same_options(role):
    options = load(role / "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(role / "defaults/main.yml")
    assert sorted(options) == sorted(defaults)


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_spec_defaults_equal_defaults_file(role):
    options = load(role / "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    defaults = load(role / "defaults/main.yml")
    for name, spec in options.items():
        assert spec.get("default") == defaults[name], name


@pytest.mark.parametrize("role", ROLES, ids=role_id)
def test_every_option_is_typed_described_and_prefixed(role):
    options = load(role / "meta/argument_specs.yml")["argument_specs"]["main"]["options"]
    for name, spec in options.items():
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
