"""container_engine_state: the exact commands it runs, what it returns for each engine and state, check mode and
its failures.

systemctl (AnsibleModule.run_command) and docker info (process.run_command, with its timeout) are mocked and answer
with the real captures of tests/unit/plugins/module_utils/fixtures/container-engine (see its README.md).
"""
import calendar
import json
import os
import pathlib

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.modules import container_engine_state

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "module_utils" / "fixtures" / "container-engine"
PROPERTIES = "--property=ActiveState,CanReload,KillMode,ActiveEnterTimestamp"
SYSTEMCTL_ENV = {"environ_update": {"LC_ALL": "C", "TZ": "UTC"}}
STARTED = calendar.timegm((2026, 12, 7, 14, 27, 39))


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


class Commands:
    """Stands in for both ways the module runs commands: answers per program, records every call."""

    def __init__(self, systemctl=None, docker=None):
        self.answers = {"systemctl": systemctl, "docker": docker}
        self.calls = []

    def systemctl(self, argv, **kwargs):
        self.calls.append((list(argv), kwargs))
        return self.answers["systemctl"]

    def docker(self, argv, timeout):
        self.calls.append((list(argv), {"timeout": timeout}))
        return self.answers["docker"]


@pytest.fixture
def binaries(monkeypatch):
    """The programs the module finds, by name (None: not installed); all are installed unless a test says."""
    found = {"systemctl": "/usr/bin/systemctl", "docker": "/usr/bin/docker"}
    monkeypatch.setattr(container_engine_state.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: found[name])
    return found


def run_module(monkeypatch, capsys, args, commands):
    monkeypatch.setattr(container_engine_state.AnsibleModule, "run_command",
                        lambda module, argv, **kwargs: commands.systemctl(argv, **kwargs))
    monkeypatch.setattr(container_engine_state, "run_with_timeout", commands.docker)
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exit_info:
            container_engine_state.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == (1 if result.get("failed") else 0)
    return result


READ = ("state", "can_reload", "kill_mode", "runtimes", "default_runtime", "started", "config_mtime", "unknown")


def reads(result):
    return dict((key, result[key]) for key in READ)


# --- Docker --------------------------------------------------------------------------------------------------

def test_active_docker_runs_systemctl_then_docker_info_with_exact_argv(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-docker-active.txt"), ""),
                        docker=(0, fixture("docker-20.10.24-nvidia-reloaded.json"), "", False))
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert commands.calls == [
        (["/usr/bin/systemctl", "show", "docker.service", PROPERTIES], SYSTEMCTL_ENV),
        (["/usr/bin/docker", "info", "--format", "{{json .}}"], {"timeout": 30}),
    ]
    assert result["changed"] is False and "failed" not in result
    assert (result["engine"], result["unit"]) == ("docker", "docker.service")
    assert reads(result) == {"state": "active", "can_reload": True, "kill_mode": "control-group",
                             "runtimes": ["nvidia", "runc"], "default_runtime": "runc", "started": None,
                             "config_mtime": None, "unknown": None}


def test_the_default_runtime_docker_29_loaded(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-ubuntu2004-docker-active.txt"), ""),
                        docker=(0, fixture("docker-29.1.3-nvidia-default.json"), "", False))
    result = run_module(monkeypatch, capsys, {"engine": "docker", "timeout": 5}, commands)
    assert commands.calls[1] == (["/usr/bin/docker", "info", "--format", "{{json .}}"], {"timeout": 5})
    assert (result["runtimes"], result["default_runtime"]) == (["io.containerd.runc.v2", "nvidia", "runc"], "nvidia")


def test_an_unreachable_dockerd_whose_client_exits_0_is_unknown(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-docker-active.txt"), ""),
                        docker=(0, fixture("docker-20.10.24-no-daemon.json"), "", False))
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert "failed" not in result
    assert result["state"] == "active" and result["runtimes"] is None
    assert result["unknown"].startswith("docker info failed: Cannot connect to the Docker daemon")


def test_a_docker_info_that_hangs_is_unknown(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-docker-active.txt"), ""),
                        docker=(None, "", "", True))
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert result["unknown"] == "docker info failed: no answer in 30 seconds"


