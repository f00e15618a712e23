"""Per-group locking of the snapshot (tests/snapshot/lock.py, resolve.py): a group whose packages changed is
resolved from the live index alone, the locked groups' files are taken by path and stay as locked, a group
packages.json no longer names drops its own files, and the migrated lock takes exactly the files of the format 1
lock it came from (lock-format1.json, tests/snapshot/lock.json as committed before per-group locking).

apt and the archive are stand-ins here: the archive's pool is a dict of real .deb files (dpkg-deb --build, which
lock.fetch reads the control data of), apt's resolution of a group a dict of the files it takes. The lines of
``apt-get --print-uris`` are apt 2.4's, as printed in a jammy node (the host replaced).
"""
import hashlib
import json
import pathlib
import shutil
import subprocess
import sys
import time

import pytest

from . import test_snapshot

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "snapshot"))
resolve, assemble, lock = test_snapshot.resolve, test_snapshot.assemble, test_snapshot.lock

SITE = "http://mirror.example/ubuntu"
SUITES = {suite: {"Origin": "Ubuntu", "Label": "Ubuntu", "Suite": suite, "Version": "22.04", "Codename": "jammy"}
          for suite in ("jammy", "jammy-security", "jammy-updates")}
INDEXES = ["jammy-security/main/amd64", "jammy-updates/main/amd64", "jammy-updates/multiverse/amd64",
           "jammy/main/amd64"]
OLD = {"components": [], "groups": {"a": ["pkg-a"], "b": ["pkg-b"], "c": ["pkg-c"]}}
needs_tools = pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="lock.fetch reads files with dpkg-deb")


def path(package, version, component="main"):
    return "pool/%s/p/%s/%s_%s_amd64.deb" % (component, package, package, version)


A, S, B, C1 = path("pkg-a", "1.0"), path("pkg-shared", "1.0"), path("pkg-b", "1.0"), path("pkg-c", "1.0")
C2, E, D = path("pkg-c", "2.0", "multiverse"), path("pkg-c-extra", "2.0", "multiverse"), path("pkg-d", "1.0", "multiverse")


def build(tmp_path, filename):
    package, version = pathlib.PurePosixPath(filename).name[:-len("_amd64.deb")].split("_")
    root = tmp_path / "build" / package / version
    (root / "DEBIAN").mkdir(parents=True)
    (root / "DEBIAN" / "control").write_text(
        "Package: %s\nVersion: %s\nArchitecture: amd64\nMaintainer: Nobody <nobody@example.org>\n"
        "Description: %s made here\n" % (package, version, package))
    deb = tmp_path / "build" / ("%s_%s.deb" % (package, version))
    subprocess.run(["dpkg-deb", "--build", "--root-owner-group", str(root), str(deb)], check=True,
                   stdout=subprocess.DEVNULL)
    return deb.read_bytes()


