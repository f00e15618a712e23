"""n3 is already on branch 595: the change does not disrupt it, so it is never drained and its job runs on through
the check run, the rollout and the second run."""
from conftest import CONTROLLER, N3, drained  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


def test_never_drained_and_its_job_runs_on(check_run, rollout, second_run, before):
    runs = (check_run, rollout, second_run)
    samples = [sample for run in runs for sample in run["samples"]]
    assert samples
    assert not [sample["nodes"][N3] for sample in samples if drained(sample["nodes"][N3][0])]
    assert all(sample["jobs"]["hold-n3"][1] == "RUNNING" for sample in samples)
    assert {sample["jobs"]["hold-n3"][0] for sample in samples} == {before["jobs"]["hold-n3"][0]}   # the same job
    for run in runs:
        assert "%s: not drained, the change does not disrupt it" % N3 in run["output"]
    assert rollout["packages"][N3] == before["packages"][N3] == second_run["packages"][N3]
