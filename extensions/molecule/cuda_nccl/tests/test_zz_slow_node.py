"""A node whose all-reduce runs at half of what its NVSwitch topology allows fails the nccl role, with the
figures; with nccl_tests_on_low: warn it only warns. Runs last: it plants the fault on the emulator."""
import os
import pathlib
import subprocess

import pytest

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "slow-node.yml"


def run(*extra):
    return subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK)] + list(extra),
                          capture_output=True, text=True, check=False)


@pytest.fixture(scope="module")
def slow(host):
    host.run_expect([0], "echo 112.0 > /etc/gpufleet-emulator/nccl_busbw")
    yield
    host.run_expect([0], "rm -f /etc/gpufleet-emulator/nccl_busbw")


def test_slow_node_fails_with_the_figures(slow):
    result = run()
    assert result.returncode != 0
    output = result.stdout + result.stderr
    assert "Bus bandwidth 111." in output and "is 50% of the 225.0 GB/s this topology allows" in output


def test_warn_only_when_asked(slow):
    result = run("-e", "nccl_tests_on_low=warn")
    assert result.returncode == 0, result.stdout[-3000:]
    assert "Bus bandwidth 111." in result.stdout + result.stderr
