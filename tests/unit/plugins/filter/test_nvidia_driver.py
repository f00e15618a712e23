"""What gpufleet.node.nvidia_driver installs for each source and flavour: the same filter the role calls,
rendered for Ubuntu 22.04 (whose archive the bench cannot reach), Ubuntu 20.04 and Debian 12."""
import pathlib
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.nvidia_driver import FilterModule

select = FilterModule().filters()["nvidia_driver_packages"]


@pytest.mark.parametrize("source, flavour, packages, main, fabricmanager", [
    ("distro", "server", ["nvidia-headless-535-server", "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("distro", "open", ["nvidia-headless-535-server-open", "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("distro", "signed", ["linux-modules-nvidia-535-server-generic", "nvidia-headless-no-dkms-535-server",
                          "nvidia-utils-535-server"], "nvidia-utils-535-server",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("distro", "desktop", ["nvidia-driver-535"], "nvidia-driver-535", ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("ppa", "desktop", ["nvidia-driver-535"], "nvidia-driver-535", []),
    ("ppa", "server", ["nvidia-headless-535", "nvidia-utils-535"], "nvidia-utils-535", []),
    ("cuda_repo", "server", ["cuda-drivers-535"], "cuda-drivers-535", ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
    ("cuda_repo", "open", ["nvidia-kernel-open-535", "cuda-drivers-535"], "cuda-drivers-535",
     ["nvidia-fabricmanager-535", "libnvidia-nscq-535"]),
])
def test_ubuntu_2204(source, flavour, packages, main, fabricmanager):
    chosen = select(source, flavour, "535", "Ubuntu", "22")
    assert chosen["packages"] == packages
    assert chosen["main"] == main
    assert chosen["fabricmanager"] == fabricmanager


def test_signed_modules_follow_the_kernel_flavour():
    assert select("distro", "signed", "535", "Ubuntu", "20", "aws")["packages"][0] == "linux-modules-nvidia-535-server-aws"


def test_debian_12_headless_compute_set():
    chosen = select("distro", "server", "535", "Debian", "12")
    assert chosen["packages"] == ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"]
    assert chosen["main"] == "nvidia-smi"
    assert chosen["fabricmanager"] == []  # Debian does not package fabric manager


def test_never_an_unversioned_metapackage():
    for source, flavours in (("distro", ["server", "open", "signed", "desktop"]), ("ppa", ["server", "desktop", "open"]),
                             ("cuda_repo", ["server", "open"])):
        for flavour in flavours:
            for name in select(source, flavour, "535", "Ubuntu", "22")["packages"]:
                assert "535" in name, name


@pytest.mark.parametrize("args, message", [
    (("ppa", "server", "535", "Debian", "12"), "PPA is for Ubuntu"),
    (("distro", "signed", "535", "Debian", "12"), "flavour 'signed' is not available"),
    (("cuda_repo", "desktop", "535", "Ubuntu", "22"), "flavour 'desktop' is not available"),
    (("distro", "server", "535", "Ubuntu", "24"), "not supported"),
    (("apt", "server", "535", "Ubuntu", "22"), "unknown driver source"),
])
def test_impossible_choices_are_named(args, message):
    with pytest.raises(AnsibleFilterError, match=message):
        select(*args)


# --- the reboot decision, on facts gpu_facts gathers from the emulator ----------------------------------------

reboot_reason = FilterModule().filters()["nvidia_driver_reboot_reason"]


@pytest.fixture
def emulated(tmp_path, monkeypatch):
    """gpu_facts' facts for an emulated profile, with a chosen loaded kernel module version."""
    from ansible_collections.gpufleet.node.plugins.modules import gpu_facts
    emulator = pathlib.Path(__file__).resolve().parents[3] / "emulator" / "nvidia_smi_emulator.py"
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, emulator))
    script.chmod(0o755)
    monkeypatch.setenv("GPUFLEET_EMULATOR_CONFIG", str(tmp_path))

    def facts(profile, loaded):
        monkeypatch.setenv("GPUFLEET_EMULATOR_PROFILE", profile)
        monkeypatch.setattr(gpu_facts, "loaded_module_version", lambda: loaded)
        return gpu_facts.gather({"nvidia_smi_path": str(script), "timeout": 10, "gather_subset": ["all"],
                                 "pci_devices_path": str(tmp_path / "none")})

    return facts


def test_no_reboot_when_the_loaded_module_is_the_installed_driver(emulated):
    assert reboot_reason(emulated("hgx-a100-8gpu", "535.183.01"), "535.183.01-1") == ""


def test_reboot_when_another_module_is_loaded(emulated):
    reason = reboot_reason(emulated("hgx-a100-8gpu", "535.161.08"), "535.183.01-1")
    assert reason == "the loaded kernel module is 535.161.08, the installed driver 535.183.01"


def test_reboot_on_a_driver_library_mismatch(emulated):
    reason = reboot_reason(emulated("mismatch", "535.183.01"), "535.216.01-0ubuntu0.22.04.1")
    assert reason.startswith("nvidia-smi reports driver_library_mismatch")


def test_reboot_when_no_module_is_loaded(emulated):
    assert "no NVIDIA kernel module is loaded" in reboot_reason(emulated("hgx-a100-8gpu", None), "535.183.01-1")


def test_never_in_a_container(emulated):
    assert reboot_reason(emulated("mismatch", "535.161.08"), "535.183.01-1", True) == ""


def test_pins_are_names_never_patterns():
    """apt matches a regex or glob pin against every package on every call (seconds each with Debian's full
    lists); exact names cost a lookup. The branch is pinned by name, other branches are forbidden by name."""
    chosen = select("cuda_repo", "server", "535", "Debian", "12")
    assert chosen["pin"][:3] == ["cuda-drivers-535", "nvidia-fabricmanager-535", "libnvidia-nscq-535"]
    # the packages an exact cuda-drivers-535 version depends on at that exact version are pinned as well
    assert {"nvidia-utils-535", "nvidia-persistenced-535", "libnvidia-compute-535-server"} <= set(chosen["pin"])
    assert {"cuda-drivers", "cuda-drivers-550", "nvidia-utils-550", "nvidia-fabricmanager-570"} <= set(chosen["forbid"])
    assert not any(name.endswith("-535") for name in chosen["forbid"])
    for name in chosen["pin"] + chosen["forbid"]:
        assert not set(name) & set("/*?[]^$"), name
    debian = select("distro", "server", "535", "Debian", "12")
    assert debian["forbid"] == [] and "nvidia-kernel-support" in debian["pin"]


@pytest.mark.parametrize("facts, path", [
    ({"distribution": "Ubuntu", "distribution_version": "22.04", "distribution_major_version": "22",
      "architecture": "x86_64"}, "ubuntu2204/x86_64"),
    ({"distribution": "Debian", "distribution_version": "12.15", "distribution_major_version": "12",
      "architecture": "aarch64"}, "debian12/sbsa"),
])
def test_cuda_repository_path(facts, path):
    from ansible_collections.gpufleet.node.plugins.filter.nvidia_driver import nvidia_cuda_repo_path
    assert nvidia_cuda_repo_path(facts) == path
    with pytest.raises(AnsibleFilterError):
        nvidia_cuda_repo_path({"distribution": "Debian"})
