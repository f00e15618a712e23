"""The lock of the snapshot: tests/snapshot/lock.json, the exact files the snapshot was last taken with.

A live resolution (resolve.py against the archive's index) depends on what the index lists that day, and an
archive caught mid-sync can list a version no pool serves while no older one is listed any more. The lock freezes
good resolutions: per release, every file by its pool path, size and SHA256, the index (suite, component,
architecture) that listed it, the Release fields of each suite, and per group of packages.json (format 2):

    "groups": {"<group>": {"spec": <digest of the group's packages and the release's components>,
                           "taken": <date it was resolved>, "files": [<pool paths it needs>],
                           "fallbacks": [<listed but not served, when it was resolved>]}}

Building from the lock asks the archive for the files by path only (its index is not read), checks each against
the lock, and writes apt lists of their own control data (``dpkg-deb --field``) for assemble.py, so the snapshot
does not change when the archive's index does. A group is resolved live (and that is said) only where it is new,
its digest changed, or the pool no longer serves one of its files as locked; the other groups keep their files
untouched, and the live resolution sees them (resolve.py serves them to apt as a local repository preferred over
the archive), so a new group takes the locked version of a package an old group already has. A group that
packages.json no longer names drops its files, unless another group needs them. ``tools/snapshot.sh
--update-lock`` writes the merged result; to take a group anew, delete its entry under "groups".

Which files a group needs is what apt takes for that group's one apt call (``apt-get install --print-uris``) in the
node image, never guessed from Depends. Format 1 locks (one digest per release, no groups) were migrated once, by
that same call against the locked files alone: with the archive's sources removed, each group of the package list
the lock was taken for resolved only against a repository of the locked files, so each group's files are exactly
the locked files apt takes for it, and their union was checked to be the whole format 1 lock (resolve.py refuses
a format 1 lock whose files no group needs). tests/unit/snapshot keeps the format 1 lock to compare.

Shared by resolve.py (in a node container, with the release's Python: 3.8 on Ubuntu 20.04) and assemble.py.
"""

import hashlib
import json
import os
import re
import subprocess
import time

from urllib.error import HTTPError
from urllib.request import urlopen

FORMAT = 2
# The Release fields a snapshot suite keeps (apt preferences pin by them).
KEPT_RELEASE_FIELDS = ("Origin", "Label", "Suite", "Version", "Codename", "Description")
# apt names a list after its URL: <site>_dists_<suite>_<component>_binary-<arch>_Packages (assemble.py reads that).
LIST_PREFIX = "gpufleet-lock"


def spec_digest(release):
    """The digest of one release's entry of packages.json (format 1 locked a release by it; format 2 keeps it to
    say which package list the lock was last written for)."""
    return hashlib.sha256(json.dumps(release, sort_keys=True).encode("utf-8")).hexdigest()


def group_digest(packages, components):
    """The digest of one group: its packages (the order of one apt call's arguments does not matter) and the
    release's components (they decide which index apt reads)."""
    text = json.dumps({"components": sorted(components), "packages": sorted(packages)}, sort_keys=True)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def plan(locked, release):
    """group -> (how, why) for every group of one release's packages.json entry: "locked" (its files are in the
    lock), "attribute" (a format 1 lock taken for this very package list: its files are found among the locked
    files) or "live" (resolved from the live index), why being the reason to say."""
    components = release.get("components", [])
    groups = release["groups"]
    if not locked:
        return {group: ("live", "the lock has no entry for this release") for group in groups}
    if "groups" not in locked:
        if locked.get("spec") == spec_digest(release):
            return {group: ("attribute", "format 1 lock") for group in groups}
        return {group: ("live", "the lock (format 1) was taken for another package list") for group in groups}
    states = {}
    for group, packages in groups.items():
        entry = locked["groups"].get(group)
        if entry is None:
            states[group] = ("live", "a group the lock does not have")
        elif entry["spec"] != group_digest(packages, components):
            states[group] = ("live", "its packages or the release's components changed since the lock")
        else:
            states[group] = ("locked", "locked %s" % entry["taken"])
    return states


def dropped(locked, release):
    """The groups of the lock that packages.json no longer names (their files go, unless another group needs them)."""
    return sorted(set((locked or {}).get("groups", {})) - set(release["groups"]))


def needed(locked, groups):
    """The pool paths the given groups of a format 2 lock need, each once."""
    return sorted({filename for group in groups for filename in locked["groups"][group]["files"]})


def list_name(index):
    """The apt list file name of an index ``suite/component/arch``."""
    suite, component, arch = index.split("/")
    return "%s_dists_%s_%s_binary-%s_Packages" % (LIST_PREFIX, suite, component, arch)


def release_name(suite):
    return "%s_dists_%s_Release" % (LIST_PREFIX, suite)


def release_text(fields):
    return "".join("%s: %s\n" % (name, fields[name]) for name in KEPT_RELEASE_FIELDS if fields.get(name))


def stanza(control, filename, data):
    """An index stanza: the package's own control data, then the fields the archive adds for its file."""
    return "%s\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s" % (
        control.strip("\n"), filename, len(data), hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest())


