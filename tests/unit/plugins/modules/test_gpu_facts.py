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
from ansible_collections.gpufleet.node.plugins.module_utils import gpu_inventory, gpu_stack
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
    """Stands in for gpu_inventory.run_command: answers per argv and records every call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, argv, timeout):
        self.calls.append((list(argv), timeout))
        return self.answers[" ".join(argv[1:])]


def no_nvml(timeout, library="libnvidia-ml.so.1"):
    """The NVML backend on a host without the library (this bench has no driver)."""
    return {"state": "library_not_found", "message": "%s: cannot open shared object file" % library}


def run_main(monkeypatch, capsys, args, answers, nvml_gather=no_nvml):
    recorder = Recorder(answers)
    monkeypatch.setattr(gpu_inventory, "run_command", recorder)
    monkeypatch.setattr(gpu_inventory.nvml, "gather", nvml_gather)
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
    # The capture (telegraf's a100-sxm4-v12.xml) lists one <gpu> of the 4 it says are attached: from a whole
    # `-q -x`, that is a GPU the driver does not list, whatever the other commands say.
    assert gpu["state"] == "device_error"
    assert gpu["message"] == "the driver says 4 GPUs are attached but lists 1"
    assert gpu["source"] == "nvidia_smi"
    assert gpu["driver_version"] == "535.54.03"
    assert gpu["cuda_driver_version"] == "12.2"
    assert gpu["count"] == 1 and gpu["attached_gpus"] == 4
    assert gpu["devices"][0]["mig_mode"]["current"] is True
    assert gpu["topology"]["nvlink_pairs"] == 28
    assert gpu["topology"]["nvlink_all_to_all"] is True
    assert gpu["topology"]["nvlink_links_active"] == 8 * 18
    assert gpu["topology"]["nvlink"]["GPU7"][17] == {"link": 17, "active": True, "speed_gbps": 26.562,
                                                     "remote_pci_bus_id": None, "remote_device_type": None}
    assert gpu["loaded_module_version"] == "535.54.03"
    assert gpu["summary"] == {"models": {"NVIDIA A100-SXM4-80GB": 1}, "total_memory_mib": 81920, "homogeneous": True}
    assert gpu["topology"]["shape"] == "8 GPUs, NV12 all-to-all"


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
    assert result["ansible_facts"]["gpu"]["count"] == 1 and result["ansible_facts"]["gpu"]["devices"]


def test_the_stack_only_when_asked_in_the_same_run(monkeypatch, capsys, fake_smi, no_pci):
    answers = {"-q -x": (0, A100_XML, "", False), "topo -m": (0, P4D_TOPO, "", False),
               "nvlink -s": (0, P5_NVLINK, "", False)}
    asked = []
    monkeypatch.setattr(gpu_stack, "gather", lambda venv: asked.append(venv) or {"cuda": "12.8.1", "torch": None})
    result, _recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci},
                                 answers)
    assert "gpu_stack" not in result["ansible_facts"] and asked == []
    args = {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci, "stack": True, "pytorch_venv": "/srv/venv"}
    result, _recorder = run_main(monkeypatch, capsys, args, answers)
    assert result["ansible_facts"]["gpu_stack"] == {"cuda": "12.8.1", "torch": None} and asked == ["/srv/venv"]
    assert result["ansible_facts"]["gpu"]["driver_version"] == "535.54.03"


def test_mismatch_is_a_state_not_a_failure(monkeypatch, capsys, fake_smi, no_pci):
    answers = dict((key, (18, MISMATCH, "", False)) for key in ("-q -x", "topo -m", "nvlink -s"))
    result, _recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci},
                                 answers)
    gpu = result["ansible_facts"]["gpu"]
    assert "failed" not in result
    assert gpu["state"] == "driver_library_mismatch"
    assert gpu["message"] == "Failed to initialize NVML: Driver/library version mismatch"
    assert set(gpu["errors"]) == {"-q -x", "topo -m", "nvlink -s", "nvml"}


def test_not_installed(monkeypatch, capsys, tmp_path, no_pci):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setattr(gpu_inventory, "SEARCH_DIRS", (str(tmp_path / "nowhere"),))
    recorder = Recorder({})
    monkeypatch.setattr(gpu_inventory, "run_command", recorder)
    monkeypatch.setattr(gpu_inventory.nvml, "gather", no_nvml)
    with patch_module_args({"pci_devices_path": no_pci}):
        with pytest.raises(SystemExit):
            gpu_facts.main()
    gpu = json.loads(capsys.readouterr().out)["ansible_facts"]["gpu"]
    assert recorder.calls == []
    assert gpu["state"] == "not_installed"
    assert gpu["message"].startswith("NVML: libnvidia-ml.so.1: cannot open shared object file; nvidia-smi not found")


def test_unknown_error_without_a_loaded_module_means_driver_not_loaded():
    """What Debian's real nvidia-smi prints in a container: 'Unknown Error' and, for -q -x, exit 0."""
    text = "Failed to initialize NVML: Unknown Error\n"
    results = {"inventory": (0, text, "", False), "topology": (255, text, "", False),
               "nvlink": (255, text, "", False)}
    facts = gpu_inventory.assemble(["inventory", "topology", "nvlink"], results,
                                   {"nvidia_gpus": 0, "nvswitches": 0}, None, "535.309.01")
    assert facts["state"] == "driver_not_loaded"
    assert "/proc/driver/nvidia/version is absent" in facts["message"]
    facts = gpu_inventory.assemble(["inventory"], results, {"nvidia_gpus": 0, "nvswitches": 0}, "535.261.03",
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
    assert gpu_inventory.read_pci(str(tmp_path)) == {"nvidia_gpus": 8, "nvswitches": 6}
    assert gpu_inventory.read_pci(str(tmp_path / "absent")) == {"nvidia_gpus": None, "nvswitches": None}


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
        return gpu_facts.gather({"backend": "nvidia_smi", "nvidia_smi_path": str(script), "timeout": timeout,
                                 "gather_subset": list(subset), "pci_devices_path": str(tmp_path / "no-pci")})

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
    assert gpu["topology"]["nvlink"]["GPU3"][5] == {"link": 5, "active": False, "speed_gbps": None,
                                                    "remote_pci_bus_id": None, "remote_device_type": None}


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


# --- states from evidence: counts, lost GPUs, a module that is loaded ----------------------------------------

LOST_TEXT = (FIXTURES / "42-error-gpu-lost" / "error.txt").read_text(encoding="utf-8")
NO_DRIVER_TEXT = (FIXTURES / "41-error-couldnt-communicate-with-driver" / "error.txt").read_text(encoding="utf-8")
HEALTHY_PCI = {"nvidia_gpus": 4, "nvswitches": 0}


def xml_document(attached, bus_ids):
    """A `-q -x` document in the v12 layout with one <gpu> per bus id (only what the assertions read)."""
    gpus = "".join(
        '<gpu id="%s"><product_name>NVIDIA A100-SXM4-80GB</product_name><uuid>GPU-%d</uuid>'
        "<pci><pci_bus_id>%s</pci_bus_id></pci><fb_memory_usage><total>81920 MiB</total></fb_memory_usage></gpu>"
        % (bus, number, bus) for number, bus in enumerate(bus_ids))
    return ('<?xml version="1.0" ?>\n<nvidia_smi_log><driver_version>535.183.01</driver_version>'
            "<cuda_version>12.2</cuda_version><attached_gpus>%d</attached_gpus>%s</nvidia_smi_log>\n" % (attached, gpus))


BUSES = ["00000000:03:00.0", "00000000:04:00.0", "00000000:05:00.0", "00000000:06:00.0"]


def test_a_lost_gpu_in_partial_output_is_gpu_lost_not_ok():
    """What nvidia-smi does when a GPU falls off the bus: the XML of the others, the lost one on stderr, rc 15."""
    results = {"inventory": (15, xml_document(4, BUSES[1:]), LOST_TEXT, False)}
    facts = gpu_inventory.assemble(["inventory"], results, HEALTHY_PCI, "535.183.01", None)
    assert facts["state"] == "gpu_lost"
    assert facts["count"] == 3 and facts["attached_gpus"] == 4
    assert facts["lost_gpus"] == ["00000000:03:00.0"]
    assert "00000000:03:00.0" in facts["message"] and "3 of 4" in facts["message"]


def test_attached_gpus_the_driver_does_not_list_are_a_device_error():
    results = {"inventory": (0, xml_document(4, BUSES[:3]), "", False)}
    facts = gpu_inventory.assemble(["inventory"], results, HEALTHY_PCI, "535.183.01", None)
    assert facts["state"] == "device_error"
    assert facts["message"] == "the driver says 4 GPUs are attached but lists 3"


def test_more_gpus_on_the_pci_bus_than_the_driver_lists_are_a_device_error():
    results = {"inventory": (0, xml_document(3, BUSES[:3]), "", False)}
    facts = gpu_inventory.assemble(["inventory"], results, HEALTHY_PCI, "535.183.01", None)
    assert facts["state"] == "device_error"
    assert facts["message"] == "the PCI bus shows 4 NVIDIA GPUs, the driver lists 3"
    healthy = gpu_inventory.assemble(["inventory"], {"inventory": (0, xml_document(4, BUSES), "", False)},
                                     HEALTHY_PCI, "535.183.01", None)
    assert healthy["state"] == "ok" and healthy["message"] == "4 GPUs, driver 535.183.01"


def test_no_answer_while_a_module_is_loaded_is_not_driver_not_loaded():
    results = dict((part, (255 if part != "inventory" else 0, NO_DRIVER_TEXT, "", False))
                   for part in ("inventory", "topology", "nvlink"))
    loaded = gpu_inventory.assemble(["inventory", "topology", "nvlink"], results, HEALTHY_PCI, "535.183.01", None)
    assert loaded["state"] == "error"
    assert "kernel module 535.183.01 is loaded" in loaded["message"]
    assert loaded["loaded_module_version"] == "535.183.01"
    unloaded = gpu_inventory.assemble(["inventory", "topology", "nvlink"], results, HEALTHY_PCI, None, None)
    assert unloaded["state"] == "driver_not_loaded"


def test_the_ok_message_counts_the_driver_list_not_the_matrix():
    """The matrix of the p4d capture has 8 GPUs; the driver lists 4: the message says 4."""
    results = {"inventory": (0, xml_document(4, BUSES), "", False), "topology": (0, P4D_TOPO, "", False)}
    facts = gpu_inventory.assemble(["inventory", "topology"], results, HEALTHY_PCI, "535.183.01", None)
    assert facts["state"] == "ok"
    assert facts["message"].startswith("4 GPUs, a topology matrix of 8")


def test_gpus_without_nvlink_print_nothing_and_that_is_ok():
    """Real nvidia-smi on PCIe-only GPUs: `nvlink -s` prints nothing and exits 0."""
    results = {"inventory": (0, xml_document(4, BUSES), "", False), "nvlink": (0, "", "", False)}
    facts = gpu_inventory.assemble(["inventory", "nvlink"], results, HEALTHY_PCI, "535.183.01", None)
    assert facts["state"] == "ok", facts["message"]
    assert facts["topology"]["nvlink"] == {} and facts["topology"]["nvlink_links_active"] == 0
    assert facts["errors"] == {}


def test_a_gpu_with_every_link_down_is_named():
    text = ("GPU 0: NVIDIA A100-SXM4-80GB (UUID: GPU-0)\n\t Link 0: 25 GB/s\n\t Link 1: 25 GB/s\n"
            "GPU 1: NVIDIA A100-SXM4-80GB (UUID: GPU-1)\n"
            "NVML: Unable to retrieve NVLink information as all links are inActive\n")
    results = {"inventory": (0, xml_document(2, BUSES[:2]), "", False), "nvlink": (0, text, "", False)}
    facts = gpu_inventory.assemble(["inventory", "nvlink"], results, {"nvidia_gpus": 2, "nvswitches": 0}, "535.183.01", None)
    assert facts["topology"]["nvlink_gpus_all_inactive"] == ["GPU1"]
    assert facts["topology"]["nvlink_links_active"] == 2


# --- the NVML backend and the choice between backends ------------------------------------------------------

def nvml_device(index, bus, **fields):
    device = {"index": index, "name": "NVIDIA A100-SXM4-80GB", "uuid": "GPU-%d" % index, "pci_bus_id": bus,
              "memory_total_mib": 81920, "compute_capability": "8.0", "temperature_c": 33, "power_draw_w": None,
              "pcie": {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16, "replay_counter": 0}}
    device.update(fields)
    return device


def nvml_result(devices, state="ok", lost=(), missing=(), count=None):
    labels = ["GPU%d" % device["index"] for device in devices]
    link = {"link": 0, "active": True, "speed_gbps": 25.0, "remote_pci_bus_id": None, "remote_device_type": "gpu"}
    return {
        "state": state, "message": "" if state == "ok" else "NVML says %s" % state, "nvml_return": None,
        "driver_version": "535.183.01", "cuda_driver_version": "12.2", "nvml_version": "12.535.183.01",
        "count": len(devices) + len(lost) if count is None else count, "devices": devices, "lost": list(lost),
        "missing": list(missing), "timings": {"init": 0.05, "gather": 0.01},
        "topology": {
            "gpus": labels, "matrix": dict((a, dict((b, "NV1") for b in labels if b != a)) for a in labels),
            "cpu_affinity": dict((label, "0-15") for label in labels), "numa_affinity": dict((label, "0") for label in labels),
            "gpu_numa_id": dict((label, "N/A") for label in labels), "nics": None, "gpu_nic": None,
            "p2p": dict((a, dict((b, "OK") for b in labels if b != a)) for a in labels),
            "nvlink": dict((label, [dict(link)]) for label in labels),
        },
    }


def test_auto_takes_nvml_when_its_library_loads(monkeypatch, capsys, fake_smi, no_pci):
    result = nvml_result([nvml_device(0, BUSES[0]), nvml_device(1, BUSES[1])])
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci}, {},
                             nvml_gather=lambda timeout, library: result)
    gpu = out["ansible_facts"]["gpu"]
    assert recorder.calls == []
    assert gpu["source"] == "nvml" and gpu["state"] == "ok", gpu["message"]
    assert gpu["count"] == 2 and gpu["devices"][1]["compute_capability"] == "8.0"
    assert gpu["topology"]["shape"] == "2 GPUs, NV1 all-to-all"
    assert gpu["topology"]["nvlink"]["GPU0"][0]["remote_device_type"] == "gpu"
    assert gpu["topology"]["nics"] is None
    assert gpu["message"] == "2 GPUs, NV1 all-to-all, driver 535.183.01"


