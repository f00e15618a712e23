# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The downloads apt-get could not make, read from its output: which file, which package, and why.

Pure: nothing here runs a command or imports Ansible; the ``apt_fetch_failures`` filter calls it on the output
of ``apt-get install --download-only`` (stdout and stderr together, run with the C locale).

The lines it reads, as apt 2.x prints them (apt's own sources, apt-pkg/acquire-item.cc and methods/basehttp.cc,
and captures quoted in public bug reports):

* stdout, one record per file while downloading (``Err:N`` since apt 1.1; ``Err`` without a number before)::

      Err:1 http://mirror/ubuntu jammy-updates/restricted amd64 nvidia-utils-580-server amd64 580.196.07-0ubuntu0.22.04.1
        404  Not Found [IP: 127.0.0.1 19535]

  A flat repository (NVIDIA's, suite ``/``) has no suite, component or architecture there:
  ``Err:1 https://host/repos/ubuntu2204/x86_64  cuda-drivers-535 535.183.01-1``.
* stderr, one line per file at the end, then apt's summary::

      E: Failed to fetch http://mirror/ubuntu/pool/.../nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb  404  Not Found [IP: 127.0.0.1 19535]
      E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?

  apt 3 (Debian 13) writes ``Error:`` for ``E:``. A file the mirror serves but the index does not describe gets
  ``Hash Sum mismatch`` (followed by indented ``Hashes of expected file:`` / ``Hashes of received file:`` /
  ``Last modification reported:`` lines), ``File has unexpected size (A != B). Mirror sync in progress?`` (the
  http method's words when the size differs), ``Size mismatch`` or ``Writing more data than expected (A > B)``
  as its reason.

The version in a pool file name has no epoch (the archive leaves it out; apt's own cache writes it as ``%3a``)
and is URL-encoded (``%2b`` for ``+``); the ``Err`` record of the same file carries the version as the index
lists it, epoch included, so the two are joined.

Interface:

* ``parse_fetch_failures(text)``: a list of failures, one per file, each ``{"url", "file", "package", "version",
  "architecture", "kind", "status", "reason"}``, None where the output does not say
* ``fetch_kind(reason)``: ``not_served``, ``hash_mismatch`` or ``transient`` for apt's reason text
* ``parse_deb_name(name)``: ``(package, version, architecture)`` of a ``.deb`` file name, or None
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

try:  # Python 3
    from urllib.parse import unquote
except ImportError:  # Python 2, for ansible-test's compile check
    from urllib import unquote

__all__ = [
    "HASH_MISMATCH",
    "KINDS",
    "NOT_SERVED",
    "TRANSIENT",
    "fetch_kind",
    "parse_deb_name",
    "parse_fetch_failures",
]

NOT_SERVED = "not_served"
HASH_MISMATCH = "hash_mismatch"
TRANSIENT = "transient"
KINDS = (NOT_SERVED, HASH_MISMATCH, TRANSIENT)

# "E: Failed to fetch URL  REASON" (apt-get's "Failed to fetch %s  %s": two spaces before the reason); "W:" where
# apt only warns (index files), "Error:" from apt 3. Some logs show the URL in angle brackets: accepted.
_FAILED = re.compile(r"^(?:(?:E|W|Err|Error):\s*)?Failed to fetch\s+<?(?P<url>[^\s<>]+)>?(?:\s+(?P<reason>\S.*?))?\s*$")
# "Err:12 URI DESCRIPTION" (apt >= 1.1) or "Err URI DESCRIPTION" (older apt).
_ERR = re.compile(r"^Err(?::\d+)?\s+<?(?P<uri>[^\s<>]+)>?\s+(?P<rest>.*?)\s*$")
# A Debian package name, and a version (it begins with a digit, its epoch too).
_NAME = re.compile(r"^[a-z0-9][a-z0-9+.-]+$")
_VERSION = re.compile(r"^[0-9][A-Za-z0-9.+~:-]*$")
_ARCH = re.compile(r"^[a-z0-9][a-z0-9-]*$")
# "name_version_arch.deb": neither the name nor the version nor the architecture has an underscore.
_DEB = re.compile(r"^(?P<package>[^_/]+)_(?P<version>[^_/]+)_(?P<arch>[^_/.]+)\.(?:deb|udeb|ddeb)$")
# apt's reasons. Hash: the file differs from what the index says (hashes, or its size). Not served: HTTP 404 or
# 410, or the file: and copy: methods' "File not found". Everything else (refused or reset connections, timeouts,
# names that do not resolve, 5xx, proxies) may pass.
_HASH = re.compile(r"Hash Sum mismatch|File has unexpected size|Size mismatch|Writing more data than expected",
                   re.IGNORECASE)
_NOT_SERVED = re.compile(r"^(?:404|410)\b|File not found|No such file", re.IGNORECASE)
_STATUS = re.compile(r"^([1-5][0-9]{2})\s")
# "[IP: 127.0.0.1 19535]" after a reason: where the method connected, not part of the reason.
_IP = re.compile(r"\s*\[IP: [^\]]*\]\s*$")


def fetch_kind(reason):
    """``hash_mismatch``, ``not_served`` or ``transient`` for the reason apt gave for a failed file (its first
    line); a reason that is missing or not understood counts as transient."""
    if not isinstance(reason, str) or not reason.strip():
        return TRANSIENT
    if _HASH.search(reason):
        return HASH_MISMATCH
    if _NOT_SERVED.search(reason.strip()):
        return NOT_SERVED
    return TRANSIENT


def parse_deb_name(name):
    """``(package, version, architecture)`` from a ``.deb`` file name (``name_version_arch.deb``, URL-encoded as
    apt prints it: ``%3a`` is the epoch's colon, ``%2b`` a plus), or None when it is not a package file name."""
    if not isinstance(name, str):
        return None
    match = _DEB.match(unquote(name))
    if not match:
        return None
    package, version, arch = match.group("package"), match.group("version"), match.group("arch")
    if not (_NAME.match(package) and _VERSION.match(version) and _ARCH.match(arch)):
        return None
    return package, version, arch


def _status(reason):
    match = _STATUS.match(reason.strip()) if reason else None
    return int(match.group(1)) if match else None


def _clean(reason):
    """The reason without the trailing ``[IP: address port]``; None when empty."""
    if not reason:
        return None
    reason = _IP.sub("", reason.strip())
    return reason or None


def _err_description(rest):
    """``(package, architecture, version)`` from the description after an ``Err`` line's URI, or None for an index
    file (``jammy-updates InRelease``, ``bookworm/main amd64 Packages``).

    apt writes it as debPackagesIndex::ArchiveInfo does (apt-pkg/deb/debindexfile.cc): the index's description
    without its last word, then ``NAME``, then ``ARCH`` unless the repository is flat (its suite ends in ``/``),
    then ``VERSION``: ``jammy-updates/restricted amd64 nvidia-utils-580-server amd64 580.196.07-0ubuntu0.22.04.1``,
    or ``cuda-drivers-535 535.183.01-1`` for NVIDIA's flat repository (suite ``/``, printed as nothing).
    """
    words = rest.split()
    if len(words) < 2 or not _VERSION.match(words[-1]):
        return None
    if len(words) == 2 or words[-3].endswith("/"):
        package, arch = words[-2], None
    elif len(words) >= 4:
        package, arch = words[-3], words[-2]
    else:
        return None
    if not _NAME.match(package) or (arch is not None and not _ARCH.match(arch)):
        return None
    return package, arch, words[-1]


def _records(lines):
    """``(kind, head match, first continuation line)`` for each ``Err`` and ``Failed to fetch`` record; the indented
    lines after a head belong to it (apt's reason, then the hashes)."""
    records, current = [], None
    for line in lines:
        if line[:1] in (" ", "\t") and current is not None:
            if current[2] is None and line.strip():
                current[2] = line.strip()
            continue
        current = None
        stripped = line.strip()
        match = _FAILED.match(stripped)
        if match:
            current = ["failed", match, None]
            records.append(current)
            continue
        match = _ERR.match(stripped)
        if match:
            current = ["err", match, None]
            records.append(current)
    return records


def _same_version(index_version, file_version):
    """Whether the index's version (epoch included) is the file name's (pool names leave the epoch out)."""
    if index_version is None or file_version is None:
        return False
    return index_version == file_version or index_version.split(":", 1)[-1] == file_version.split(":", 1)[-1]


def parse_fetch_failures(text):
    """The files apt-get could not download, one dict per file in the order of its ``Failed to fetch`` lines, then
    any ``Err`` record no such line repeats (a cut-off output):

    * ``url``: the file's URL as apt printed it (None for an ``Err`` record alone, which names only the
      repository)
    * ``file``: the ``.deb`` file name, URL-decoded (None when the URL is not a package file: an index)
    * ``package``, ``version``, ``architecture``: from the ``Err`` record of the file where there is one (the
      version as the index lists it, epoch included), else from the file name
    * ``kind``: ``not_served`` (404, 410, "File not found"), ``hash_mismatch`` (the file differs from the index:
      hash or size) or ``transient`` (anything else, or no reason at all)
    * ``status``: the HTTP status code at the start of the reason, an int, or None
    * ``reason``: apt's reason, its first line, without ``[IP: ...]``; None when apt gave none

    Text with no such lines (apt's other errors: a lock, disk space, an unknown package) gives ``[]``; anything
    that is not a string too.
    """
    if not isinstance(text, str):
        return []
    records = _records(text.replace("\r\n", "\n").replace("\r", "\n").split("\n"))
    errs = []
    for kind, match, continuation in records:
        if kind != "err":
            continue
        described = _err_description(match.group("rest"))
        if described:
            errs.append({"repository": match.group("uri"), "package": described[0], "architecture": described[1],
                         "version": described[2], "reason": continuation, "used": False})

    failures, seen = [], set()
    for kind, match, continuation in records:
        if kind != "failed":
            continue
        url = match.group("url")
        if url in seen:
            continue
        seen.add(url)
        reason = match.group("reason") or continuation
        name = url.rstrip("/").rsplit("/", 1)[-1]
        deb = parse_deb_name(name)
        failure = {"url": url, "file": unquote(name) if deb else None, "package": None, "version": None,
                   "architecture": None}
        if deb:
            failure.update(package=deb[0], version=deb[1], architecture=deb[2])
            for err in errs:
                if not err["used"] and err["package"] == deb[0] and _same_version(err["version"], deb[1]) \
                        and err["architecture"] in (None, deb[2]):
                    err["used"] = True
                    failure["version"] = err["version"]
                    reason = reason or err["reason"]
                    break
        failure.update(kind=fetch_kind(reason), status=_status(reason), reason=_clean(reason))
        failures.append(failure)

    for err in errs:
        if err["used"]:
            continue
        failures.append({"url": None, "file": None, "package": err["package"], "version": err["version"],
                         "architecture": err["architecture"], "kind": fetch_kind(err["reason"]),
                         "status": _status(err["reason"]), "reason": _clean(err["reason"])})
    return failures
