"""The snapshot of the real distribution packages (tests/snapshot): the resolver's reading of apt's output and
the assembler's layout, over a release made up here from real index stanzas' shapes.

The real artifact is the archive itself (Ubuntu's jammy-updates and jammy-security, Debian's bookworm and
bookworm-security), which tools/snapshot.sh reads: these tests check what the snapshot does with it. apt's
messages are apt 2.x's: "E: Failed to fetch URL  404  Not Found [IP: ...]" (apt-pkg/acquire-item.cc) and the
unmet-dependencies report " NAME : Depends: ..." (apt-pkg/algorithms.cc, as apt-get prints it).
"""
import gzip
import hashlib
import importlib.util
import json
import pathlib
import shutil
import subprocess
import sys
import urllib.error

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
# resolve.py and assemble.py import lock.py from beside them, as they do when run.
sys.path.insert(0, str(ROOT / "tests" / "snapshot"))


def load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "tests" / "snapshot" / (name + ".py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


resolve = load("resolve")
assemble = load("assemble")
lock = load("lock")

APT_OUTPUT = """Reading package lists...
Err:1 http://mirror.example/ubuntu jammy-updates/restricted amd64 nvidia-utils-580-server amd64 580.196.07-0ubuntu0.22.04.1
  404  Not Found [IP: 192.0.2.1 80]
E: Failed to fetch http://mirror.example/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-server/\
nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb  404  Not Found [IP: 192.0.2.1 80]
E: Failed to fetch http://mirror.example/ubuntu/pool/main/p/pciutils/pciutils_1%3a3.7.0-6_amd64.deb  Hash Sum mismatch
E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?
"""

UNMET = """The following packages have unmet dependencies:
 libnvidia-nscq-580 : Depends: nvidia-kernel-common-580-server-580.196.07
 nvidia-fabricmanager-580 : Depends: nvidia-kernel-common-580-server-580.196.07
                            Depends: libc6 (>= 2.34)
E: Unable to correct problems, you have held broken packages.
"""


def test_failed_fetches_name_the_file_and_the_reason():
    failures = resolve.FAILED_FETCH.findall(APT_OUTPUT)
    assert [(name, reason.split()[0]) for _url, name, reason in failures] == [
        ("nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb", "404"),
        ("pciutils_1%3a3.7.0-6_amd64.deb", "Hash")]
    assert resolve.deb_identity(failures[0][1]) == ("nvidia-utils-580-server", "580.196.07-0ubuntu0.22.04.1")
    assert resolve.deb_identity(failures[1][1]) == ("pciutils", "1:3.7.0-6")
    assert resolve.deb_identity("not-a-pool-file.deb") is None


def test_unmet_dependencies_name_each_package_once_per_line():
    assert resolve.UNMET.findall(UNMET) == ["libnvidia-nscq-580", "nvidia-fabricmanager-580"]


def stanza(package, version, source, digest, filename, depends=""):
    lines = ["Package: %s" % package, "Architecture: amd64", "Version: %s" % version,
             "Priority: optional", "Section: restricted/libs", "Source: %s" % source]
    if depends:
        lines.append("Depends: %s" % depends)
    lines += ["Filename: %s" % filename, "Size: 4", "SHA256: %s" % digest,
              "Description: %s of the made-up release" % package, " A continuation line kept as it is."]
    return "\n".join(lines)


@pytest.fixture
def work(tmp_path):
    """A release as resolve.py leaves it: two downloaded files (real .deb files, which repack.py opens), the lists
    of two pockets, one fallback."""
    work = tmp_path / "ubuntu2204"
    (work / "debs").mkdir(parents=True)
    (work / "lists").mkdir()
    files = {package: build_deb(tmp_path, package, "580.178.04-0ubuntu0.22.04.1")
             for package in ("nvidia-utils-580-server", "libnvidia-compute-580-server")}
    stanzas = []
    for package, data in files.items():
        (work / "debs" / ("%s_580.178.04-0ubuntu0.22.04.1_amd64.deb" % package)).write_bytes(data)
        stanzas.append(stanza(package, "580.178.04-0ubuntu0.22.04.1", "nvidia-graphics-drivers-580-server",
                              hashlib.sha256(data).hexdigest(),
                              "pool/restricted/n/nvidia-graphics-drivers-580-server/%s_580.178.04-0ubuntu0.22.04.1_amd64.deb"
                              % package, depends="libnvidia-compute-580-server (= 580.178.04-0ubuntu0.22.04.1)"
                              if package.startswith("nvidia-utils") else ""))
    prefix = "mirror.example_ubuntu_dists_"
    listed_not_served = stanza("nvidia-utils-580-server", "580.196.07-0ubuntu0.22.04.1", "nvidia-graphics-drivers-580-server",
                               "0" * 64, "pool/restricted/n/x/nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb")
    (work / "lists" / (prefix + "jammy-security_restricted_binary-amd64_Packages")).write_text("\n\n".join(stanzas) + "\n")
    (work / "lists" / (prefix + "jammy-updates_restricted_binary-amd64_Packages")).write_text(listed_not_served + "\n")
    (work / "lists" / (prefix + "jammy-updates_main_binary-amd64_Packages")).write_text("")
    for suite in ("jammy-security", "jammy-updates"):
        (work / "lists" / (prefix + suite + "_InRelease")).write_text(
            "-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n\nOrigin: Ubuntu\nLabel: Ubuntu\nSuite: %s\n"
            "Version: 22.04\nCodename: jammy\nDate: Thu, 03 Dec 2026 10:00:00 UTC\nValid-Until: never\n"
            "SHA256:\n 0 0 main/binary-amd64/Packages\n-----BEGIN PGP SIGNATURE-----\nx\n-----END PGP SIGNATURE-----\n" % suite)
    (work / "fallbacks.json").write_text(json.dumps([{"group": "driver", "package": "nvidia-utils-580-server",
                                                      "version": "580.196.07-0ubuntu0.22.04.1", "url": "http://x",
                                                      "reason": "not served (404)", "pinned_away": []}]))
    (work / "taken").write_text("2026-12-05\n")
    (work / "release.json").write_text(json.dumps(RELEASE))
    (work / "groups.json").write_text(json.dumps({"driver": {
        "taken": "2026-12-05", "fallbacks": [],
        "files": ["pool/restricted/n/nvidia-graphics-drivers-580-server/%s_580.178.04-0ubuntu0.22.04.1_amd64.deb" % package
                  for package in files]}}))
    return work


RELEASE = {"components": [], "groups": {"driver": ["nvidia-utils-580-server"]}}


@pytest.mark.skipif(shutil.which("gpg") is None, reason="the assembler signs with gpg")
def test_assembled_snapshot_is_the_archive_layout_with_its_own_entries(tmp_path, work):
    out = tmp_path / "snapshot"
    assemble.main(str(out), [str(work)])
    root = out / "ubuntu"
    security = (root / "dists/jammy-security/restricted/binary-amd64/Packages").read_text()
    # The index entries are the archive's, byte for byte, continuation lines included; only files taken are listed.
    assert security.count("Package: ") == 2 and " A continuation line kept as it is." in security
    assert "580.196.07" not in security
    assert gzip.decompress((root / "dists/jammy-security/restricted/binary-amd64/Packages.gz").read_bytes()).decode() == security
    # A pocket that lists nothing taken still has its (empty) index and a Release: apt fails on a missing suite.
    assert (root / "dists/jammy-updates/main/binary-amd64/Packages").read_text() == ""
    release = (root / "dists/jammy-security/Release").read_text()
    assert "Origin: Ubuntu\nLabel: Ubuntu\nSuite: jammy-security\nVersion: 22.04\nCodename: jammy\n" in release
    assert "Valid-Until" not in release
    digest = hashlib.sha256((root / "dists/jammy-security/restricted/binary-amd64/Packages").read_bytes()).hexdigest()
    assert " %s " % digest in release
    # Each file at the path of its Filename; the manifest says package, version, pocket and SHA256.
    utils = root / "pool/restricted/n/nvidia-graphics-drivers-580-server/nvidia-utils-580-server_580.178.04-0ubuntu0.22.04.1_amd64.deb"
    assert utils.read_bytes() == (work / "debs" / utils.name).read_bytes()
    manifest = (out / "manifest.tsv").read_text().splitlines()
    assert manifest[0].split("\t") == ["distribution", "package", "version", "arch", "suites", "sha256"]
    assert "ubuntu\tnvidia-utils-580-server\t580.178.04-0ubuntu0.22.04.1\tamd64\tjammy-security/restricted\t%s" % (
        hashlib.sha256(utils.read_bytes()).hexdigest()) in manifest
    assert "nvidia-utils-580-server 580.196.07-0ubuntu0.22.04.1 is listed but not served (404)" in (out / "fallbacks.txt").read_text()
    # The signature verifies with the exported key.
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(out / "gpufleet-snapshot.pub")], check=True)
    subprocess.run(["gpgv", "--keyring", str(keyring), str(root / "dists/jammy-security/InRelease")], check=True,
                   stderr=subprocess.DEVNULL)


