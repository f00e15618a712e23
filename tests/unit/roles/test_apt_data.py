"""gpufleet.node._apt's download before the install (tasks/fetch.yml), rendered as Ansible renders it: the apt-get
command, where it sits in the packages entry point, when the rescue stops the run, and the message it stops with.

The failures the message names are what the apt_fetch_failures filter returns for apt-get output like the samples
of tests/unit/plugins/filter/test_apt_fetch.py (the filter itself is tested there)."""
import pytest

from ansible_collections.gpufleet.node.plugins.filter.apt_fetch import apt_fetch_failures

from .platform import ROLES, load, templar, trusted

UTILS_URL = ("http://127.0.0.1:19535/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-server/"
             "nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb")
NOT_SERVED = {"rc": 100, "stdout": "", "stderr": (
    "E: Failed to fetch " + UTILS_URL + "  404  Not Found [IP: 127.0.0.1 19535]\n"
    "E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n")}
HASH = {"rc": 100, "stdout": "", "stderr": (
    "E: Failed to fetch http://127.0.0.1:19535/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-server/"
    "libnvidia-compute-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb  Hash Sum mismatch\n"
    "   Hashes of expected file:\n    - SHA256:5a0c0f0c\n   Hashes of received file:\n    - SHA256:9f1e0d4c\n")}
REFUSED = {"rc": 100, "stdout": "", "stderr": (
    "E: Failed to fetch http://127.0.0.1:19535/ubuntu/pool/main/c/curl/curl_7.81.0-1ubuntu1.20_amd64.deb  "
    "Could not connect to 127.0.0.1:19535 (127.0.0.1). - connect (111: Connection refused)\n")}
LOCK = {"rc": 100, "stdout": "", "stderr": (
    "E: Could not get lock /var/cache/apt/archives/lock. It is held by process 4242 (unattended-upgr)\n"
    "E: Unable to lock directory /var/cache/apt/archives/"),
    "stderr_lines": ["E: Could not get lock /var/cache/apt/archives/lock. It is held by process 4242 (unattended-upgr)",
                     "E: Unable to lock directory /var/cache/apt/archives/"]}
PLAN = {
    "install": ["nvidia-headless-580-server=580.196.07-0ubuntu0.22.04.1",
                "nvidia-utils-580-server=580.196.07-0ubuntu0.22.04.1"],
    "missing": [],
    "packages": {
        "nvidia-headless-580-server": {"wanted": "580.196.07-0ubuntu0.22.04.1", "action": "upgrade",
                                       "installed": "580.178.04-0ubuntu0.22.04.1", "held": True},
        "nvidia-utils-580-server": {"wanted": "580.196.07-0ubuntu0.22.04.1", "action": "upgrade",
                                    "installed": "580.178.04-0ubuntu0.22.04.1", "held": True},
    },
}
SKIPPED = {"changed": False, "skipped": True, "skip_reason": "Conditional result was False"}


def apt_variables(**overrides):
    """The package seam's defaults (gpufleet.node._pkg, which includes _apt), _apt's defaults and vars/main.yml
    (trusted, as Ansible loads a role's files), then ``overrides``."""
    variables = {}
    for path in (ROLES / "_pkg" / "defaults" / "main.yml", ROLES / "_apt" / "defaults" / "main.yml",
                 ROLES / "_apt" / "vars" / "main.yml"):
        variables.update(trusted(load(path)))
    variables.update(overrides)
    return variables


def render(expression, **overrides):
    return templar(apt_variables(**overrides)).template(trusted(expression))


def rescue_state(result, again=None, caller="gpufleet.node.nvidia_driver", **overrides):
    """The variables in the rescue of fetch.yml after a download registered ``result``: the filter's failures (as
    the role computes them), the second download's result (skipped unless given), the calling role."""
    last = again if again is not None else result
    state = {"ansible_failed_result": result, "__apt_fetch_again": again if again is not None else SKIPPED,
             "_pkg_plan": PLAN, "__apt_fetch_failures": apt_fetch_failures(last, PLAN["packages"]),
             "ansible_parent_role_names": [caller] if caller else []}
    state.update(overrides)
    return state


def message(result, **kwargs):
    return render("{{ __apt_fetch_message }}", **rescue_state(result, **kwargs))


def fetch_tasks():
    return load(ROLES / "_apt" / "tasks" / "fetch.yml")


def test_the_download_resolves_as_the_install_does_and_changes_nothing():
    argv = render("{{ __apt_fetch_argv }}", _pkg_plan=PLAN)
    assert argv == ["apt-get", "install", "--download-only", "-y", "--no-install-recommends",
                    "--allow-change-held-packages", "--allow-downgrades", "-o", "Dpkg::Use-Pty=0",
                    "-o", "Acquire::Retries=3"] + PLAN["install"]
    install = next(task for task in load(ROLES / "_apt" / "tasks" / "packages.yml")
                   if "ansible.builtin.apt" in task)["ansible.builtin.apt"]
    # The same choices as the install task, so that apt fetches what the install then takes from its cache.
    assert install["install_recommends"] is False and install["allow_change_held_packages"] is True
    assert install["allow_downgrade"] is True and install["name"] == "{{ _pkg_plan.install }}"


