"""Fabric manager and NVLSM where the NVSwitches are the node's own (HGX B200: 4th generation, no PCI function),
neither on a GB200 compute tray (its NVSwitches are in the NVLink switch trays, which run them)."""
import pytest

NVLSM_MODULES = "/etc/modules-load.d/gpufleet-nvlsm.conf"


def upstream(version):
    return version.rsplit("-", 1)[0]


def test_fabric_manager_at_the_driver_version_held(host, profile):
    if profile != "hgx-b200-8gpu":
        pytest.skip("fabric manager only on the HGX B200")
    driver = upstream(host.package("cuda-drivers-580").version)
    # From 580 NVIDIA names them without the branch; they provide the branch-named names.
    for name, provides in (("nvidia-fabricmanager", "nvidia-fabricmanager-580"), ("libnvidia-nscq", "libnvidia-nscq-580")):
        package = host.package(name)
        assert package.is_installed and upstream(package.version) == driver, name
        assert provides in host.check_output("dpkg-query -W -f '${Provides}' %s" % name)
        assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")
    service = host.service("nvidia-fabricmanager")
    assert service.is_enabled


def test_nvlsm_with_its_infiniband_modules(host, profile):
    if profile != "hgx-b200-8gpu":
        pytest.skip("NVLSM only on the HGX B200")
    assert host.package("nvlsm").is_installed
    assert host.package("infiniband-diags").is_installed
    assert host.file("/usr/share/nvidia/nvlsm/nvlsm.conf").is_file
    modules = host.file(NVLSM_MODULES)
    assert modules.is_file and modules.user == "root" and modules.mode == 0o644
    lines = [line for line in modules.content_string.splitlines() if line and not line.startswith("#")]
    assert lines == ["mlx5_ib", "ib_umad"]


def test_gb200_tray_runs_no_fabric_manager_and_no_nvlsm(host, profile):
    if profile != "gb200-tray-4gpu":
        pytest.skip("the GB200 compute tray only")
    for name in ("nvidia-fabricmanager", "libnvidia-nscq", "nvlsm", "infiniband-diags"):
        assert not host.package(name).is_installed, name
    assert not host.file(NVLSM_MODULES).exists


def test_gpu_facts_after_the_role(host, profile):
    gpu = host.ansible("gpufleet.node.gpu_facts", check=False)["ansible_facts"]["gpu"]
    assert gpu["state"] == "ok"
    assert {device["architecture"] for device in gpu["devices"]} == {"Blackwell"}
    assert len(gpu["devices"]) == (8 if profile == "hgx-b200-8gpu" else 4)
    assert gpu["pci"]["nvswitches"] == 0
    assert {(device["fabric"]["state"], device["fabric"]["status"]) for device in gpu["devices"]} == {("Completed", "Success")}