@pytest.mark.skipif(shutil.which("gpg") is None, reason="the assembler signs with gpg")
def test_midsync_copy_lists_a_newer_upload_whose_files_are_missing(tmp_path, work):
    out = tmp_path / "snapshot"
    assemble.main(str(out), [str(work)])
    midsync = out / "midsync" / "ubuntu"
    planted = (midsync / "dists/jammy-updates/restricted/binary-amd64/Packages").read_text()
    assert "Version: 580.178.04-0ubuntu0.22.04.1+midsync1" in planted
    # Siblings of the upload move with it, as the real Depends (= version) do.
    assert "libnvidia-compute-580-server (= 580.178.04-0ubuntu0.22.04.1+midsync1)" in planted
    filenames = [line.split(": ", 1)[1] for line in planted.splitlines() if line.startswith("Filename: ")]
    assert filenames and all("+midsync1" in name for name in filenames)
    assert not any((midsync / name).exists() for name in filenames)
    # Everything else is served: the pool is the snapshot's own.
    assert (midsync / "pool").resolve() == (out / "ubuntu" / "pool").resolve()


@pytest.mark.skipif(shutil.which("gpg") is None or shutil.which("dpkg-deb") is None, reason="needs gpg and dpkg-deb")
def test_next_copy_lists_the_release_repacked_at_the_next_version(tmp_path, work):
    out = tmp_path / "snapshot"
    assemble.main(str(out), [str(work)])
    following = out / "next" / "ubuntu"
    listed = (following / "dists/jammy-updates/restricted/binary-amd64/Packages").read_text()
    new = "580.196.07-0ubuntu0.22.04.1+repack1"
    assert listed.count("Version: %s\n" % new) == 2
    # The real release stays where it was, in its own pocket and in the distribution's own index.
    assert (following / "dists/jammy-security/restricted/binary-amd64/Packages").read_text().count("Package: ") == 2
    assert new not in (out / "ubuntu/dists/jammy-updates/restricted/binary-amd64/Packages").read_text()
    # Each repacked file is served where its entry says, with the size and hash the entry gives.
    for block in listed.strip().split("\n\n"):
        if new not in block:
            continue
        entry = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(" "))
        data = (following / entry["Filename"]).read_bytes()
        assert int(entry["Size"]) == len(data) and entry["SHA256"] == hashlib.sha256(data).hexdigest()
        fields = subprocess.run(["dpkg-deb", "-f", str(following / entry["Filename"]), "Package", "Version"], check=True,
                                stdout=subprocess.PIPE, universal_newlines=True).stdout
        assert fields == "Package: %s\nVersion: %s\n" % (entry["Package"], new)
    assert "next/jammy-updates/restricted (repacked)" in (out / "manifest.tsv").read_text()
    assert not (out / ".repacked").exists()