def test_inactive_docker_is_not_asked(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-not-found.txt"), ""))
    result = run_module(monkeypatch, capsys, {"engine": "docker", "unit": "docker-custom.service"}, commands)
    assert commands.calls == [(["/usr/bin/systemctl", "show", "docker-custom.service", PROPERTIES], SYSTEMCTL_ENV)]
    assert reads(result) == {"state": "inactive", "can_reload": False, "kill_mode": "control-group", "runtimes": None,
                             "default_runtime": None, "started": None, "config_mtime": None, "unknown": None}
    assert result["unit"] == "docker-custom.service"


def test_a_missing_docker_client_is_unknown(monkeypatch, capsys, binaries):
    binaries["docker"] = None
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-docker-active.txt"), ""))
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert len(commands.calls) == 1
    assert result["unknown"] == "docker info failed: the docker command is not installed"


# --- containerd ----------------------------------------------------------------------------------------------

def test_active_containerd_gives_its_start_and_the_files_mtime(monkeypatch, capsys, binaries, tmp_path):
    config = tmp_path / "config.toml"
    config.write_text("version = 2\n", encoding="utf-8")
    os.utime(config, (STARTED + 61.9, STARTED + 61.9))
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-containerd-active.txt"), ""))
    result = run_module(monkeypatch, capsys, {"engine": "containerd", "config": str(config)}, commands)
    assert commands.calls == [(["/usr/bin/systemctl", "show", "containerd.service", PROPERTIES], SYSTEMCTL_ENV)]
    assert reads(result) == {"state": "active", "can_reload": False, "kill_mode": "process", "runtimes": None,
                             "default_runtime": None, "started": STARTED, "config_mtime": STARTED + 61,
                             "unknown": None}


def test_containerd_without_its_file_has_mtime_0(monkeypatch, capsys, binaries, tmp_path):
    commands = Commands(systemctl=(0, fixture("systemctl-ubuntu2004-containerd-active.txt"), ""))
    result = run_module(monkeypatch, capsys, {"engine": "containerd", "config": str(tmp_path / "none.toml")},
                        commands)
    assert (result["config_mtime"], result["unknown"]) == (0, None)


def test_containerd_whose_start_is_not_in_utc_is_unknown(monkeypatch, capsys, binaries, tmp_path):
    commands = Commands(systemctl=(0, "ActiveState=active\nKillMode=process\nCanReload=no\n"
                                      "ActiveEnterTimestamp=Mon 2026-12-07 15:27:39 CET\n", ""))
    result = run_module(monkeypatch, capsys, {"engine": "containerd", "config": str(tmp_path / "c.toml")}, commands)
    assert result["started"] is None
    assert result["unknown"] == "systemctl show gave no ActiveEnterTimestamp in UTC for the active unit"


def test_inactive_containerd_reads_no_file(monkeypatch, capsys, binaries, tmp_path):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-failed.txt"), ""))
    result = run_module(monkeypatch, capsys, {"engine": "containerd", "config": str(tmp_path / "c.toml")}, commands)
    assert (result["state"], result["started"], result["config_mtime"]) == ("failed", None, None)


# --- hosts without systemd, check mode, failures -------------------------------------------------------------

def test_a_host_not_booted_with_systemd_is_unknown_and_not_a_failure(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(1, "", fixture("systemctl-not-booted.stderr.txt")))
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert len(commands.calls) == 1 and "failed" not in result
    assert result["state"] == "unknown"
    assert result["unknown"].startswith("systemctl show failed (exit status 1): System has not been booted with systemd")


def test_without_systemctl_nothing_runs(monkeypatch, capsys, binaries):
    binaries["systemctl"] = None
    commands = Commands()
    result = run_module(monkeypatch, capsys, {"engine": "docker"}, commands)
    assert commands.calls == []
    assert (result["state"], result["unknown"]) == (
        "unknown", "systemctl is not installed: the unit's state cannot be read")


def test_check_mode_reads_the_same(monkeypatch, capsys, binaries):
    commands = Commands(systemctl=(0, fixture("systemctl-debian12-docker-active.txt"), ""),
                        docker=(0, fixture("docker-20.10.24-nvidia-default-reloaded.json"), "", False))
    result = run_module(monkeypatch, capsys, {"engine": "docker", "_ansible_check_mode": True}, commands)
    assert len(commands.calls) == 2
    assert result["changed"] is False and "failed" not in result
    assert (result["runtimes"], result["default_runtime"]) == (["nvidia", "runc"], "nvidia")


def test_containerd_needs_its_config(monkeypatch, capsys, binaries):
    commands = Commands()
    result = run_module(monkeypatch, capsys, {"engine": "containerd"}, commands)
    assert result["failed"] is True and commands.calls == []
    assert result["msg"] == "engine is containerd but all of the following are missing: config"


def test_a_timeout_below_one_second_fails(monkeypatch, capsys, binaries):
    commands = Commands()
    result = run_module(monkeypatch, capsys, {"engine": "docker", "timeout": 0}, commands)
    assert result["failed"] is True and commands.calls == []
    assert result["msg"] == "timeout must be at least 1 second, got 0"