class Archive:
    """The archive as the resolver meets it: its pool by path (lock.download), and apt (resolve's calls of it)."""

    def __init__(self, tmp_path, monkeypatch, live):
        self.pool = {name: build(tmp_path, name) for name in (A, S, B, C1, C2, E, D)}
        self.live, self.asked, self.resolved, self.listed, self.repository = live, [], [], [], []
        self.missing = set()
        lists = tmp_path / "apt-lists"
        lists.mkdir()
        # The live index lists the files resolved live (only those stanzas are kept) and one it does not serve.
        stanzas = [self.stanza(name) for name in (C2, E, D)] + [
            "Package: pkg-z\nVersion: 9\nFilename: pool/main/p/pkg-z/pkg-z_9_amd64.deb\nSHA256: %s" % ("0" * 64)]
        (lists / "mirror.example_ubuntu_dists_jammy-updates_multiverse_binary-amd64_Packages").write_text(
            "\n\n".join(stanzas) + "\n")
        (lists / "mirror.example_ubuntu_dists_jammy-updates_InRelease").write_text(
            "Origin: Ubuntu\nLabel: Ubuntu\nSuite: jammy-updates\nVersion: 22.04\nCodename: jammy\n")
        (lists / "mirror.example_ubuntu_dists_jammy-proposed_InRelease").write_text(
            "Origin: Ubuntu\nLabel: Ubuntu\nSuite: jammy-proposed\nVersion: 22.04\nCodename: jammy\n")
        monkeypatch.setattr(resolve, "LISTS", str(lists))
        monkeypatch.setattr(resolve, "PINS", str(tmp_path / "pins"))
        monkeypatch.setattr(resolve, "sites", lambda: {suite: SITE for suite in SUITES})
        monkeypatch.setattr(resolve, "uploads_index", lambda: ({}, {}))
        monkeypatch.setattr(resolve, "apt_update", lambda: None)
        monkeypatch.setattr(resolve, "local_repository", self.local_repository)
        monkeypatch.setattr(resolve, "download", self.download)
        monkeypatch.setattr(resolve, "group_files", self.group_files)
        monkeypatch.setattr(resolve.lock, "download", self.fetch)   # the lock.py resolve.py imported
        self.tmp_path = tmp_path

    def stanza(self, name):
        data = self.pool[name]
        package = pathlib.PurePosixPath(name).name.split("_")[0]
        return "Package: %s\nArchitecture: amd64\nVersion: %s\nFilename: %s\nSize: %d\nSHA256: %s" % (
            package, name.split("_")[1], name, len(data), hashlib.sha256(data).hexdigest())

    def fetch(self, url, opener=None, **_options):
        self.asked.append(url)
        name = url[len(SITE) + 1:]
        if name in self.missing:
            return None, "HTTP 404"
        return self.pool[name], None

    def local_repository(self, out, alone):
        self.repository.append(alone)
        (pathlib.Path(out) / "lockrepo").mkdir()
        return str(pathlib.Path(out) / "lockrepo")

    def download(self, group, packages, out, index, fallbacks):
        self.resolved.append(group)
        for name in self.live[group]:
            target = pathlib.Path(out) / "debs" / pathlib.PurePosixPath(name).name
            if not target.exists():
                target.write_bytes(self.pool[name])

    def group_files(self, group, packages):
        self.listed.append(group)
        return sorted(self.live[group])


def lock_of(archive, release, groups, taken="2026-12-05"):
    """A format 2 lock entry: groups name -> files (each listed in jammy-security/main)."""
    files = sorted({name for names in groups.values() for name in names})
    return lock.entry(release, SUITES, INDEXES, [
        {"filename": name, "size": len(archive.pool[name]), "sha256": hashlib.sha256(archive.pool[name]).hexdigest(),
         "indexes": ["jammy-security/main/amd64"]} for name in files],
        {group: {"taken": taken, "files": names, "fallbacks": []} for group, names in groups.items()})


def run(tmp_path, release, locked):
    work = tmp_path / "ubuntu2204"
    work.mkdir()
    (work / "release.json").write_text(json.dumps(release))
    (work / "lock.json").write_text(json.dumps(locked))
    resolve.main(str(work / "release.json"), str(work), str(work / "lock.json"))
    return work, json.loads((work / "groups.json").read_text())


def test_group_digest_is_its_packages_and_the_components():
    assert lock.group_digest(["b", "a"], []) == lock.group_digest(["a", "b"], [])
    assert lock.group_digest(["a"], []) != lock.group_digest(["a", "b"], [])
    assert lock.group_digest(["a"], []) != lock.group_digest(["a"], ["contrib"])


@needs_tools
def test_plan_says_which_groups_are_resolved_live(tmp_path, monkeypatch):
    archive = Archive(tmp_path, monkeypatch, {})
    locked = lock_of(archive, OLD, {"a": [A, S], "b": [B, S], "c": [C1]})
    new = {"components": [], "groups": {"a": ["pkg-a"], "b": ["pkg-b"], "c": ["pkg-c", "pkg-c-extra"], "d": ["pkg-d"]}}
    states = lock.plan(locked, new)
    assert {group: how for group, (how, _why) in states.items()} == {"a": "locked", "b": "locked", "c": "live", "d": "live"}
    assert "changed" in states["c"][1] and "does not have" in states["d"][1]
    # Another component changes which index apt reads: every group is resolved again.
    assert {how for how, _why in lock.plan(locked, dict(OLD, components=["multiverse"])).values()} == {"live"}
    assert lock.dropped(locked, {"components": [], "groups": {"a": ["pkg-a"]}}) == ["b", "c"]
    # A format 1 lock: its files are attributed where it was taken for this package list, else all is live.
    format1 = {"spec": lock.spec_digest(OLD), "files": locked["files"]}
    assert {how for how, _why in lock.plan(format1, OLD).values()} == {"attribute"}
    assert {how for how, _why in lock.plan(format1, new).values()} == {"live"}
    assert {how for how, _why in lock.plan(None, OLD).values()} == {"live"}


