"""n1 and n5 each run a job when the rollout starts: each is drained (DRAINING while the job runs), its driver
changes only once the job has ended, while the node is DRAINED, and it is resumed idle once its node check passes.
n1 goes through the role's Slurm support; n5 through the generic command hook (scheduler_type command), whose
commands molecule.yml sets to scontrol and squeue on the controller: Slurm shows the same either way."""
import pytest

from conftest import CONTROLLER, N1, N5, REASON, drained  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]
HOOKS = [N1, N5]


def changed(sample, before, node):
    return sample["packages"][node] != before["packages"][node]


@pytest.mark.parametrize("node", HOOKS)
def test_the_job_delays_the_change(rollout, before, node):
    released = rollout["released"].get(node)
    assert released, "%s was never seen draining for 5 s:\n%s" % (node, rollout["output"][-4000:])
    draining = [sample for sample in rollout["samples"] if sample["nodes"][node][0] == "draining"]
    assert len(draining) >= 5
    job = "hold-" + node.rsplit("-", 1)[1]
    # Until its job was released, the node was drained with the reason, the job ran, and its packages stayed as they
    # were (after the release, Slurm may show it draining for a moment with the job gone).
    for sample in (sample for sample in draining if sample["time"] <= released):
        assert sample["nodes"][node][1] == REASON
        assert sample["jobs"][job][1] == "RUNNING"
        assert not changed(sample, before, node)
    assert all(not changed(sample, before, node) for sample in rollout["samples"] if sample["time"] <= released)


@pytest.mark.parametrize("node", HOOKS)
def test_the_change_happens_drained(rollout, before, node):
    changing = [sample for sample in rollout["samples"] if changed(sample, before, node)]
    assert changing, "no sample saw the packages of %s move" % node
    first = changing[0]
    assert first["time"] > rollout["released"][node]
    assert "hold-" + node.rsplit("-", 1)[1] not in first["jobs"]           # the job had ended
    # From the first move of its packages until the play resumed it, the node stayed drained.
    resumed = [sample for sample in changing if not drained(sample["nodes"][node][0])]
    during = changing[:changing.index(resumed[0])] if resumed else changing
    assert during and all(sample["nodes"][node][0].rstrip("*") == "drained" for sample in during), \
        [sample["nodes"][node] for sample in during]


@pytest.mark.parametrize("node, says", [
    (N1, "%s resumed in Slurm" % N1),
    # the command hook's own task, delegated to the host its commands run on
    (N5, "TASK [gpufleet.node.scheduler : Put the node back in service, on gpufleet-slurm-ctl]"),
])
def test_the_node_is_resumed_idle_on_the_new_branch(rollout, before, node, says):
    assert "%s passed the node check" % node in rollout["output"]
    assert says in rollout["output"]
    state, reason = rollout["nodes"][node]
    assert state.rstrip("*") == "idle" and reason == "none", rollout["nodes"][node]
    assert rollout["packages"][node] != before["packages"][node]
    assert " cuda-drivers " in rollout["packages"][node] and " 595." in rollout["packages"][node]
    assert "cuda-drivers-580" not in rollout["packages"][node]


def test_the_command_hook_ran_its_commands_on_the_host_it_names(rollout):
    output = rollout["output"]
    for task in ("Take the node out of service, on gpufleet-slurm-ctl",
                 "Wait until scheduler_command_idle says the node is idle"):
        assert "TASK [gpufleet.node.scheduler : %s" % task in output, task
    assert "changed: [%s -> gpufleet-slurm-ctl]" % N5 in output
