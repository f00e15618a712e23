"""The role run again on the converged node with only part of it selected by tags: check mode with the configure
step alone, and the verify step alone, work (the install step's register is not there then) and change nothing."""
import functools
import os
import pathlib
import subprocess

import pytest

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "converge.yml"


@functools.lru_cache(maxsize=None)
def run_on_every_node(*args):
    """One ansible-playbook run over all the scenario's nodes (each node's test reads its own recap)."""
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK)] + list(args),
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("args", [("--check", "--tags", "gpu_monitoring_configure"), ("--tags", "gpu_monitoring_verify")],
                         ids=["check_configure", "verify"])
def test_a_part_selected_by_tags_runs_and_changes_nothing(host, args):
    name = host.ansible.get_variables()["inventory_hostname"]
    returncode, output = run_on_every_node(*args)
    assert returncode == 0, output[-3000:]
    assert "undefined" not in output.lower(), output[-3000:]
    recap = [line for line in output.splitlines() if line.startswith(name + " ") and "ok=" in line]
    assert recap and "changed=0" in recap[-1] and "failed=0" in recap[-1], output[-3000:]
