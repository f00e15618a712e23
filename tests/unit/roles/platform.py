"""Render a role's variables for a platform the way Ansible does: defaults, vars/main.yml and the platform file
that gpufleet.node._common's fallback list picks (the list itself is read from _common, not copied here)."""
import pathlib

import yaml
from ansible.parsing.dataloader import DataLoader
from ansible.template import Templar

try:  # ansible-core 2.19 templates only strings marked as trusted (as a role's own files are)
    from ansible.template import trust_as_template
except ImportError:  # older ansible-core trusts every string
    def trust_as_template(value):
        return value

ROOT = pathlib.Path(__file__).resolve().parents[3]
ROLES = ROOT / "roles"

FACTS = {
    ("Debian", "12"): {"distribution": "Debian", "distribution_version": "12.7", "distribution_major_version": "12",
                       "distribution_release": "bookworm", "os_family": "Debian"},
    ("Ubuntu", "20.04"): {"distribution": "Ubuntu", "distribution_version": "20.04", "distribution_major_version": "20",
                          "distribution_release": "focal", "os_family": "Debian"},
    ("Ubuntu", "22.04"): {"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
                          "distribution_release": "jammy", "os_family": "Debian"},
    ("Ubuntu", "24.04"): {"distribution": "Ubuntu", "distribution_version": "24.04", "distribution_major_version": "24",
                          "distribution_release": "noble", "os_family": "Debian"},
    ("Rocky", "9.4"): {"distribution": "Rocky", "distribution_version": "9.4", "distribution_major_version": "9",
                       "distribution_release": "Blue Onyx", "os_family": "RedHat"},
}


def load(path):
    with open(path, encoding="utf-8") as stream:
        return yaml.safe_load(stream) or {}


def trusted(value):
    """The loaded data marked as Ansible marks a role's own vars files: templates in it are rendered."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, list):
        return [trusted(item) for item in value]
    if isinstance(value, dict):
        return {key: trusted(item) for key, item in value.items()}
    return value


def common_vars():
    return load(ROLES / "_common" / "vars" / "main.yml")


def facts_for(distribution, version, architecture="x86_64", **extra):
    facts = dict(FACTS[(distribution, version)])
    facts.update({"architecture": architecture, "kernel": "6.1.0-28-amd64", "virtualization_role": "host",
                  "virtualization_type": "kvm"})
    facts.update(extra)
    return facts


def templar(variables):
    return Templar(loader=DataLoader(), variables=variables)


def platform_file(role, facts):
    """The file _common's first_found picks in the role's vars/ (the same list of names, templated)."""
    names = common_vars()["__common_platform_files"]["files"]
    for name in templar({"ansible_facts": facts}).template(trusted(names)):
        if (ROLES / role / "vars" / name).is_file():
            return ROLES / role / "vars" / name
    raise AssertionError("no vars/default.yml in %s" % role)


def render(role, facts, expression, **overrides):
    """Template ``expression`` with the role's defaults, vars/main.yml, its platform file and ``overrides``."""
    variables = {}
    for path in (ROLES / role / "defaults" / "main.yml", ROLES / role / "vars" / "main.yml", platform_file(role, facts)):
        if path.is_file():
            variables.update(trusted(load(path)))
    variables.update(overrides)
    variables["ansible_facts"] = facts
    return templar(variables).template(trusted(expression))
