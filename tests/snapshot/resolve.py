"""Downloads the real packages of one distribution release for the snapshot (tools/snapshot.sh).

Runs inside a node container of that release (gpufleet-node:<os>), whose apt sources are the live archive as an
installed server has them, with the Python 3 of the release (3.8 on Ubuntu 20.04: no newer syntax here).

    resolve.py RELEASE_JSON OUT [LOCK_JSON]

RELEASE_JSON is one release's entry of tests/snapshot/packages.json: ``components``, the archive components to
enable besides the image's own, and ``groups``, each the packages one apt call installs (what one role or prepare
step asks for). Each group is resolved on its own against the node's installed packages, so that an alternative dependency is
chosen as it is on a test node, and downloaded with ``apt-get install --download-only`` into ``OUT/debs``.

"Listed" and "served" are two facts: where the archive's index lists a version whose file the pool does not
serve (HTTP 404, a mirror caught mid-sync) or serves with another hash, that upload (every binary package of the
same source at that version) is pinned away and the group resolved again, so apt takes the newest version that
can be fetched, from whichever pocket lists it. ``OUT/fallbacks.json`` records each such case; ``OUT/lists``
receives apt's lists (the index the downloads were resolved against) for tools/snapshot.sh to assemble the
repository from.

With LOCK_JSON (this release's entry of tests/snapshot/lock.json, see lock.py), the groups the lock holds as they
are in RELEASE_JSON are taken by path (their files only, each checked against the lock; PREVIOUS, an earlier OUT,
is looked in first) and the live index is not read for them. Only a group that is new, changed, or whose locked
files the pool no longer serves is resolved from the live index, and that is said; apt then also sees the kept
groups' files, as a local repository pinned above the archive (LOCAL_PIN), so the new group takes the versions the
lock already has. ``OUT/groups.json`` says which files each group needs: the pool paths of
``apt-get install --print-uris`` for the group, against the same sources. A format 1 lock (no groups) taken for
this package list is migrated so: each group's files are found against the locked files alone.

    resolve.py RELEASE_JSON OUT [LOCK_JSON [PREVIOUS]]
"""

from __future__ import print_function

import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time

try:
    from urllib.parse import unquote
except ImportError:  # pragma: no cover (Python 2 is not a node's Python)
    from urllib import unquote

import lock  # beside this script

LISTS = "/var/lib/apt/lists"
PINS = "/etc/apt/preferences.d/gpufleet-snapshot-unserved"
# apt 2.x: "E: Failed to fetch http://host/ubuntu/pool/.../name_version_arch.deb  404  Not Found [IP: ...]"
# and "E: Failed to fetch http://host/.../name_version_arch.deb  Hash Sum mismatch" (apt-pkg/acquire-item.cc).
FAILED_FETCH = re.compile(r"^E: Failed to fetch (\S+/([^/\s]+\.deb))\s+(.*)$", re.MULTILINE)
# " libnvidia-nscq-580 : Depends: nvidia-kernel-common-580-server-580.196.07" (apt's unmet dependencies report)
UNMET = re.compile(r"^ (\S+) : (?:Pre-)?Depends:", re.MULTILINE)
MAX_ROUNDS = 20
# The kept groups' files, served to apt as a flat repository of OUT (its Release says Origin: gpufleet-lock) and
# preferred over the archive's versions (990: above the archive's 500, below a downgrade's 1000).
LOCAL_ORIGIN = "gpufleet-lock"
LOCAL_PIN = "/etc/apt/preferences.d/gpufleet-snapshot-locked"
LOCAL_SOURCE = "/etc/apt/sources.list.d/gpufleet-snapshot-locked.list"
ARCHIVE_SOURCES = ("/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources",
                   "/etc/apt/sources.list.d/ubuntu.sources")
# apt-get --print-uris, one line per file apt would fetch (apt-private/private-install.cc):
# 'http://host/ubuntu/pool/main/a/avahi/avahi-daemon_0.8-5ubuntu5.5_amd64.deb' avahi-daemon_0.8-5ubuntu5.5_amd64.deb 69714 MD5Sum:cbb9...
# (a file: source's line ends after the size).
PRINT_URI = re.compile(r"^'([^']+\.deb)' (\S+) (\d+)", re.MULTILINE)


