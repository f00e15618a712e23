"""The worked inventory parses, has the groups site.yml targets, and a host with NVSwitch and one without."""
import json
import pathlib
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]


def inventory():
    out = subprocess.run(["ansible-inventory", "-i", str(ROOT / "inventory" / "example"), "--list"],
                         check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def test_groups_and_hosts():
    data = inventory()
    assert set(data["gpu_nodes"]["children"]) == {"hgx_h100", "pcie_l40s"}
    assert data["hgx_h100"]["hosts"] and data["pcie_l40s"]["hosts"]


def test_nvswitch_nodes_take_the_driver_from_nvidia_repository():
    hostvars = inventory()["_meta"]["hostvars"]
    for host, variables in hostvars.items():
        expected = "cuda_repo" if "h100" in host else "distro"
        assert variables["nvidia_driver_source"] == expected, host
        if expected == "cuda_repo":
            assert variables["nvidia_driver_version"].startswith(variables["nvidia_driver_branch"] + ".")


def test_exact_versions_only_with_nvidia_repository():
    """An archive pocket (Ubuntu's -updates, Debian's security) carries only the newest build of a branch, so an
    exact version with source distro fails as soon as the archive moves on."""
    for host, variables in inventory()["_meta"]["hostvars"].items():
        if variables["nvidia_driver_source"] == "distro":
            assert not variables.get("nvidia_driver_version"), host


def test_no_end_of_life_branch():
    """Branch 535 reached its end of life in June 2026 (NVIDIA's driver lifecycle)."""
    for host, variables in inventory()["_meta"]["hostvars"].items():
        assert variables["nvidia_driver_branch"] != "535", host


def test_site_playbook_syntax():
    subprocess.run(["ansible-playbook", "--syntax-check", "-i", str(ROOT / "inventory" / "example"),
                    str(ROOT / "playbooks" / "site.yml")], check=True, capture_output=True)


def test_containers_power_and_metrics_are_turned_on_explicitly():
    """site.yml runs these roles only where the inventory turns them on; the example shows all three."""
    hostvars = inventory()["_meta"]["hostvars"]
    for host, variables in hostvars.items():
        assert variables["gpufleet_containers"] is True and variables["gpufleet_monitoring"] is True, host
        assert variables.get("gpufleet_gpu_power", False) is ("h100" in host), host
    h100 = next(variables for host, variables in hostvars.items() if "h100" in host)
    assert 200 <= h100["gpu_power_limits_w"]["NVIDIA H100 80GB HBM3"] <= 700    # the H100 SXM's range


def test_every_variable_is_a_role_option_or_a_site_switch():
    """A misspelt variable in an inventory is silently ignored: each one the example sets is an option of a role's
    argument spec, or one of site.yml's gpufleet_* switches (which site.yml itself names)."""
    options = set()
    for spec in ROOT.glob("roles/*/meta/argument_specs.yml"):
        for entry in yaml.safe_load(spec.read_text())["argument_specs"].values():
            options.update(entry.get("options", {}))
    site = (ROOT / "playbooks" / "site.yml").read_text()
    for host, variables in inventory()["_meta"]["hostvars"].items():
        for name in variables:
            assert name in options or (name.startswith("gpufleet_") and name in site), (host, name)
