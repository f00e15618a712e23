"""Bad input is refused with the role's own message, before anything changes, under any tag selection and in a
play that gathers no facts (each role's preflight carries all of its tags and gathers what it needs)."""
import os
import pathlib
import subprocess

import pytest

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "any-tags.yml"


def play(*args):
    """rc and everything Ansible printed (the failure goes to stderr or stdout depending on the callback)."""
    result = subprocess.run(["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK)] + list(args),
                            capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr


@pytest.mark.parametrize("args, message, untouched", [
    (["--tags", "cuda_install", "-e", "cuda_version=twelve"],
     "cuda_version takes a major.minor release", "/etc/apt/preferences.d/gpufleet-cuda"),
    (["--tags", "baseline_sysctl", "-e", "baseline_swappiness=250"],
     "baseline_swappiness must be an integer from 0 to 200", None),
    (["--tags", "no_facts", "-e", "nvidia_driver_branch=53"],
     "nvidia_driver_branch must be three digits", "/etc/apt/preferences.d/gpufleet-nvidia-driver"),
], ids=["cuda_install", "baseline_sysctl", "gather_facts_false"])
def test_refused_with_the_roles_message(host, args, message, untouched):
    sysctl = host.file("/etc/sysctl.d/60-gpufleet-baseline.conf").content_string
    returncode, output = play(*args)
    assert returncode != 0, output[-2000:]
    assert message in output, output[-3000:]
    assert "undefined" not in output.lower(), output[-3000:]
    assert host.file("/etc/sysctl.d/60-gpufleet-baseline.conf").content_string == sysctl
    if untouched:
        assert not host.file(untouched).exists


def test_the_message_names_only_what_is_wrong(host):
    returncode, output = play("--tags", "baseline_sysctl", "-e", "baseline_swappiness=250")
    assert returncode != 0 and "baseline_swappiness must be" in output
    assert "baseline_memlock_limit" not in output
    assert "baseline_masked_units" not in output