def run(argv, check=True):
    env = dict(os.environ, DEBIAN_FRONTEND="noninteractive", LC_ALL="C")
    result = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True, env=env,
                            check=False)
    if check and result.returncode != 0:
        sys.exit("%s failed (%d):\n%s" % (" ".join(argv), result.returncode, result.stdout))
    return result


def stanzas(path):
    """The stanzas of an apt Packages list as dicts (the first line of each field; enough for names)."""
    with open(path, encoding="utf-8", errors="replace") as handle:
        for block in handle.read().split("\n\n"):
            fields = {}
            for line in block.split("\n"):
                match = re.match(r"^([A-Za-z0-9-]+): ?(.*)$", line)
                if match:
                    fields[match.group(1)] = match.group(2)
            if "Package" in fields:
                yield fields


def uploads_index():
    """(package, version) -> source name, and (source, version) -> binary package names, over every list."""
    source_of, binaries = {}, {}
    for name in os.listdir(LISTS):
        if not name.endswith("_Packages"):
            continue
        for fields in stanzas(os.path.join(LISTS, name)):
            source = fields.get("Source", fields["Package"]).split(" ")[0]
            source_of[(fields["Package"], fields["Version"])] = source
            binaries.setdefault((source, fields["Version"]), set()).add(fields["Package"])
    return source_of, binaries


def deb_identity(filename):
    """(package, version) of a pool file name ``name_version_arch.deb`` (apt writes the epoch colon as %3a)."""
    parts = filename[:-len(".deb")].split("_")
    if len(parts) != 3:
        return None
    return parts[0], parts[1].replace("%3a", ":")


def pin_away(package, version, index):
    """Pins every binary package of the upload that holds package=version to -1; returns the names pinned."""
    source_of, binaries = index
    source = source_of.get((package, version), package)
    names = sorted(binaries.get((source, version), {package}))
    with open(PINS, "a") as handle:
        for name in names:
            handle.write("Package: %s\nPin: version %s\nPin-Priority: -1\n\n" % (name, version))
    return names


def enable_components(components):
    """Adds components to every archive entry of the node's sources (one-line and deb822), as the roles do."""
    for path in ("/etc/apt/sources.list", "/etc/apt/sources.list.d/debian.sources",
                 "/etc/apt/sources.list.d/ubuntu.sources"):
        if not components or not os.path.exists(path):
            continue
        with open(path) as handle:
            lines = handle.read().split("\n")
        for number, line in enumerate(lines):
            if re.match(r"^(deb\s|Components:)", line):
                present = line.split()
                lines[number] = " ".join(present + [c for c in components if c not in present])
        with open(path, "w") as handle:
            handle.write("\n".join(lines))


def candidate(package):
    """The version apt would install of a package now (after the pins so far), or None."""
    match = re.search(r"^\s*Candidate: (\S+)$", run(["apt-cache", "policy", package]).stdout, re.MULTILINE)
    return match.group(1) if match and match.group(1) != "(none)" else None


def download(group, packages, out, index, fallbacks):
    for _round in range(MAX_ROUNDS):
        result = run(["apt-get", "install", "--download-only", "-y", "--no-install-recommends", "-o", "Acquire::Retries=3",
                      "-o", "Dir::Cache::archives=%s" % os.path.join(out, "debs")] + packages, check=False)
        if result.returncode == 0:
            return
        failures = FAILED_FETCH.findall(result.stdout)
        unmet = [(name, candidate(name)) for name in UNMET.findall(result.stdout)] if fallbacks else []
        if not failures and unmet and all(version for _name, version in unmet):
            # A package whose candidate needs an upload pinned away above (fabric manager 580.196.07 needs
            # nvidia-kernel-common-580-server-580.196.07) cannot be installed either: take its newest version
            # that can be, in the next round.
            for name, version in unmet:
                pinned = pin_away(name, version, index)
                fallbacks.append({"group": group, "package": name, "version": version, "url": None,
                                  "reason": "needs an upload that is not served", "pinned_away": pinned})
                print("    %s %s needs an upload that is not served: taking its newest version that can be installed"
                      % (name, version), flush=True)
            continue
        if not failures:
            sys.exit("group %s: apt-get could not download %s:\n%s" % (group, " ".join(packages), result.stdout))
        for url, filename, reason in failures:
            identity = deb_identity(filename)
            if identity is None:
                sys.exit("group %s: cannot tell the package of %s" % (group, url))
            kind = "not served (404)" if re.search(r"\b404\b", reason) else (
                "hash mismatch" if "Hash Sum mismatch" in reason else reason.strip())
            if not re.search(r"\b404\b|Hash Sum mismatch", reason):
                # Anything else (a timeout, a refused connection) is not a fact about the archive: try once more.
                time.sleep(10)
                continue
            pinned = pin_away(identity[0], identity[1], index)
            fallbacks.append({"group": group, "package": identity[0], "version": identity[1], "url": url,
                              "reason": kind, "pinned_away": pinned})
            print("    %s %s is listed but %s: taking the newest version that can be fetched"
                  % (identity[0], identity[1], kind), flush=True)
    sys.exit("group %s: still failing after %d rounds" % (group, MAX_ROUNDS))


