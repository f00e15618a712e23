"""The persistence daemon's stand-in: its unit as the real package ships it, and what the emulator reports for it.

Real artifact: nvidia-compute-utils-<branch> 535.183.01-0ubuntu1 (and the other releases) in NVIDIA's ubuntu2204
repository. NVIDIA builds its Ubuntu driver packages from Canonical's packaging (their versions end in -0ubuntu1;
nvidia-driver-550_550.54.15-0ubuntu1 is "Source: nvidia-graphics-drivers-550, Maintainer: Ubuntu Core
Developers" in NVIDIA's nvidia-driver-local-repo-ubuntu2204-550.54.15), so the unit is Canonical's:
github.com/canonical/nvidia-graphics-drivers, branch 535-jammy,
debian/templates/nvidia-compute-utils-flavour.nvidia-persistenced.service.in, installed by dh_installsystemd
into /lib/systemd/system (debian/rules): ExecStart with --no-persistence-mode, StopWhenUnneeded=true, Type=forking,
no [Install] (static; udev's 71-nvidia.rules starts it). Users of NVIDIA's ubuntu2204 repository who install
cuda-drivers-535=535.183.01-1 with nvidia-compute-utils-535=535.183.01-0ubuntu1 edit that flag out of
/usr/lib/systemd/system/nvidia-persistenced.service, which confirms the package ships it. NVIDIA's own template
(github.com/NVIDIA/nvidia-persistenced, init/systemd/nvidia-persistenced.service.template) runs the daemon
without the option and has an [Install] section; Debian's nvidia-persistenced (bookworm contrib) ships that
template. The debian12 path of the mirror carries the same Ubuntu-built packages (see test_drivers.py).

The daemon starts with persistence mode on unless given --no-persistence-mode (option-table.h, manual page
nvidia-persistenced.1.m4; options.c applies the options in order): the emulator reads the running daemons'
command lines and reports persistence mode accordingly.
"""
import configparser
import importlib.util
import os

import pytest

from .conftest import ROOT

EMULATOR = ROOT / "tests" / "emulator" / "nvidia_smi_emulator.py"


def load_emulator():
    spec = importlib.util.spec_from_file_location("nvidia_smi_emulator", EMULATOR)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def unit(repositories, tmp_path, distribution, branch):
    repo = repositories[distribution]
    name = "nvidia-compute-utils-%s" % branch
    version = repo.versions(name)[-1]
    root = repo.unpack(name, version, tmp_path)
    text = (root / "lib/systemd/system/nvidia-persistenced.service").read_text()
    parser = configparser.ConfigParser(strict=False, interpolation=None)
    parser.optionxform = str
    parser.read_string(text)
    return repo, name, version, root, text, parser


@pytest.mark.parametrize("distribution, branch", [("ubuntu2204", "535"), ("ubuntu2204", "580"), ("debian12", "535")])
def test_unit_is_canonicals(repositories, tmp_path, distribution, branch):
    repo, name, version, root, text, parser = unit(repositories, tmp_path, distribution, branch)
    assert version.endswith("-0ubuntu1")
    assert parser["Service"]["ExecStart"].split() == [
        "/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced", "--no-persistence-mode", "--verbose"]
    assert parser["Service"]["Type"] == "forking"
    assert parser["Service"]["ExecStopPost"] == "/bin/rm -rf /var/run/nvidia-persistenced"
    assert parser["Unit"]["StopWhenUnneeded"] == "true"
    assert "Install" not in parser.sections()          # static: nothing to enable
    assert "nvidia-persistenced" in repo.field(name, version, "Provides").split(", ")
    assert os.access(root / "usr/bin/nvidia-persistenced", os.X_OK)


def test_the_packaged_unit_leaves_persistence_mode_off(repositories, tmp_path):
    """What the node reports with the package as shipped: Disabled; with the option removed (a drop-in): Enabled."""
    emulator = load_emulator()
    *_rest, parser = unit(repositories, tmp_path, "ubuntu2204", "535")
    argv = parser["Service"]["ExecStart"].split()
    assert emulator.persistence_on(argv[1:]) is False
    assert emulator.persistence_on([arg for arg in argv[1:] if arg != "--no-persistence-mode"]) is True


def fake_proc(tmp_path, *command_lines):
    proc = tmp_path / "proc"
    (proc / "self").mkdir(parents=True)
    for pid, argv in enumerate(command_lines, start=100):
        (proc / str(pid)).mkdir()
        (proc / str(pid) / "cmdline").write_bytes(b"\0".join(part.encode() for part in argv) + b"\0")
    return str(proc)


@pytest.mark.parametrize("command_lines, expected", [
    ([], "Disabled"),
    ([["/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced", "--no-persistence-mode", "--verbose"]],
     "Disabled"),
    ([["/usr/bin/nvidia-persistenced", "--user", "nvidia-persistenced", "--verbose"]], "Enabled"),
    ([["/usr/bin/nvidia-persistenced", "--user", "nvpd"]], "Enabled"),                  # NVIDIA's template
    ([["/usr/bin/python3", "/usr/bin/nvidia-persistenced", "--no-persistence-mode"]], "Disabled"),  # the stand-in
    ([["/usr/bin/python3", "/usr/bin/nvidia-persistenced", "--user", "x"]], "Enabled"),
    ([["/usr/bin/nvidia-persistenced", "--no-persistence-mode", "--persistence-mode"]], "Enabled"),  # last wins
    ([["/usr/bin/nvidia-persistenced", "--persistence-mode", "--no-persistence-mode"]], "Disabled"),
    ([["sleep", "infinity"], ["/bin/sh", "-c", "echo nvidia-persistenced"]], "Disabled"),  # not the daemon
], ids=["none", "ubuntu-unit", "drop-in", "nvidia-template", "stand-in-flag", "stand-in", "last-on", "last-off",
        "other-processes"])
def test_emulator_reports_what_the_running_daemon_does(tmp_path, monkeypatch, command_lines, expected):
    emulator = load_emulator()
    monkeypatch.setattr(emulator, "CONFIG_DIR", str(tmp_path / "config"))
    assert emulator.persistence_mode(fake_proc(tmp_path, *command_lines)) == expected


def test_the_config_still_forces_persistence_on(tmp_path, monkeypatch):
    """As `nvidia-smi -pm 1` would, without any daemon."""
    emulator = load_emulator()
    (tmp_path / "config").mkdir()
    (tmp_path / "config" / "persistence").write_text("1\n")
    monkeypatch.setattr(emulator, "CONFIG_DIR", str(tmp_path / "config"))
    assert emulator.persistence_mode(fake_proc(tmp_path)) == "Enabled"


def test_the_stand_in_daemon_keeps_its_arguments_in_its_command_line(repositories, tmp_path):
    """The stand-in is a script: run through its interpreter, the daemon's name is argv[1] and its options follow,
    which is what the emulator reads. It forks like the real daemon (Type=forking)."""
    *_rest, root, _text, _parser = unit(repositories, tmp_path, "ubuntu2204", "535")
    source = (root / "usr/bin/nvidia-persistenced").read_text()
    assert source.startswith("#!/usr/bin/python3\n")
    assert "os.fork()" in source and "/var/run/nvidia-persistenced/nvidia-persistenced.pid" in source
