"""/etc/gpufleet/container-runtime.json, the record the fleet report reads (keys of the issue-16 contract, and
restart_pending: containerd was restarted for its file; docker is stopped, so nothing holds an older file)."""
import json


def test_record(host, debian):
    record = json.loads(host.file("/etc/gpufleet/container-runtime.json").content_string)
    engine = {"runtime": "nvidia", "default": False, "restart_pending": False}
    assert record == {
        "toolkit_version": "1.17.8-1",
        "engines": {"docker": dict(engine, config="/etc/docker/daemon.json"),
                    "containerd": dict(engine, config="/etc/containerd/config.toml")},
        "cdi_spec": "/etc/cdi/nvidia.yaml" if debian else None,
    }
