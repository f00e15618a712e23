"""One floor of ansible-core: meta/runtime.yml, every role's min_ansible_version and the tool chain make test runs;
the newest release make test runs lies above it, and the README names both."""
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def floor():
    spec = yaml.safe_load((ROOT / "meta" / "runtime.yml").read_text())["requires_ansible"]
    match = re.fullmatch(r">=(\d+)\.(\d+)\.0", spec)
    assert match, spec
    return "%s.%s" % match.groups()


def test_every_role_states_the_floor():
    for meta in sorted(ROOT.glob("roles/*/meta/main.yml")):
        assert str(yaml.safe_load(meta.read_text())["galaxy_info"]["min_ansible_version"]) == floor(), meta


def test_make_test_runs_the_floor():
    pinned = re.search(r"^ansible-core==(\d+\.\d+)\.\d+$", (ROOT / "requirements" / "dev.txt").read_text(), re.MULTILINE)
    assert pinned and pinned.group(1) == floor()


def pinned(requirements):
    match = re.search(r"^ansible-core==(\d+\.\d+\.\d+)$", (ROOT / "requirements" / requirements).read_text(), re.MULTILINE)
    assert match, requirements
    return match.group(1)


def test_the_newest_lies_above_the_floor_and_the_readme_names_both():
    newest = tuple(int(part) for part in pinned("newest.txt").split("."))
    assert newest[:2] > tuple(int(part) for part in floor().split("."))
    readme = (ROOT / "README.md").read_text()
    assert "ansible-core %s or newer" % floor() in readme
    assert "the floor, %s," % pinned("dev.txt") in readme and "the newest, %s," % pinned("newest.txt") in readme