def test_auto_falls_back_to_nvidia_smi_without_the_library(monkeypatch, capsys, fake_smi, no_pci):
    answers = {"-q -x": (0, xml_document(2, BUSES[:2]), "", False), "topo -m": (0, P4D_TOPO, "", False),
               "nvlink -s": (0, "", "", False)}
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci}, answers)
    gpu = out["ansible_facts"]["gpu"]
    assert len(recorder.calls) == 3
    assert gpu["source"] == "nvidia_smi"
    assert "cannot open shared object file" in gpu["errors"]["nvml"]
    assert gpu["devices"][0]["compute_capability"] is None


def test_backend_nvml_without_the_library_is_not_installed(monkeypatch, capsys, fake_smi, no_pci):
    out, recorder = run_main(monkeypatch, capsys, {"backend": "nvml", "nvidia_smi_path": fake_smi,
                                                   "pci_devices_path": no_pci}, {})
    gpu = out["ansible_facts"]["gpu"]
    assert recorder.calls == []
    assert gpu["state"] == "not_installed" and gpu["message"].startswith("NVML: ")


def test_backend_nvidia_smi_never_loads_nvml(monkeypatch, capsys, fake_smi, no_pci):
    def forbidden(timeout, library):
        raise AssertionError("NVML was loaded")

    answers = {"-q -x": (0, xml_document(1, BUSES[:1]), "", False)}
    out, _recorder = run_main(monkeypatch, capsys, {"backend": "nvidia_smi", "nvidia_smi_path": fake_smi,
                                                    "gather_subset": ["inventory"], "pci_devices_path": no_pci},
                              answers, nvml_gather=forbidden)
    assert out["ansible_facts"]["gpu"]["source"] == "nvidia_smi"


