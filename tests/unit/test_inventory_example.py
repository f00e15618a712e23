"""The worked inventory parses, has the groups site.yml targets, and a host with NVSwitch and one without."""
import json
import pathlib
import subprocess

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
