"""nvidia_driver_outcome (roles/nvidia_driver/tasks/outcome.yml), rendered as the role renders it: the fact
gpufleet.node.scheduler reads from a check-mode run to drain only the nodes the change disrupts. Each way a run
disturbs a node's work makes it disruptive - the driver's packages moving, a reboot the policy makes, a MIG mode the
run sets, and a MIG mode that waits for busy GPUs (draining lets it happen) - and nothing else does."""
import pytest

from .platform import facts_for, find_task, templar, role_variables, trusted

TASK = "Say what this run changes that disrupts the node's work (in check mode, what a real run would change)"
UUIDS = ["GPU-0f6c1a52-0000-0000-0000-000000000000", "GPU-0f6c1a52-0000-0000-0000-000000000001"]


def gpu(*mig_current, state="ok"):
    return {"state": state, "devices": [{"index": index, "uuid": UUIDS[index], "mig_mode": {"current": current}}
                                        for index, current in enumerate(mig_current)]}


def outcome(plan=None, check_mode=False, busy=(), gpu_facts=None, **settings):
    """The outcome fact with a plan (the filter nvidia_driver_plan's fields the task reads), the GPUs, the busy
    GPUs' UUIDs (mig.yml's nvidia-smi --query-compute-apps) and settings."""
    facts = dict(facts_for("Ubuntu", "22.04"), gpu=gpu_facts or gpu(False, False))
    task = find_task("nvidia_driver", "outcome.yml", TASK)
    variables = role_variables("nvidia_driver", facts)
    variables.update(trusted(task["vars"]))
    variables.update(settings)
    variables.update({"ansible_facts": facts, "ansible_check_mode": check_mode,
                      "__nvidia_driver_plan": dict({"changed": False, "ready": True, "reboot_reason": "",
                                                    "version": "580.95.05-0ubuntu1"}, **(plan or {})),
                      "__nvidia_driver_busy": {"stdout_lines": [uuid + " " for uuid in busy]}})
    rendered = templar(variables).template(trusted(task["ansible.builtin.set_fact"]["nvidia_driver_outcome"]))
    return dict((key, value.strip() == "True" if isinstance(value, str) and key in ("change", "reboot", "disruptive")
                 else value) for key, value in rendered.items())


def test_nothing_to_do_disrupts_nothing():
    assert outcome() == {"change": False, "reboot": False, "mig": [], "mig_waiting": [], "disruptive": False,
                         "version": "580.95.05-0ubuntu1"}


@pytest.mark.parametrize("plan, check_mode, settings, field", [
    ({"changed": True}, False, {}, "change"),
    # check mode, where the source does not offer the choice yet: a real run installs it (or refuses)
    ({"ready": False}, True, {}, "change"),
    ({"reboot_reason": "the loaded module is 570.195.03, the installed driver 580.95.05"}, False,
     {"nvidia_driver_reboot": "reboot"}, "reboot"),
])
def test_each_disruption_makes_the_node_disruptive(plan, check_mode, settings, field):
    found = outcome(plan, check_mode, **settings)
    assert found[field] is True and found["disruptive"] is True


@pytest.mark.parametrize("policy", ["record", "fail"])
def test_a_reboot_the_policy_does_not_make_is_no_disruption(policy):
    found = outcome({"reboot_reason": "the loaded module is 570.195.03"}, nvidia_driver_reboot=policy)
    assert found["reboot"] is False and found["disruptive"] is False


def test_mig_on_idle_gpus_is_set_and_on_busy_gpus_waits_for_the_drain():
    wanted = {0: True, 1: True}
    idle = outcome(nvidia_driver_mig=wanted)
    assert (idle["mig"], idle["mig_waiting"], idle["disruptive"]) == ([0, 1], [], True)
    busy = outcome(nvidia_driver_mig=wanted, busy=[UUIDS[1]])
    assert (busy["mig"], busy["mig_waiting"], busy["disruptive"]) == ([0], [1], True)
    forced = outcome(nvidia_driver_mig=wanted, busy=UUIDS, nvidia_driver_force=True)
    assert (forced["mig"], forced["mig_waiting"]) == ([0, 1], [])
    # already in the mode asked, busy or not: nothing to do
    done = outcome(nvidia_driver_mig=wanted, busy=UUIDS, gpu_facts=gpu(True, True))
    assert (done["mig"], done["mig_waiting"], done["disruptive"]) == ([], [], False)


def test_mig_is_not_judged_where_the_driver_does_not_answer():
    found = outcome(nvidia_driver_mig={0: True}, gpu_facts=gpu(False, state="driver_not_loaded"))
    assert (found["mig"], found["mig_waiting"], found["disruptive"]) == ([], [], False)