def drop_pinned_away(debs, fallbacks, locked_files=()):
    """Removes the files of uploads pinned away that an earlier round downloaded: the snapshot holds what resolved
    (never a locked file: the kept groups' files stay as locked)."""
    away = {(name, entry["version"]) for entry in fallbacks for name in entry["pinned_away"]}
    keep = {os.path.basename(name) for name in locked_files}
    for name in os.listdir(debs):
        if name.endswith(".deb") and name not in keep and deb_identity(name) in away:
            os.remove(os.path.join(debs, name))


def sites():
    """suite -> the archive URL the node's sources name for it (one-line and deb822 alike)."""
    listing = run(["apt-get", "indextargets", "--no-release-info", "--format", "$(IDENTIFIER) $(RELEASE) $(SITE)"]).stdout
    return {fields[1]: fields[2] for fields in (line.split() for line in listing.splitlines())
            if len(fields) == 3 and fields[0] == "Packages"}


def uri_files(text):
    """The pool paths of the files in apt-get --print-uris output (URIs are quoted: %2b for +, %7e for ~)."""
    return sorted({unquote(lock.pool_path(uri)) for uri, _name, _size in PRINT_URI.findall(text)})


def group_files(group, packages):
    """The pool paths of every file apt takes for one group's apt call now (pins and sources as they are)."""
    empty = "/tmp/gpufleet-print-uris"
    shutil.rmtree(empty, ignore_errors=True)
    os.makedirs(os.path.join(empty, "partial"))
    result = run(["apt-get", "install", "--print-uris", "-qq", "-y", "--no-install-recommends",
                  "-o", "Dir::Cache::archives=%s" % empty] + packages, check=False)
    if result.returncode != 0:
        sys.exit("group %s: apt-get --print-uris %s failed:\n%s" % (group, " ".join(packages), result.stdout))
    return uri_files(result.stdout)


def local_repository(out, alone):
    """Serves the files lock.fetch took (OUT/debs, their stanzas in OUT/lists) to apt as a flat repository,
    preferred over the archive; alone: the archive's sources are set aside (the migration of a format 1 lock)."""
    root = os.path.abspath(os.path.join(out, "lockrepo"))
    shutil.rmtree(root, ignore_errors=True)
    os.makedirs(root)
    seen = {}
    lists = os.path.join(out, "lists")
    for name in sorted(os.listdir(lists)):
        if name.endswith("_Packages"):
            for block in open(os.path.join(lists, name), encoding="utf-8").read().split("\n\n"):
                digest = re.search(r"^SHA256: (\S+)$", block, re.MULTILINE)
                if digest:
                    seen.setdefault(digest.group(1), block.strip("\n"))
    for block in seen.values():
        filename = re.search(r"^Filename: (\S+)$", block, re.MULTILINE).group(1)
        target = os.path.join(root, filename)
        if not os.path.isdir(os.path.dirname(target)):
            os.makedirs(os.path.dirname(target))
        os.link(os.path.join(out, "debs", os.path.basename(filename)), target)
    text = "".join(block + "\n\n" for _digest, block in sorted(seen.items()))
    with open(os.path.join(root, "Packages"), "w", encoding="utf-8") as handle:
        handle.write(text)
    data = text.encode("utf-8")
    with open(os.path.join(root, "Release"), "w") as handle:
        handle.write("Origin: %s\nLabel: %s\nSuite: %s\nCodename: %s\nDate: %s\nSHA256:\n %s %d Packages\n" % (
            LOCAL_ORIGIN, LOCAL_ORIGIN, LOCAL_ORIGIN, LOCAL_ORIGIN,
            time.strftime("%a, %d %b %Y %H:%M:%S UTC", time.gmtime()), hashlib.sha256(data).hexdigest(), len(data)))
    with open(LOCAL_SOURCE, "w") as handle:
        handle.write("deb [trusted=yes] file:%s ./\n" % root)
    with open(LOCAL_PIN, "w") as handle:
        handle.write("Package: *\nPin: release o=%s\nPin-Priority: 990\n" % LOCAL_ORIGIN)
    if alone:
        for path in ARCHIVE_SOURCES:
            if os.path.exists(path):
                os.rename(path, path + ".gpufleet-set-aside")
    return root