def test_the_download_comes_after_the_checks_and_before_the_install_and_not_in_check_mode():
    tasks = load(ROLES / "_apt" / "tasks" / "packages.yml")
    names = [task["name"] for task in tasks]
    download = next(i for i, task in enumerate(tasks)
                    if (task.get("ansible.builtin.include_tasks") or {}).get("file") == "fetch.yml")
    install = next(i for i, task in enumerate(tasks) if "ansible.builtin.apt" in task)
    missing = names.index("Check that apt offers every package at the version asked")
    assert missing < download == install - 1
    assert "not ansible_check_mode" in tasks[download]["when"]
    assert tasks[0]["name"] == "Check the caller"


def test_the_tries_stop_at_once_for_a_refused_file_and_are_bounded():
    download = fetch_tasks()[0]["block"][0]
    assert download["retries"] == "{{ _pkg_fetch_retries }}" and download["delay"] == "{{ _pkg_fetch_delay }}"
    assert download["changed_when"] is False
    assert "rejectattr('kind', 'equalto', 'transient')" in download["until"]
    defaults = load(ROLES / "_pkg" / "defaults" / "main.yml")
    assert (defaults["_pkg_fetch_retries"], defaults["_pkg_fetch_delay"], defaults["_pkg_fetch_acquire_retries"]) == (
        3, 10, 3)


@pytest.mark.parametrize("result, again, stops", [
    (NOT_SERVED, None, True),                                   # refused, lists not updated (transient path)
    (NOT_SERVED, {"rc": 0, "stdout": "", "stderr": ""}, False),  # the second download after the update worked
    (NOT_SERVED, NOT_SERVED, True),                             # ... or did not
    (LOCK, None, True),
    ({"failed": True, "msg": "template error"}, None, True),    # no rc at all: stop
])
def test_when_the_rescue_stops_the_run(result, again, stops):
    stop = fetch_tasks()[0]["rescue"][-1]
    assert "ansible.builtin.fail" in stop
    condition = "{{ (%s) }}" % stop["when"]
    assert render(condition, **rescue_state(result, again=again)) is stops


def test_a_file_the_mirror_does_not_serve():
    assert message(NOT_SERVED, nvidia_driver_source="distro") == (
        "apt-get could not download everything the install needs, so nothing was installed or removed and every "
        "package stays as it was. " + UTILS_URL + " : the index lists nvidia-utils-580-server "
        "580.196.07-0ubuntu0.22.04.1, but the mirror does not serve that file (404); apt planned to upgrade it from "
        "580.178.04-0ubuntu0.22.04.1. Ways out: retry later (a mirror caught mid-sync catches up), pin nvidia_driver_version "
        "to a version the mirror serves (apt-cache policy nvidia-utils-580-server lists those apt sees), or point "
        "gpufleet_os_mirror_url (the distribution's archive) at a consistent snapshot of the repository.")


def test_after_the_lists_were_updated_the_message_says_so():
    text = message(NOT_SERVED, again=NOT_SERVED)
    assert "stays as it was (the package lists were updated and the download tried again). http" in text


@pytest.mark.parametrize("caller, source, mirrors", [
    ("gpufleet.node.nvidia_driver", "cuda_repo",
     "point nvidia_repo_url or gpufleet_os_mirror_url (the distribution's archive), whichever serves the file, at"),
    ("gpufleet.node.nvidia_driver", "ppa", "point nvidia_driver_ppa_url or gpufleet_os_mirror_url"),
    ("gpufleet.node.nccl", "", "point nvidia_repo_url or gpufleet_os_mirror_url"),
    ("gpufleet.node.nvidia_container_toolkit", "", "point nvidia_container_toolkit_repo_url or"),
    ("gpufleet.node.baseline", "", "point gpufleet_os_mirror_url (the distribution's archive) at"),
])
def test_the_ways_out_name_the_calling_roles_variables(caller, source, mirrors):
    text = message(NOT_SERVED, caller=caller, nvidia_driver_source=source)
    assert mirrors in text
    version = {"nvidia_driver": "nvidia_driver_version", "nccl": "nccl_version",
               "nvidia_container_toolkit": "nvidia_container_toolkit_version"}.get(caller.rsplit(".", 1)[-1])
    assert ("pin %s to a version" % (version or "the package")) in text


def test_a_hash_mismatch_of_a_dependency():
    text = message(HASH)
    assert ("libnvidia-compute-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb : the index lists "
            "libnvidia-compute-580-server 580.196.07-0ubuntu0.22.04.1, but the mirror serves a file whose hash "
            "differs from the index (Hash Sum mismatch); apt added it as a dependency.") in text
    assert "Ways out: retry later (a mirror caught mid-sync catches up)" in text


def test_transient_failures_after_every_try():
    text = message(REFUSED, caller="gpufleet.node.baseline")
    assert ("curl_7.81.0-1ubuntu1.20_amd64.deb : could not be downloaded (Could not connect to 127.0.0.1:19535 "
            "(127.0.0.1). - connect (111: Connection refused)); apt added it as a dependency.") in text
    assert text.endswith("the download was tried 4 times, 10 s apart, each with apt's own 3 retries per file.")
    assert "retry later" not in text and "nothing was installed or removed" in text


def test_an_error_that_names_no_file_quotes_apt():
    text = message(LOCK)
    assert ("apt-get ended with return code 100: E: Could not get lock /var/cache/apt/archives/lock. It is held by "
            "process 4242 (unattended-upgr) E: Unable to lock directory /var/cache/apt/archives/.") in text
    assert "apt's lock" in text
