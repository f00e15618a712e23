"""n2's driver changes, but its node check finds the planted uncorrected ECC error: n2 stays drained in Slurm with
a reason that says so, and the run fails it."""
from conftest import CONTROLLER, N2, REASON  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


def test_the_node_stays_drained_with_the_reason(rollout):
    state, reason = rollout["nodes"][N2]
    assert state.rstrip("*") == "drained", rollout["nodes"][N2]
    assert reason.startswith(REASON + ": node check failed: GPU1"), reason
    assert "uncorrect" in reason.lower() and "ECC" in reason, reason


def test_the_run_fails_the_node_and_says_why(rollout):
    assert rollout["rc"] != 0
    assert "fatal: [%s]" % N2 in rollout["output"]
    assert "%s stays drained in Slurm with the reason" % N2 in rollout["output"]


def test_its_driver_did_change(rollout, before):
    assert rollout["packages"][N2] != before["packages"][N2]
    assert " 595." in rollout["packages"][N2] and "cuda-drivers-580" not in rollout["packages"][N2]
