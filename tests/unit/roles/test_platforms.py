"""One list of supported platforms (roles/_common/vars/main.yml): every role's Galaxy metadata and the README's
table follow it, every role has platform data for each of them, and anything else falls back to default.yml,
which preflight refuses."""
import re

import pytest

from .platform import FACTS, ROLES, ROOT, common_vars, facts_for, load, platform_file, render

PLATFORMS = common_vars()["__common_platforms"]
ALL_ROLES = sorted(p for p in ROLES.iterdir() if (p / "meta" / "main.yml").is_file())
DATA_ROLES = sorted(p for p in ALL_ROLES if (p / "vars" / "default.yml").is_file())


def role_id(role):
    return role.name


def test_the_list_names_each_platform_once_with_its_release():
    keys = [(p["distribution"], p["version"]) for p in PLATFORMS]
    assert len(keys) == len(set(keys))
    assert all(p["release"] for p in PLATFORMS)
    assert ("Ubuntu", "24.04") in keys


@pytest.mark.parametrize("role", ALL_ROLES, ids=role_id)
def test_galaxy_metadata_follows_the_list(role):
    galaxy = load(role / "meta" / "main.yml")["galaxy_info"]["platforms"]
    expected = {}
    for platform in PLATFORMS:
        expected.setdefault(platform["distribution"], []).append(platform["release"])
    assert {entry["name"]: entry["versions"] for entry in galaxy} == expected


def test_readme_table_follows_the_list():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("## Supported platforms", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| *(Debian|Ubuntu) *\| *([0-9.]+) *\| *([a-z]+) *\|", section, re.M)
    assert rows == [(p["distribution"], p["version"], p["release"]) for p in PLATFORMS]


@pytest.mark.parametrize("role", DATA_ROLES, ids=role_id)
def test_every_listed_platform_has_data_in_every_role(role):
    for platform in PLATFORMS:
        facts = facts_for(platform["distribution"], platform["version"])
        assert platform_file(role.name, facts).name != "default.yml", (role.name, platform)


@pytest.mark.parametrize("role", DATA_ROLES, ids=role_id)
def test_an_unlisted_platform_falls_back_to_default(role):
    assert platform_file(role.name, facts_for("Rocky", "9.4")).name == "default.yml"


@pytest.mark.parametrize("role", DATA_ROLES, ids=role_id)
def test_platform_files_hold_only_internal_constants(role):
    for path in sorted((role / "vars").glob("*.yml")):
        for name in load(path):
            assert name.startswith("__%s_" % role.name.lstrip("_")), (path.name, name)


def test_every_role_loads_its_platform_data_first():
    """Each public role's preflight starts with _common's platform entry point, which loads the data and refuses
    platforms outside the list."""
    for role in ALL_ROLES:
        if role.name.startswith("_"):
            continue
        first = load(role / "tasks" / "preflight.yml")[0]
        include = first["ansible.builtin.include_role"]
        assert include["name"] == "gpufleet.node._common" and include["tasks_from"] == "platform", role.name
        assert first["vars"]["_common_role_name"] == role.name


def test_facts_cover_the_list():
    assert {(p["distribution"], p["version"]) for p in PLATFORMS} <= set(FACTS)


def test_release_tables_cover_the_list():
    """Data kept per release: the first CUDA release NVIDIA's repository has on each platform's path (the path as
    _nvidia_repo computes it), and each Ubuntu release's GA kernel series (baseline's HWE headers metapackage)."""
    first_releases = load(ROLES / "_nvidia_repo" / "vars" / "main.yml")["__nvidia_repo_first_cuda_releases"]
    ga_kernels = load(ROLES / "baseline" / "vars" / "Ubuntu.yml")["__baseline_ubuntu_ga_kernels"]
    for platform in PLATFORMS:
        facts = facts_for(platform["distribution"], platform["version"])
        assert render("_nvidia_repo", facts, "{{ __nvidia_repo_distro }}") in first_releases, platform
        if platform["distribution"] == "Ubuntu":
            assert re.match(r"^[0-9]+\.[0-9]+$", ga_kernels[platform["version"]]), platform
