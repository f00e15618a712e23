"""ansible-core in the role's virtualenv: Python 3.11 from the archive's universe (Ubuntu 22.04's python3 is 3.10),
the pinned release from the bench's wheelhouse, pip told to use only it."""
VENV = "/opt/gpufleet/self-converge/venv"


def test_the_virtualenv_is_python_3_11(host):
    assert host.check_output(VENV + "/bin/python --version").startswith("Python 3.11.")
    assert host.file(VENV + "/pyvenv.cfg").contains("/usr/bin")
    assert host.package("python3.11-venv").is_installed


def test_ansible_core_is_the_pinned_release(host):
    version = host.check_output(VENV + "/bin/python -c \"from importlib.metadata import version; "
                                "print(version('ansible-core'))\"")
    assert version == "2.19.14"
    assert host.check_output(VENV + "/bin/ansible-pull --version").splitlines()[0].startswith("ansible-pull [core 2.19.14]")


def test_pip_uses_only_the_wheelhouse(host):
    conf = host.file(VENV + "/pip.conf").content_string
    assert "no-index = true" in conf
    assert "find-links = /srv/gpufleet-wheels" in conf
    assert "index-url" not in conf


def test_git_is_there_for_ansible_pull(host):
    assert host.run("git --version").rc == 0
