"""Bad input is refused with the role's own message before anything changes, whatever tags a run selects (the
preflight carries every tag of the role)."""
import os
import pathlib
import subprocess

import pytest

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "any-tags.yml"
WRITTEN = ["/etc/gpufleet/self-converge-settings.json", "/etc/systemd/system/gpufleet-self-converge.timer",
           "/opt/gpufleet/self-converge/venv/pip.conf"]


def play(*args):
    """rc and everything Ansible printed."""
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK)] + list(args),
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("args, message", [
    (["--tags", "self_converge_configure", "-e", "self_converge_interval_s=30"],
     "self_converge_interval_s must be at least 60 seconds"),
    (["--tags", "self_converge_install", "-e", "self_converge_ansible_core_version=2.19"],
     "self_converge_ansible_core_version must be an ansible-core release"),
    (["--tags", "self_converge_verify", "-e", "self_converge_limit='node 1'"],
     "self_converge_limit must name the node"),
], ids=["configure", "install", "verify"])
def test_refused_with_the_roles_message(host, args, message):
    before = {path: host.file(path).content_string for path in WRITTEN}
    returncode, output = play(*args)
    assert returncode != 0, output[-2000:]
    assert message in output, output[-3000:]
    assert "undefined" not in output.lower(), output[-3000:]
    assert {path: host.file(path).content_string for path in WRITTEN} == before


def test_the_message_names_only_what_is_wrong(host):
    returncode, output = play("--tags", "self_converge_configure", "-e", "self_converge_interval_s=30")
    assert returncode != 0 and "self_converge_interval_s must be" in output
    assert "self_converge_repo_url" not in output
    assert "self_converge_playbook" not in output
