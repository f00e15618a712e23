"""The rollout again, on the nodes it finished: nothing is disrupted, so nothing is drained or changed; n2 stays
drained with its reason (a person resumes it once it is fixed)."""
from conftest import CONTROLLER, N1, N2, N3, N5, REASON, drained  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


def recap_changed(output, host):
    line = [line for line in output.splitlines() if line.startswith(host + " ") and " changed=" in line]
    assert line, output[-3000:]
    return int(line[-1].split(" changed=")[1].split()[0])


def test_nothing_changes_and_nothing_is_drained(second_run, rollout):
    assert second_run["rc"] == 0, second_run["output"][-4000:]
    for node in (N1, N2, N3, N5):
        assert recap_changed(second_run["output"], node) == 0, node
        assert "%s: not drained, the change does not disrupt it" % node in second_run["output"]
        assert second_run["packages"][node] == rollout["packages"][node]
    for sample in second_run["samples"]:
        assert not [node for node in (N1, N3, N5) if drained(sample["nodes"][node][0])], sample["nodes"]
        assert sample["nodes"][N2] == rollout["nodes"][N2]
    assert second_run["nodes"][N2][1].startswith(REASON + ": node check failed")
