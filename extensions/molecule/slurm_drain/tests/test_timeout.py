"""n4's job outlasts its scheduler_drain_timeout (10 s): n4 stays drained, unchanged, with a reason that says so,
and its job runs on (never forced: scheduler_force is false)."""
from conftest import CONTROLLER, N4, REASON  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


def test_the_node_stays_drained_and_unchanged(rollout, before):
    state, reason = rollout["nodes"][N4]
    assert state == "draining", rollout["nodes"][N4]
    assert reason == REASON + ": jobs still running after 10 s"
    assert rollout["packages"][N4] == before["packages"][N4]
    assert rollout["jobs"]["hold-n4"][1] == "RUNNING"
    assert "%s still runs jobs after 10 s" % N4 in rollout["output"]