def test_calls_missing_from_nvml_are_filled_from_nvidia_smi_by_bus_id(monkeypatch, capsys, fake_smi, no_pci):
    """An older driver's library lacks a call: auto fills that field from `-q -x`, matching GPUs by bus id."""
    devices = [nvml_device(0, BUSES[1], memory_total_mib=None), nvml_device(1, BUSES[0], memory_total_mib=None)]
    result = nvml_result(devices, missing=["nvmlDeviceGetMemoryInfo"])
    result["absent"] = ["nvmlDeviceGetMemoryInfo"]
    xml = xml_document(2, BUSES[:2]).replace("<total>81920 MiB</total>", "<total>40960 MiB</total>", 1)
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci},
                             {"-q -x": (0, xml, "", False)}, nvml_gather=lambda timeout, library: result)
    gpu = out["ansible_facts"]["gpu"]
    assert [call[0][1:] for call in recorder.calls] == [["-q", "-x"]]
    assert gpu["source"] == "nvml+nvidia_smi"
    assert gpu["nvml_missing"] == ["nvmlDeviceGetMemoryInfo"]
    by_bus = dict((device["pci_bus_id"], device["memory_total_mib"]) for device in gpu["devices"])
    assert by_bus == {BUSES[0]: 40960, BUSES[1]: 81920}


