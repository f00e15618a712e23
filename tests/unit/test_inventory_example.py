"""The worked inventory parses, has the groups site.yml targets, and a host with NVSwitch and one without."""
import json
import os
import pathlib
import subprocess
import sys

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


# The constructed source inventory/example/topology.yml: groups from the GPU facts in the fact cache.
EXAMPLE_HOSTS = {"gpu-h100-01.example.com": "hgx-h100-8gpu", "gpu-h100-02.example.com": "hgx-h100-8gpu",
                 "gpu-l40s-01.example.com": "pcie-4gpu"}


def collections_path(tmp):
    """A collection path where gpufleet.node is this checkout."""
    link = tmp / "collections" / "ansible_collections" / "gpufleet" / "node"
    if not link.is_symlink():
        link.parent.mkdir(parents=True, exist_ok=True)
        link.symlink_to(ROOT)
    return tmp / "collections"


def gather_into_cache(tmp, profiles):
    """A jsonfile fact cache of the example's hosts as gpu_facts gathers them, each from the emulated board of its
    profile (nvidia-smi: the emulator's output, replayed; the board's PCI tree through pci_devices_path), through
    local connections named as the example's hosts. Returns the cache directory."""
    sys.path.insert(0, str(ROOT / "tools" / "bench"))
    import simulated_fleet  # pylint: disable=import-outside-toplevel
    for directory in ("config", "proc"):
        (tmp / directory).mkdir(exist_ok=True)
    hosts = {}
    for host, profile in profiles.items():
        pci = tmp / "pci" / profile
        if not pci.exists():
            pci.mkdir(parents=True)
            simulated_fleet.emulator_profile.lay_out_pci(simulated_fleet.emulator_profile.load_profile(profile), str(pci))
        hosts[host] = {"smi": str(simulated_fleet.write_nvidia_smi(tmp, profile, 0, True)), "pci": str(pci)}
    (tmp / "hosts.json").write_text(json.dumps({"all": {"hosts": hosts, "vars": {
        "ansible_connection": "local", "ansible_python_interpreter": sys.executable}}}))
    (tmp / "gather.yml").write_text(
        "- hosts: all\n  gather_facts: false\n  tasks:\n"
        "    - gpufleet.node.gpu_facts: {backend: nvidia_smi, nvidia_smi_path: '{{ smi }}', pci_devices_path: '{{ pci }}'}\n")
    cache = tmp / "cache"
    subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp / "hosts.json"),
                    str(tmp / "gather.yml")], env=cache_env(tmp, cache), check=True, capture_output=True)
    return cache


def cache_env(tmp, cache):
    return dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections_path(tmp)), ANSIBLE_CACHE_PLUGIN="jsonfile",
                ANSIBLE_CACHE_PLUGIN_CONNECTION=str(cache), ANSIBLE_LOCAL_TMP=str(tmp / "ansible-tmp"))


def graph(env):
    """``{group: {host, ...}}`` from ansible-inventory --graph over inventory/example."""
    out = subprocess.run([str(pathlib.Path(sys.executable).parent / "ansible-inventory"), "-i",
                          str(ROOT / "inventory" / "example"), "--graph"], env=env, check=True, capture_output=True,
                         text=True).stdout
    groups, stack = {}, []
    for line in out.splitlines():
        depth = line.count("|")
        name = line.split("--")[-1].strip()
        del stack[depth:]
        if name.startswith("@"):
            groups.setdefault(name[1:].rstrip(":"), set())
            stack.append(name[1:].rstrip(":"))
        elif name:
            for group in stack:
                groups[group].add(name)
    return groups


def test_constructed_groups_from_the_cached_gpu_facts(tmp_path):
    cache = gather_into_cache(tmp_path, EXAMPLE_HOSTS)
    groups = graph(cache_env(tmp_path, cache))
    h100 = {"gpu-h100-01.example.com", "gpu-h100-02.example.com"}
    assert groups["nvswitch_8gpu"] == h100 and groups["gpus_8"] == h100
    assert groups["pcie"] == {"gpu-l40s-01.example.com"} and groups["gpus_4"] == {"gpu-l40s-01.example.com"}
    assert groups["gpu_state_ok"] == set(EXAMPLE_HOSTS)
    assert groups["hgx_h100"] == h100 and groups["gpu_nodes"] == set(EXAMPLE_HOSTS)   # hosts.yml as before


def test_constructed_groups_follow_the_machine_not_the_name(tmp_path):
    """An H100 host whose facts show NVLink pairs, and one the cache does not hold, are in neither group."""
    cache = gather_into_cache(tmp_path, {"gpu-h100-01.example.com": "pairs-4gpu", "gpu-l40s-01.example.com": "pcie-4gpu"})
    groups = graph(cache_env(tmp_path, cache))
    assert "nvswitch_8gpu" not in groups and groups["gpus_4"] == {"gpu-h100-01.example.com", "gpu-l40s-01.example.com"}
    assert groups["pcie"] == {"gpu-l40s-01.example.com"}
    assert "gpu-h100-02.example.com" not in set().union(*(groups[name] for name in groups if name.startswith("gpu")
                                                          and name != "gpu_nodes"))


def test_without_a_fact_cache_the_constructed_groups_are_empty():
    groups = graph(dict(os.environ))
    assert not [name for name in groups if name in ("nvswitch_8gpu", "pcie") or name.startswith(("gpus_", "gpu_state_"))]
    assert groups["gpu_nodes"] == set(EXAMPLE_HOSTS)
