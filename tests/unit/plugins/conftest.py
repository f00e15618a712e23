"""Fixtures shared by the gpu_facts and gpu_metrics tests: gpu_facts' two backends on emulated hardware (the
nvidia-smi emulator and the fake libnvidia-ml.so.1 built from tests/emulator/fake_nvml)."""
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys

import pytest

from ansible_collections.gpufleet.node.plugins.modules import gpu_facts

EMULATION = pathlib.Path(__file__).resolve().parents[2] / "emulator"
EMULATOR = EMULATION / "nvidia_smi_emulator.py"


@pytest.fixture(scope="module")
def fake_nvml_library(tmp_path_factory):
    # tools/newest-core.sh runs these tests on a node with no gcc: it names tools/fake-nvml.sh's build instead.
    built = os.environ.get("GPUFLEET_UNIT_FAKE_NVML")
    if built and pathlib.Path(built).is_file():
        return built
    gcc = shutil.which("gcc")
    assert gcc, "gcc builds the fake libnvidia-ml.so.1 (tools/host-deps.sh installs it)"
    output = tmp_path_factory.mktemp("fake-nvml") / "libnvidia-ml.so.1"
    subprocess.run([gcc, "-shared", "-fPIC", "-O1", "-o", str(output)]
                   + [str(path) for path in sorted((EMULATION / "fake_nvml").glob("*.c"))], check=True)
    return str(output)


@pytest.fixture(scope="module")
def profile_tool():
    spec = importlib.util.spec_from_file_location("gpufleet_emulator_profile", str(EMULATION / "emulator_profile.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def both_backends(fake_nvml_library, profile_tool, tmp_path, monkeypatch):
    """gather(profile, faults=None): the facts of both backends (nvml, nvidia_smi) for an emulated profile with its
    faults, as gpu_facts gathers them."""
    config = tmp_path / "config"
    config.mkdir()
    pci = tmp_path / "pci"
    pci.mkdir()
    script = tmp_path / "nvidia-smi"
    script.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, EMULATOR))
    script.chmod(0o755)
    monkeypatch.setenv("GPUFLEET_EMULATOR_CONFIG", str(config))
    monkeypatch.setenv("GPUFLEET_NVML_CONF", str(config / "nvml.conf"))
    # Both stand-ins read persistence daemons from /proc, which shows those of test nodes' containers running
    # beside the tests: an empty process directory instead.
    (tmp_path / "proc").mkdir()
    monkeypatch.setenv("GPUFLEET_EMULATOR_PROC", str(tmp_path / "proc"))
    monkeypatch.setenv("GPUFLEET_NVML_PROC", str(tmp_path / "proc"))
    monkeypatch.setattr(gpu_facts, "loaded_module_version", lambda: "535.183.01")

    def gather(name, faults=None):
        profile = json.loads((EMULATION / "profiles" / (name + ".json")).read_text(encoding="utf-8"))
        if faults is not None:
            (config / "faults.json").write_text(json.dumps(faults), encoding="utf-8")
        (config / "nvml.conf").write_text(profile_tool.render_nvml_conf(profile, name, faults), encoding="utf-8")
        profile_tool.lay_out_pci(profile, str(pci))
        monkeypatch.setenv("GPUFLEET_EMULATOR_PROFILE", name)
        params = {"nvidia_smi_path": str(script), "nvml_library": fake_nvml_library, "timeout": 10,
                  "gather_subset": ["all"], "pci_devices_path": str(pci)}
        return gpu_facts.gather(dict(params, backend="nvml")), gpu_facts.gather(dict(params, backend="nvidia_smi"))

    return gather
