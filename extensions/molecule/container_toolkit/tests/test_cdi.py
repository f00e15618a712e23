"""The CDI spec: made by nvidia-ctk cdi generate where the driver answers (Debian 12, 8 emulated GPUs), with the
driver and toolkit versions it was made for recorded beside it; none where no driver answers (Ubuntu 22.04)."""
import json

SPEC = "/etc/cdi/nvidia.yaml"


def test_spec_where_the_driver_answers(host, debian):
    spec = host.file(SPEC)
    if not debian:
        assert not spec.exists
        return
    assert spec.exists and spec.mode == 0o644
    assert "kind: nvidia.com/gpu" in spec.content_string
    devices = host.check_output("nvidia-ctk cdi list").splitlines()
    assert "nvidia.com/gpu=all" in devices
    assert {"nvidia.com/gpu=%d" % index for index in range(8)} <= set(devices)


def test_versions_the_spec_was_made_for(host, debian):
    state = host.file("/var/lib/gpufleet/nvidia-container-toolkit-cdi.json")
    if not debian:
        assert not state.exists
        return
    made_for = json.loads(state.content_string)
    smi = host.check_output("nvidia-smi --query-gpu=driver_version --format=csv,noheader").splitlines()[0].strip()
    assert made_for == {"driver_version": smi, "toolkit_version": "1.17.8-1", "spec": SPEC}
