"""gpu_facts: the exact commands it runs, the facts it assembles, check mode, failures and the timeout.

Two layers: ``run_command`` mocked (argv, call count, facts from real captures), and the module's gather()
against the nvidia-smi emulator of tests/emulator as a real subprocess.
"""
import json
import os
import pathlib
import sys
import time

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.modules import gpu_facts

HERE = pathlib.Path(__file__).resolve().parent
FIXTURES = HERE.parent / "module_utils" / "fixtures" / "nvidia-smi"
EMULATOR = HERE.parents[2] / "emulator" / "nvidia_smi_emulator.py"

A100_XML = (FIXTURES / "31-a100-sxm4-80gb-mig-4x1g-xml" / "q-x.xml").read_text(encoding="utf-8")
P4D_TOPO = (FIXTURES / "02-aws-p4d-24xlarge-a100" / "topo-m.txt").read_text(encoding="utf-8")
P5_NVLINK = (FIXTURES / "56-aws-p5-h100-8gpu-nvlink-status-full" / "nvlink-s.txt").read_text(encoding="utf-8")
MISMATCH = (FIXTURES / "40-error-version-mismatch-classic" / "error.txt").read_text(encoding="utf-8")


@pytest.fixture
def fake_smi(tmp_path):
    path = tmp_path / "nvidia-smi"
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return str(path)


@pytest.fixture
def no_pci(tmp_path):
    return str(tmp_path / "no-pci")


class Recorder:
    """Stands in for gpu_facts.run_command: answers per argv and records every call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append((list(argv), timeout))
        return self.answers[" ".join(argv[1:])]


def run_main(monkeypatch, capsys, args, answers):
    recorder = Recorder(answers)
    monkeypatch.setattr(gpu_facts, "run_command", recorder)
    monkeypatch.setattr(gpu_facts, "loaded_module_version", lambda: "535.54.03")
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exit_info:
            gpu_facts.main()
    assert exit_info.value.code == 0
    return json.loads(capsys.readouterr().out), recorder


def test_runs_each_subcommand_once_with_exact_argv(monkeypatch, capsys, fake_smi, no_pci):
    answers = {"-q -x": (0, A100_XML, "", False), "topo -m": (0, P4D_TOPO, "", False),
               "nvlink -s": (0, P5_NVLINK, "", False)}
    result, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "timeout": 7,
                                                      "pci_devices_path": no_pci}, answers)
    assert sorted(recorder.calls) == sorted([
        ([fake_smi, "-q", "-x"], 7), ([fake_smi, "topo", "-m"], 7), ([fake_smi, "nvlink", "-s"], 7)])
    assert result["changed"] is False
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["state"] == "ok"
    assert gpu["driver_version"] == "535.54.03"
    assert gpu["cuda_driver_version"] == "12.2"
    assert gpu["count"] == 1 and gpu["attached_gpus"] == 4
    assert gpu["devices"][0]["mig_mode"]["current"] is True
    assert gpu["topology"]["nvlink_pairs"] == 28
    assert gpu["topology"]["nvlink_all_to_all"] is True
    assert gpu["topology"]["shape"] == "8 GPUs, NV12 all-to-all"
    assert gpu["topology"]["nvlink_links_active"] == 8 * 18
    assert gpu["topology"]["nvlink"]["GPU7"][17] == {"link": 17, "active": True, "speed_gbps": 26.562}
    assert gpu["loaded_module_version"] == "535.54.03"
    assert gpu["summary"] == {"models": {"NVIDIA A100-SXM4-80GB": 1}, "total_memory_mib": 81920, "homogeneous": True}
    assert gpu["message"] == "8 GPUs, NV12 all-to-all, driver 535.54.03"


def test_subset_runs_only_its_command(monkeypatch, capsys, fake_smi, no_pci):
    answers = {"topo -m": (0, P4D_TOPO, "", False)}
    result, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "gather_subset": ["topology"],
                                                      "pci_devices_path": no_pci}, answers)
    assert [call[0] for call in recorder.calls] == [[fake_smi, "topo", "-m"]]
    gpu = result["ansible_facts"]["gpu"]
    assert gpu["state"] == "ok" and gpu["count"] == 8 and gpu["devices"] == []


def test_check_mode_gathers_the_same(monkeypatch, capsys, fake_smi, no_pci):
    answers = {"-q -x": (0, A100_XML, "", False), "topo -m": (0, P4D_TOPO, "", False),
               "nvlink -s": (0, P5_NVLINK, "", False)}
    result, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci,
                                                      "_ansible_check_mode": True}, answers)
    assert len(recorder.calls) == 3
    assert result["changed"] is False
    assert result["ansible_facts"]["gpu"]["state"] == "ok"


def test_mismatch_is_a_state_not_a_failure(monkeypatch, capsys, fake_smi, no_pci):
    answers = dict((key, (18, MISMATCH, "", False)) for key in ("-q -x", "topo -m", "nvlink -s"))
    result, _recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci},
                                 answers)
    gpu = result["ansible_facts"]["gpu"]
    assert "failed" not in result
    assert gpu["state"] == "driver_library_mismatch"
    assert gpu["message"] == "Failed to initialize NVML: Driver/library version mismatch"
    assert set(gpu["errors"]) == {"-q -x", "topo -m", "nvlink -s"}


def test_not_installed(monkeypatch, capsys, tmp_path, no_pci):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_facts, "SEARCH_DIRS", (str(tmp_path / "nowhere"),))
    recorder = Recorder({})
    monkeypatch.setattr(gpu_facts, "run_command", recorder)
    with patch_module_args({"pci_devices_path": no_pci}):
        with pytest.raises(SystemExit):
            gpu_facts.main()
    gpu = json.loads(capsys.readouterr().out)["ansible_facts"]["gpu"]
    assert recorder.calls == []
    assert gpu["state"] == "not_installed"
    assert gpu["message"].startswith("nvidia-smi not found")


def test_unknown_error_without_a_loaded_module_means_driver_not_loaded():
    """What Debian's real nvidia-smi prints in a container: 'Unknown Error' and, for -q -x, exit 0."""
    text = "Failed to initialize NVML: Unknown Error\n"
    results = {"inventory": (0, text, "", False), "topology": (255, text, "", False),
               "nvlink": (255, text, "", False)}
    facts = gpu_facts.assemble(["inventory", "topology", "nvlink"], results,
                               {"nvidia_gpus": 0, "nvswitches": 0}, None, "535.309.01")
    assert facts["state"] == "driver_not_loaded"
    assert "/proc/driver/nvidia/version is absent" in facts["message"]
    facts = gpu_facts.assemble(["inventory"], results, {"nvidia_gpus": 0, "nvswitches": 0}, "535.261.03",
                               "535.309.01")
    assert facts["state"] == "driver_library_mismatch"


