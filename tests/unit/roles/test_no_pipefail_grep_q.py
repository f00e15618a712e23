"""No shell pipeline in the roles ends in ``grep -q`` under ``pipefail``: grep exits at the first match, the
command before it dies of SIGPIPE, and pipefail reports that failure, so "present" reads as "absent" (the
nvidia_driver handler read the initramfs that way and never rebuilt it)."""
import pathlib
import subprocess

import pytest
import yaml

ROLES = pathlib.Path(__file__).resolve().parents[3] / "roles"


def shell_commands():
    for path in sorted(ROLES.glob("*/*/*.yml")):
        for task in yaml.safe_load(path.read_text(encoding="utf-8")) or []:
            if not isinstance(task, dict):
                continue
            for key in ("ansible.builtin.shell", "shell"):
                body = task.get(key)
                if body:
                    yield path, body["cmd"] if isinstance(body, dict) else body


def test_the_failure_mode_is_real():
    """A producer with more output than a pipe buffer, grep -q matching early: pipefail turns success into 141."""
    done = subprocess.run(["bash", "-c", "set -o pipefail; seq 1 200000 | grep -q '^1$' && echo present || echo absent"],
                          capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "absent"


@pytest.mark.parametrize("path, command", list(shell_commands()) or [(None, "")])
def test_no_grep_q_after_a_pipe_under_pipefail(path, command):
    assert not ("pipefail" in command and "| grep -q" in command), path


def test_the_initramfs_is_read_whole():
    handlers = yaml.safe_load((ROLES / "nvidia_driver" / "handlers" / "main.yml").read_text(encoding="utf-8"))
    listing = handlers[0]
    assert listing["ansible.builtin.command"]["argv"][0] == "lsinitramfs"
