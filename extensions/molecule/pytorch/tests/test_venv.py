"""pytorch: the virtualenv from the wheelhouse, pip pointed at it, gpu-node-check passing on the CPU (gloo)."""
import json

VENV = "/opt/gpufleet/pytorch"


def test_torch_is_the_pinned_build(host):
    out = host.check_output("%s/bin/python -c 'import torch; print(torch.__version__, torch.version.cuda)'" % VENV)
    assert out.split()[-2:] == ["2.13.0+cpu", "None"]


def test_venv_owner_and_mode(host):
    venv = host.file(VENV)
    assert venv.user == "root" and venv.mode == 0o755


def test_pip_uses_the_wheelhouse(host):
    conf = host.file(VENV + "/pip.conf").content_string
    assert "no-index = true" in conf and "find-links = /srv/gpufleet-wheels" in conf
    assert "torch==2.13.0" in host.file(VENV + "/gpufleet-requirements.txt").content_string


def test_node_check_passes_on_cpu_with_gloo(host):
    report = json.loads(host.check_output("gpu-node-check --json 2>/dev/null"))
    assert report["ok"] and report["backend"] == "gloo"
    names = [check["name"] for check in report["checks"]]
    assert names == ["torch imports", "torch is a CPU build", "matmul on cpu", "DDP all-reduce (gloo)"]
    assert report["ddp"]["world_size"] == 2 and report["ddp"]["correct"]
    assert report["ddp"]["busbw_gbps"] > 0


def test_node_check_summary_and_failure(host):
    summary = host.run("gpu-node-check --skip-ddp 2>/dev/null")
    assert summary.rc == 0 and "PASS" in summary.stdout
    host.run_expect([0], "mkdir -p /tmp/cfg && echo '{\"cuda_version\": \"12.1\", \"gpu_count\": 8}' > /tmp/cfg/c.json")
    wrong = host.run("gpu-node-check --skip-ddp --config /tmp/cfg/c.json 2>/dev/null")
    assert wrong.rc == 1
    assert "[FAIL] torch built for CUDA 12.1" in wrong.stdout
    assert "torch.version.cuda is None (a CPU build)" in wrong.stdout
