"""Assembles the frozen snapshot of the real distribution packages (tools/snapshot.sh).

    assemble.py OUT WORK...
    assemble.py --write-lock LOCK WORK...    (tools/snapshot.sh --update-lock: the lock of these downloads)

Each WORK directory is what tests/snapshot/resolve.py left for one release: ``debs/`` (the real files),
``lists/`` (the index entries of those files: the lock's, or the archive's own for files resolved live),
``fallbacks.json`` and ``groups.json`` (which files each group needs, for the lock). OUT receives one repository
per distribution, laid out as its archive is:

    OUT/<distribution>/dists/<suite>/<component>/binary-<arch>/Packages(.gz)
    OUT/<distribution>/dists/<suite>/{Release,InRelease,Release.gpg}
    OUT/<distribution>/pool/...          (each file at the path of its index entry's Filename)

Every package is entered, with its index stanza copied byte for byte, in each suite and component whose index
lists that very file (same SHA256), so a version that reached -updates and -security is in both, as in the
archive. The Release files keep the archive's Origin, Label, Suite, Version and Codename (apt preferences pin
by them) and are signed with a throwaway key made for this build (``OUT/gpufleet-snapshot.pub``,
``OUT/fingerprint``): the archive's own signature cannot cover an index that holds only part of it. No
Valid-Until: the snapshot is frozen on purpose. ``OUT/manifest.tsv`` lists package, version, architecture,
suites, SHA256, and the fallbacks where the newest listed version was not served.
"""

import gzip
import hashlib
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import lock  # beside this script
import repack  # beside this script

# apt names a list after its URL: <host>_<path>_dists_<suite>_<component>_binary-<arch>_Packages
LIST_NAME = re.compile(r"_dists_(?P<suite>[^_]+)_(?P<component>[^_]+)_binary-(?P<arch>[^_]+)_Packages$")
RELEASE_NAME = re.compile(r"_dists_(?P<suite>[^_]+)_(?:In)?Release$")
# The mid-sync state a scenario plants (planted_midsync): served at OUT/midsync/<distribution>.
MIDSYNC = {"distribution": "ubuntu", "codename": "jammy", "suite": "jammy-updates", "component": "restricted",
           "source": "nvidia-graphics-drivers-580-server"}
KEPT_RELEASE_FIELDS = lock.KEPT_RELEASE_FIELDS


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def field(stanza, name):
    match = re.search(r"^%s: ?(.*)$" % re.escape(name), stanza, re.MULTILINE)
    return match.group(1).strip() if match else None


def read_stanzas(path):
    text = path.read_text(encoding="utf-8")
    return [block.strip("\n") for block in re.split(r"\n\s*\n", text) if block.strip()]


def release_fields(path):
    """The header fields of a Release or InRelease file (the signature's armour skipped)."""
    fields = {}
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        if line.startswith((" ", "-----", "Hash:")) or not line.strip():
            if fields and line.startswith("-----BEGIN PGP SIGNATURE"):
                break
            continue
        match = re.match(r"^([A-Za-z0-9-]+): ?(.*)$", line)
        if match:
            fields.setdefault(match.group(1), match.group(2))
    return fields


def distribution_of(fields):
    origin = (fields.get("Origin") or "").lower()
    if origin not in ("ubuntu", "debian"):
        raise SystemExit("an index of origin %r: the snapshot holds Debian's and Ubuntu's archives only" % origin)
    return origin


