"""The record of the last run (/etc/gpufleet/self-converge.json), after the side effects' runs ended with a good one:
every field the role's README lists, with the values of that run."""
import datetime
import json

import pytest

FIELDS = {"time", "finished", "duration_s", "ok", "stage", "rc", "message", "source", "url", "version", "directory",
          "commit", "playbook", "limit", "changed", "hosts", "failed_tasks", "output_tail", "ansible_core", "trigger",
          "log", "last_ok"}


@pytest.fixture(name="record")
def fixture_record(host):
    return json.loads(host.file("/etc/gpufleet/self-converge.json").content_string)


def when(text):
    return datetime.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ")


def test_the_record_has_every_field(record):
    assert set(record) == FIELDS


def test_the_last_run_converged_the_repository_s_head(host, record):
    head = host.check_output("git -C /srv/gpufleet-infra.git rev-parse main")
    assert record["ok"] is True and record["stage"] == "converge" and record["rc"] == 0
    assert record["commit"] == head
    assert record["changed"] == 0
    assert record["message"] == "converged: 0 changed"
    assert record["failed_tasks"] == [] and record["output_tail"] == []
    assert record["last_ok"] == {"time": record["time"], "commit": head}


def test_the_record_says_where_from_and_what(record):
    assert record["source"] == "git"
    assert record["url"] == "file:///srv/gpufleet-infra.git"
    assert record["version"] == "main"
    assert record["directory"] == "/opt/gpufleet/self-converge/checkout"
    assert record["playbook"] == "site.yml"
    assert record["limit"] == "gpufleet-self_converge"
    assert record["ansible_core"] == "2.19.14"
    assert record["trigger"] == "manual"  # the side effects end with a run of the command
    assert record["log"] == "/var/log/gpufleet/self-converge.log"


def test_the_hosts_counts_are_ansible_s_recap(record):
    counts = record["hosts"]["gpufleet-self_converge"]
    assert set(counts) == {"ok", "changed", "failures", "unreachable", "skipped", "rescued", "ignored"}
    assert counts["ok"] > 0 and counts["changed"] == 0 and counts["failures"] == 0


def test_the_times_are_utc_and_the_duration_theirs(record):
    start, end = when(record["time"]), when(record["finished"])
    assert start <= end
    assert record["duration_s"] > 0
    assert abs((end - start).total_seconds() - record["duration_s"]) <= 2


def test_the_status_command_prints_it(host, record):
    result = host.run("gpufleet-self-converge status")
    assert result.rc == 0
    assert json.loads(result.stdout) == record


def test_gpu_facts_stack_hands_it_to_the_fleet_report(host, record):
    """gpu_facts with stack: true (fleet_facts.yml, so validate.yml and report.yml) reads the record's summary."""
    stack = host.ansible("gpufleet.node.gpu_facts", "stack=true", check=False)["ansible_facts"]["gpu_stack"]
    assert stack["self_converge"] == dict((field, record[field])
                                          for field in ("ok", "time", "message", "commit", "changed", "last_ok"))