def apt_update():
    for _attempt in range(3):
        result = run(["apt-get", "update", "-o", "Acquire::Retries=3"], check=False)
        if result.returncode == 0 and not re.search(r"^(W|E): Failed to fetch", result.stdout, re.MULTILINE):
            return
        time.sleep(15)
    sys.exit("apt-get update kept failing:\n%s" % result.stdout)


def sha256_file(path):
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def keep_live_lists(out, locked):
    """Copies apt's live lists into OUT/lists with only the stanzas of files taken live (the locked files' entries
    are the lock's own, from lock.fetch), and the Release files of suites the lock does not have."""
    lists = os.path.join(out, "lists")
    os.makedirs(lists, exist_ok=True)
    locked_hashes = {item["sha256"] for item in (locked or {}).get("files", [])}
    taken = {sha256_file(os.path.join(out, "debs", name)) for name in os.listdir(os.path.join(out, "debs"))
             if name.endswith(".deb")} - locked_hashes
    locked_suites = set((locked or {}).get("suites", {}))
    for name in os.listdir(LISTS):
        if "_dists_" not in name:
            continue
        if name.endswith("_Packages"):
            blocks = open(os.path.join(LISTS, name), encoding="utf-8", errors="replace").read().split("\n\n")
            kept = [block.strip("\n") for block in blocks
                    if (re.search(r"^SHA256: (\S+)$", block, re.MULTILINE) or [None, None])[1] in taken]
            with open(os.path.join(lists, name), "w", encoding="utf-8") as handle:
                handle.write("".join(block + "\n\n" for block in kept))
        elif name.endswith("Release") and re.search(r"_dists_([^_]+)_(?:In)?Release$", name).group(1) not in locked_suites:
            shutil.copy(os.path.join(LISTS, name), lists)


def write_result(out, groups):
    """OUT/groups.json (group -> taken, files, fallbacks), and fallbacks.json and taken for assemble.py."""
    with open(os.path.join(out, "groups.json"), "w") as handle:
        json.dump(groups, handle, indent=1, sort_keys=True)
    with open(os.path.join(out, "fallbacks.json"), "w") as handle:
        json.dump([item for _name, group in sorted(groups.items()) for item in group["fallbacks"]], handle,
                  indent=1, sort_keys=True)
    with open(os.path.join(out, "taken"), "w") as handle:
        handle.write(max(group["taken"] for group in groups.values()) + "\n")


