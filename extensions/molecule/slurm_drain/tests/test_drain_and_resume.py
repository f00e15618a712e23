"""n1 runs a job when the rollout starts: Slurm drains it (DRAINING while the job runs), its driver changes only
once the job has ended, while the node is DRAINED, and it is resumed idle once its node check passes."""
from conftest import CONTROLLER, N1, REASON, drained  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


def changed(sample, before):
    return sample["n1_packages"] != before["packages"][N1]


def test_the_job_delays_the_change(rollout, before):
    assert rollout["released"], "n1 was never seen draining for 5 s:\n" + rollout["output"][-4000:]
    draining = [sample for sample in rollout["samples"] if sample["nodes"][N1][0] == "draining"]
    assert len(draining) >= 5
    # While its job ran, n1 was drained with the reason, and its packages stayed as they were.
    for sample in draining:
        assert sample["nodes"][N1][1] == REASON
        assert sample["jobs"]["hold-n1"][1] == "RUNNING"
        assert not changed(sample, before)
    assert all(not changed(sample, before) for sample in rollout["samples"] if sample["time"] <= rollout["released"])


def test_the_change_happens_drained(rollout, before):
    changing = [sample for sample in rollout["samples"] if changed(sample, before)]
    assert changing, "no sample saw n1's packages move"
    first = changing[0]
    assert first["time"] > rollout["released"]
    assert "hold-n1" not in first["jobs"]                 # the job had ended
    # From the first move of its packages until the play resumed it, n1 stayed drained.
    resumed = [sample for sample in changing if not drained(sample["nodes"][N1][0])]
    during = changing[:changing.index(resumed[0])] if resumed else changing
    assert during and all(sample["nodes"][N1][0].rstrip("*") == "drained" for sample in during), \
        [sample["nodes"][N1] for sample in during]


def test_the_node_is_resumed_idle_on_the_new_branch(rollout, before):
    assert "%s passed the node check" % N1 in rollout["output"]
    assert "%s resumed in Slurm" % N1 in rollout["output"]
    state, reason = rollout["nodes"][N1]
    assert state.rstrip("*") == "idle" and reason == "none", rollout["nodes"][N1]
    assert rollout["packages"][N1] != before["packages"][N1]
    assert " cuda-drivers " in rollout["packages"][N1] and " 595." in rollout["packages"][N1]
    assert "cuda-drivers-580" not in rollout["packages"][N1]
