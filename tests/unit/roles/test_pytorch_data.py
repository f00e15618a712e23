"""gpufleet.node.pytorch's interpreter decisions rendered as the role renders them: the venv package of the
interpreter the role uses (python3.X-venv, one rule on every platform), and the refusal, before anything changes,
of a torch release without wheels for that interpreter (torch 2.1-2.4 support Python 3.8, 2.5 dropped it; PyTorch's
release matrix as listed in the project's reference notes). Releases the role does not know pass."""
import pytest

from .platform import facts_for, failures_that_fire, render, task_fires, task_message

PREFLIGHT = "preflight.yml"
CHECK = "Check that the OS Python is there and that torch has wheels for it"


def probe(version, rc=0):
    """The registered result of preflight's question to the interpreter."""
    return {"__pytorch_python_version": {"rc": rc, "stdout": version + "\n" if rc == 0 else "", "stderr": ""}}


@pytest.mark.parametrize("platform, python, package", [
    (("Debian", "12"), "3.11", "python3.11-venv"),
    (("Ubuntu", "20.04"), "3.8", "python3.8-venv"),
    (("Ubuntu", "20.04"), "3.9", "python3.9-venv"),     # pytorch_python: /usr/bin/python3.9 (universe)
    (("Ubuntu", "22.04"), "3.10", "python3.10-venv"),
    (("Ubuntu", "24.04"), "3.12", "python3.12-venv"),
])
def test_the_venv_package_of_the_interpreter(platform, python, package):
    assert render("pytorch", facts_for(*platform), "{{ __pytorch_os_packages }}", **probe(python)) == [package]


@pytest.mark.parametrize("torch, python, refused", [
    ("2.5.1", "3.8", True),       # the default torch on Ubuntu 20.04's python3
    ("2.4.1", "3.8", False),
    ("2.1.2", "3.8", False),
    ("2.5.1", "3.9", False),
    ("2.5.1", "3.11", False),
    ("2.5.1", "3.13", False),
    ("2.5.1", "3.14", True),
    ("2.1.2", "3.12", True),      # 2.2 added 3.12
    ("2.2.2", "3.12", False),
    ("2.13.0", "3.11", False),    # a release the role does not know passes (the bench's CPU wheel)
    ("2.13.0", "3.8", False),
])
def test_torch_against_the_interpreter(torch, python, refused):
    facts = facts_for("Ubuntu", "20.04")
    assert task_fires("pytorch", PREFLIGHT, CHECK, facts, pytorch_version=torch, **probe(python)) == refused


def test_a_missing_interpreter_is_refused():
    facts = facts_for("Ubuntu", "20.04")
    assert task_fires("pytorch", PREFLIGHT, CHECK, facts, pytorch_python="/usr/bin/python3.9", **probe("", rc=2))
    message = task_message("pytorch", PREFLIGHT, CHECK, facts, pytorch_python="/usr/bin/python3.9", **probe("", rc=2))
    assert message.startswith("/usr/bin/python3.9 is missing")


def test_the_message_names_the_python_the_range_and_the_releases_that_fit():
    facts = facts_for("Ubuntu", "20.04")
    message = task_message("pytorch", PREFLIGHT, CHECK, facts, **probe("3.8"))
    assert "/usr/bin/python3 is Python 3.8" in message
    assert "torch 2.5.1 has wheels for Python 3.9 to 3.13 only" in message
    assert "(2.1, 2.2, 2.3, 2.4;" in message and "pytorch_python" in message


@pytest.mark.parametrize("torch, python, refused", [("2.4.1", "3.8", False), ("2.5.1", "3.8", True),
                                                    ("2.13.0", "3.11", False)])
def test_preflight_refuses_only_torch_without_wheels(torch, python, refused):
    """Whatever the checks are called: torch 2.4.1 on Ubuntu 20.04's Python 3.8 is not refused."""
    facts = facts_for("Ubuntu", "20.04")
    assert bool(failures_that_fire("pytorch", PREFLIGHT, facts, pytorch_version=torch, **probe(python))) == refused