def test_not_supported_calls_are_answers_not_a_reason_for_nvidia_smi(monkeypatch, capsys, fake_smi, no_pci):
    result = nvml_result([nvml_device(0, BUSES[0])], missing=["nvmlDeviceGetGpuFabricInfo"])
    result["absent"] = []
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci}, {},
                             nvml_gather=lambda timeout, library: result)
    assert recorder.calls == [] and out["ansible_facts"]["gpu"]["source"] == "nvml"


@pytest.mark.parametrize("state", ["driver_library_mismatch", "driver_not_loaded", "no_devices", "timeout"])
def test_nvml_states_come_from_its_return_codes(state):
    facts = gpu_inventory.assemble_nvml(["inventory"], nvml_result([], state=state), HEALTHY_PCI, None)
    assert facts["state"] == state and facts["source"] == "nvml"
    assert facts["message"] == "NVML says %s" % state


def test_nvml_driver_not_loaded_beside_a_loaded_module_is_an_error():
    facts = gpu_inventory.assemble_nvml(["inventory"], nvml_result([], state="driver_not_loaded"), HEALTHY_PCI,
                                        "535.183.01")
    assert facts["state"] == "error" and "kernel module 535.183.01 is loaded" in facts["message"]


@pytest.mark.parametrize("state", ["gpu_lost", "device_error"])
def test_nvml_failing_before_any_device_is_a_state_not_a_crash(state):
    """nvmlInit_v2 or the device count answering GPU_IS_LOST or RESET_REQUIRED: no devices, no topology."""
    result = dict(nvml_result([], state=state), topology=None)
    facts = gpu_inventory.assemble_nvml(["inventory", "topology", "nvlink"], result, HEALTHY_PCI, "535.183.01")
    assert facts["state"] == state and facts["message"] == "NVML says %s" % state


