"""The NVIDIA driver's reboot decision, on the facts gpu_facts gathers from the emulator. (The driver's package
names per platform are data in roles/nvidia_driver/vars; tests/unit/roles/test_nvidia_driver_data.py renders them.)"""
import pathlib
import sys

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.nvidia_driver import FilterModule

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


@pytest.mark.parametrize("gpu", [None, "ok", ["GPU0"]])
def test_not_gpu_facts_is_an_error(gpu):
    with pytest.raises(AnsibleFilterError, match="expects the gpu facts"):
        reboot_reason(gpu, "535.183.01-1")


# --- transitional packages (Ubuntu's archive after branch 535's end of life) -------------------------------

transitional = FilterModule().filters()["nvidia_driver_transitional"]


def _records(name):
    """apt_plan's packages entry for one stanza of the real jammy-updates index (the apt fixtures)."""
    from ansible_collections.gpufleet.node.plugins.module_utils.apt import parse_show
    fixture = pathlib.Path(__file__).resolve().parents[1] / "module_utils" / "fixtures" / "apt" / "ubuntu2204-nvidia-headless.show.txt"
    (version, record), = parse_show(fixture.read_text(encoding="utf-8"))[name].items()
    return dict(record, wanted=version, candidate=version)


def test_ubuntu_535_headless_is_transitional():
    found = transitional({"nvidia-headless-535-server": _records("nvidia-headless-535-server")},
                         ["nvidia-headless-580-server", "nvidia-utils-580-server"])
    assert found == [{"name": "nvidia-headless-535-server", "version": "535.309.01-0ubuntu0.22.04.2",
                      "reason": "its description says 'NVIDIA headless metapackage (transitional package)' and it "
                                "depends on nvidia-headless-580-server"}]


def test_real_580_packages_are_not_transitional():
    packages = {name: _records(name) for name in ("nvidia-headless-580-server", "nvidia-headless-no-dkms-580-server")}
    assert transitional(packages, ["nvidia-headless-535-server", "nvidia-dkms-535-server"]) == []


def test_dependency_on_another_branch_without_saying_so():
    # Ubuntu's nvidia-fabricmanager-570 570.211.01-0ubuntu1.22.04.1 (jammy-updates multiverse): summary
    # "Fabric Manager for NVSwitch based systems.", Depends: nvidia-fabricmanager-580.
    packages = {"nvidia-fabricmanager-570": {"wanted": None, "candidate": "570.211.01-0ubuntu1.22.04.1",
                                             "summary": "Fabric Manager for NVSwitch based systems.",
                                             "depends": ["nvidia-fabricmanager-580"]}}
    assert transitional(packages, ["nvidia-fabricmanager-580"]) == [{
        "name": "nvidia-fabricmanager-570", "version": "570.211.01-0ubuntu1.22.04.1",
        "reason": "it depends on nvidia-fabricmanager-580, of another branch"}]


def test_packages_without_records_are_not_reported():
    assert transitional({"cuda-drivers-535": {"wanted": "535.183.01-1", "candidate": None}}, ["x"]) == []
    with pytest.raises(AnsibleFilterError):
        transitional(["not", "a", "dict"], [])
