# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning apt work: pure parsers of ``apt-cache policy`` and ``dpkg-query``, Debian version comparison,
and the decision of which version each package must have.

Nothing here runs a command or touches ``AnsibleModule``; ``gpufleet.node.apt_plan`` gathers the data (from
python-apt or from the two commands) and calls these functions.

Interface:

* ``parse_policy(text)``: ``apt-cache policy NAME...`` -> ``{name: {"installed", "candidate", "versions",
  "priorities", "downloadable"}}`` (``None`` for ``(none)``)
* ``apt_messages(text)``: apt's ``W:``/``E:``/``N:`` lines
* ``parse_show(text)``: ``apt-cache show NAME...`` -> ``{name: {version: {"summary", "depends"}}}``
* ``parse_dpkg(text)``: ``dpkg-query --show --showformat '${Package} ${db:Status-Abbrev} ${Version}\\n'
  NAME...`` (or ``${binary:Package}``) -> ``(installed, held)``
* ``parse_spec(item)``: ``NAME``, ``NAME=VERSION``, ``NAME=*`` or ``NAME=PREFIX*`` / ``*SUFFIX`` / ``*PART*``;
  ``parse_specs(items)`` for a list (a name twice is an error)
* ``version_compare(a, b)``: dpkg's ordering of two versions, -1, 0 or 1
* ``plan_packages(known, installed, held, packages, hold)``: the plan

Malformed package items raise :class:`AptPlanError`; text that is not the output of the command a parser
reads raises :class:`AptParseError` (a subclass).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

__all__ = [
    "ACTIONS",
    "apt_messages",
    "AptParseError",
    "AptPlanError",
    "DPKG_SHOWFORMAT",
    "find_package",
    "matches",
    "parse_dpkg",
    "parse_policy",
    "parse_show",
    "parse_spec",
    "parse_specs",
    "plan_packages",
    "version_compare",
]

# The format the module asks dpkg-query for: ${binary:Package} qualifies a name with its architecture where
# the bare name would be ambiguous (Multi-Arch: same packages, foreign architectures), as apt does.
DPKG_SHOWFORMAT = "${binary:Package} ${db:Status-Abbrev} ${Version}\n"
ACTIONS = ("keep", "install", "upgrade", "downgrade", "missing")
DPKG_STATUS_FILE = "/var/lib/dpkg/status"


class AptPlanError(ValueError):
    """A package item (or another input of the plan) is malformed."""


class AptParseError(AptPlanError):
    """The text is not output of the command the parser reads."""


# --- apt-cache policy -------------------------------------------------------------------------------------

# "cuda-drivers-535:" or, for a foreign architecture, "libfoo:i386:"; never indented, never with a space.
_POLICY_HEADER = re.compile(r"^(\S+):$")
_POLICY_FIELD = re.compile(r"^\s+(Installed|Candidate):\s*(\S+)\s*$")
# "     535.183.01-1 1001" or " *** 535.161.08-1 500": a version and its pin priority.
_POLICY_VERSION = re.compile(r"^\s+(\*\*\*\s+)?(\S+)\s+(-?\d+)\s*$")
# "        500 https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64  Packages"
_POLICY_SOURCE = re.compile(r"^\s+(-?\d+)\s+(\S.*?)\s*$")
# What apt prints besides the table, on stderr: "W: Unable to read /etc/apt/preferences.d/x - open (13: ...)",
# "N: ...", "E: ...".
_APT_MESSAGE = re.compile(r"^[WNE]: ")
_POLICY_KNOWN = re.compile(r"^\s+(Version table:|Package pin:)")


def apt_messages(text):
    """apt's ``W:``, ``E:`` and ``N:`` lines in text (stderr, or stdout and stderr together), in order."""
    if not isinstance(text, str):
        return []
    return [line.strip() for line in text.splitlines() if _APT_MESSAGE.match(line)]