def test_lock_of_a_resolution_names_each_file_its_indexes_and_no_host(work):
    entry = assemble.lock_entry(work)
    assert entry["spec"] == lock.spec_digest(RELEASE) and entry["taken"] == "2026-12-05"
    assert entry["groups"]["driver"]["spec"] == lock.group_digest(["nvidia-utils-580-server"], [])
    assert entry["groups"]["driver"]["files"] == [item["filename"] for item in entry["files"]]
    assert entry["indexes"] == ["jammy-security/restricted/amd64", "jammy-updates/main/amd64",
                                "jammy-updates/restricted/amd64"]
    assert [(item["filename"].rsplit("/", 1)[1], item["size"], item["indexes"]) for item in entry["files"]] == [
        (name, (work / "debs" / name).stat().st_size, ["jammy-security/restricted/amd64"]) for name in (
            "libnvidia-compute-580-server_580.178.04-0ubuntu0.22.04.1_amd64.deb",
            "nvidia-utils-580-server_580.178.04-0ubuntu0.22.04.1_amd64.deb")]
    assert entry["suites"]["jammy-updates"] == {"Origin": "Ubuntu", "Label": "Ubuntu", "Suite": "jammy-updates",
                                                "Version": "22.04", "Codename": "jammy"}
    assert lock.pool_path("http://mirror.example/ubuntu/pool/r/x/a_1_amd64.deb") == "pool/r/x/a_1_amd64.deb"


class Pool:
    """The archive's pool as urlopen sees it: path -> bytes, or an HTTP status, or a connection error."""

    def __init__(self, files):
        self.files, self.asked = files, []

    def __call__(self, url, timeout):
        self.asked.append(url)
        answer = self.files.get(url)
        if isinstance(answer, bytes):
            return _Answer(answer)
        if isinstance(answer, int):
            raise urllib.error.HTTPError(url, answer, "status", {}, None)
        raise OSError("Connection refused")


class _Answer:
    def __init__(self, data):
        self.data = data

    def read(self):
        return self.data