def collect(work, repos, manifest):
    """Enters the downloads of one WORK directory into repos[distribution][suite][(component, arch)]."""
    lists = work / "lists"
    by_hash, releases, lists_seen = {}, {}, []
    for path in sorted(lists.iterdir()):
        release = RELEASE_NAME.search(path.name)
        if release:
            releases[release.group("suite")] = release_fields(path)
            continue
        listing = LIST_NAME.search(path.name)
        if not listing:
            continue
        lists_seen.append((listing.group("suite"), listing.group("component"), listing.group("arch")))
        for stanza in read_stanzas(path):
            digest = field(stanza, "SHA256")
            if digest:
                by_hash.setdefault(digest, []).append((listing.group("suite"), listing.group("component"),
                                                       listing.group("arch"), stanza))
    # Every suite and component the node's sources name gets its index, empty where nothing was taken from it:
    # apt fails an update on a suite without a Release file.
    for suite, component, arch in lists_seen:
        repo = repos.setdefault(distribution_of(releases[suite]), {"suites": {}, "files": {}})
        repo["suites"].setdefault(suite, {"release": releases[suite], "indexes": {}})["indexes"].setdefault(
            (component, arch), {})
    for deb in sorted((work / "debs").glob("*.deb")):
        digest = sha256(deb)
        entries = by_hash.get(digest)
        if not entries:
            raise SystemExit("%s: no index entry has its SHA256 %s (not a file of this archive?)" % (deb, digest))
        distribution = distribution_of(releases[entries[0][0]])
        repo = repos.setdefault(distribution, {"suites": {}, "files": {}})
        for suite, component, arch, stanza in entries:
            suite_entry = repo["suites"].setdefault(suite, {"release": releases[suite], "indexes": {}})
            suite_entry["indexes"].setdefault((component, arch), {})[digest] = stanza
        stanza = entries[0][3]
        repo["files"][field(stanza, "Filename")] = deb
        manifest.append((distribution, field(stanza, "Package"), field(stanza, "Version"),
                         field(stanza, "Architecture"), " ".join(sorted({e[0] + "/" + e[1] for e in entries})), digest))


def write_release(suite_dir, release, files):
    lines = ["%s: %s" % (name, release[name]) for name in KEPT_RELEASE_FIELDS if release.get(name)]
    components = sorted({path.split("/")[0] for path in files})
    archs = sorted({path.split("/")[1][len("binary-"):] for path in files})
    lines += ["Date: %s" % time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()),
              "Architectures: %s" % " ".join(archs), "Components: %s" % " ".join(components)]
    for title, algorithm in (("MD5Sum", hashlib.md5), ("SHA256", hashlib.sha256)):
        lines.append("%s:" % title)
        for path in sorted(files):
            data = (suite_dir / path).read_bytes()
            lines.append(" %s %16d %s" % (algorithm(data).hexdigest(), len(data), path))
    (suite_dir / "Release").write_text("\n".join(lines) + "\n")


def sign(suite_dir, gpg):
    for argv in (["--clearsign", "-o", str(suite_dir / "InRelease")], ["--armor", "--detach-sign", "-o", str(suite_dir / "Release.gpg")]):
        subprocess.run(gpg + argv + [str(suite_dir / "Release")], check=True, stderr=subprocess.DEVNULL)


def planted_midsync(repos):
    """The mirror caught mid-sync, for the test that plants it: a copy of MIDSYNC's distribution whose suite
    also lists, for every binary package of the source, a newer upload (Debian revision +midsync1) that its pool
    does not have, as Ubuntu's jammy-updates listed 580.196.07 on 4 December 2026 while its pool answered 404."""
    repo = repos.get(MIDSYNC["distribution"])
    if repo is None or MIDSYNC["suite"] not in repo["suites"]:
        return None
    taken = {}
    for suite_entry in repo["suites"].values():
        if suite_entry["release"].get("Codename") != MIDSYNC["codename"]:
            continue
        for stanzas in suite_entry["indexes"].values():
            for stanza in stanzas.values():
                if (field(stanza, "Source") or "").split(" ")[0] == MIDSYNC["source"]:
                    taken[field(stanza, "Package")] = stanza
    if not taken:
        return None
    suites = {suite: {"release": entry["release"], "indexes": {key: dict(value) for key, value in entry["indexes"].items()}}
              for suite, entry in repo["suites"].items()}
    listed = suites[MIDSYNC["suite"]]["indexes"].setdefault((MIDSYNC["component"], "amd64"), {})
    for package, stanza in sorted(taken.items()):
        version = field(stanza, "Version")
        newer = version + "+midsync1"
        planted = re.sub(r"^Version: .*$", "Version: " + newer, stanza, flags=re.MULTILINE)
        planted = re.sub(r"^Filename: .*$", "Filename: " + field(stanza, "Filename").replace(
            "_%s_" % version.split(":")[-1], "_%s_" % newer.split(":")[-1]), planted, flags=re.MULTILINE)
        # Depends on sibling packages of the same upload name its version exactly: they move with it.
        planted = planted.replace("(= %s)" % version, "(= %s)" % newer)
        listed["planted:" + package] = planted
    return {"suites": suites, "files": {}}


def newest(stanzas):
    """The stanza of the highest version among these (dpkg's ordering)."""
    best = None
    for stanza in stanzas:
        if best is None or subprocess.run(["dpkg", "--compare-versions", field(stanza, "Version"), "gt",
                                           field(best, "Version")], check=False).returncode == 0:
            best = stanza
    return best