def parse_policy(text):
    """``{name: entry}`` from ``apt-cache policy NAME...`` run with the C locale.

    Each entry has ``installed`` and ``candidate`` (a version, or None for ``(none)``), ``versions`` (the
    version table in apt's order, newest first), ``priorities`` (version -> pin priority as printed) and
    ``downloadable`` (the versions some repository offers, not only ``/var/lib/dpkg/status``).

    apt's messages (``W:``, ``N:``, ``E:`` lines), blank lines and lines apt added in other releases are
    skipped; text with other lines but no package in it raises :class:`AptParseError`.
    """
    if not isinstance(text, str):
        raise AptParseError("apt-cache policy output must be text, got %s" % type(text).__name__)
    packages, current, version, other = {}, None, None, []
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip() or _APT_MESSAGE.match(line):
            continue
        header = _POLICY_HEADER.match(line)
        if header:
            current = packages.setdefault(header.group(1), {
                "installed": None, "candidate": None, "versions": [], "priorities": {}, "downloadable": []})
            version = None
            continue
        if current is None:
            other.append(line)
            continue
        field = _POLICY_FIELD.match(line)
        if field:
            current[field.group(1).lower()] = None if field.group(2) == "(none)" else field.group(2)
            continue
        row = _POLICY_VERSION.match(line)
        if row:
            version = row.group(2)
            if version not in current["priorities"]:
                current["versions"].append(version)
            current["priorities"][version] = int(row.group(3))
            continue
        source = _POLICY_SOURCE.match(line)
        if source and version is not None:
            if source.group(2) != DPKG_STATUS_FILE and version not in current["downloadable"]:
                current["downloadable"].append(version)
            continue
        if not _POLICY_KNOWN.match(line):
            other.append(line)
    if not packages and other:
        raise AptParseError("not apt-cache policy output (no 'NAME:' line): %r" % other[0][:200])
    return packages


# --- apt-cache show ---------------------------------------------------------------------------------------

# "Depends: nvidia-headless-no-dkms-580-server, nvidia-dkms-580-server (>= 580) | foo:any": a relation is a
# name, an optional architecture qualifier and an optional version constraint.
_RELATION_NAME = re.compile(r"^\s*([a-z0-9][a-z0-9+.-]*)")


def _relation_names(value):
    """Every package name a Depends-style field mentions (all alternatives), in order, without duplicates."""
    names = []
    for group in value.split(","):
        for alternative in group.split("|"):
            match = _RELATION_NAME.match(alternative)
            if match and match.group(1) not in names:
                names.append(match.group(1))
    return names


def parse_show(text):
    """``{name: {version: {"summary", "depends"}}}`` from ``apt-cache show NAME...`` (C locale).

    ``summary`` is the first line of the description (``Description`` or ``Description-en``), or None;
    ``depends`` the names of ``Pre-Depends`` and ``Depends`` (every alternative). apt prints one stanza per
    version and package file, so a version may appear twice; the first stanza counts. Text with lines but no
    ``Package:`` field raises :class:`AptParseError`.
    """
    if not isinstance(text, str):
        raise AptParseError("apt-cache show output must be text, got %s" % type(text).__name__)
    result, seen_lines = {}, False
    for stanza in re.split(r"\n\s*\n", text.replace("\r\n", "\n")):
        fields, last = {}, None
        for line in stanza.split("\n"):
            if not line.strip() or _APT_MESSAGE.match(line):
                continue
            seen_lines = True
            if line[0] in " \t":
                if last is not None:
                    fields[last] += "\n" + line.strip()
                continue
            key, sep, value = line.partition(":")
            if sep:
                last = key.strip()
                fields[last] = value.strip()
        name, version = fields.get("Package"), fields.get("Version")
        if not name or not version:
            continue
        description = fields.get("Description", fields.get("Description-en"))
        depends = _relation_names(fields.get("Pre-Depends", "")) + [
            dep for dep in _relation_names(fields.get("Depends", ""))
            if dep not in _relation_names(fields.get("Pre-Depends", ""))]
        result.setdefault(name, {}).setdefault(version, {
            "summary": description.split("\n", 1)[0].strip() if description else None,
            "depends": depends,
        })
    if seen_lines and not result:
        raise AptParseError("not apt-cache show output (no stanza with Package and Version)")
    return result


# --- dpkg-query -------------------------------------------------------------------------------------------

# "libnccl2 hi  2.18.3-1+cuda12.1", "libc6:amd64 ii  2.36-9+deb12u7", "nvidia-smi rc  535.161.08-1",
# "cuda un  " (known to dpkg, never installed: no version). The third status letter is R (reinstall
# required) or a space.
_DPKG_LINE = re.compile(r"^(\S+) ([uihrp])([ncHUFWti])(R?)(?:\s+(\S+))?\s*$")


