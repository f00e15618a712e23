# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A change of an installed, held package set in one apt transaction: pure functions.

A driver update within its branch, a branch or flavour change and a rollback all move a set of packages that
dpkg holds and that depend on each other at exact versions. Naming only the top packages fails ("you have held
broken packages": apt does not choose to move a held package it was not asked about), so the change is planned
first: apt-get simulates the install of the wanted versions against a copy of dpkg's status in which the holds
of the set are lifted, and what it would install and remove becomes the explicit transaction. A package of the
set the transaction leaves alone but that belongs to the old state (its name carries an older version, such as
``nvidia-firmware-580-server-580.178.04``, or another branch, by the caller's patterns) is removed in the same
transaction, and a second simulation checks that nothing outside the set goes with it.

Nothing here runs a command; ``gpufleet.node.apt_plan`` (option ``change``) gathers dpkg's and apt's answers.

Interface:

* ``FAMILY_SHOWFORMAT``: the ``dpkg-query --show --showformat`` the family is read with
* ``parse_family(text, sources, names)``: installed packages whose source package matches one of ``sources``
  (regular expressions) or whose name is in ``names`` -> ``{name: {"version", "source", "state", "held"}}``
* ``release_holds(status_text, names)``: dpkg's status file with the ``hold`` selection of ``names`` turned
  into ``install`` (for the simulation only)
* ``parse_simulation(text)``: ``apt-get -s install ...`` -> ``{"install": {name: {"from", "to"}}, "remove":
  {name: from}}``
* ``simulation_problems(text)``: apt's error lines and the unmet dependencies it lists
* ``problem_packages(problems)``: the packages those lines name
* ``parse_sources(text)``: ``apt-cache show NAME=VERSION...`` -> ``{name: source package}``
* ``set_after(family, simulated, sources, patterns)``: the set's names once the change is made
* ``upstream(version)``: the upstream part of a Debian version (no epoch, no revision)
* ``obsolete_packages(family, touched, keep_upstreams, patterns)``: the set's packages to remove although
  apt would leave them
* ``transaction(wanted, simulated, family)``: apt-get's arguments (``name=version`` and ``name-``)
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

__all__ = [
    "FAMILY_SHOWFORMAT",
    "obsolete_packages",
    "parse_family",
    "parse_simulation",
    "parse_sources",
    "problem_packages",
    "set_after",
    "release_holds",
    "simulation_problems",
    "transaction",
    "upstream",
]

FAMILY_SHOWFORMAT = "${binary:Package}\t${source:Package}\t${Version}\t${db:Status-Abbrev}\n"
# dpkg's second status letter (db:Status-Abbrev) of a package whose files are (at least partly) on disk:
# installed, unpacked, half-configured, half-installed, triggers-awaited, triggers-pending. n (not installed)
# and c (config-files only) are not.
_ON_DISK = "iUFHWt"
# apt-get -s: "Inst NAME [OLD] (NEW ORIGIN [ARCH])" ("[OLD]" only for an upgrade or downgrade) and
# "Remv NAME [OLD]" (apt-pkg/algorithms.cc, pkgSimulate).
_INST = re.compile(r"^Inst (\S+)(?: \[([^\]]+)\])? \((\S+) ")
_REMV = re.compile(r"^Remv (\S+)(?: \[([^\]]+)\])?")
# apt's "The following packages have unmet dependencies:" lines (" name : Depends: ...", " name : Conflicts: ...")
# and their continuation lines ("                Depends: ...").
_UNMET = re.compile(r"^ +(?:\S+ : )?(?:Pre-?Depends|Depends|Conflicts|Breaks): ")
_UNMET_NAME = re.compile(r"^ +(\S+) : ")


def _bare(name, native):
    """``name:arch`` without the native architecture (apt and dpkg name native packages without it)."""
    base, _colon, arch = name.partition(":")
    return base if not arch or native is None or arch == native else name


def parse_family(text, sources=(), names=(), native=None):
    """The installed packages of ``dpkg-query --show --showformat FAMILY_SHOWFORMAT`` whose source package
    matches one of the regular expressions ``sources`` (``re.search``) or whose name is one of ``names``.
    Packages of the ``native`` architecture are named without it (``libnvidia-compute-580-server``), others keep
    it (``libnvidia-compute-580-server:i386``), as apt-get names them.

    Each is ``{"version", "source", "state", "held"}``: ``state`` is dpkg's status letter (``i`` installed,
    ``U`` unpacked, ``F`` half-configured, ...), ``held`` whether its selection is ``hold``. A package dpkg
    lists as not installed or with its configuration files only is not part of it.
    """
    patterns = [re.compile(source) for source in sources or ()]
    wanted = set(names or ())
    family = {}
    for line in text.splitlines():
        if not line.strip():
            continue
        fields = line.split("\t")
        if len(fields) != 4 or len(fields[3]) < 2:
            raise ValueError("not a line of dpkg-query --showformat %r: %r" % (FAMILY_SHOWFORMAT, line))
        name, source, version, status = fields
        source = source.strip() or name.partition(":")[0]
        if status[1] not in _ON_DISK:
            continue
        key = _bare(name, native)
        if key in wanted or name in wanted or any(pattern.search(source) for pattern in patterns):
            family[key] = {"version": version, "source": source, "state": status[1], "held": status[0] == "h"}
    return family


def release_holds(status_text, names):
    """dpkg's status file (``/var/lib/dpkg/status``) with the ``hold`` selection of ``names`` changed to
    ``install``, for a simulation in which apt may move them. Other stanzas are returned unchanged."""
    names = set(names)
    stanzas = status_text.split("\n\n")
    for index, stanza in enumerate(stanzas):
        match = re.search(r"^Package: (\S+)$", stanza, re.M)
        if match and match.group(1) in names:
            stanzas[index] = re.sub(r"^Status: hold ", "Status: install ", stanza, count=1, flags=re.M)
    return "\n\n".join(stanzas)


def parse_simulation(text):
    """What ``apt-get -s install ...`` would do: ``{"install": {name: {"from": old or None, "to": new}},
    "remove": {name: old or None}}``, names as apt prints them (a foreign architecture's with ``:arch``). ``Conf``
    lines repeat the ``Inst`` ones and are not needed."""
    install, remove = {}, {}
    for line in text.splitlines():
        match = _INST.match(line)
        if match:
            install[match.group(1)] = {"from": match.group(2), "to": match.group(3)}
            continue
        match = _REMV.match(line)
        if match:
            remove[match.group(1)] = match.group(2)
    return {"install": install, "remove": remove}


def parse_sources(text):
    """``{name: source package}`` of ``apt-cache show`` records (``Source: name`` or ``Source: name (version)``;
    a record without it is its own source)."""
    found = {}
    for stanza in text.split("\n\n"):
        package = re.search(r"^Package: (\S+)$", stanza, re.M)
        if package:
            source = re.search(r"^Source: (\S+)", stanza, re.M)
            found[package.group(1)] = source.group(1) if source else package.group(1)
    return found


def set_after(family, simulated, sources, patterns):
    """The set's packages once the simulated change is made: the family less what it removes, and the packages
    it installs whose source package (``sources``: :func:`parse_sources`) matches one of ``patterns``. Sorted."""
    compiled = [re.compile(pattern) for pattern in patterns or ()]
    new = [name for name in simulated["install"]
           if name in family or any(pattern.search(sources.get(name, name)) for pattern in compiled)]
    return sorted((set(family) - set(simulated["remove"])) | set(new))


def simulation_problems(text):
    """apt's ``E:`` lines and the unmet dependencies it prints before them (`` name : Depends: ...``)."""
    return [line.strip() for line in text.splitlines() if line.startswith("E:") or _UNMET.match(line)]


def problem_packages(problems):
    """The packages apt names on the left of its unmet-dependency lines (``problems``: :func:`simulation_problems`)."""
    return sorted(set(match.group(1) for match in (_UNMET_NAME.match(" " + line) for line in problems) if match))


def upstream(version):
    """``580.178.04`` of ``580.178.04-0ubuntu0.22.04.1`` (and of ``1:580.178.04-1``); a version without a
    revision is all upstream."""
    version = version.partition(":")[2] if ":" in version.split("-", 1)[0] else version
    return version.rsplit("-", 1)[0] if "-" in version else version


def obsolete_packages(family, touched, keep_upstreams, patterns=()):
    """The packages of ``family`` (:func:`parse_family`) to remove though the transaction leaves them alone
    (``touched``: names it installs or removes): those whose name ends with their own upstream version when that
    version is not one of ``keep_upstreams`` (the firmware of the old release), and those whose name matches
    one of ``patterns`` (regular expressions; a caller's names of other branches). Sorted."""
    compiled = [re.compile(pattern) for pattern in patterns or ()]
    keep = set(keep_upstreams)
    found = []
    for name, entry in family.items():
        if name in touched:
            continue
        version = upstream(entry["version"])
        named = re.search(r"-%s$" % re.escape(version), name) if version else None
        if (version not in keep and named) or any(pattern.search(name) for pattern in compiled):
            found.append(name)
    return sorted(found)


def transaction(wanted, simulated, family=()):
    """apt-get's arguments for the change in one transaction: the wanted packages at their versions and every
    package of ``family`` (the installed set, held before) that the simulation moves, at the version it moves
    to, then every package it removes as ``name-``. New dependencies are left to apt (marked automatic)."""
    versions = dict((name, entry["to"]) for name, entry in simulated["install"].items() if name in family)
    versions.update(wanted)
    return (["%s=%s" % (name, versions[name]) for name in sorted(versions)]
            + ["%s-" % name for name in sorted(simulated["remove"])])
