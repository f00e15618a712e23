"""The execution environment's definition (execution-environment.yml) and the build context ansible-builder makes of it.

    python tools/ee-check.py --tarball DIR/gpufleet-node-X.Y.Z.tar.gz --work DIR

No container image can be pulled where `make test` runs, so the image itself is not built; what can be checked
without one is checked (tools/run.sh build-check runs this after building the collection tarball):

- the definition: schema version 3, a base image named, ansible-core pinned at requirements/dev.txt's version,
  ansible-runner pinned, the Python requirements at requirements/constraints.txt's versions, and this collection
  taken from the file `ansible-galaxy collection build` writes, at galaxy.yml's version;
- `ansible-builder create` on a copy of the definition laid out as in a checkout after that build (the tarball next
  to the definition), into DIR/context;
- the context: Containerfile exists, installs that ansible-core, copies the build files into /build and installs
  the galaxy requirements there; the tarball in the context is the built one (same SHA-256); the context's
  requirements name it as a file and hold the Python pins;
- the galaxy stage's two commands, run here from the context's files offline: the collection installs from the
  context alone, at galaxy.yml's version.

Exits 1 with one line per problem.
"""
import argparse
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[1]
DEFINITION = "execution-environment.yml"


def tool(name):
    """A command of this Python's environment (the virtualenv's ansible-builder), else the one on PATH, as an
    absolute path: the commands run in other directories."""
    beside = os.path.join(os.path.dirname(sys.executable), name)
    return beside if os.access(beside, os.X_OK) else (shutil.which(name) or name)


def pins(path):
    """``{name: version}`` of the ``name==version`` lines of a requirements file (comments and extras dropped)."""
    found = {}
    for line in pathlib.Path(path).read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        match = re.match(r"^([A-Za-z0-9_.-]+)(?:\[[^\]]*\])?==(\S+)$", line)
        if match:
            found[match.group(1).lower().replace("_", "-")] = match.group(2)
    return found


def collection_tarball_name(galaxy):
    return "%s-%s-%s.tar.gz" % (galaxy["namespace"], galaxy["name"], galaxy["version"])


def definition_files(definition):
    """The files of the checkout the definition names (relative to it): its dependency files."""
    dependencies = definition.get("dependencies") or {}
    return [dependencies[key] for key in ("galaxy", "python", "system") if isinstance(dependencies.get(key), str)]


def check_definition(root):
    """Problems of execution-environment.yml against the checkout's pins and galaxy.yml."""
    root = pathlib.Path(root)
    problems = []
    definition = yaml.safe_load((root / DEFINITION).read_text())
    galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
    if definition.get("version") != 3:
        problems.append("%s: version must be 3 (ansible-builder 3's schema), not %r" % (DEFINITION, definition.get("version")))
    if not ((definition.get("images") or {}).get("base_image") or {}).get("name"):
        problems.append("%s: images.base_image.name names no base image" % DEFINITION)
    dependencies = definition.get("dependencies") or {}
    core = "ansible-core==%s" % pins(root / "requirements" / "dev.txt").get("ansible-core")
    if (dependencies.get("ansible_core") or {}).get("package_pip") != core:
        problems.append("%s: dependencies.ansible_core.package_pip is %r; requirements/dev.txt pins %s"
                        % (DEFINITION, (dependencies.get("ansible_core") or {}).get("package_pip"), core))
    if not re.match(r"^ansible-runner==\S+$", str((dependencies.get("ansible_runner") or {}).get("package_pip"))):
        problems.append("%s: dependencies.ansible_runner.package_pip must pin ansible-runner (name==version)" % DEFINITION)
    constraints = pins(root / "requirements" / "constraints.txt")
    python = dependencies.get("python")
    if not isinstance(python, str):
        problems.append("%s: dependencies.python must name a requirements file" % DEFINITION)
    else:
        for name, version in sorted(pins(root / python).items()):
            if constraints.get(name) != version:
                problems.append("%s: %s==%s, but requirements/constraints.txt has %s"
                                % (python, name, version, constraints.get(name, "no pin")))
        if "jmespath" not in pins(root / python):
            problems.append("%s: jmespath is not pinned" % python)
    tarball = collection_tarball_name(galaxy)
    sources = [entry.get("src") for entry in definition.get("additional_build_files") or []
               if entry.get("dest") == "collections"]
    if sources != [tarball]:
        problems.append("%s: additional_build_files must copy %s (galaxy.yml's version) to collections; it copies %s"
                        % (DEFINITION, tarball, sources or "nothing"))
    galaxy_requirements = dependencies.get("galaxy")
    wanted = [{"name": "collections/" + tarball, "type": "file"}]
    if not isinstance(galaxy_requirements, str):
        problems.append("%s: dependencies.galaxy must name a requirements file" % DEFINITION)
    else:
        listed = (yaml.safe_load((root / galaxy_requirements).read_text()) or {}).get("collections")
        if listed != wanted:
            problems.append("%s: collections must be exactly %s; found %s" % (galaxy_requirements, wanted, listed))
    return problems


def sha256(path):
    with open(path, "rb") as stream:
        return hashlib.sha256(stream.read()).hexdigest()


