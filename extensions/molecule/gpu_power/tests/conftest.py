"""The node's emulated GPUs (tests/emulator, profile hgx-h100-8gpu) after gpu_power converged; GPU 3 is busy."""
import json

import pytest

H100 = "NVIDIA H100 80GB HBM3"
BUSY = "00000000:86:00.0"
BUSES = ["00000000:53:00.0", "00000000:64:00.0", "00000000:75:00.0", BUSY,
         "00000000:97:00.0", "00000000:A8:00.0", "00000000:B9:00.0", "00000000:CA:00.0"]


@pytest.fixture
def record(host):
    """/etc/gpufleet/gpu-power.json as the role wrote it."""
    return json.loads(host.file("/etc/gpufleet/gpu-power.json").content_string)