def repacked_next(repos, build):
    """The next release of repack.NEXT's sources, for the in-branch update tests: a copy of its distribution
    whose suite also lists the snapshot's release of those sources repacked at NEXT's version (repack.py). The
    repacked files are built in `build` and returned for the distribution's own pool, where its index does not
    list them; the copy reads that pool. Returns (repo, {filename: file}, manifest rows) or None."""
    spec = repack.NEXT
    repo = repos.get(spec["distribution"])
    if repo is None or spec["suite"] not in repo["suites"]:
        return None
    found = {}
    for suite_entry in repo["suites"].values():
        if suite_entry["release"].get("Codename") != spec["codename"]:
            continue
        for (component, arch), stanzas in suite_entry["indexes"].items():
            for stanza in stanzas.values():
                if (field(stanza, "Source") or field(stanza, "Package")).split(" ")[0] in spec["sources"]:
                    found.setdefault(field(stanza, "Package"), []).append((component, arch, stanza))
    if not found:
        return None
    suites = {suite: {"release": entry["release"], "indexes": {key: dict(value) for key, value in entry["indexes"].items()}}
              for suite, entry in repo["suites"].items()}
    files, rows = {}, []
    for package, entries in sorted(found.items()):
        stanza = newest(entry[2] for entry in entries)
        component, arch = next((c, a) for c, a, s in entries if s is stanza)
        deb, text = repack.repack(repo["files"][field(stanza, "Filename")], build, spec["to"])
        filename = "%s/%s" % (field(stanza, "Filename").rsplit("/", 1)[0], deb.name)
        files[filename] = deb
        listed = repack.stanza(text, filename, deb)
        suites[spec["suite"]]["indexes"].setdefault((component, arch), {})[field(listed, "SHA256")] = listed
        rows.append((spec["distribution"], field(listed, "Package"), field(listed, "Version"), field(listed, "Architecture"),
                     "next/%s/%s (repacked)" % (spec["suite"], component), field(listed, "SHA256")))
    return {"suites": suites, "files": {}, "pool_from": spec["distribution"]}, files, rows


def write_repos(out, repos, gpg):
    for distribution, repo in sorted(repos.items()):
        root = out / distribution
        if repo.get("pool_from"):
            root.mkdir(parents=True, exist_ok=True)
            (root / "pool").symlink_to(os.path.relpath(str(out / repo["pool_from"] / "pool"), str(root)))
        for filename, deb in repo["files"].items():
            target = root / filename
            target.parent.mkdir(parents=True, exist_ok=True)
            try:
                os.link(deb, target)   # the downloads stay in the cache; a link costs no space
            except OSError:
                shutil.copyfile(deb, target)
        for suite, suite_entry in sorted(repo["suites"].items()):
            suite_dir = root / "dists" / suite
            files = []
            for (component, arch), stanzas in sorted(suite_entry["indexes"].items()):
                rel = "%s/binary-%s/Packages" % (component, arch)
                (suite_dir / rel).parent.mkdir(parents=True, exist_ok=True)
                text = "".join(stanzas[digest] + "\n\n" for digest in sorted(stanzas, key=lambda d: stanzas[d]))
                (suite_dir / rel).write_text(text, encoding="utf-8")
                with gzip.GzipFile(str(suite_dir / (rel + ".gz")), "wb", mtime=0) as handle:
                    handle.write(text.encode("utf-8"))
                files += [rel, rel + ".gz"]
            write_release(suite_dir, suite_entry["release"], files)
            sign(suite_dir, gpg)


def lock_entry(work):
    """The lock of one WORK directory's downloads (lock.py): each file with the indexes that list it, and each
    group with the files it needs (resolve.py's groups.json)."""
    repos = {}
    collect(work, repos, [])
    suites, indexes, files = {}, [], []
    for repo in repos.values():
        for suite, suite_entry in repo["suites"].items():
            suites[suite] = {name: suite_entry["release"][name] for name in KEPT_RELEASE_FIELDS
                             if suite_entry["release"].get(name)}
            indexes += ["%s/%s/%s" % (suite, component, arch) for component, arch in suite_entry["indexes"]]
        for filename, deb in repo["files"].items():
            digest = sha256(deb)
            files.append({"filename": filename, "size": deb.stat().st_size, "sha256": digest, "indexes": sorted(
                "%s/%s/%s" % (suite, component, arch) for suite, suite_entry in repo["suites"].items()
                for (component, arch), stanzas in suite_entry["indexes"].items() if digest in stanzas)})
    release = json.loads((work / "release.json").read_text())
    return lock.entry(release, suites, indexes, files, json.loads((work / "groups.json").read_text()))


