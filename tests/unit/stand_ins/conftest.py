"""The stand-in mirror built once per test session (tests/mirror/build_mirror.py), and helpers to read it.

Every test in this directory checks one stand-in against the real artifact it copies and names its sources.
"""
import importlib.util
import pathlib
import shutil
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
MIRROR_SOURCES = ROOT / "tests" / "mirror"


def load_builder():
    spec = importlib.util.spec_from_file_location("build_mirror", MIRROR_SOURCES / "build_mirror.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="session")
def builder():
    return load_builder()


@pytest.fixture(scope="session")
def mirror(tmp_path_factory, builder):
    """The built mirror's directory (skipped where the host lacks the Debian tools the build needs)."""
    missing = [tool for tool in ("dpkg-deb", "apt-ftparchive", "gpg") if not shutil.which(tool)]
    if missing:
        pytest.skip("building the mirror needs %s (tools/host-deps.sh)" % ", ".join(missing))
    out = tmp_path_factory.mktemp("mirror") / "out"
    builder.main(str(out))
    return out


class Repository:
    """One distribution path of the built mirror: its packages (name -> {version: control fields})."""

    def __init__(self, path):
        self.path = path
        self.packages = {}
        for stanza in (path / "Packages").read_text().strip().split("\n\n"):
            fields = {}
            for line in stanza.splitlines():
                if line[:1] not in (" ", "\t") and ":" in line:
                    key, _sep, value = line.partition(":")
                    fields[key] = value.strip()
            self.packages.setdefault(fields["Package"], {})[fields["Version"]] = fields

    def versions(self, name):
        return sorted(self.packages.get(name, {}))

    def field(self, name, version, key):
        return self.packages[name][version].get(key, "")

    def unpack(self, name, version, into):
        """Extracts the package's files into a directory and returns it."""
        deb = self.path / self.field(name, version, "Filename").lstrip("./")
        target = into / ("%s_%s" % (name, version))
        target.mkdir(parents=True, exist_ok=True)
        subprocess.run(["dpkg-deb", "-x", str(deb), str(target)], check=True)
        return target


@pytest.fixture(scope="session")
def repositories(mirror, builder):
    return {repository["distribution"]: Repository(mirror / path)
            for path, repository in builder.load_spec()["repositories"].items()}
