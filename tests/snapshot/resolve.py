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

With LOCK_JSON (this release's entry of tests/snapshot/lock.json, see lock.py), the locked files are taken by path
instead and the live index is not read; only where the lock is stale (another package list, or a file the pool no
longer serves as locked) is the release resolved from the live index, and that is said.
"""

from __future__ import print_function

import json
import os
import re
import shutil
import subprocess
import sys
import time

import lock  # beside this script

LISTS = "/var/lib/apt/lists"
PINS = "/etc/apt/preferences.d/gpufleet-snapshot-unserved"
# apt 2.x: "E: Failed to fetch http://host/ubuntu/pool/.../name_version_arch.deb  404  Not Found [IP: ...]"
# and "E: Failed to fetch http://host/.../name_version_arch.deb  Hash Sum mismatch" (apt-pkg/acquire-item.cc).
FAILED_FETCH = re.compile(r"^E: Failed to fetch (\S+/([^/\s]+\.deb))\s+(.*)$", re.MULTILINE)
# " libnvidia-nscq-580 : Depends: nvidia-kernel-common-580-server-580.196.07" (apt's unmet dependencies report)
UNMET = re.compile(r"^ (\S+) : (?:Pre-)?Depends:", re.MULTILINE)
MAX_ROUNDS = 20


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


def drop_pinned_away(debs, fallbacks):
    """Removes the files of uploads pinned away that an earlier round downloaded: the snapshot holds what resolved."""
    away = {(name, entry["version"]) for entry in fallbacks for name in entry["pinned_away"]}
    for name in os.listdir(debs):
        if name.endswith(".deb") and deb_identity(name) in away:
            os.remove(os.path.join(debs, name))


def sites():
    """suite -> the archive URL the node's sources name for it (one-line and deb822 alike)."""
    listing = run(["apt-get", "indextargets", "--no-release-info", "--format", "$(IDENTIFIER) $(RELEASE) $(SITE)"]).stdout
    return {fields[1]: fields[2] for fields in (line.split() for line in listing.splitlines())
            if len(fields) == 3 and fields[0] == "Packages"}


def from_lock(release, locked, out):
    """Takes the locked files (lock.fetch); False, with the reason printed, where the lock is stale."""
    if locked.get("spec") != lock.spec_digest(release):
        print("    the lock was taken for another package list (tests/snapshot/packages.json changed since): "
              "resolving from the live index", flush=True)
        return False
    print("    taking the %d files of the lock of %s by path, each checked against it"
          % (len(locked["files"]), locked["taken"]), flush=True)
    problems = lock.fetch(locked, sites(), out)
    if not problems:
        write_result(out, locked["taken"], locked["fallbacks"])
        return True
    shown = "; ".join(problems[:3]) + ("; ..." if len(problems) > 3 else "")
    print("    %d file(s) of the lock are not served as locked (%s): resolving from the live index instead; "
          "tools/snapshot.sh --update-lock takes a new lock" % (len(problems), shown), flush=True)
    for name in ("debs", "lists"):
        shutil.rmtree(os.path.join(out, name), ignore_errors=True)
    return False


def write_result(out, taken, fallbacks):
    with open(os.path.join(out, "fallbacks.json"), "w") as handle:
        json.dump(fallbacks, handle, indent=1, sort_keys=True)
    with open(os.path.join(out, "taken"), "w") as handle:
        handle.write(taken + "\n")


def main(release_file, out, lock_file=None):
    with open(release_file) as handle:
        release = json.load(handle)
    groups = release["groups"]
    enable_components(release.get("components", []))
    if lock_file:
        with open(lock_file) as handle:
            if from_lock(release, json.load(handle), out):
                return
    os.makedirs(os.path.join(out, "debs", "partial"), exist_ok=True)
    if os.path.exists(PINS):
        os.remove(PINS)
    for attempt in range(3):
        result = run(["apt-get", "update", "-o", "Acquire::Retries=3"], check=False)
        if result.returncode == 0 and not re.search(r"^(W|E): Failed to fetch", result.stdout, re.MULTILINE):
            break
        time.sleep(15)
    else:
        sys.exit("apt-get update kept failing:\n%s" % result.stdout)
    index = uploads_index()
    fallbacks = []
    for group in sorted(groups):
        print("    group %s: %s" % (group, " ".join(groups[group])), flush=True)
        download(group, groups[group], out, index, fallbacks)
    lists = os.path.join(out, "lists")
    os.makedirs(lists, exist_ok=True)
    for name in os.listdir(LISTS):
        if name.endswith(("_Packages", "Release")):
            shutil.copy(os.path.join(LISTS, name), lists)
    drop_pinned_away(os.path.join(out, "debs"), fallbacks)
    write_result(out, time.strftime("%Y-%m-%d", time.gmtime()), fallbacks)
    shutil.rmtree(os.path.join(out, "debs", "partial"), ignore_errors=True)


if __name__ == "__main__":
    main(*sys.argv[1:4])
