"""The log of the runs: in the journal and in /var/log/gpufleet/self-converge.log, which the scenario's runs have
rotated (self_converge_log_max_bytes 16384, self_converge_log_keep 2)."""
LOG = "/var/log/gpufleet/self-converge.log"
MAX_BYTES = 16384


def test_the_log_was_rotated_and_stays_bounded(host):
    assert host.file(LOG + ".1").exists, "the runs were expected to fill more than one file"
    assert not host.file(LOG + ".3").exists
    for path in (LOG, LOG + ".1", LOG + ".2"):
        if host.file(path).exists:
            assert host.file(path).size <= MAX_BYTES, path
            assert host.file(path).mode == 0o644, path


def test_the_log_ends_with_the_last_run(host):
    lines = host.file(LOG).content_string.splitlines()
    runner = [line for line in lines if " gpufleet-self-converge[" in line]
    assert runner[-1].split(": ", 1)[1].startswith("run ok after "), runner[-3:]
    assert "converged: 0 changed" in runner[-1]
    # the playbook's own output is there too, as ansible-playbook prints it
    assert any(line.startswith("PLAY RECAP ") for line in lines)


def test_the_journal_has_the_good_and_the_failed_runs(host):
    journal = host.check_output("journalctl --no-pager --output cat --unit gpufleet-self-converge.service")
    assert "run FAILED after " in journal
    assert "baseline_swappiness must be an integer from 0 to 200" in journal
    last = [line for line in journal.splitlines() if ": run " in line and " after " in line][-1]
    assert " run ok after " in last and last.endswith("converged: 0 changed"), last