@needs_tools
def test_a_changed_group_is_resolved_alone_and_the_locked_ones_are_taken_by_path(tmp_path, monkeypatch, capsys):
    archive = Archive(tmp_path, monkeypatch, {"c": [C2, E, S], "d": [D]})
    locked = lock_of(archive, OLD, {"a": [A, S], "b": [B, S], "c": [C1]})
    new = {"components": [], "groups": {"a": ["pkg-a"], "b": ["pkg-b"], "c": ["pkg-c", "pkg-c-extra"], "d": ["pkg-d"]}}
    work, groups = run(tmp_path, new, locked)
    # Only the changed and the new group went to apt; the locked groups' files were asked for by path, once each.
    assert set(archive.resolved) == {"c", "d"} and set(archive.listed) == {"c", "d"}
    assert sorted(archive.asked) == sorted("%s/%s" % (SITE, name) for name in (A, S, B))
    assert archive.repository == [False]   # apt saw the locked files beside the archive
    assert "group c: resolved from the live index: its packages" in capsys.readouterr().out
    for group in ("a", "b"):
        assert groups[group] == {key: locked["groups"][group][key] for key in ("taken", "files", "fallbacks")}
    assert groups["c"]["files"] == sorted([C2, E, S]) and groups["c"]["taken"] == time.strftime("%Y-%m-%d", time.gmtime())
    assert sorted(p.name for p in (work / "debs").glob("*.deb")) == sorted(
        pathlib.PurePosixPath(name).name for name in (A, S, B, C2, E, D))
    # The lock written from this: the old groups and their files exactly as locked, C1 gone, the new files with the
    # indexes the live index lists them in.
    entry = assemble.lock_entry(work)
    for group in ("a", "b"):
        assert entry["groups"][group] == locked["groups"][group]
    old_files = {item["filename"]: item for item in locked["files"]}
    new_files = {item["filename"]: item for item in entry["files"]}
    assert sorted(new_files) == sorted([A, S, B, C2, E, D])
    for name in (A, S, B):
        assert new_files[name] == old_files[name]
    assert new_files[C2]["indexes"] == ["jammy-updates/multiverse/amd64"]
    assert entry["groups"]["c"]["spec"] == lock.group_digest(["pkg-c", "pkg-c-extra"], [])
    # The lock's own Release fields stay; a suite the live index has but nothing was taken from adds nothing.
    assert entry["suites"] == SUITES


@needs_tools
def test_a_removed_group_drops_only_its_own_files(tmp_path, monkeypatch):
    archive = Archive(tmp_path, monkeypatch, {})
    monkeypatch.setattr(resolve, "apt_update", lambda: pytest.fail("nothing is resolved live"))
    locked = lock_of(archive, OLD, {"a": [A, S], "b": [B, S], "c": [C1]})
    work, groups = run(tmp_path, {"components": [], "groups": {"a": ["pkg-a"], "c": ["pkg-c"]}}, locked)
    assert sorted(archive.asked) == sorted("%s/%s" % (SITE, name) for name in (A, S, C1))
    assert sorted(groups) == ["a", "c"] and not archive.resolved
    entry = assemble.lock_entry(work)
    # S stays: group a needs it too. B was b's alone.
    assert [item["filename"] for item in entry["files"]] == sorted([A, S, C1])
    assert entry["files"] == [item for item in locked["files"] if item["filename"] != B]
    assert entry["groups"] == {group: locked["groups"][group] for group in ("a", "c")}


@needs_tools
def test_a_group_whose_locked_file_is_gone_is_resolved_live_and_said(tmp_path, monkeypatch, capsys):
    archive = Archive(tmp_path, monkeypatch, {"b": [D, S]})
    archive.missing = {B}
    locked = lock_of(archive, OLD, {"a": [A, S], "b": [B, E], "c": [C1]})
    work, groups = run(tmp_path, OLD, locked)
    output = capsys.readouterr().out
    assert "%s: HTTP 404" % B in output and "group b: resolved from the live index: its locked files are not served" in output
    assert archive.resolved == ["b", "b"] and groups["a"]["files"] == [A, S] and groups["b"]["files"] == sorted([D, S])
    # E was b's locked file, fetched before B failed: b resolved anew does not take it, so it goes.
    assert sorted(p.name for p in (work / "debs").glob("*.deb")) == sorted(
        pathlib.PurePosixPath(name).name for name in (A, S, C1, D))