def parse_dpkg(text):
    """``(installed, held)`` from dpkg-query's ``NAME STATUS-ABBREV VERSION`` lines.

    ``installed`` maps the names dpkg has fully installed (status ``ii``, or ``hi`` when held; not ``rc``,
    half-installed or needing a reinstall) to their versions; ``held`` maps every name dpkg printed to whether
    its selection is hold. Names are kept as printed (``libc6:amd64`` with ``${binary:Package}``).
    """
    if not isinstance(text, str):
        raise AptParseError("dpkg-query output must be text, got %s" % type(text).__name__)
    installed, held = {}, {}
    for line in text.replace("\r\n", "\n").split("\n"):
        if not line.strip():
            continue
        match = _DPKG_LINE.match(line)
        if not match:
            raise AptParseError("not a 'NAME STATUS VERSION' line of dpkg-query: %r" % line[:200])
        name, want, status, error, version = match.groups()
        held[name] = want == "h"
        if status == "i" and want in ("i", "h") and not error and version:
            installed[name] = version
    return installed, held


# --- Debian versions --------------------------------------------------------------------------------------

_DIGITS = "0123456789"
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"


def _order(char):
    """dpkg's weight of a non-digit character: ``~`` sorts before the end of the string, letters before
    other characters."""
    if char == "~":
        return -1
    if char in _LETTERS:
        return ord(char)
    return ord(char) + 256


def _verrevcmp(left, right):
    """dpkg's comparison of two upstream versions or two revisions (lib/dpkg/version.c, verrevcmp)."""
    i = j = 0
    while i < len(left) or j < len(right):
        while (i < len(left) and left[i] not in _DIGITS) or (j < len(right) and right[j] not in _DIGITS):
            left_weight = _order(left[i]) if i < len(left) and left[i] not in _DIGITS else 0
            right_weight = _order(right[j]) if j < len(right) and right[j] not in _DIGITS else 0
            if left_weight != right_weight:
                return left_weight - right_weight
            i += 1
            j += 1
        while i < len(left) and left[i] == "0":
            i += 1
        while j < len(right) and right[j] == "0":
            j += 1
        first_diff = 0
        while i < len(left) and left[i] in _DIGITS and j < len(right) and right[j] in _DIGITS:
            if not first_diff:
                first_diff = ord(left[i]) - ord(right[j])
            i += 1
            j += 1
        if i < len(left) and left[i] in _DIGITS:
            return 1
        if j < len(right) and right[j] in _DIGITS:
            return -1
        if first_diff:
            return first_diff
    return 0


def _split_version(version):
    """``(epoch, upstream, revision)``; the revision is everything after the last ``-``."""
    if not isinstance(version, str) or not version or any(c.isspace() for c in version):
        raise AptPlanError("not a Debian version: %r" % (version,))
    epoch, _sep, rest = version.partition(":") if ":" in version else ("0", "", version)
    if not epoch.isdigit():
        raise AptPlanError("not a Debian version (the epoch must be a number): %r" % (version,))
    upstream, sep, revision = rest.rpartition("-")
    if not sep:
        upstream, revision = rest, ""
    return int(epoch), upstream, revision


def version_compare(left, right):
    """-1, 0 or 1 as Debian version ``left`` sorts before, equal to or after ``right`` (dpkg's algorithm:
    epoch, then upstream version, then revision; ``~`` before anything, even the end)."""
    left_epoch, left_upstream, left_revision = _split_version(left)
    right_epoch, right_upstream, right_revision = _split_version(right)
    result = (left_epoch > right_epoch) - (left_epoch < right_epoch)
    if not result:
        result = _verrevcmp(left_upstream, right_upstream)
    if not result:
        result = _verrevcmp(left_revision, right_revision)
    return (result > 0) - (result < 0)


# --- package items ----------------------------------------------------------------------------------------

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9+._-]*(:[A-Za-z0-9][A-Za-z0-9-]*)?$")
_VERSION_TEXT = re.compile(r"^[A-Za-z0-9.+~:-]+$")
ITEM_FORMS = "NAME, NAME=VERSION, NAME=* or NAME=PREFIX* (or *SUFFIX, *PART*)"