def test_nvml_handle_failing_otherwise_than_lost_is_a_device_error():
    devices = [nvml_device(index, BUSES[index]) for index in (0, 1, 3)]
    result = nvml_result(devices, state="device_error",
                         lost=[{"index": 2, "pci_bus_id": None, "nvml_return": "NVML_ERROR_INSUFFICIENT_POWER"}])
    facts = gpu_inventory.assemble_nvml(["inventory"], result, HEALTHY_PCI, "535.183.01")
    assert facts["lost_gpus"] == []
    assert facts["state"] == "device_error"


def test_auto_falls_back_when_the_nvml_child_broke(monkeypatch, capsys, fake_smi, no_pci):
    broken = dict(nvml_result([], state="error"), message="the NVML gather ended without a result (signal 11)")
    answers = {"-q -x": (0, xml_document(1, BUSES[:1]), "", False), "topo -m": (0, P4D_TOPO, "", False),
               "nvlink -s": (0, "", "", False)}
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci}, answers,
                             nvml_gather=lambda timeout, library: broken)
    gpu = out["ansible_facts"]["gpu"]
    assert len(recorder.calls) == 3 and gpu["source"] == "nvidia_smi"
    assert gpu["errors"]["nvml"] == "the NVML gather ended without a result (signal 11)"
    answered = dict(broken, nvml_return="NVML_ERROR_UNKNOWN")
    out, recorder = run_main(monkeypatch, capsys, {"nvidia_smi_path": fake_smi, "pci_devices_path": no_pci}, answers,
                             nvml_gather=lambda timeout, library: answered)
    assert recorder.calls == [] and out["ansible_facts"]["gpu"]["source"] == "nvml"