def write_lock(path, works):
    path = pathlib.Path(path)
    document = json.loads(path.read_text()) if path.exists() else {}
    document["format"] = lock.FORMAT
    document.setdefault("comment", ["Written by tools/snapshot.sh --update-lock; read by tests/snapshot/lock.py."])
    releases = document.setdefault("releases", {})
    for work in map(pathlib.Path, works):
        entry = releases[work.name] = lock_entry(work)
        print("lock of %s: %d files, %.1f MB; groups %s" % (
            work.name, len(entry["files"]), sum(item["size"] for item in entry["files"]) / 1e6,
            ", ".join("%s (%s, %d files)" % (name, group["taken"], len(group["files"]))
                      for name, group in sorted(entry["groups"].items()))))
    path.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")


def main(out, works):
    out = pathlib.Path(out)
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    repos, manifest, fallbacks = {}, [], []
    for work in map(pathlib.Path, works):
        collect(work, repos, manifest)
        taken = (work / "taken").read_text().strip()
        # Each fallback with the date its group was resolved (groups.json; a group locked earlier keeps its date).
        groups = json.loads((work / "groups.json").read_text()) if (work / "groups.json").exists() else {}
        fallbacks += [dict(entry, release="%s (%s)" % (work.name, groups.get(entry.get("group"), {}).get("taken", taken)))
                      for entry in json.loads((work / "fallbacks.json").read_text())]
    home = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-snapshot-gpg-"))
    try:
        subprocess.run(["gpg", "--homedir", str(home), "--batch", "--passphrase", "", "--quick-gen-key",
                        "gpufleet.node snapshot of the distribution archives (tests only)", "ed25519", "sign", "never"],
                       check=True, stderr=subprocess.DEVNULL)
        listing = subprocess.run(["gpg", "--homedir", str(home), "--with-colons", "--list-keys"], check=True,
                                 stdout=subprocess.PIPE, universal_newlines=True).stdout
        fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
        armored = subprocess.run(["gpg", "--homedir", str(home), "--armor", "--export", fingerprint], check=True,
                                 stdout=subprocess.PIPE).stdout
        midsync = planted_midsync(repos)
        if midsync:
            midsync["pool_from"] = MIDSYNC["distribution"]
            repos["midsync/" + MIDSYNC["distribution"]] = midsync
        following = repacked_next(repos, out / ".repacked")
        if following:
            next_repo, next_files, next_rows = following
            repos[repack.NEXT["distribution"]]["files"].update(next_files)
            repos["next/" + repack.NEXT["distribution"]] = next_repo
            manifest += next_rows
        write_repos(out, repos, ["gpg", "--homedir", str(home), "--batch", "--yes", "--local-user", fingerprint])
    finally:
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(out / ".repacked", ignore_errors=True)   # linked into the pool by now
    (out / "gpufleet-snapshot.pub").write_bytes(armored)
    (out / "fingerprint").write_text(fingerprint + "\n")
    rows = ["distribution\tpackage\tversion\tarch\tsuites\tsha256"]
    rows += ["\t".join(row) for row in sorted(set(manifest))]
    (out / "manifest.tsv").write_text("\n".join(rows) + "\n")
    notes = ["%s: %s %s is listed but %s; the snapshot has the newest version that was served instead"
             % (entry["release"], entry["package"], entry["version"], entry["reason"]) for entry in fallbacks]
    (out / "fallbacks.txt").write_text("".join(note + "\n" for note in notes))
    print("snapshot in %s (key %s): %s; %d files" % (
        out, fingerprint, ", ".join("%s/ (%s)" % (d, " ".join(sorted(r["suites"]))) for d, r in sorted(repos.items())),
        sum(len(r["files"]) for r in repos.values())))
    for note in notes:
        print("fallback: " + note)


if __name__ == "__main__":
    if sys.argv[1] == "--write-lock":
        write_lock(sys.argv[2], sys.argv[3:])
    else:
        main(sys.argv[1], sys.argv[2:])
