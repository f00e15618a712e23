"""execution-environment.yml and tools/ee-check.py: the definition agrees with the checkout's pins and galaxy.yml, and
the build context `ansible-builder create` makes of it installs the built collection and the pinned ansible-core.
Each check is also shown to fail on the fault it is there for."""
import importlib.util
import pathlib
import shutil
import subprocess

import pytest
import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
_SPEC = importlib.util.spec_from_file_location("ee_check", ROOT / "tools" / "ee-check.py")
ee_check = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(ee_check)

GALAXY = yaml.safe_load((ROOT / "galaxy.yml").read_text())
DEFINITION = yaml.safe_load((ROOT / "execution-environment.yml").read_text())
CORE = DEFINITION["dependencies"]["ansible_core"]["package_pip"]
PYTHON_PINS = ee_check.pins(ROOT / DEFINITION["dependencies"]["python"])


def test_definition_agrees_with_the_checkout():
    assert ee_check.check_definition(ROOT) == []
    assert CORE == "ansible-core==" + ee_check.pins(ROOT / "requirements" / "dev.txt")["ansible-core"]
    assert PYTHON_PINS == {"jmespath": ee_check.pins(ROOT / "requirements" / "constraints.txt")["jmespath"]}
    # The builder that `make test` runs is pinned where the virtualenv's tools are.
    assert "ansible-builder" in ee_check.pins(ROOT / "requirements" / "dev.txt")


@pytest.fixture(name="checkout")
def fixture_checkout(tmp_path):
    """The files check_definition reads, copied, so that a test can break one."""
    for relative in ["execution-environment.yml", "galaxy.yml", "requirements/dev.txt", "requirements/constraints.txt"] \
            + ee_check.definition_files(DEFINITION):
        (tmp_path / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / relative, tmp_path / relative)
    return tmp_path


def edit(path, old, new):
    text = path.read_text()
    assert old in text, (path, old)
    path.write_text(text.replace(old, new))


@pytest.mark.parametrize("relative, old, new, expected", [
    ("requirements/dev.txt", "ansible-core==2.", "ansible-core==9.", "requirements/dev.txt pins ansible-core==9."),
    ("galaxy.yml", "version: %s" % GALAXY["version"], "version: 9.9.9", "gpufleet-node-9.9.9.tar.gz"),
    ("requirements/constraints.txt", "jmespath==", "jmespath==0.0.", "requirements/constraints.txt has 0.0."),
    ("execution-environment.yml", "version: 3", "version: 1", "version must be 3"),
    ("execution-environment.yml", "ansible-runner==", "ansible-runner>=", "must pin ansible-runner"),
])
def test_definition_check_finds_drift(checkout, relative, old, new, expected):
    edit(checkout / relative, old, new)
    problems = ee_check.check_definition(checkout)
    assert any(expected in problem for problem in problems), problems


def test_galaxy_requirements_must_be_the_tarball_alone(checkout):
    path = checkout / DEFINITION["dependencies"]["galaxy"]
    data = yaml.safe_load(path.read_text())
    data["collections"].append({"name": "community.general"})
    path.write_text(yaml.safe_dump(data))
    assert any("collections must be exactly" in problem for problem in ee_check.check_definition(checkout))


@pytest.fixture(name="tarball", scope="module")
def fixture_tarball(tmp_path_factory):
    """A small collection named and versioned as galaxy.yml says, built by ansible-galaxy (the real one's build is
    build-check's job): what the context must carry and install."""
    source = tmp_path_factory.mktemp("collection")
    (source / "galaxy.yml").write_text(yaml.safe_dump({
        "namespace": GALAXY["namespace"], "name": GALAXY["name"], "version": GALAXY["version"], "readme": "README.md",
        "authors": ["tests"]}))
    (source / "README.md").write_text("test\n")
    (source / "meta").mkdir()
    (source / "meta" / "runtime.yml").write_text("requires_ansible: '>=2.19.0'\n")
    out = tmp_path_factory.mktemp("built")
    subprocess.run(["ansible-galaxy", "collection", "build", "--output-path", str(out), str(source)], check=True,
                   capture_output=True)
    built = out / ee_check.collection_tarball_name(GALAXY)
    assert built.is_file()
    return built


@pytest.fixture(name="context")
def fixture_context(tmp_path, tarball):
    return ee_check.create_context(ROOT, tarball, tmp_path / "ee")


def test_context_installs_the_tarball_and_the_pinned_core(context, tarball):
    assert (context / "Containerfile").is_file()
    assert (context / "_build" / "collections" / tarball.name).read_bytes() == tarball.read_bytes()
    assert ee_check.check_context(context, tarball, CORE, PYTHON_PINS, GALAXY["version"]) == []
    installed = context.parent / "galaxy-stage" / "collections" / "ansible_collections" / "gpufleet" / "node"
    assert (installed / "MANIFEST.json").is_file()


def test_context_without_the_tarball_fails(context, tarball):
    (context / "_build" / "collections" / tarball.name).unlink()
    problems = ee_check.check_context(context, tarball, CORE, PYTHON_PINS, GALAXY["version"])
    assert any("is missing" in problem for problem in problems), problems


def test_context_with_another_tarball_fails(context, tarball):
    (context / "_build" / "collections" / tarball.name).write_bytes(b"not the build")
    problems = ee_check.check_context(context, tarball, CORE, PYTHON_PINS, GALAXY["version"])
    assert problems == ["context: _build/collections/%s is not the tarball just built" % tarball.name]


def test_context_with_another_core_fails(context, tarball):
    edit(context / "Containerfile", CORE, "ansible-core==2.18.0")
    problems = ee_check.check_context(context, tarball, CORE, PYTHON_PINS, GALAXY["version"])
    assert any("ANSIBLE_INSTALL_REFS does not name " + CORE in problem for problem in problems), problems


def test_context_without_the_galaxy_install_fails(context, tarball):
    edit(context / "Containerfile", "ansible-galaxy collection install", "true")
    problems = ee_check.check_context(context, tarball, CORE, PYTHON_PINS, GALAXY["version"], installer=False)
    assert problems == ["Containerfile: no ansible-galaxy collection install of requirements.yml"]


def test_galaxy_stage_fails_on_a_broken_tarball(context, tarball):
    (context / "_build" / "collections" / tarball.name).write_bytes(b"not a tarball")
    problems = ee_check.install_from_context(context, GALAXY["version"])
    # ansible-galaxy reads the collection entries in its role install already, and refuses the file there.
    assert len(problems) == 1 and problems[0].startswith("galaxy stage: ansible-galaxy ") \
        and "is not a valid tar file" in problems[0], problems
