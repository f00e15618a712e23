"""The healthy fleet after site.yml: validate passes every node (health gates, versions, the DDP smoke test).

Runs on the controller (the playbooks run against Molecule's inventory), once, not per host. The faults and the
report are checked after the side effect plant-faults.yml, in tests_with_faults/.
"""
import os
import pathlib
import subprocess

ROOT = pathlib.Path(__file__).resolve().parents[4]
testinfra_hosts = ["gpufleet-fleet-hgx"]      # controller-side tests: run them once


def playbook(name, *extra):
    return subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(ROOT / "playbooks" / name),
         "-e", "gpufleet_ddp_rdzv_host=127.0.0.1", "-e", "gpufleet_ddp_port=29491",
         "-e", "gpufleet_ddp_local_addr=127.0.0.1"] + list(extra),
        capture_output=True, text=True, check=False)


def test_validate_passes_on_the_healthy_fleet():
    result = playbook("validate.yml")
    assert result.returncode == 0, result.stdout[-4000:]
    assert "3 nodes validated, 0 failing" in result.stdout
    assert "12 ranks on 3 node(s)" in result.stdout or "6 ranks on 3 node(s)" in result.stdout
    for host in ("gpufleet-fleet-hgx", "gpufleet-fleet-pairs", "gpufleet-fleet-pcie"):
        assert "%s passed" % host in result.stdout, host


def test_a_bad_threshold_stops_validate_before_anything_runs():
    result = playbook("validate.yml", "-e", "gpufleet_health_nvlink_inactive_max=two", "-e", "gpufleet_validate_ddp=false")
    assert result.returncode != 0
    assert "gpufleet_health_nvlink_inactive_max must be a whole number" in result.stdout + result.stderr
    assert "Gather GPU facts" not in result.stdout          # stopped in the first play, before gathering anything
