"""The readers of container_engine over real captures (fixtures/container-engine, see its README.md): docker info's
JSON from Debian 12's docker.io 20.10 and Ubuntu 22.04's docker.io 29, and systemctl show from systemd 252 and 245."""
import calendar
import pathlib

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils.container_engine import (
    containerd_loaded,
    docker_loaded,
    parse_systemctl_show,
    parse_systemd_timestamp,
    unit_state,
)

FIXTURES = pathlib.Path(__file__).resolve().parent / "fixtures" / "container-engine"


def fixture(name):
    return (FIXTURES / name).read_text(encoding="utf-8")


# The second the capture containers' units became active (their ActiveEnterTimestamp, UTC).
DEBIAN_STARTED = calendar.timegm((2026, 12, 7, 14, 27, 39))
UBUNTU_STARTED = calendar.timegm((2026, 12, 7, 14, 27, 42))


# --- systemctl show ------------------------------------------------------------------------------------------

def test_systemctl_show_lines_become_a_dict_in_any_order():
    assert parse_systemctl_show(fixture("systemctl-debian12-containerd-active.txt")) == {
        "KillMode": "process", "ActiveState": "active", "ActiveEnterTimestamp": "Mon 2026-12-07 14:27:39 UTC",
        "CanReload": "no"}


def test_a_value_may_hold_an_equals_sign_and_lines_without_one_are_left_out():
    assert parse_systemctl_show("ExecReload={ path=/bin/kill ; argv[]=/bin/kill -s HUP $MAINPID }\nnoise\n=x\n") == {
        "ExecReload": "{ path=/bin/kill ; argv[]=/bin/kill -s HUP $MAINPID }"}


@pytest.mark.parametrize("name, started", [
    ("systemctl-debian12-containerd-active.txt", DEBIAN_STARTED),
    ("systemctl-ubuntu2004-containerd-active.txt", UBUNTU_STARTED),
])
def test_an_active_containerd_unit_stops_its_daemon_only(name, started):
    assert unit_state(0, fixture(name), "") == {
        "state": "active", "can_reload": False, "kill_mode": "process", "started": started, "unknown": None}


@pytest.mark.parametrize("name, started", [
    ("systemctl-debian12-docker-active.txt", DEBIAN_STARTED),
    ("systemctl-ubuntu2004-docker-active.txt", UBUNTU_STARTED),
])
def test_an_active_docker_unit_can_reload(name, started):
    assert unit_state(0, fixture(name), "") == {
        "state": "active", "can_reload": True, "kill_mode": "control-group", "started": started, "unknown": None}


@pytest.mark.parametrize("name", ["systemctl-debian12-not-found.txt", "systemctl-ubuntu2004-not-found.txt"])
def test_a_unit_systemd_does_not_know_is_inactive_with_no_start(name):
    assert unit_state(0, fixture(name), "") == {
        "state": "inactive", "can_reload": False, "kill_mode": "control-group", "started": None, "unknown": None}


def test_a_failed_unit_is_not_active():
    assert unit_state(0, fixture("systemctl-debian12-failed.txt"), "")["state"] == "failed"


def test_a_host_not_booted_with_systemd_is_unknown_and_says_why():
    state = unit_state(1, "", fixture("systemctl-not-booted.stderr.txt"))
    assert state == {
        "state": "unknown", "can_reload": False, "kill_mode": None, "started": None,
        "unknown": "systemctl show failed (exit status 1): System has not been booted with systemd as init system "
                   "(PID 1). Can't operate. Failed to connect to bus: Host is down"}


def test_an_answer_without_active_state_is_unknown():
    assert unit_state(0, "KillMode=process\n", "")["state"] == "unknown"
    assert unit_state(0, "", "")["unknown"] == "systemctl show failed (exit status 0): no ActiveState in its output"


@pytest.mark.parametrize("text, expected", [
    ("Mon 2026-12-07 14:27:39 UTC", DEBIAN_STARTED),
    ("Thu 1970-01-01 00:00:01 UTC", 1),
    ("", None),
    ("n/a", None),
    # What systemd printed in other zones (fixtures README): no offset can be read back from the name.
    ("Mon 2026-12-07 15:27:39 CET", None),
    ("Mon 2026-12-07 14:27:42 Europe", None),
    ("Mon 2026-13-07 14:27:42 UTC", None),
])
def test_only_utc_timestamps_are_read(text, expected):
    assert parse_systemd_timestamp(text) == expected


