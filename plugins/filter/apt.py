# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What apt has to do for packages at resolved versions, from apt-cache policy and dpkg-query (pure)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: apt_plan
author: gpufleet.node maintainers (@gpufleet)
version_added: "0.1.0"
short_description: Which packages apt must install to reach resolved versions
description:
  - Reads the output of C(apt-cache policy NAME...) and of
    C(dpkg-query --show --showformat '${Package} ${db:Status-Abbrev} ${Version}\n' NAME...) and decides, for each
    wanted package, the version it must have (the one asked for, or apt's candidate) and whether apt has to run.
  - Used by the gpufleet.node.apt_source helper so that a run with nothing to change never opens apt's cache.
positional: _input, dpkg, packages, hold
options:
  _input:
    description: The output of C(apt-cache policy) for the packages.
    type: str
    required: true
  dpkg:
    description: The output of the C(dpkg-query) call above.
    type: str
    required: true
  packages:
    description: C(NAME) (apt's candidate), C(NAME=VERSION) (exactly that version) or C(NAME=*) (any installed
      version, else the candidate).
    type: list
    elements: str
    required: true
  hold:
    description: Whether the packages should end up held (true) or not (false); None leaves holds out of the plan.
    type: bool
"""

EXAMPLES = r"""
- name: Plan
  ansible.builtin.set_fact:
    plan: "{{ policy.stdout | gpufleet.node.apt_plan(dpkg.stdout, ['libnccl2', 'gnupg=*']) }}"
"""

RETURN = r"""
_value:
  description: C(wanted) (name to version), C(installed) (name to the installed version, None when not installed),
    C(held) (name to whether dpkg holds it), C(reselect) (with I(hold), the names whose hold must be set again,
    those apt installs and those whose hold differs),
    C(install) (C(name=version) items apt must install), C(unresolved) (names apt has no candidate for) and
    C(unavailable) (names whose asked version apt does not offer).
  type: dict
"""

import re

from ansible.errors import AnsibleFilterError

_PACKAGE = re.compile(r"^(\S+):$")
_FIELD = re.compile(r"^\s+(Installed|Candidate):\s*(\S+)")
_VERSION_ROW = re.compile(r"^\s+(?:\*\*\*\s+)?(\S+)\s+(-?\d+)$")


def parse_policy(text):
    """``{name: {"installed", "candidate", "versions"}}`` from ``apt-cache policy NAME...`` (None for (none))."""
    packages, current = {}, None
    for line in text.splitlines():
        header = _PACKAGE.match(line)
        if header:
            current = packages.setdefault(header.group(1), {"installed": None, "candidate": None, "versions": []})
            continue
        if current is None:
            continue
        field = _FIELD.match(line)
        if field:
            current[field.group(1).lower()] = None if field.group(2) == "(none)" else field.group(2)
            continue
        row = _VERSION_ROW.match(line)
        if row:
            current["versions"].append(row.group(1))
    return packages


def parse_dpkg(text):
    """``({name: version}, {name: held})``: the packages dpkg has fully installed (status ``ii``, or ``hi``
    when held), and whether each package dpkg knows is held."""
    installed, held = {}, {}
    for line in text.splitlines():
        fields = line.split()
        if len(fields) >= 2:
            held[fields[0].split(":")[0]] = fields[1].startswith("h")
        if len(fields) == 3 and fields[1][1:2] == "i":
            installed[fields[0].split(":")[0]] = fields[2]
    return installed, held


def apt_plan(policy, dpkg, packages, hold=None):
    if not isinstance(policy, str) or not isinstance(dpkg, str) or not isinstance(packages, list):
        raise AnsibleFilterError("apt_plan expects apt-cache policy text, dpkg-query text and a list of packages")
    known = parse_policy(policy)
    installed, held = parse_dpkg(dpkg)
    plan = {"wanted": {}, "installed": {}, "held": {}, "install": [], "unresolved": [], "unavailable": []}
    for package in packages:
        if not isinstance(package, str) or not package.split("=")[0]:
            raise AnsibleFilterError("apt_plan: packages are NAME, NAME=VERSION or NAME=*, got %r" % (package,))
        name, _sep, asked = package.partition("=")
        entry = known.get(name, {"installed": None, "candidate": None, "versions": []})
        have = installed.get(name)
        plan["installed"][name] = have
        plan["held"][name] = held.get(name, False)
        if asked == "*":
            wanted = have or entry["candidate"]
            if wanted is None:
                plan["unresolved"].append(name)
        elif asked:
            wanted = asked
            if asked != have and asked not in entry["versions"]:
                plan["unavailable"].append(name)
        else:
            wanted = entry["candidate"]
            if wanted is None:
                plan["unresolved"].append(name)
        plan["wanted"][name] = wanted
        if wanted and wanted != have:
            plan["install"].append("%s=%s" % (name, wanted))
    if hold is not None:
        installing = set(item.split("=")[0] for item in plan["install"])
        plan["reselect"] = [name for name in plan["held"] if name in installing or plan["held"][name] != bool(hold)]
    return plan


class FilterModule(object):
    def filters(self):
        return {"apt_plan": apt_plan}
