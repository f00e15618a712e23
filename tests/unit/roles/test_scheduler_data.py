"""gpufleet.node.scheduler's data, rendered as the role renders it: the check run it starts per batch (limited to the
batch, so that site.yml's serial batches still apply, with the run's tags), the settings it refuses before anything
changes, the wait, and the reason the scheduler shows."""
import pytest

from .platform import ROOT, facts_for, render

UBUNTU = facts_for("Ubuntu", "22.04")
HOSTS = ["ctl-1", "node-1", "node-2", "node-3"]
# What Ansible gives the role at run time (magic variables and the play's context).
RUN = {"inventory_hostname": "node-1", "inventory_hostname_short": "node-1", "groups": {"all": HOSTS},
       "ansible_play_batch": ["node-1", "node-2"], "ansible_run_tags": ["nvidia_driver"], "ansible_skip_tags": [],
       "ansible_inventory_sources": ["/srv/infra/inventory/hosts.yml"], "ansible_config_file": "/srv/infra/ansible.cfg",
       "ansible_playbook_python": "/usr/bin/python3",
       "role_path": "/srv/infra/collections/ansible_collections/gpufleet/node/roles/scheduler",
       "__scheduler_check_dir": {"path": "/tmp/abc.gpufleet-scheduler"}}


def scheduler(expression, **settings):
    return render("scheduler", UBUNTU, expression, **dict(RUN, **settings))


def test_the_check_run_is_limited_to_the_batch_with_the_run_s_tags():
    argv = scheduler("{{ __scheduler_check_argv }}", scheduler_type="slurm")
    assert argv[:5] == ["/usr/bin/python3", "-m", "ansible", "playbook", "--check"]
    assert argv[argv.index("--limit") + 1] == "node-1,node-2"
    assert argv[argv.index("--tags") + 1] == "nvidia_driver"
    assert "--inventory=/srv/infra/inventory/hosts.yml" in argv and "--skip-tags" not in argv
    assert argv[argv.index("--extra-vars") + 1] == "@/tmp/abc.gpufleet-scheduler/run.json"
    assert argv[-1] == RUN["role_path"] + "/files/check.yml"
    argv = scheduler("{{ __scheduler_check_argv }}", ansible_skip_tags=["nvidia_driver_mig"],
                     scheduler_check_args=["--vault-password-file", "/srv/vault"])
    assert argv[argv.index("--skip-tags") + 1] == "nvidia_driver_mig"
    assert argv[-3:-1] == ["--vault-password-file", "/srv/vault"]


def test_the_check_run_finds_this_collection_first_and_the_same_configuration(monkeypatch):
    monkeypatch.setenv("ANSIBLE_COLLECTIONS_PATH", "/usr/share/ansible/collections")
    environment = scheduler("{{ __scheduler_check_environment }}")
    assert environment == {"ANSIBLE_CONFIG": "/srv/infra/ansible.cfg",
                           "ANSIBLE_COLLECTIONS_PATH": "/srv/infra/collections:/usr/share/ansible/collections"}


@pytest.mark.parametrize("settings, retries", [
    ({"scheduler_drain_timeout": 3600, "scheduler_poll_interval": 30}, 120),
    ({"scheduler_drain_timeout": "300", "scheduler_poll_interval": "2"}, 150),    # extra variables are strings
    ({"scheduler_drain_timeout": 10, "scheduler_poll_interval": 3}, 4),           # rounded up: never shorter
])
def test_the_wait_covers_the_timeout(settings, retries):
    assert int(scheduler("{{ __scheduler_retries }}", **settings)) == retries


def test_the_reason_is_one_line_without_double_quotes():
    assert scheduler("{{ __scheduler_reason_clean }}", scheduler_reason='gpufleet: "595"\r\nrollout ') == \
        "gpufleet: '595' rollout"


@pytest.mark.parametrize("settings, host", [
    ({"scheduler_type": "slurm"}, "node-1"),                       # the node itself
    ({"scheduler_type": "slurm", "scheduler_slurm_host": "ctl-1"}, "ctl-1"),
    ({"scheduler_type": "command", "scheduler_command_host": "ctl-1"}, "ctl-1"),
    ({"scheduler_type": "none"}, "node-1"),                        # never empty: delegate_to is templated first
])
def test_the_commands_run_on(settings, host):
    assert scheduler("{{ __scheduler_host }}", **settings) == host


COMMANDS = {"scheduler_command_host": "ctl-1", "scheduler_command_drain": ["kubectl", "cordon", "{node}"],
            "scheduler_command_idle": ["kubectl", "drain", "{node}", "--ignore-daemonsets"],
            "scheduler_command_resume": ["kubectl", "uncordon", "{node}"]}


@pytest.mark.parametrize("settings", [
    {"scheduler_type": "none", "scheduler_drain_timeout": 0},      # none checks nothing: it drains nothing
    {"scheduler_type": "slurm", "scheduler_slurm_host": "ctl-1"},
    {"scheduler_type": "slurm"},
    dict(COMMANDS, scheduler_type="command"),
    dict(COMMANDS, scheduler_type="command", scheduler_verify_commands=[["/usr/local/bin/gpu-node-check"]]),
])
def test_good_settings_pass(settings):
    assert scheduler("{{ __scheduler_setting_errors }}", **settings) == []


@pytest.mark.parametrize("settings, says", [
    ({"scheduler_node_name": "node 1"}, "scheduler_node_name must be one name"),
    ({"scheduler_reason": " \n "}, "scheduler_reason must not be empty"),
    ({"scheduler_drain_timeout": 0}, "scheduler_drain_timeout and scheduler_poll_interval are seconds above 0"),
    ({"scheduler_drain_timeout": 10, "scheduler_poll_interval": 30}, "the interval not above the timeout"),
    ({"scheduler_check_roles": [{"role": "gpufleet.node.nvidia_driver"}]}, "scheduler_check_roles lists the roles"),
    ({"scheduler_check_roles": []}, "scheduler_check_roles lists the roles"),
    ({"scheduler_slurm_host": "ctl-9"}, "scheduler_slurm_host ctl-9 is not in the inventory"),
    ({"scheduler_verify_commands": ["/usr/local/bin/gpu-node-check"]}, "scheduler_verify_commands holds argv lists"),
    (dict(COMMANDS, scheduler_type="command", scheduler_command_host=""), "scheduler_command_host must name"),
    (dict(COMMANDS, scheduler_type="command", scheduler_command_idle=[]), "scheduler_command_idle must be a command"),
    (dict(COMMANDS, scheduler_type="command", scheduler_command_drain="kubectl cordon {node}"),
     "scheduler_command_drain must be a command"),
])
def test_bad_settings_are_refused_by_name(settings, says):
    errors = scheduler("{{ __scheduler_setting_errors }}", **dict({"scheduler_type": "slurm"}, **settings))
    assert len(errors) == 1 and says in errors[0], errors


def test_the_role_s_files_exist_where_the_argv_points():
    assert (ROOT / "roles" / "scheduler" / "files" / "check.yml").is_file()