def entry(release, suites, indexes, files, groups):
    """One release's lock entry. files: dicts of filename, size, sha256 and indexes (each ``suite/component/arch``);
    groups: group -> {"taken", "files", "fallbacks"} (the digest is added here). Every file is needed by a group."""
    components = release.get("components", [])
    names = {item["filename"] for item in files}
    wanted = {filename for group in groups.values() for filename in group["files"]}
    if names != wanted:
        raise ValueError("files no group needs: %s; files needed but not taken: %s"
                         % (sorted(names - wanted) or "none", sorted(wanted - names) or "none"))
    locked = {name: {"spec": group_digest(release["groups"][name], components), "taken": group["taken"],
                     "files": sorted(set(group["files"])),
                     "fallbacks": [dict(item, url=pool_path(item.get("url"))) for item in group["fallbacks"]]}
              for name, group in groups.items()}
    return {"spec": spec_digest(release), "taken": max([group["taken"] for group in groups.values()] or [""]),
            "suites": suites, "indexes": sorted(indexes), "groups": locked,
            "files": sorted(files, key=lambda item: item["filename"])}


def fallbacks(locked, groups=None):
    """The fallbacks a lock recorded (of the given groups only, where named), each once."""
    if "groups" not in locked:
        found = locked.get("fallbacks", [])
        return [item for item in found if groups is None or item.get("group") in groups]
    return [item for name, group in sorted(locked["groups"].items()) if groups is None or name in groups
            for item in group["fallbacks"]]


def pool_path(url):
    """The pool path of a file's URL (a lock names no archive host: the node's sources do)."""
    return re.sub(r"^.*?/(pool/)", r"\1", url) if url else url


def check(locked, data):
    """None when data is the file the lock names, else what is wrong with it."""
    if len(data) != locked["size"]:
        return "%d bytes, the lock says %d" % (len(data), locked["size"])
    digest = hashlib.sha256(data).hexdigest()
    if digest != locked["sha256"]:
        return "SHA256 %s, the lock says %s" % (digest, locked["sha256"])
    return None


def download(url, tries=3, delay=5, opener=urlopen):
    """The bytes at url; (None, reason) for an answer that is a fact (404, 410), after retries for the rest."""
    reason = None
    for attempt in range(tries):
        try:
            return opener(url, timeout=60).read(), None
        except HTTPError as error:
            reason = "HTTP %d" % error.code
            if error.code in (404, 410):
                return None, reason
        except OSError as error:
            reason = str(error)
        if attempt + 1 < tries:
            time.sleep(delay)
    return None, reason


def fetch(locked, sites, out, opener=urlopen, only=None, reuse=()):
    """Downloads the locked files into out/debs and writes out/lists from them; returns the problems (none: done).

    sites maps each suite to the archive URL its sources name (apt-get indextargets), so a file of a security
    suite comes from where the node's sources say that suite is served. only: the pool paths to take (the files
    of the groups kept; None: all). reuse: directories of earlier downloads, where a file is taken from when its
    size and SHA256 are the lock's (out/debs itself is one), instead of asking the archive again."""
    problems = []
    debs = os.path.join(out, "debs")
    lists = os.path.join(out, "lists")
    for path in (debs, lists):
        os.makedirs(path, exist_ok=True)
    listed = {index: [] for index in locked["indexes"]}
    for item in locked["files"]:
        if only is not None and item["filename"] not in only:
            continue
        suite = item["indexes"][0].split("/")[0]
        if suite not in sites:
            problems.append("%s: the node's sources name no suite %s" % (item["filename"], suite))
            continue
        data = earlier(item, [debs] + list(reuse))
        reason = None
        if data is None:
            data, reason = download("%s/%s" % (sites[suite].rstrip("/"), item["filename"]), opener=opener)
            reason = reason or check(item, data)
        if reason:
            problems.append("%s: %s" % (item["filename"], reason))
            continue
        target = os.path.join(debs, os.path.basename(item["filename"]))
        with open(target, "wb") as handle:
            handle.write(data)
        control = subprocess.run(["dpkg-deb", "--field", target], stdout=subprocess.PIPE, check=True,
                                 universal_newlines=True).stdout
        for index in item["indexes"]:
            listed.setdefault(index, []).append(stanza(control, item["filename"], data))
    if problems:
        return problems
    for index, stanzas in listed.items():
        with open(os.path.join(lists, list_name(index)), "w", encoding="utf-8") as handle:
            handle.write("".join(text + "\n\n" for text in stanzas))
    for suite, fields in locked["suites"].items():
        with open(os.path.join(lists, release_name(suite)), "w", encoding="utf-8") as handle:
            handle.write(release_text(fields))
    return []


def earlier(item, directories):
    """The bytes of a locked file already downloaded into one of these directories, or None."""
    for directory in directories:
        path = os.path.join(directory, os.path.basename(item["filename"]))
        if os.path.isfile(path) and os.path.getsize(path) == item["size"]:
            with open(path, "rb") as handle:
                data = handle.read()
            if check(item, data) is None:
                return data
    return None