def parse_spec(item):
    """``(name, kind, value)`` of a package item: kind ``candidate`` (value None), ``exact`` (the version),
    ``any`` (value None) or ``glob`` (the pattern, ``*`` only at its start and/or end)."""
    if not isinstance(item, str):
        raise AptPlanError("package items are strings (%s), got %r" % (ITEM_FORMS, item))
    name, sep, version = item.strip().partition("=")
    if not _NAME.match(name):
        raise AptPlanError("%r: %r is not a package name (%s)" % (item, name, ITEM_FORMS))
    if not sep:
        return name, "candidate", None
    if version == "*":
        return name, "any", None
    core = version[1:] if version.startswith("*") else version
    core = core[:-1] if core.endswith("*") else core
    if not core or not _VERSION_TEXT.match(core):
        if "*" in core:
            raise AptPlanError("%r: '*' may only start or end the version pattern" % item)
        raise AptPlanError("%r: %r is not a version or version pattern (%s)" % (item, version, ITEM_FORMS))
    return name, ("glob" if core != version else "exact"), version


def parse_specs(packages):
    """``[(name, kind, value)]`` for a list of package items; a name asked for twice is an error."""
    if not isinstance(packages, (list, tuple)):
        raise AptPlanError("packages must be a list of items (%s), got %r" % (ITEM_FORMS, packages))
    specs, seen = [], {}
    for item in packages:
        name, kind, value = parse_spec(item)
        if name in seen:
            raise AptPlanError("%s is asked for twice (%r and %r)" % (name, seen[name], item))
        seen[name] = item
        specs.append((name, kind, value))
    return specs


def matches(pattern, version):
    """Whether ``version`` matches ``pattern`` (``*``, ``PREFIX*``, ``*SUFFIX``, ``*PART*`` or exact text)."""
    if pattern == "*":
        return True
    starts, ends = pattern.startswith("*"), pattern.endswith("*")
    core = pattern[1 if starts else 0:len(pattern) - 1 if ends else len(pattern)]
    if starts and ends:
        return core in version
    if ends:
        return version.startswith(core)
    if starts:
        return version.endswith(core)
    return version == core


# --- the plan ---------------------------------------------------------------------------------------------

def find_package(mapping, name, arch):
    """The key of ``mapping`` that stands for package ``name``, or None.

    apt prints the native architecture and ``all`` bare (``libc6:``); dpkg's ``${binary:Package}``
    qualifies Multi-Arch: same packages even on the native architecture (``libc6:amd64``); both qualify a
    foreign architecture. ``arch`` is the native architecture, or None when unknown (a bare name then finds a
    qualified key only when it is the one key for that name).
    """
    if name in mapping:
        return name
    base, _sep, qualifier = name.partition(":")
    if qualifier:
        if base in mapping and (arch is None or qualifier in (arch, "all")):
            return base
        return None
    if arch:
        native = "%s:%s" % (base, arch)
        return native if native in mapping else None
    keys = [key for key in mapping if key.partition(":")[0] == base]
    return keys[0] if len(keys) == 1 else None


def _offered(versions):
    """The versions apt offers, in words."""
    if not versions:
        return "apt offers no version of it"
    return "apt offers " + ", ".join(versions[:4]) + (", ..." if len(versions) > 4 else "")


def _resolve(name, kind, value, entry, have, compare):
    """``(wanted, why, kept)`` for one package.

    ``why`` is a phrase saying what the wanted version is (``kept``: the installed version, chosen because it is
    installed, and why says why it will do), or, when wanted is None (apt cannot give what is asked), a
    sentence saying why not.
    """
    candidate = entry["candidate"]
    downloadable = entry.get("downloadable", entry.get("versions", []))
    priorities = entry.get("priorities", {})
    if kind == "candidate":
        if candidate is None:
            return None, "apt has no candidate for %s (%s)." % (name, _offered(downloadable)), False
        return candidate, "apt's candidate", False
    if kind == "any":
        if have is not None:
            return have, "any version is accepted", True
        if candidate is None:
            return None, "%s is not installed and apt has no candidate for it (%s)." % (
                name, _offered(downloadable)), False
        return candidate, "apt's candidate (any version is accepted)", False
    if kind == "exact":
        if (have is not None and compare(have, value) == 0) or value in downloadable:
            return value, "the version asked for", False
        return None, "apt has no %s=%s to install (%s)." % (name, value, _offered(downloadable)), False
    # A pattern: the candidate, else the installed version, else the newest version apt may install.
    if candidate is not None and matches(value, candidate):
        return candidate, "apt's candidate, which matches %s" % value, False
    if have is not None and matches(value, have):
        if candidate is None:
            return have, "it matches %s (apt has no candidate)" % value, True
        return have, "it matches %s (apt's candidate %s does not)" % (value, candidate), True
    matching = [version for version in downloadable if matches(value, version)]
    allowed = [version for version in matching if priorities.get(version, 0) >= 0]
    if allowed:
        newest = allowed[0]
        for version in allowed[1:]:
            if compare(version, newest) > 0:
                newest = version
        return newest, "the newest version apt offers that matches %s (apt's candidate %s does not)" % (
            value, candidate), False
    if matching:
        return None, ("The host's apt preferences pin every version of %s that matches %s below 0 (%s); "
                      "ask for one by its exact version to override the pin." % (
                          name, value, ", ".join("%s at %d" % (v, priorities[v]) for v in matching))), False
    return None, "apt has no version of %s that matches %s (%s)." % (name, value, _offered(downloadable)), False


