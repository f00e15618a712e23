"""module_utils/gpu_stack (gpu_facts' ``stack``): the container runtime and the metrics endpoint come from the roles'
records, each checked against the node (an engine whose configuration lost the runtime, an exporter that is not
active); the kernel log's Xid lines come from the first log that shows kernel messages."""
import json
import os
import time
from pathlib import Path

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils import gpu_stack


@pytest.fixture(name="probe")
def fixture_probe(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_stack, "RUNTIME_RECORD", str(tmp_path / "container-runtime.json"))
    monkeypatch.setattr(gpu_stack, "MONITORING_RECORD", str(tmp_path / "monitoring.json"))
    monkeypatch.setattr(gpu_stack, "SELF_CONVERGE_RECORD", str(tmp_path / "self-converge.json"))
    return gpu_stack


def write(path, data):
    Path(path).write_text(data if isinstance(data, str) else json.dumps(data))


def test_no_records_no_claims(probe):
    assert probe.container_runtime() is None
    assert probe.monitoring() is None


def test_runtime_counts_only_engines_whose_config_names_it(probe, tmp_path):
    daemon = tmp_path / "daemon.json"
    write(daemon, {"log-driver": "json-file", "runtimes": {"nvidia": {"path": "nvidia-container-runtime"}}})
    containerd = tmp_path / "config.toml"
    write(containerd, 'version = 2\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n')
    cdi = tmp_path / "nvidia.yaml"
    write(cdi, "cdiVersion: 0.5.0\n")
    write(probe.RUNTIME_RECORD, {
        "toolkit_version": "1.17.8-1", "cdi_spec": str(cdi),
        "engines": {"docker": {"config": str(daemon), "runtime": "nvidia", "default": True},
                    "containerd": {"config": str(containerd), "runtime": "nvidia", "default": False, "restart_pending": True}}})
    assert probe.container_runtime() == {
        "toolkit": "1.17.8-1", "cdi": str(cdi),
        "engines": {"containerd": {"runtime": "nvidia", "default": False, "restart_pending": True},
                    "docker": {"runtime": "nvidia", "default": True, "restart_pending": False}}}
    write(daemon, {"log-driver": "json-file"})     # someone rewrote daemon.json since
    os.remove(cdi)
    assert probe.container_runtime()["engines"].keys() == {"containerd"}
    assert probe.container_runtime()["cdi"] is None
    write(daemon, "not json")
    assert "docker" not in probe.container_runtime()["engines"]


def test_monitoring_reports_the_service_and_the_file_age(probe, tmp_path, monkeypatch):
    textfile = tmp_path / "gpu.prom"
    write(textfile, "DCGM_FI_DEV_GPU_TEMP 30\n")
    os.utime(textfile, (time.time() - 42, time.time() - 42))
    write(probe.MONITORING_RECORD, {"node_exporter": {"listen_address": ":9100", "metrics_path": "/metrics"},
                                    "textfile": str(textfile), "interval_s": 30, "metric_prefix": "DCGM_FI_"})

    class Result:
        stdout = "inactive\n"
    monkeypatch.setattr(probe, "run", lambda argv, timeout=20: Result)
    result = probe.monitoring()
    assert result["listen_address"] == ":9100" and result["active"] is False and result["interval_s"] == 30
    assert 41 <= result["textfile_age_s"] <= 44
    Result.stdout = "active\n"
    assert probe.monitoring()["active"] is True
    os.remove(textfile)
    assert probe.monitoring()["textfile_age_s"] is None


def Ran(returncode, stdout="", stderr=""):  # pylint: disable=invalid-name
    """A command's exit status, output and error text, as gpu_stack.run gives them."""
    return gpu_stack.Ran(returncode, stdout, stderr)


# Kernel log lines as journalctl -k -o short-iso prints them; the Xid lines in the driver's form (NVIDIA's Xid
# catalog: "NVRM: Xid (PCI:0000:01:00): 79, pid=1122, GPU has fallen off the bus.").
JOURNAL = """2026-12-04T10:00:01+0000 node7 kernel: Linux version 6.8.0-49-generic (buildd@lcy02-amd64-103)
2026-12-04T10:00:09+0000 node7 kernel: nvidia-nvlink: Nvlink Core is being initialized, major device number 234
2026-12-05T03:12:44+0000 node7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1122, name=python, GPU has fallen off the bus.
2026-12-05T03:12:44+0000 node7 kernel: NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.
"""


@pytest.mark.parametrize("answers, expected", [
    # the journal shows kernel messages: its Xid lines
    ({"journalctl": Ran(0, JOURNAL)},
     {"source": "journal", "lines": [JOURNAL.splitlines()[2]], "lines_total": 1, "error": None}),
    # a container's journal has no kernel messages ("-- No entries --" without -q): the ring buffer instead
    ({"journalctl": Ran(0, "-- No entries --\n"), "dmesg": Ran(0, "[    0.000000] Linux version 6.8.0\n")},
     {"source": "dmesg", "lines": [], "lines_total": 0, "error": None}),
    # neither can be read: no source, and why, so that the gate says it could not look
    ({"journalctl": Ran(0, ""), "dmesg": Ran(1, "", "dmesg: read kernel buffer failed: Operation not permitted\n")},
     {"source": None, "lines": [], "lines_total": 0,
      "error": "journalctl: no kernel messages; dmesg: read kernel buffer failed: Operation not permitted"}),
    ({}, {"source": None, "lines": [], "lines_total": 0, "error": "journalctl did not run; dmesg did not run"}),
])
def test_kernel_xids(probe, monkeypatch, answers, expected):
    monkeypatch.setattr(probe, "run", lambda argv, timeout=20: answers.get(argv[0]))
    assert probe.kernel_xids() == expected


