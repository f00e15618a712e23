"""site.yml --check with the scheduler: the driver role in check mode decides, nothing is drained or changed, and
the drains a real run would make are reported as changes."""
import re

from conftest import CONTROLLER, N1, N3, N5, NODES, drained  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]      # controller-side tests: run them once


def test_check_mode_drains_nothing(check_run, before):
    assert check_run["rc"] == 0, check_run["output"][-4000:]
    assert check_run["samples"], "no sample of Slurm was taken"
    for sample in check_run["samples"]:
        assert not [node for node in NODES if drained(sample["nodes"][node][0])], sample["nodes"]
        assert {state for _job, state, _node in sample["jobs"].values()} == {"RUNNING"}, sample["jobs"]
    assert check_run["packages"] == before["packages"]


def test_check_mode_names_the_nodes_a_real_run_drains(check_run):
    output = check_run["output"]
    assert "%s: would be drained from slurm" % N1 in output
    assert "%s: would be drained from command" % N5 in output
    assert "%s: not drained, the change does not disrupt it" % N3 in output
    assert re.search(r"Check mode: %s runs job [0-9]+ [(]RUNNING[)]" % N1, output), output[-3000:]
    # The drain a real run makes is reported as a change; nothing is changed on n3.
    recap = dict((line.split()[0], line) for line in output.splitlines() if " changed=" in line and " ok=" in line)
    assert " changed=0 " not in recap[N1] and " changed=0 " not in recap[N5] and " changed=0 " in recap[N3], recap
