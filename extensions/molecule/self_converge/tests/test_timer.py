"""The service and its timer: what systemd loaded, and when the timer's first run falls."""
import json


def show(host, unit, *properties):
    args = " ".join("--property " + name for name in properties)
    out = host.check_output("systemctl show %s %s" % (args, unit))
    return dict(line.split("=", 1) for line in out.splitlines())


def test_the_timer_is_enabled_and_waiting(host):
    timer = host.service("gpufleet-self-converge.timer")
    assert timer.is_enabled
    assert timer.is_running  # a timer is "active (waiting)"


def timespan(text):
    """Seconds of a systemd time span as systemctl show prints it ("1h 5min 19.022166s")."""
    units = {"d": 86400, "h": 3600, "min": 60, "s": 1, "ms": 1e-3, "us": 1e-6}
    total = 0.0
    for part in text.split():
        number = part.rstrip("abcdefghijklmnopqrstuvwxyz")
        total += float(number) * units[part[len(number):]]
    return total


def test_the_timer_has_the_interval_and_the_random_delay(host):
    props = show(host, "gpufleet-self-converge.timer", "RandomizedDelayUSec", "AccuracyUSec", "Unit")
    assert props["RandomizedDelayUSec"] == "10min"
    assert props["AccuracyUSec"] == "1s"
    assert props["Unit"] == "gpufleet-self-converge.service"
    # one TimersMonotonic line per trigger
    triggers = host.check_output("systemctl show --property TimersMonotonic gpufleet-self-converge.timer")
    assert "{ OnBootUSec=1h ;" in triggers and "{ OnUnitInactiveUSec=1h ;" in triggers, triggers


def test_the_first_run_falls_after_the_boot_delay_within_the_random_delay(host):
    """OnBootSec=3600 and RandomizedDelaySec=600: the next elapse lies between 1 h and 1 h 10 min after the container's
    systemd started (OnBootSec is OnStartupSec in a container; both on CLOCK_MONOTONIC)."""
    next_elapse = timespan(show(host, "gpufleet-self-converge.timer", "NextElapseUSecMonotonic")["NextElapseUSecMonotonic"])
    started = int(host.check_output("systemctl show --property UserspaceTimestampMonotonic --value")) / 1e6
    assert 3600 <= next_elapse - started <= 3600 + 600 + 1, (started, next_elapse)


def test_timespans_are_read_as_systemd_prints_them():
    assert timespan("5h 19min 3.022166s") == 5 * 3600 + 19 * 60 + 3.022166
    assert timespan("1d 250ms") == 86400.25


def test_the_service_is_a_oneshot_that_has_not_run(host):
    props = show(host, "gpufleet-self-converge.service", "Type", "SuccessExitStatus", "TimeoutStartUSec", "ActiveState",
                 "ExecMainStartTimestampMonotonic", "Environment")
    assert props["Type"] == "oneshot"
    assert "75" in props["SuccessExitStatus"]
    assert props["TimeoutStartUSec"] == "1h"
    assert props["ActiveState"] == "inactive"
    assert props["ExecMainStartTimestampMonotonic"] == "0"
    assert "LC_ALL=C.UTF-8" in props["Environment"]


def test_the_role_writes_no_record(host):
    """The record is the runner's: no run yet, no record."""
    assert not host.file("/etc/gpufleet/self-converge.json").exists


def test_the_settings_name_the_repository_and_the_node(host):
    settings = json.loads(host.file("/etc/gpufleet/self-converge-settings.json").content_string)
    assert settings["source"] == "git"
    assert settings["url"] == "file:///srv/gpufleet-infra.git"
    assert settings["version"] == "main"
    assert settings["limit"] == "gpufleet-self_converge"
    assert settings["tags"] == ["baseline_sysctl", "baseline_limits"] and settings["skip_tags"] == []
    assert settings["directory"] == "/opt/gpufleet/self-converge/checkout"
    assert settings["record"] == "/etc/gpufleet/self-converge.json"
    assert settings["log_max_bytes"] == 16384 and settings["log_keep"] == 2


def test_the_command_checks_what_a_run_needs(host):
    command = host.file("/usr/local/sbin/gpufleet-self-converge")
    assert command.mode == 0o755
    result = host.run("gpufleet-self-converge check")
    assert result.rc == 0, result.stdout + result.stderr
    report = json.loads(result.stdout)
    assert report == {"ok": True, "problems": [], "ansible_core": "2.19.14"}