def test_nvml_lost_gpu():
    devices = [nvml_device(index, BUSES[index]) for index in (0, 1, 3)]
    result = nvml_result(devices, state="gpu_lost",
                         lost=[{"index": 2, "pci_bus_id": BUSES[2], "nvml_return": "NVML_ERROR_GPU_IS_LOST"}])
    facts = gpu_inventory.assemble_nvml(["inventory", "topology", "nvlink"], result, HEALTHY_PCI, "535.183.01")
    assert facts["state"] == "gpu_lost" and facts["lost_gpus"] == [BUSES[2]]
    assert facts["count"] == 3 and facts["attached_gpus"] == 4


# --- both backends on the same emulated hardware -----------------------------------------------------------
#
# The nvidia-smi emulator and the fake libnvidia-ml.so.1 (tests/emulator/fake_nvml, built here with gcc) read the
# same profile; the module must give the same facts from either, except what only one of them can see
# (tools/bench/compare_backends.py says which).


EMULATION = HERE.parents[2] / "emulator"
sys.path.insert(0, str(HERE.parents[3] / "tools" / "bench"))
import compare_backends  # noqa: E402  pylint: disable=wrong-import-position,wrong-import-order

PROFILE_NAMES = sorted(path.stem for path in (EMULATION / "profiles").glob("*.json")
                       if "bus_ids" in json.loads(path.read_text(encoding="utf-8")))
FAULTS = {
    "none": None,
    "links down": {"inactive_links": [[1, 0], [1, 2]], "all_links_inactive": [3]},
    "health": {"gpus": {"0": {"ecc_sram_uncorrectable_volatile": 2, "ecc_dram_correctable_volatile": 5,
                              "clock_event_reasons": ["sw_power_cap", "gpu_idle"], "temperature_c": 91,
                              "compute_mode": "Exclusive_Process", "pcie_width_current": 8,
                              "remapped_rows": {"correctable": 1, "uncorrectable": 2, "pending": True, "failure": False},
                              "retired_pages_pending": True, "reset_required": True}}},
    "lost": {"lost_gpus": [1]},
    # A driver from 570 on GPU 2: the recovery action (NVML field 230, -q -x's <gpu_recovery_action>), the reset
    # status deprecated.
    "recovery action": {"gpus": {"2": {"recovery_action": "drain_p2p"}}},
}


# fake_nvml_library, profile_tool and both_backends: tests/unit/plugins/conftest.py


