"""gpufleet.node.nvidia_container_toolkit's evidence rules (tasks/engine.yml and vars/main.yml) over what
gpufleet.node.container_engine_state returns for real docker info and systemctl show captures
(tests/unit/plugins/module_utils/fixtures/container-engine): whether the running dockerd shows the nvidia runtime as
asked, and whether a running engine has not loaded its file (a restart or a reload is due)."""
import calendar
import pathlib

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils.container_engine import (
    containerd_loaded,
    docker_loaded,
    unit_state,
)

from .platform import ROOT, facts_for, find_task, render, role_variables, templar, trusted

FIXTURES = ROOT / "tests" / "unit" / "plugins" / "module_utils" / "fixtures" / "container-engine"
ENGINE = "engine.yml"
STALE = "Note whether the running engine has not loaded its file, {{ __nvidia_container_toolkit_engine }}"
DEBIAN_12 = facts_for("Debian", "12")
STARTED = calendar.timegm((2026, 12, 7, 14, 27, 39))


def fixture(name):
    return pathlib.Path(FIXTURES / name).read_text(encoding="utf-8")


def docker_result(info, systemctl="systemctl-debian12-docker-active.txt", rc=0):
    """container_engine_state's result for Docker: the unit, and docker info's answer read by the module's parser."""
    unit = unit_state(0, fixture(systemctl), "")
    result = dict(unit, runtimes=None, default_runtime=None, config_mtime=None)
    if unit["state"] == "active":
        result.update(docker_loaded(rc, fixture(info) if info else "", ""))
    return result


def containerd_result(mtime, systemctl="systemctl-debian12-containerd-active.txt"):
    unit = unit_state(0, fixture(systemctl), "")
    result = dict(unit, runtimes=None, default_runtime=None, config_mtime=None)
    if unit["state"] == "active":
        result.update(containerd_loaded(unit, mtime))
    return result


def loaded_ok(loaded, default_runtime):
    return render("nvidia_container_toolkit", DEBIAN_12, "{{ __nvidia_container_toolkit_docker_loaded_ok | bool }}",
                  __nvidia_container_toolkit_docker_loaded=loaded,
                  nvidia_container_toolkit_default_runtime=default_runtime)


@pytest.mark.parametrize("info, default_runtime, ok", [
    ("docker-20.10.24-nvidia-reloaded.json", False, True),
    ("docker-20.10.24-nvidia-reloaded.json", True, False),          # nvidia known, but not the default asked for
    ("docker-20.10.24-nvidia-default-reloaded.json", True, True),
    ("docker-20.10.24-nvidia-default-reloaded.json", False, False),  # nvidia still the default, given up since
    ("docker-29.1.3-nvidia.json", False, True),
    ("docker-29.1.3-nvidia-default.json", True, True),
    ("docker-20.10.24-runc.json", False, False),                     # the file is not loaded yet
    ("docker-20.10.24-no-daemon.json", False, False),                # docker info could not ask the daemon
])
def test_docker_shows_the_runtime_as_asked(info, default_runtime, ok):
    assert loaded_ok(docker_result(info), default_runtime) is ok


@pytest.mark.parametrize("loaded", [{}, {"skipped": True, "changed": False}])
def test_a_read_that_did_not_run_is_not_loaded(loaded):
    assert loaded_ok(loaded, False) is False


def stale(engine, probed, written_changed=False, **settings):
    """The set_fact's __nvidia_container_toolkit_stale, rendered with the task's vars as Ansible renders it."""
    task = find_task("nvidia_container_toolkit", ENGINE, STALE)
    variables = role_variables("nvidia_container_toolkit", DEBIAN_12)
    variables.update(trusted(task["vars"]))
    variables.update(settings, __nvidia_container_toolkit_engine=engine, __nvidia_container_toolkit_probed=probed,
                     __nvidia_container_toolkit_written={"changed": written_changed})
    expression = task["ansible.builtin.set_fact"]["__nvidia_container_toolkit_stale"]
    return templar(variables).template(trusted(expression))


def test_the_probe_is_the_read_only_module_and_runs_in_check_mode():
    """No shell probe, and nothing keeps it from check mode (the module supports it)."""
    task = find_task("nvidia_container_toolkit", ENGINE, STALE.replace(
        "Note whether the running engine has not loaded its file", "Read whether the engine runs and has loaded its file"))
    assert "gpufleet.node.container_engine_state" in task
    assert task.get("check_mode") is None and task["when"] == []


@pytest.mark.parametrize("info, written_changed, expected", [
    ("docker-20.10.24-nvidia-reloaded.json", False, False),   # loaded: nothing to do
    ("docker-20.10.24-nvidia-reloaded.json", True, True),     # the file changed in this run
    ("docker-20.10.24-runc.json", False, True),               # an earlier run's restart still pending
    ("docker-20.10.24-no-daemon.json", False, True),          # unknown counts as not loaded
])
def test_a_running_docker_is_stale_until_it_shows_the_runtime(info, written_changed, expected):
    assert stale("docker", docker_result(info), written_changed, nvidia_container_toolkit_default_runtime=False) \
        is expected


def test_an_engine_that_does_not_run_is_never_stale():
    probed = docker_result(None, systemctl="systemctl-debian12-not-found.txt")
    assert probed["state"] == "inactive"
    assert stale("docker", probed, written_changed=True) is False
    assert stale("containerd", containerd_result(STARTED + 100, systemctl="systemctl-debian12-failed.txt"),
                 written_changed=True) is False


def test_a_host_without_systemd_is_never_stale():
    probed = dict(unit_state(1, "", fixture("systemctl-not-booted.stderr.txt")), runtimes=None, default_runtime=None,
                  config_mtime=None)
    assert stale("docker", probed, written_changed=True) is False


@pytest.mark.parametrize("mtime, expected", [
    (STARTED - 3600, False),
    (STARTED, False),          # written in the second it started: whole seconds count as loaded
    (STARTED + 1, True),
    (0, False),                # no file
])
def test_containerd_is_stale_when_its_file_changed_after_it_started(mtime, expected):
    assert stale("containerd", containerd_result(mtime)) is expected


def test_containerd_whose_start_cannot_be_read_is_stale():
    probed = containerd_result(0)
    probed.update(containerd_loaded(dict(probed, started=None), 0))
    assert probed["started"] is None and probed["unknown"]
    assert stale("containerd", probed) is True
