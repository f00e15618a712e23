"""run_command: output, exit code, C locale, a missing binary, and a hard timeout."""
import time

from ansible_collections.gpufleet.node.plugins.module_utils.process import run_command


def test_output_and_exit_code():
    rc, stdout, stderr, timed_out = run_command(["sh", "-c", "echo out; echo err >&2; exit 3"], 5)
    assert (rc, stdout, stderr, timed_out) == (3, "out\n", "err\n", False)


def test_c_locale():
    assert run_command(["sh", "-c", "echo $LC_ALL $LANG"], 5)[1] == "C C\n"


def test_missing_binary():
    rc, _stdout, stderr, timed_out = run_command(["/nonexistent/nvidia-smi"], 5)
    assert rc == 127 and not timed_out and stderr


def test_timeout_kills_the_process_group():
    started = time.monotonic()
    rc, _stdout, _stderr, timed_out = run_command(["sh", "-c", "sleep 30 & sleep 30"], 1)
    assert timed_out and rc is None
    assert time.monotonic() - started < 3