def build_deb(tmp_path, package, version):
    """A real .deb (dpkg-deb --build) of one control file: what lock.fetch reads the control data of."""
    root = tmp_path / ("build-" + package)
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: Nobody <nobody@example.org>\n"
        "Source: nvidia-graphics-drivers-580-server\nDescription: %s made here\n long text, kept\n" % (package, version, package))
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(tmp_path / (package + ".deb"))],
                   check=True, stdout=subprocess.DEVNULL)
    return (tmp_path / (package + ".deb")).read_bytes()


@pytest.mark.skipif(shutil.which("dpkg-deb") is None or shutil.which("gpg") is None, reason="needs dpkg-deb and gpg")
def test_locked_files_are_taken_by_path_and_assemble_as_the_archive(tmp_path, monkeypatch):
    monkeypatch.setattr(lock.time, "sleep", lambda seconds: None)
    data = build_deb(tmp_path, "nvidia-utils-580-server", "580.178.04-0ubuntu0.22.04.1")
    filename = "pool/restricted/n/nvidia-graphics-drivers-580-server/nvidia-utils-580-server_580.178.04-0ubuntu0.22.04.1_amd64.deb"
    groups = {"driver": {"taken": "2026-12-05", "files": [filename], "fallbacks": []}}
    locked = lock.entry(RELEASE, {"jammy-security": {"Origin": "Ubuntu", "Suite": "jammy-security", "Codename": "jammy"}},
                        ["jammy-security/restricted/amd64", "jammy-security/main/amd64"],
                        [{"filename": filename, "size": len(data), "sha256": hashlib.sha256(data).hexdigest(),
                          "indexes": ["jammy-security/restricted/amd64"]}], groups)
    sites = {"jammy-security": "http://mirror.example/ubuntu/"}
    # The first answer is a refused connection: retried. The index is never asked for.
    pool = Pool({})
    work = tmp_path / "ubuntu2204"
    assert lock.fetch(locked, sites, str(work), opener=pool) == [
        filename + ": Connection refused"]
    assert len(pool.asked) == 3
    pool = Pool({"http://mirror.example/ubuntu/" + filename: data})
    assert lock.fetch(locked, sites, str(work), opener=pool) == []
    assert pool.asked == ["http://mirror.example/ubuntu/" + filename]
    (work / "fallbacks.json").write_text("[]")
    (work / "taken").write_text("2026-12-05\n")
    (work / "release.json").write_text(json.dumps(RELEASE))
    (work / "groups.json").write_text(json.dumps(groups))
    out = tmp_path / "snapshot"
    assemble.main(str(out), [str(work)])
    index = (out / "ubuntu/dists/jammy-security/restricted/binary-amd64/Packages").read_text()
    assert "Package: nvidia-utils-580-server\n" in index and " long text, kept\n" in index
    assert "Filename: %s\nSize: %d\n" % (filename, len(data)) in index
    assert "SHA256: %s\n" % hashlib.sha256(data).hexdigest() in index
    assert (out / "ubuntu/dists/jammy-security/main/binary-amd64/Packages").read_text() == ""
    assert (out / "ubuntu" / filename).read_bytes() == data
    # The lock written back from this download is the lock it came from.
    assert assemble.lock_entry(work) == locked


def test_a_locked_file_that_is_gone_or_changed_makes_the_lock_stale(tmp_path):
    locked = {"indexes": ["noble/main/amd64"], "suites": {}, "files": [
        {"filename": "pool/main/a/a_1_amd64.deb", "size": 3, "sha256": hashlib.sha256(b"abc").hexdigest(),
         "indexes": ["noble/main/amd64"]},
        {"filename": "pool/main/b/b_1_amd64.deb", "size": 3, "sha256": hashlib.sha256(b"abc").hexdigest(),
         "indexes": ["noble/main/amd64"]},
        {"filename": "pool/main/c/c_1_amd64.deb", "size": 3, "sha256": "0" * 64, "indexes": ["noble-proposed/main/amd64"]}]}
    pool = Pool({"http://m/pool/main/a/a_1_amd64.deb": 404, "http://m/pool/main/b/b_1_amd64.deb": b"abd"})
    problems = lock.fetch(locked, {"noble": "http://m"}, str(tmp_path), opener=pool)
    assert problems == ["pool/main/a/a_1_amd64.deb: HTTP 404",
                        "pool/main/b/b_1_amd64.deb: SHA256 %s, the lock says %s" % (
                            hashlib.sha256(b"abd").hexdigest(), hashlib.sha256(b"abc").hexdigest()),
                        "pool/main/c/c_1_amd64.deb: the node's sources name no suite noble-proposed"]
    # A 404 is a fact about the pool: asked once, not retried.
    assert pool.asked.count("http://m/pool/main/a/a_1_amd64.deb") == 1
    assert not (tmp_path / "lists").exists() or not list((tmp_path / "lists").iterdir())