def test_kernel_xids_keeps_the_newest_lines(probe, monkeypatch):
    storm = "".join("[%d.0] NVRM: Xid (PCI:0000:3b:00): 13, Graphics Exception %d\n" % (n, n) for n in range(1500))
    monkeypatch.setattr(probe, "run", lambda argv, timeout=20: Ran(0, storm))
    found = probe.kernel_xids()
    assert (found["lines_total"], len(found["lines"])) == (1500, probe.XID_LINES_KEPT)
    assert found["lines"][-1].endswith("Graphics Exception 1499")


def test_run_says_none_for_a_command_that_did_not_run_or_finish(monkeypatch):
    assert gpu_stack.run(["/nonexistent/gpufleet-command"]) is None
    assert gpu_stack.run(["sh", "-c", "echo out; echo err >&2; exit 3"]) == gpu_stack.Ran(3, "out\n", "err\n")
    assert gpu_stack.run(["sleep", "5"], timeout=1) is None


def test_versions_from_the_node(tmp_path, monkeypatch):
    version_file = tmp_path / "version.json"
    monkeypatch.setattr(gpu_stack, "CUDA_VERSION_FILE", str(version_file))
    assert gpu_stack.cuda() is None
    # /usr/local/cuda/version.json as cuda-toolkit-config-common 12.8 ships it (its first keys)
    version_file.write_text(json.dumps({"cuda": {"name": "CUDA SDK", "version": "12.8.1"},
                                        "cuda_cccl": {"name": "CUDA C++ Core Compute Libraries", "version": "12.8.90"}}))
    assert gpu_stack.cuda() == "12.8.1"
    version_file.write_text("[]")
    assert gpu_stack.cuda() is None
    answers = {"ii 2.26.5-1+cuda12.9": "2.26.5", "hi 2.21.5-1+cuda12.4": "2.21.5", "rc 2.26.5-1+cuda12.9": None, "": None}
    for printed, expected in answers.items():
        monkeypatch.setattr(gpu_stack, "run", lambda argv, timeout=20, printed=printed: Ran(0 if printed else 1, printed))
        assert gpu_stack.nccl() == expected, printed
    site = tmp_path / "venv" / "lib" / "python3.11" / "site-packages"
    assert gpu_stack.torch(str(tmp_path / "venv")) is None
    (site / "torch-2.7.1+cu128.dist-info").mkdir(parents=True)
    assert gpu_stack.torch(str(tmp_path / "venv")) == "2.7.1+cu128"


def test_gather_never_raises(monkeypatch):
    def broken(venv):
        raise RuntimeError("planted")
    monkeypatch.setattr(gpu_stack, "_gather", broken)
    facts = gpu_stack.gather("/opt/gpufleet/pytorch")
    assert set(facts) == set(gpu_stack.FIELDS) and facts["cuda"] is None
    assert facts["kernel_xids"]["source"] is None and "RuntimeError: planted" in facts["kernel_xids"]["error"]


def test_self_converge_from_the_runners_record(probe):
    assert probe.self_converge() is None
    # a record as the runner (roles/self_converge/files) writes it, shortened to the fields read and a few others
    record = {"time": "2026-12-07T14:03:12Z", "finished": "2026-12-07T14:04:01Z", "duration_s": 49, "ok": False,
              "stage": "converge", "rc": 2, "message": "the playbook failed (ansible-playbook exit status 2)",
              "commit": "3f7f13c2a1b4c5d6e7f8091a2b3c4d5e6f708192", "changed": None,
              "last_ok": {"time": "2026-12-07T13:03:10Z", "commit": "0a1b2c3d"}, "trigger": "systemd"}
    write(probe.SELF_CONVERGE_RECORD, record)
    assert probe.self_converge() == dict((field, record[field]) for field in probe.SELF_CONVERGE_FIELDS)
    # not the runner's: never a good run
    for text in ('{"ok": "yes"}', "[]", "not json"):
        write(probe.SELF_CONVERGE_RECORD, text)
        found = probe.self_converge()
        assert found["ok"] is False and "is not a record of the self-converge runner" in found["message"], text


@pytest.mark.parametrize("answer, expected", [
    (Ran(0, "active\n"), True),
    (Ran(3, "inactive\n"), False),
    (Ran(3, "failed\n"), False),
    (Ran(3, "activating\n"), False),
    # no systemd to ask: nothing on stdout, so no evidence either way (not "inactive")
    (Ran(1, "", "System has not been booted with systemd as init system (PID 1). Can't operate.\n"), None),
    (Ran(1, "", "Failed to connect to bus: No such file or directory\n"), None),
    (None, None),
])
def test_a_service_state_only_from_what_systemctl_printed(probe, monkeypatch, answer, expected):
    monkeypatch.setattr(probe, "run", lambda argv, timeout=20: answer)
    assert probe.service_active("nvidia-fabricmanager") is expected
    assert probe.fabricmanager() is expected