def take_locked(locked, states, out, previous):
    """Fetches the locked files of the groups kept (lock.fetch); a group whose file the pool no longer serves as
    locked is resolved live instead, and that is said. Returns the states as they end up."""
    for _round in range(2):
        kept = [group for group, (how, _why) in states.items() if how != "live"]
        if not kept:
            return states
        whole = any(how == "attribute" for how, _why in states.values())
        only = None if whole else set(lock.needed(locked, kept))
        count = len(locked["files"]) if whole else len(only)
        print("    taking %d files of the lock by path, each checked against it" % count, flush=True)
        problems = lock.fetch(locked, sites(), out, only=only,
                              reuse=[os.path.join(previous, "debs")] if previous else [])
        if not problems:
            return states
        shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
        failed = {problem.split(": ", 1)[0] for problem in problems}
        print("    %d file(s) of the lock are not served as locked (%s)" % (len(problems), shown), flush=True)
        for group in kept:
            if whole or failed & set(locked["groups"][group]["files"]):
                states[group] = ("live", "its locked files are not served as locked "
                                         "(tools/snapshot.sh --update-lock takes them anew)")
        shutil.rmtree(os.path.join(out, "lists"), ignore_errors=True)
    sys.exit("the lock's files kept failing to download: %s" % "; ".join(problems[:3]))


def main(release_file, out, lock_file=None, previous=None):
    with open(release_file) as handle:
        release = json.load(handle)
    groups = release["groups"]
    locked = None
    if lock_file:
        with open(lock_file) as handle:
            locked = json.load(handle)
    enable_components(release.get("components", []))
    states = lock.plan(locked, release)
    for group in lock.dropped(locked, release):
        print("    group %s: no longer in packages.json: its files go, unless another group needs them" % group,
              flush=True)
    if locked:
        states = take_locked(locked, states, out, previous)
    live = sorted(group for group, (how, _why) in states.items() if how == "live")
    attribute = sorted(group for group, (how, _why) in states.items() if how == "attribute")
    result = {}
    for group, (how, why) in sorted(states.items()):
        said = {"locked": why, "attribute": "finding its files among the locked files (the lock is format 1)"}
        print("    group %s: %s" % (group, said.get(how, "resolved from the live index: " + why)), flush=True)
        if how == "locked":
            entry = locked["groups"][group]
            result[group] = {"taken": entry["taken"], "files": entry["files"], "fallbacks": entry["fallbacks"]}
    if live or attribute:
        debs = os.path.join(out, "debs")
        os.makedirs(os.path.join(debs, "partial"), exist_ok=True)
        if os.path.exists(PINS):
            os.remove(PINS)
        repository = None
        if os.path.isdir(os.path.join(out, "lists")):
            repository = local_repository(out, alone=not live)
        apt_update()
        locked_files = {item["filename"] for item in (locked or {}).get("files", [])}
        for group in attribute:
            files = group_files(group, groups[group])
            strange = sorted(set(files) - locked_files)
            if strange:
                sys.exit("group %s takes files the format 1 lock does not have: %s" % (group, ", ".join(strange)))
            result[group] = {"taken": locked["taken"], "files": files, "fallbacks": lock.fallbacks(locked, [group])}
        if attribute and not live:
            unclaimed = locked_files - {name for group in result.values() for name in group["files"]}
            if unclaimed:
                sys.exit("files of the format 1 lock that no group takes: %s" % ", ".join(sorted(unclaimed)))
        index = uploads_index()
        fallbacks = []
        for group in live:
            print("    group %s: %s" % (group, " ".join(groups[group])), flush=True)
            download(group, groups[group], out, index, fallbacks)
        drop_pinned_away(debs, fallbacks, locked_files)
        today = time.strftime("%Y-%m-%d", time.gmtime())
        for group in live:
            # Again with every pin in place: a later group's fallback can move an earlier group's choice.
            download(group, groups[group], out, index, fallbacks)
            result[group] = {"taken": today, "files": group_files(group, groups[group]),
                             "fallbacks": [item for item in fallbacks if item["group"] == group]}
        if live:
            keep_live_lists(out, locked)
        if repository:
            shutil.rmtree(repository, ignore_errors=True)
        shutil.rmtree(os.path.join(debs, "partial"), ignore_errors=True)
    drop_unneeded(out, locked, result)
    write_result(out, result)


def drop_unneeded(out, locked, result):
    """Removes the locked files no group needs any more (a group dropped, or resolved live instead)."""
    needed = {os.path.basename(name) for group in result.values() for name in group["files"]}
    for item in (locked or {}).get("files", []):
        name = os.path.basename(item["filename"])
        path = os.path.join(out, "debs", name)
        if name not in needed and os.path.exists(path):
            os.remove(path)


if __name__ == "__main__":
    main(*sys.argv[1:5])
