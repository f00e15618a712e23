"""Molecule typed by hand gets what tools/run.sh gets: extensions/molecule/config.yml names the bench's paths as
tools/lib.sh does, and every variable the scenarios read from the environment is set there or has a default."""
import os
import pathlib
import re
import subprocess

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
CONFIG = ROOT / "extensions" / "molecule" / "config.yml"
# Variables the scenarios read but do not need: set by the caller to change a default, or by a test for itself.
OPTIONAL = {"GPUFLEET_NODE_IMAGE", "GPUFLEET_CACHE", "GPUFLEET_ARTIFACTS", "GPUFLEET_EMULATOR_CONFIG",
            "GPUFLEET_EMULATOR_PROFILE", "GPUFLEET_EMULATOR_DELAY_MS", "GPUFLEET_NVML_CONF", "GPUFLEET_NVML_PROC"}


def molecule_env():
    """config.yml's ansible.env as Molecule interpolates it, run from ROOT with no GPUFLEET_* variables set."""
    env = yaml.safe_load(CONFIG.read_text())["ansible"]["env"]
    out = {}
    for key, value in env.items():
        value = value.replace("${MOLECULE_PROJECT_DIRECTORY}", str(ROOT))
        value = re.sub(r"\$\{[A-Z_]+:-([^}]*)\}", r"\1", value)
        assert "$" not in value, (key, value)
        out[key] = value
    return out


def lib_sh(*names):
    script = "source tools/lib.sh; " + "; ".join('echo "${%s-}"' % name for name in names)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GPUFLEET_", "ANSIBLE_"))}
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, env=env, check=True, capture_output=True, text=True)
    return out.stdout.splitlines()


def test_paths_and_ports_are_those_of_lib_sh():
    env = molecule_env()
    del env["GPUFLEET_MIRROR_PORT"]   # a lane's (tools/run.sh), below
    names = sorted(env)
    assert dict(zip(names, lib_sh(*names))) == env


def test_the_mirror_port_default_is_that_of_the_first_lane():
    run_sh = (ROOT / "tools" / "run.sh").read_text()
    assert "MIRROR_PORT_BASE=%s " % molecule_env()["GPUFLEET_MIRROR_PORT"] in run_sh


def test_every_variable_the_scenarios_read_is_set():
    read = set()
    for path in list((ROOT / "extensions" / "molecule").rglob("*")) + list((ROOT / "tests" / "mirror").rglob("*.yml")) \
            + list((ROOT / "tests" / "emulator").glob("*.yml")):
        if path.suffix in (".yml", ".py") and path.is_file():
            read |= set(re.findall(r"\b(GPUFLEET_[A-Z_]+)\b", path.read_text()))
    missing = read - set(molecule_env()) - OPTIONAL
    assert not missing, "read by the scenarios but not set in config.yml's ansible.env: %s" % sorted(missing)


def test_every_scenario_file_survives_molecule_s_interpolation():
    """Molecule substitutes ${...} in config.yml and each molecule.yml before it reads the YAML; a bare $ before
    anything but a name or a brace (a shell's "$(...)" in a command) stops it: $$ is its escape."""
    from molecule import interpolation  # pylint: disable=import-outside-toplevel
    interpolator = interpolation.Interpolator(interpolation.TemplateWithDefaults, dict(os.environ))
    paths = [CONFIG] + sorted((ROOT / "extensions" / "molecule").glob("*/molecule.yml"))
    for path in paths:
        try:
            yaml.safe_load(interpolator.interpolate(path.read_text()))
        except interpolation.InvalidInterpolation as exc:
            raise AssertionError("%s: %s at %s" % (path.relative_to(ROOT), exc.string, exc.place)) from exc
    assert len(paths) > 10