def test_pci_counts_gpus_and_nvswitches(tmp_path):
    def device(name, vendor, device_id, cls):
        path = tmp_path / name
        path.mkdir()
        (path / "vendor").write_text(vendor + "\n")
        (path / "device").write_text(device_id + "\n")
        (path / "class").write_text(cls + "\n")

    for bus in range(8):
        device("0000:%02x:00.0" % bus, "0x10de", "0x20b2", "0x030200")
    for bus in range(6):
        device("0000:%02x:00.0" % (0x80 + bus), "0x10de", "0x1af1", "0x068000")
    device("0000:c0:00.0", "0x15b3", "0x101b", "0x020700")  # a Mellanox NIC
    device("0000:c1:00.0", "0x10de", "0x228b", "0x040300")  # a GPU's audio function
    assert gpu_facts.read_pci(str(tmp_path)) == {"nvidia_gpus": 8, "nvswitches": 6}
    assert gpu_facts.read_pci(str(tmp_path / "absent")) == {"nvidia_gpus": None, "nvswitches": None}


# --- against the emulator, as real processes ---------------------------------------------------------------

@pytest.fixture
def emulator(tmp_path, monkeypatch):
    """An nvidia-smi on disk that runs the emulator with the profile in $GPUFLEET_EMULATOR_PROFILE."""
    config = tmp_path / "config"
    config.mkdir()
    monkeypatch.setenv("GPUFLEET_EMULATOR_CONFIG", str(config))
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, EMULATOR))
    script.chmod(0o755)

    def gather(profile, delay_ms=0, timeout=10, subset=("all",)):
        monkeypatch.setenv("GPUFLEET_EMULATOR_PROFILE", profile)
        monkeypatch.setenv("GPUFLEET_EMULATOR_DELAY_MS", str(delay_ms))
        return gpu_facts.gather({"nvidia_smi_path": str(script), "timeout": timeout, "gather_subset": list(subset),
                                 "pci_devices_path": str(tmp_path / "no-pci")})

    gather.config = config
    return gather


@pytest.mark.parametrize("profile, count, pairs, all_to_all, shape", [
    ("hgx-a100-8gpu", 8, 28, True, "8 GPUs, NV12 all-to-all"),
    ("pairs-4gpu", 4, 2, False, "4 GPUs, 2 NV4 pairs"),
    ("pcie-4gpu", 4, 0, False, "4 GPUs, no NVLink"),
])
def test_emulated_hardware(emulator, profile, count, pairs, all_to_all, shape):
    gpu = emulator(profile)
    assert gpu["state"] == "ok", gpu["message"]
    assert gpu["count"] == count == len(gpu["topology"]["gpus"])
    assert gpu["topology"]["nvlink_pairs"] == pairs
    assert gpu["topology"]["nvlink_all_to_all"] is all_to_all
    assert gpu["topology"]["shape"] == shape
    assert gpu["summary"]["homogeneous"] is True
    assert gpu["errors"] == {}


def test_emulated_inactive_link(emulator):
    (emulator.config / "inactive_links").write_text("3 5\n")
    gpu = emulator("hgx-a100-8gpu")
    assert gpu["topology"]["nvlink_links_inactive"] == 1
    assert gpu["topology"]["nvlink"]["GPU3"][5] == {"link": 5, "active": False, "speed_gbps": None}


@pytest.mark.parametrize("profile, state", [("mismatch", "driver_library_mismatch"), ("no-devices", "no_devices")])
def test_emulated_failures(emulator, profile, state):
    assert emulator(profile)["state"] == state


def test_hung_nvidia_smi_times_out_within_the_timeout(emulator):
    started = time.monotonic()
    gpu = emulator("hung", timeout=1)
    elapsed = time.monotonic() - started
    assert gpu["state"] == "timeout"
    assert "did not finish in time" in gpu["message"]
    assert elapsed < 3.0, elapsed


def test_commands_run_concurrently(emulator):
    """Three calls of 300 ms each overlap: the wall time is far under their sum (the benchmark measures how
    close it comes to the slowest call)."""
    gpu = emulator("hgx-a100-8gpu", delay_ms=300)
    calls = [seconds for name, seconds in gpu["timings"].items() if name != "wall"]
    assert len(calls) == 3
    assert gpu["timings"]["wall"] < 0.6 * sum(calls)


def test_emulator_script_is_self_contained():
    assert os.access(str(EMULATOR), os.R_OK)
    assert "import ansible" not in EMULATOR.read_text(encoding="utf-8")