# --- docker info ---------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, runtimes, default", [
    ("docker-20.10.24-runc.json", ["io.containerd.runc.v2", "io.containerd.runtime.v1.linux", "runc"], "runc"),
    ("docker-20.10.24-nvidia-reloaded.json", ["nvidia", "runc"], "runc"),
    ("docker-20.10.24-nvidia-default-reloaded.json", ["nvidia", "runc"], "nvidia"),
    ("docker-29.1.3-nvidia.json", ["io.containerd.runc.v2", "nvidia", "runc"], "runc"),
    ("docker-29.1.3-nvidia-default.json", ["io.containerd.runc.v2", "nvidia", "runc"], "nvidia"),
])
def test_the_runtimes_and_default_the_daemon_loaded(name, runtimes, default):
    assert docker_loaded(0, fixture(name), "") == {"runtimes": runtimes, "default_runtime": default, "unknown": None}


def test_the_20_10_client_exits_0_without_a_daemon_and_that_is_unknown():
    assert docker_loaded(0, fixture("docker-20.10.24-no-daemon.json"), "") == {
        "runtimes": None, "default_runtime": None,
        "unknown": "docker info failed: Cannot connect to the Docker daemon at unix:///tmp/ces-nonexistent.sock. "
                   "Is the docker daemon running?"}


def test_the_29_client_exits_1_without_a_daemon_and_its_stderr_is_quoted():
    loaded = docker_loaded(1, fixture("docker-29.1.3-no-daemon.json"), fixture("docker-29.1.3-no-daemon.stderr.txt"))
    assert loaded["runtimes"] is None and loaded["default_runtime"] is None
    assert loaded["unknown"] == (
        "docker info failed (exit status 1): failed to connect to the docker API at unix:///tmp/ces-nonexistent.sock;"
        " check if the path is correct and if the daemon is running: dial unix /tmp/ces-nonexistent.sock: connect: "
        "no such file or directory")


def test_empty_server_fields_that_exit_0_are_not_taken_for_an_answer():
    """The 29 client's answer without a daemon, had it exited 0: "Runtimes": null is no evidence."""
    assert docker_loaded(0, fixture("docker-29.1.3-no-daemon.json"), "")["unknown"] == (
        "docker info answered without the daemon's runtimes (Runtimes: null)")


def test_a_timeout_is_unknown():
    assert docker_loaded(None, "", "", timed_out=True, timeout=30) == {
        "runtimes": None, "default_runtime": None, "unknown": "docker info failed: no answer in 30 seconds"}


@pytest.mark.parametrize("stdout, reason", [
    ("", "docker info answered without JSON: no output"),
    ("Client:\n Context: default\n", "docker info answered without JSON: Client: Context: default"),
    ("[]", "docker info answered without a JSON object: []"),
    ('{"Runtimes": {}, "DefaultRuntime": "runc"}', "docker info answered without the daemon's runtimes (Runtimes: {})"),
])
def test_answers_that_are_not_docker_info_are_unknown(stdout, reason):
    assert docker_loaded(0, stdout, "")["unknown"] == reason


def test_a_long_error_is_shortened():
    loaded = docker_loaded(1, "", "x" * 1000)
    assert loaded["unknown"] == "docker info failed (exit status 1): " + "x" * 300 + "..."


# --- containerd ----------------------------------------------------------------------------------------------

def test_containerd_evidence_is_the_start_and_the_files_mtime():
    unit = unit_state(0, fixture("systemctl-debian12-containerd-active.txt"), "")
    assert containerd_loaded(unit, DEBIAN_STARTED + 5) == {
        "started": DEBIAN_STARTED, "config_mtime": DEBIAN_STARTED + 5, "unknown": None}


def test_containerd_without_a_readable_start_is_unknown():
    unit = unit_state(0, "ActiveState=active\nActiveEnterTimestamp=Mon 2026-12-07 15:27:39 CET\n", "")
    assert containerd_loaded(unit, 0) == {
        "started": None, "config_mtime": 0,
        "unknown": "systemctl show gave no ActiveEnterTimestamp in UTC for the active unit"}