def check_context(context, tarball, core_pin, python_pins, version, installer=True):
    """Problems of a build context made by `ansible-builder create` from the definition."""
    context = pathlib.Path(context)
    problems = []
    containerfile = context / "Containerfile"
    if not containerfile.is_file():
        return ["%s: no Containerfile (ansible-builder create --output-filename Containerfile)" % context]
    text = containerfile.read_text()
    refs = re.search(r'^ARG ANSIBLE_INSTALL_REFS="([^"]*)"$', text, re.M)
    if not refs or core_pin not in refs.group(1).split():
        problems.append("Containerfile: ANSIBLE_INSTALL_REFS does not name %s (%s)"
                        % (core_pin, refs.group(1) if refs else "no such ARG"))
    if not re.search(r"^RUN \$PYCMD -m pip install --no-cache-dir \$ANSIBLE_INSTALL_REFS$", text, re.M):
        problems.append("Containerfile: no pip install of $ANSIBLE_INSTALL_REFS (ansible-core, ansible-runner)")
    if not re.search(r"^COPY _build /build$", text, re.M):
        problems.append("Containerfile: the build files (_build, with the tarball) are not copied to /build")
    if not re.search(r"^RUN .*ansible-galaxy collection install .*-r requirements\.yml", text, re.M):
        problems.append("Containerfile: no ansible-galaxy collection install of requirements.yml")
    name = os.path.basename(str(tarball))
    copied = context / "_build" / "collections" / name
    if not copied.is_file():
        problems.append("context: %s is missing (additional_build_files found no %s next to the definition)"
                        % (copied.relative_to(context), name))
    elif sha256(copied) != sha256(tarball):
        problems.append("context: %s is not the tarball just built" % copied.relative_to(context))
    requirements = context / "_build" / "requirements.yml"
    listed = (yaml.safe_load(requirements.read_text()) or {}).get("collections") if requirements.is_file() else None
    if listed != [{"name": "collections/" + name, "type": "file"}]:
        problems.append("context: _build/requirements.yml does not name collections/%s as a file: %s" % (name, listed))
    python_file = context / "_build" / "requirements.txt"
    got = pins(python_file) if python_file.is_file() else {}
    for package, pinned in sorted(python_pins.items()):
        if got.get(package) != pinned:
            problems.append("context: _build/requirements.txt lacks %s==%s" % (package, pinned))
    if installer and not problems:
        problems.extend(install_from_context(context, version))
    return problems


def install_from_context(context, version):
    """The galaxy stage's commands, offline, from the context's /build files: the collection must install."""
    build = pathlib.Path(context) / "_build"
    target = pathlib.Path(context).parent / "galaxy-stage"
    shutil.rmtree(target, ignore_errors=True)
    # The image's galaxy stage sees no other collections; here, a gpufleet.node the caller can already see (the
    # checkout itself under `make`: on ANSIBLE_COLLECTIONS_PATH, and on PYTHONPATH, which Ansible scans too) would make
    # the install a no-op.
    env = dict(os.environ, ANSIBLE_GALAXY_DISABLE_GPG_VERIFY="1", ANSIBLE_COLLECTIONS_PATH=str(target / "collections"),
               ANSIBLE_COLLECTIONS_SCAN_SYS_PATH="false")
    for argv in ([tool("ansible-galaxy"), "role", "install", "-r", "requirements.yml", "--roles-path", str(target / "roles")],
                 [tool("ansible-galaxy"), "collection", "install", "--offline", "-r", "requirements.yml",
                  "--collections-path", str(target / "collections")]):
        result = subprocess.run(argv, cwd=build, env=env, capture_output=True, text=True, check=False)
        if result.returncode != 0:
            return ["galaxy stage: %s failed: %s" % (" ".join(["ansible-galaxy"] + argv[1:3]), (result.stdout + result.stderr).strip()[-600:])]
    manifest = target / "collections" / "ansible_collections" / "gpufleet" / "node" / "MANIFEST.json"
    if not manifest.is_file():
        return ["galaxy stage: gpufleet.node was not installed from the context"]
    installed = json.loads(manifest.read_text())["collection_info"]["version"]
    if installed != version:
        return ["galaxy stage: gpufleet.node %s installed, galaxy.yml says %s" % (installed, version)]
    return []


def create_context(root, tarball, work):
    """The definition and its files copied to WORK with the tarball beside them, as a checkout has them after
    `ansible-galaxy collection build`, and `ansible-builder create` run there. Returns the context directory."""
    root, work = pathlib.Path(root), pathlib.Path(work)
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    definition = yaml.safe_load((root / DEFINITION).read_text())
    shutil.copy2(root / DEFINITION, work / DEFINITION)
    for relative in definition_files(definition):
        (work / relative).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(root / relative, work / relative)
    shutil.copy2(tarball, work / os.path.basename(str(tarball)))
    context = work / "context"
    result = subprocess.run([tool("ansible-builder"), "create", "--file", DEFINITION, "--context", str(context),
                             "--output-filename", "Containerfile"], cwd=work, capture_output=True, text=True,
                            check=False)
    if result.returncode != 0:
        raise SystemExit("ansible-builder create failed:\n" + result.stdout + result.stderr)
    return context


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tarball", required=True, help="the collection tarball ansible-galaxy collection build wrote")
    parser.add_argument("--work", required=True, help="an empty directory for the copy and the context")
    parser.add_argument("--root", default=str(ROOT), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    root = pathlib.Path(args.root)
    problems = check_definition(root)
    if not problems:
        definition = yaml.safe_load((root / DEFINITION).read_text())
        galaxy = yaml.safe_load((root / "galaxy.yml").read_text())
        if os.path.basename(args.tarball) != collection_tarball_name(galaxy):
            problems.append("the tarball %s is not galaxy.yml's %s" % (args.tarball, collection_tarball_name(galaxy)))
        else:
            context = create_context(root, args.tarball, args.work)
            problems = check_context(context, args.tarball, definition["dependencies"]["ansible_core"]["package_pip"],
                                     pins(root / definition["dependencies"]["python"]), galaxy["version"])
            if not problems:
                print("execution environment: %s builds on %s with %s and %s; context %s" % (
                    DEFINITION, definition["images"]["base_image"]["name"],
                    definition["dependencies"]["ansible_core"]["package_pip"], collection_tarball_name(galaxy), context))
    for problem in problems:
        print(problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