def plan_packages(known, installed, held, packages, hold=None, compare=None, arch=None):
    """What apt and dpkg have to do so that ``packages`` end up at the wanted versions (and held or not).

    ``known`` is what :func:`parse_policy` returns, ``installed`` and ``held`` what :func:`parse_dpkg` returns;
    ``packages`` are items as :func:`parse_spec` reads them; ``hold`` True/False/None. ``compare`` compares two
    versions (default :func:`version_compare`); ``arch`` is the native architecture where known.

    The wanted version: ``NAME``: apt's candidate. ``NAME=VERSION``: that version (installed, or offered by a
    repository whatever its pin: apt installs a version asked for by number). ``NAME=*``: the installed
    version, else the candidate. ``NAME=PATTERN``: the candidate when it matches, else the installed version
    when it matches, else the newest matching version whose pin priority is not negative.

    Returns ``packages`` (name -> ``wanted``, ``installed``, ``candidate``, ``held``, ``action``, ``reason``),
    ``install`` (``name=version`` for apt), ``hold`` and ``release`` (names whose dpkg selection must change),
    ``missing`` (names apt cannot give as asked) and ``wanted`` (name -> version or None).
    """
    if hold not in (True, False, None):
        raise AptPlanError("hold must be true, false or null, got %r" % (hold,))
    compare = compare or version_compare
    specs = parse_specs(packages)

    plan = {"packages": {}, "install": [], "hold": [], "release": [], "missing": [], "wanted": {}}
    for name, kind, value in specs:
        key = find_package(known, name, arch)
        entry = known[key] if key is not None else {
            "installed": None, "candidate": None, "versions": [], "priorities": {}, "downloadable": []}
        dpkg_key = find_package(held, name, arch)
        have = installed.get(dpkg_key) if dpkg_key is not None else None
        if (arch is None and dpkg_key is not None and ":" in dpkg_key and ":" not in name and key is not None
                and have is not None and entry["installed"] != have):
            # A bare name found only as NAME:ARCH in dpkg's answer while apt, which answers for the native
            # architecture, disagrees: that is another architecture's package, not the one asked for.
            dpkg_key, have = None, None
        is_held = bool(held.get(dpkg_key, False)) if dpkg_key is not None else False
        wanted, why, kept = _resolve(name, kind, value, entry, have, compare)

        if wanted is None:
            action, reason = "missing", why
        elif have is None:
            action = "install"
            reason = "Not installed; the wanted version %s is %s." % (wanted, why)
            if entry["installed"]:
                reason += " dpkg has %s only partly installed." % entry["installed"]
        else:
            order = compare(wanted, have)
            action = "keep" if order == 0 else ("upgrade" if order > 0 else "downgrade")
            if kept:
                reason = "Installed %s is kept: %s." % (have, why)
            elif action == "keep":
                reason = "Installed %s is the wanted version, %s." % (have, why)
            else:
                reason = "Installed %s is %s than the wanted version %s, %s." % (
                    have, "older" if order > 0 else "newer", wanted, why)
                if is_held:
                    reason += " dpkg holds it at %s." % have

        plan["packages"][name] = {
            "wanted": wanted, "installed": have, "candidate": entry["candidate"], "held": is_held,
            "action": action, "reason": reason,
        }
        plan["wanted"][name] = wanted
        if action == "missing":
            plan["missing"].append(name)
        elif action != "keep":
            plan["install"].append("%s=%s" % (name, wanted))
        # A missing package is left out of the holds: its plan cannot be carried out.
        if hold is True and (action in ("install", "upgrade", "downgrade") or (action == "keep" and not is_held)):
            plan["hold"].append(name)
        elif hold is False and is_held:
            plan["release"].append(name)
    return plan
