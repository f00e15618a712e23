"""Bad scheduler settings stop site.yml in its first play, whatever tags the run selects, before any play changes
anything (baseline included) and before Slurm is asked to drain anything."""
import os
import subprocess

import pytest

from conftest import CONTROLLER, N5, SITE, slurm_nodes  # pylint: disable=import-error

testinfra_hosts = [CONTROLLER]


@pytest.mark.parametrize("tags, extra, says", [
    ("baseline", ["-e", "scheduler_drain_timeout=0"],
     "scheduler_drain_timeout and scheduler_poll_interval are seconds above 0"),
    # Slurm's settings, on the nodes that use Slurm: n5's scheduler is the command hook, which they do not concern
    # (with them, n5 alone would go on, rightly).
    ("nvidia_driver", ["-e", "scheduler_slurm_host=gpufleet-nowhere", "--limit", "all:!" + N5],
     "scheduler_slurm_host gpufleet-nowhere is not in the inventory"),
    ("nvidia_driver", ["-e", "scheduler_node_name=gpufleet-nowhere", "--limit", "all:!" + N5],
     "Slurm does not know a node gpufleet-nowhere"),
    ("nvidia_driver", ["-e", "scheduler_type=command", "-e", "scheduler_command_host=gpufleet-slurm-ctl",
                       "-e", '{"scheduler_command_drain": []}'],
     "scheduler_command_drain must be a command as an argv list of strings"),
    ("nvidia_driver", ["-e", "scheduler_type=command", "-e", "scheduler_command_host=gpufleet-nowhere"],
     "scheduler_command_host must name the inventory host"),
])
def test_refused_before_anything_changes(tags, extra, says):
    nodes = slurm_nodes()
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(SITE), "--tags", tags]
                            + extra, capture_output=True, text=True, check=False, timeout=600)
    output = result.stdout + result.stderr
    assert result.returncode != 0
    assert says in output, output[-3000:]
    assert "Gather GPU facts" not in output          # stopped in the first play's preflight
    assert "PLAY [OS baseline]" not in output and "changed=0" in output
    assert slurm_nodes() == nodes
