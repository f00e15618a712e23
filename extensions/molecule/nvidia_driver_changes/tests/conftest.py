"""Prints how long each change took (tests/test_changes.py writes TIMES_FILE) after the tests."""
import json
import os
import pathlib

TIMES_FILE = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp")) / "change-seconds.json"


def pytest_sessionstart(session):  # pylint: disable=unused-argument
    TIMES_FILE.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter):
    if TIMES_FILE.exists():
        terminalreporter.write_sep("-", "seconds per change: check mode / the change / the second run")
        for label, seconds in json.loads(TIMES_FILE.read_text()).items():
            terminalreporter.write_line("%-44s %s" % (label, " / ".join("%.0f" % value for value in seconds)))
