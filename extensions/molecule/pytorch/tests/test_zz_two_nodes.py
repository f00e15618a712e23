"""The multi-node DDP smoke test (playbooks/ddp_smoke.yml) really runs one all-reduce across both containers."""
import os
import pathlib
import subprocess

PLAYBOOK = pathlib.Path(__file__).resolve().parents[3] / "playbooks" / "ddp_smoke.yml"


def test_all_reduce_across_two_nodes():
    result = subprocess.run(
        ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK),
         "-e", "gpufleet_ddp_rdzv_host=127.0.0.1", "-e", "gpufleet_ddp_port=29471", "-e", "gpufleet_ddp_timeout=180",
         "-e", "gpufleet_ddp_local_addr=127.0.0.1"],
        capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout[-3000:]
    assert "4 ranks on 2 node(s)" in result.stdout           # 2 gloo ranks on each of the two containers
    assert "joined as node" in result.stdout
