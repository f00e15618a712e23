"""The lock of the snapshot: tests/snapshot/lock.json, the exact files the snapshot was last taken with.

A live resolution (resolve.py against the archive's index) depends on what the index lists that day, and an
archive caught mid-sync can list a version no pool serves while no older one is listed any more. The lock freezes
one good resolution: per release, every file by its pool path, size and SHA256, the index (suite, component,
architecture) that listed it, the Release fields of each suite, and the fallbacks seen when it was taken. Building
from the lock asks the archive for those files by path only (its index is not read), checks each against the lock,
and writes apt lists of their own control data (``dpkg-deb --field``) for assemble.py, so the snapshot does not
change when the archive's index does. A file the pool no longer serves makes the lock stale: resolve.py then
resolves that release from the live index and says so (``tools/snapshot.sh --update-lock`` takes a new lock).

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

FORMAT = 1
# The Release fields a snapshot suite keeps (apt preferences pin by them).
KEPT_RELEASE_FIELDS = ("Origin", "Label", "Suite", "Version", "Codename", "Description")
# apt names a list after its URL: <site>_dists_<suite>_<component>_binary-<arch>_Packages (assemble.py reads that).
LIST_PREFIX = "gpufleet-lock"


def spec_digest(release):
    """The digest of one release's entry of packages.json: a lock taken for another package list is not used."""
    return hashlib.sha256(json.dumps(release, sort_keys=True).encode("utf-8")).hexdigest()


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


def entry(release, taken, suites, indexes, files, fallbacks):
    """One release's lock entry. files: dicts of filename, size, sha256 and indexes (each ``suite/component/arch``)."""
    return {"spec": spec_digest(release), "taken": taken, "suites": suites, "indexes": sorted(indexes),
            "files": sorted(files, key=lambda item: item["filename"]),
            "fallbacks": [dict(item, url=pool_path(item.get("url"))) for item in fallbacks]}


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


def fetch(locked, sites, out, opener=urlopen):
    """Downloads the locked files into out/debs and writes out/lists from them; returns the problems (none: done).

    sites maps each suite to the archive URL its sources name (apt-get indextargets), so a file of a security
    suite comes from where the node's sources say that suite is served."""
    problems = []
    debs = os.path.join(out, "debs")
    lists = os.path.join(out, "lists")
    for path in (debs, lists):
        os.makedirs(path, exist_ok=True)
    listed = {index: [] for index in locked["indexes"]}
    for item in locked["files"]:
        suite = item["indexes"][0].split("/")[0]
        if suite not in sites:
            problems.append("%s: the node's sources name no suite %s" % (item["filename"], suite))
            continue
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