@needs_tools
def test_a_format_1_lock_is_migrated_by_what_apt_takes_from_the_locked_files(tmp_path, monkeypatch):
    archive = Archive(tmp_path, monkeypatch, {"a": [A, S], "b": [B, S], "c": [C1]})
    v2 = lock_of(archive, OLD, {"a": [A, S], "b": [B, S], "c": [C1]})
    format1 = {"spec": lock.spec_digest(OLD), "taken": "2026-12-05", "suites": v2["suites"], "indexes": v2["indexes"],
               "files": v2["files"], "fallbacks": []}
    work, groups = run(tmp_path, OLD, format1)
    assert archive.repository == [True]   # the archive's sources set aside: the locked files alone
    assert not archive.resolved
    assert assemble.lock_entry(work) == v2
    # A locked file no group takes is refused, not dropped in silence.
    archive.live["c"] = []
    shutil.rmtree(work)
    with pytest.raises(SystemExit, match="no group takes: %s" % C1):
        run(tmp_path, OLD, format1)


def test_print_uris_lines_give_pool_paths():
    text = (
        "'http://mirror.example/ubuntu/pool/main/g/gcc-12/libstdc%2b%2b6_12.3.0-1ubuntu1%7e22.04.3_amd64.deb' "
        "libstdc++6_12.3.0-1ubuntu1~22.04.3_amd64.deb 698608 MD5Sum:42dfead39d2326dd54bf447c5d676e76\n"
        "'http://mirror.example/ubuntu/pool/main/b/bind9/bind9-libs_9.18.39-0ubuntu0.22.04.8_amd64.deb' "
        "bind9-libs_1%3a9.18.39-0ubuntu0.22.04.8_amd64.deb 1266010 MD5Sum:4c6ec51d947845c53cd87f91449bdb18\n"
        "'file:/work/lockrepo/pool/main/p/perl/perl-base_5.34.0-3ubuntu1.10_amd64.deb' "
        "perl-base_5.34.0-3ubuntu1.10_amd64.deb 1762892 \n")
    assert resolve.uri_files(text) == [
        "pool/main/b/bind9/bind9-libs_9.18.39-0ubuntu0.22.04.8_amd64.deb",
        "pool/main/g/gcc-12/libstdc++6_12.3.0-1ubuntu1~22.04.3_amd64.deb",
        "pool/main/p/perl/perl-base_5.34.0-3ubuntu1.10_amd64.deb"]


def test_the_migrated_lock_takes_exactly_the_format_1_files_for_the_groups_it_was_taken_for():
    format1 = json.loads((pathlib.Path(__file__).parent / "lock-format1.json").read_text())["releases"]
    current = json.loads((ROOT / "tests" / "snapshot" / "lock.json").read_text())
    spec = json.loads((ROOT / "tests" / "snapshot" / "packages.json").read_text())["releases"]
    assert current["format"] == lock.FORMAT == 2
    for release, old in format1.items():
        entry = current["releases"][release]
        # The migrated groups keep the format 1 lock's date; they are exactly the package list it was taken for.
        migrated = sorted(name for name, group in entry["groups"].items() if group["taken"] == old["taken"])
        taken_for = dict(spec[release], groups={name: spec[release]["groups"][name] for name in migrated})
        assert lock.spec_digest(taken_for) == old["spec"], release
        for name, group in entry["groups"].items():
            assert group["spec"] == lock.group_digest(spec[release]["groups"][name], spec[release]["components"])
        files = {item["filename"]: item for item in entry["files"]}
        assert sorted(lock.needed(entry, migrated)) == sorted(item["filename"] for item in old["files"]), release
        assert [files[item["filename"]] for item in old["files"]] == old["files"], release
        assert {key: value for key, value in entry["suites"].items() if key in old["suites"]} == old["suites"]
        assert set(old["indexes"]) <= set(entry["indexes"])
        assert sorted(lock.fallbacks(entry, migrated), key=json.dumps) == sorted(
            [dict(item) for item in old["fallbacks"]], key=json.dumps)