@pytest.mark.parametrize("faults", sorted(FAULTS))
@pytest.mark.parametrize("profile", PROFILE_NAMES)
def test_both_backends_give_equal_facts(both_backends, profile, faults):
    nvml_facts, smi_facts = both_backends(profile, FAULTS[faults])
    assert nvml_facts["source"] == "nvml" and smi_facts["source"] == "nvidia_smi"
    assert nvml_facts["state"] == smi_facts["state"]
    if faults == "lost":
        # nvidia-smi's topo -m fails outright with a lost GPU and its error names the GPU by bus id, where
        # NVML has no handle to ask: the answering GPUs must agree, and both must say which one is gone.
        assert nvml_facts["state"] == "gpu_lost"
        assert (nvml_facts["count"], nvml_facts["attached_gpus"]) == (smi_facts["count"], smi_facts["attached_gpus"])
        assert nvml_facts["lost_gpus"] == [None] and smi_facts["lost_gpus"] == ["00000000:" + PROFILE_BUS(profile, 1)]
        assert compare_backends.differences(
            {"devices": nvml_facts["devices"], "driver_version": nvml_facts["driver_version"]},
            {"devices": smi_facts["devices"], "driver_version": smi_facts["driver_version"]}) == []
        return
    assert compare_backends.differences(nvml_facts, smi_facts) == []
    if faults == "none":
        assert nvml_facts["state"] == "ok", nvml_facts["message"]
    if faults == "recovery action":
        assert [gpu["recovery_action"] for gpu in nvml_facts["devices"]][1:3] == [None, "drain_p2p"]
        assert (nvml_facts["devices"][2]["reset_required"], nvml_facts["devices"][2]["drain_and_reset_recommended"]) == (None, None)


def PROFILE_BUS(name, index):  # pylint: disable=invalid-name
    return json.loads((EMULATION / "profiles" / (name + ".json")).read_text(encoding="utf-8"))["bus_ids"][index].upper()


def test_the_comparison_sees_a_difference(both_backends):
    nvml_facts, smi_facts = both_backends("pairs-4gpu")
    smi_facts["devices"][2]["temperature_c"] += 1
    smi_facts["topology"]["matrix"]["GPU0"]["GPU1"] = "NV2"
    temperatures = (nvml_facts["devices"][2]["temperature_c"], smi_facts["devices"][2]["temperature_c"])
    assert compare_backends.differences(nvml_facts, smi_facts) == [
        "gpu.devices[2].temperature_c: nvml=%d nvidia_smi=%d" % temperatures,
        "gpu.topology.matrix.GPU0.GPU1: nvml='NV4' nvidia_smi='NV2'"]


@pytest.mark.parametrize("pci, devices, nvlink, expected", [
    ({"nvswitches": 4}, [], {}, True),                                           # gen 3 on the PCI bus (H100)
    ({"nvswitches": 0}, [{"fabric": {"state": "Completed", "status": "Success"}}], {}, True),
    ({"nvswitches": 0}, [{"fabric": {"state": "In Progress", "status": None}}], {}, True),   # fabric manager down
    ({"nvswitches": None}, [{"fabric": {"state": None, "status": None}}],
     {"GPU0": [{"link": 0, "active": True, "remote_device_type": "switch"}]}, True),
    # PCIe cards, NVLink pairs (the far end a GPU), -q -x without remote types: no NVSwitch
    ({"nvswitches": 0}, [{"fabric": {"state": None, "status": None}}], {}, False),
    ({"nvswitches": 0}, [{"fabric": None}], {"GPU0": [{"link": 0, "active": True, "remote_device_type": "gpu"}]}, False),
    ({"nvswitches": 0}, [{}], {"GPU0": [{"link": 0, "active": True, "remote_device_type": None}]}, False),
])
def test_nvswitches_from_any_evidence(pci, devices, nvlink, expected):
    # The 4th-generation NVSwitch of HGX B200/B300 has no PCI function: its GPUs' fabric state and their NVLinks'
    # far ends say it is there (NVIDIA's Fabric Manager guide).
    assert gpu_inventory.nvswitch_evidence(pci, devices, nvlink) is expected


def test_a_switch_fabric_without_pci_switches_is_an_nvswitch_node(both_backends, tmp_path, monkeypatch):
    # An HGX H100 whose NVSwitches are not on the PCI bus (as on HGX B200): the GPUs' fabric state still says so.
    real_read_pci = gpu_inventory.read_pci
    monkeypatch.setattr(gpu_inventory, "read_pci", lambda path: dict(real_read_pci(path), nvswitches=0))
    for facts in both_backends("hgx-h100-8gpu"):
        assert facts["pci"]["nvswitches"] == 0 and facts["topology"]["nvswitch"] is True, facts["source"]
        assert facts["topology"]["shape"].endswith("(NVSwitch)"), facts["topology"]["shape"]
