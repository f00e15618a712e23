#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_plan
short_description: Which versions apt packages must have, and what apt and dpkg must do to get there
version_added: "0.1.0"
description:
  - Works out, for each package asked for, the version it must end up at (under the host's apt preferences),
    compares it with what dpkg has installed, and returns the plan; C(ansible.builtin.apt) and
    C(ansible.builtin.dpkg_selections) then carry it out, and only when there is something to do.
  - Reads only. It runs the same in check mode and never reports a change.
  - With python-apt it reads apt's cache in the module's process (a C(DepCache), so pins in
    C(/etc/apt/preferences) and C(/etc/apt/preferences.d) decide the candidate). Without it, it runs
    C(apt-cache policy NAME...) and
    C(dpkg-query --show --showformat '${binary:Package} ${db:Status-Abbrev} ${Version}\n' NAME...) with the C
    locale, and C(dpkg --print-architecture) when a name carries an architecture.
  - It does not update apt's package lists; when a package is C(missing) on a fresh host, update them
    (C(ansible.builtin.apt) with C(update_cache=true)) and plan again.
author:
  - gpufleet.node maintainers (@gpufleet)
options:
  packages:
    description:
      - The packages and the versions wanted, each one of
      - C(NAME), apt's candidate (the version C(apt-get install NAME) would install under the host's apt
        preferences).
      - C(NAME=VERSION), exactly that version. apt installs a version asked for by number even when the
        host's preferences pin it below 0, so any version a repository offers (or the installed one) will do.
      - C(NAME=*), any installed version; the candidate when the package is not installed.
      - C(NAME=PATTERN), a version matching a pattern with C(*) at its start, its end or both, such as
        C(cuda-drivers-535=535.*) or C(libnccl2=*+cuda12.1). The wanted version is the candidate when the
        candidate matches; otherwise the installed version when it matches; otherwise the newest matching
        version a repository offers whose pin priority is not negative. Patterns match the version text as
        apt prints it (epoch included).
      - C(NAME) may carry an architecture, as in C(libfoo:amd64).
      - Each package may be named once.
    type: list
    elements: str
    required: true
  hold:
    description:
      - C(true), the packages should end up held (dpkg selection C(hold)); C(false), released; C(null),
        holds are left out of the plan (C(hold) and C(release) come back empty).
    type: bool
  backend:
    description:
      - Where the module reads apt's view from. C(python-apt) reads apt's cache through the C(apt_pkg)
        module of python3-apt; C(apt-cache) runs C(apt-cache policy), C(dpkg-query) (and
        C(dpkg --print-architecture) for names with an architecture). C(auto) uses C(python-apt) when
        C(apt_pkg) can be imported by the Python that runs the module, else C(apt-cache).
      - Versions are compared with C(apt_pkg.version_compare) when python3-apt can be imported, else with
        the module's own implementation of dpkg's algorithm.
    type: str
    choices: [auto, python-apt, apt-cache]
    default: auto
  details:
    description:
      - Also return, per package, the description's first line and the dependencies of the wanted version (of
        the candidate where nothing is wanted), from apt's package records (C(apt-cache show) with the
        C(apt-cache) backend). A caller tells a transitional package from them (its summary says so, or it
        depends on another branch's package) before it installs anything.
    type: bool
    default: false
  change:
    description:
      - Also plan the change of an installed, held package set to these packages in one apt transaction (a
        driver update within its branch, a branch or flavour change, a rollback), returned as C(change).
      - C(apt-get -s install) is run against a copy of dpkg's status in which the holds of the set are lifted,
        with the wanted version of every package asked for and C(NAME-) for each of O(change.remove) that is
        installed. The set's packages apt would leave alone but that belong to the old state (a name carrying
        an older version than those installed now, such as C(nvidia-firmware-580-server-580.178.04), or
        matching O(change.obsolete)) are removed in the same transaction; a second simulation checks that it
        removes nothing outside the set.
      - Planned only when no package is C(missing). Reads only, as the rest of the module.
    type: dict
    suboptions:
      sources:
        description: Regular expressions on the source package name (C(${source:Package})) of the set's packages.
        type: list
        elements: str
        default: []
      names:
        description: Names that belong to the set whatever their source (an earlier run's packages).
        type: list
        elements: str
        default: []
      remove:
        description: Packages to remove in the transaction when installed (an earlier flavour's or branch's).
        type: list
        elements: str
        default: []
      obsolete:
        description: Regular expressions on names; an installed package of the set that matches and that the
          transaction does not install is removed (for example the names of other driver branches).
        type: list
        elements: str
        default: []
      version:
        description:
          - The upstream version the set moves to (C(580.178.04)). apt does not downgrade a package on its own to
            satisfy another, so when the first simulation fails (a rollback), the set's other packages are named at
            this version, where apt offers it, and the change is simulated again.
        type: str
  preferences:
    description:
      - An apt preferences file the plan (and the change) is read under, as C(path) and C(content), in place of
        that file in C(/etc/apt/preferences.d); these are the pins a caller is about to write, which check mode does
        not write.
    type: dict
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: The module only reads; it answers the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: debian
    description: Debian, Ubuntu and their derivatives (apt and dpkg).
requirements:
  - apt and dpkg on the managed node
  - python3-apt for the Python that runs the module, with O(backend=python-apt) (optional with the default
    C(auto))
notes:
  - The module does not install python3-apt.
  - A package apt does not know at all is C(missing), like one with no candidate.
seealso:
  - module: ansible.builtin.apt
  - module: ansible.builtin.dpkg_selections
  - name: apt_preferences(5)
    description: How apt picks the candidate version, and what pin priorities mean.
    link: https://manpages.debian.org/bookworm/apt/apt_preferences.5.en.html
"""

EXAMPLES = r"""
- name: Plan the driver branch and NCCL for CUDA 12.1, held
  gpufleet.node.apt_plan:
    packages:
      - cuda-drivers-535=535.*
      - libnccl2=*+cuda12.1
      - gnupg=*
    hold: true
  register: plan

- name: Install what differs from dpkg's versions
  ansible.builtin.apt:
    name: "{{ plan.install }}"
    state: present
    allow_change_held_packages: true
    allow_downgrade: true
  when: plan.install | length > 0

- name: Hold what is not held yet
  ansible.builtin.dpkg_selections:
    name: "{{ item }}"
    selection: hold
  loop: "{{ plan.hold }}"

- name: Stop when apt cannot give a package as asked
  ansible.builtin.assert:
    that: plan.missing | length == 0
    fail_msg: "{{ plan.missing | map('extract', plan.packages) | map(attribute='reason') | join(' ') }}"

- name: An exact version, read with apt-cache even where python3-apt is installed
  gpufleet.node.apt_plan:
    packages: [cuda-toolkit-12-1=12.1.1-1]
    backend: apt-cache
"""

RETURN = r"""
change:
  description: The change planned with O(change); absent without it or when a package is missing.
  returned: when O(change) is given and no package is missing
  type: dict
  contains:
    family:
      description: The set's installed packages before the change, name to version, state and hold.
      type: dict
    moves:
      description: What the transaction does, C(name), C(from) (null for a new package) and C(to) (null for a removal).
      type: list
      elements: dict
    transaction:
      description: apt-get install's arguments, C(NAME=VERSION) for every package it installs and C(NAME-) for
        every package it removes; empty when nothing changes.
      type: list
      elements: str
    after:
      description: The set's packages once the change is made (the family less what it removes, and the new
        packages of the set's source packages); a caller that holds the set holds these.
      type: list
      elements: str
    release:
      description: The held packages whose hold the transaction needs lifted (re-held by the caller after it).
      type: list
      elements: str
    problems:
      description: apt's errors when the change cannot be made (the transaction is then empty).
      type: list
      elements: str
  sample:
    moves: [{name: nvidia-firmware-580-server-580.178.04, from: 580.178.04-0ubuntu0.22.04.1, to: null}]
    transaction: [nvidia-utils-580-server=580.196.07-0ubuntu0.22.04.1, nvidia-firmware-580-server-580.178.04-]
packages:
  description: Per package name (as asked for, without the version), what apt sees and what must happen.
  returned: always
  type: dict
  sample:
    cuda-drivers-535:
      wanted: 535.183.01-1
      installed: 535.161.08-1
      candidate: 535.183.01-1
      held: true
      action: upgrade
      reason: Installed 535.161.08-1 is older than the wanted version 535.183.01-1, apt's candidate, which matches
        535.*. dpkg holds it at 535.161.08-1.
  contains:
    wanted:
      description: The version the package must have; null when the action is C(missing).
      type: str
      sample: 535.183.01-1
    installed:
      description: The version dpkg has installed (status C(ii) or C(hi)); null when not installed (C(rc),
        half-installed and needing a reinstall count as not installed).
      type: str
      sample: 535.161.08-1
    candidate:
      description: apt's candidate under the host's apt preferences; null when apt has none.
      type: str
      sample: 535.183.01-1
    held:
      description: Whether dpkg's selection for the package is C(hold).
      type: bool
      sample: true
    action:
      description: C(keep) (installed at the wanted version), C(install) (not installed), C(upgrade),
        C(downgrade), or C(missing) (apt has no candidate, or no version matching or equal to the one asked).
      type: str
      sample: upgrade
    reason:
      description: A sentence saying why.
      type: str
      sample: Not installed; the wanted version 12.1.1-1 is apt's candidate.
    summary:
      description: With O(details=true), the first line of the description of the wanted version (of the
        candidate where none is wanted); null where apt has no record of it.
      type: str
      returned: with O(details=true)
      sample: NVIDIA headless metapackage (transitional package)
    depends:
      description: With O(details=true), the names in that version's C(Pre-Depends) and C(Depends), every
        alternative, without version constraints.
      type: list
      elements: str
      returned: with O(details=true)
      sample: ["nvidia-headless-580-server"]
install:
  description: C(NAME=VERSION) for each package apt must install (not installed, or at another version), in
    the order asked; ready for C(ansible.builtin.apt)'s O(ansible.builtin.apt#module:name).
  returned: always
  type: list
  elements: str
  sample: ["cuda-drivers-535=535.183.01-1", "cuda-toolkit-12-1=12.1.1-1"]
hold:
  description: With O(hold=true), the names whose dpkg selection must be set to C(hold), those apt installs and
    those installed but not held (missing packages are left out); empty otherwise.
  returned: always
  type: list
  elements: str
  sample: ["cuda-drivers-535", "cuda-toolkit-12-1"]
release:
  description: With O(hold=false), the names dpkg holds, whose selection must go back to C(install); empty
    otherwise.
  returned: always
  type: list
  elements: str
  sample: []
missing:
  description: The names apt cannot give as asked (no candidate, no matching version, not the version asked);
    C(packages[NAME].reason) says which.
  returned: always
  type: list
  elements: str
  sample: ["cuda"]
wanted:
  description: Package name to the version it must have, or null where it is missing.
  returned: always
  type: dict
  sample: {"cuda-drivers-535": "535.183.01-1", "cuda-toolkit-12-1": "12.1.1-1", "cuda": null}
backend:
  description: The backend that read apt's view, C(python-apt) or C(apt-cache).
  returned: always
  type: str
  sample: python-apt
"""

import os
import re
import shutil
import tempfile
import traceback

from ansible.module_utils.basic import AnsibleModule, missing_required_lib
from ansible_collections.gpufleet.node.plugins.module_utils.apt_change import (
    FAMILY_SHOWFORMAT,
    obsolete_packages,
    parse_family,
    parse_simulation,
    parse_sources,
    problem_packages,
    release_holds,
    set_after,
    simulation_problems,
    transaction,
    upstream,
)
from ansible_collections.gpufleet.node.plugins.module_utils.apt import (
    DPKG_SHOWFORMAT,
    DPKG_STATUS_FILE,
    AptPlanError,
    find_package,
    apt_messages,
    parse_dpkg,
    parse_policy,
    parse_show,
    parse_specs,
    plan_packages,
    version_compare,
)

APT_PKG_IMPORT_ERROR = None
try:
    import apt_pkg
except ImportError:
    apt_pkg = None
    APT_PKG_IMPORT_ERROR = traceback.format_exc()

C_LOCALE = {"LC_ALL": "C"}
PREFERENCES_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class SilentProgress(object):
    """Progress sink for apt_pkg.Cache: without one, apt_pkg prints 'Reading package lists...' on stdout,
    into the module's JSON."""

    op = ""
    subop = ""
    major_change = False
    percent = 0.0

    def update(self, percent=None):
        pass

    def done(self):
        pass


def _init_apt_pkg(module):
    """Initialise apt_pkg (configuration and system) once: version_compare and the cache need it."""
    try:
        apt_pkg.init_config()
        apt_pkg.init_system()
    except SystemError as exc:
        module.fail_json(msg="python-apt could not read apt's configuration: %s" % exc)


def apt_pkg_compare(left, right):
    """apt's own comparison of two versions, as -1, 0 or 1."""
    result = apt_pkg.version_compare(left, right)
    return (result > 0) - (result < 0)


def _python_apt_details(records, version):
    """``{"summary", "depends"}`` of one apt_pkg version, from its package record and dependency lists."""
    summary = None
    if version.file_list:
        try:
            records.lookup(version.file_list[0])
            summary = records.short_desc or None
        except (SystemError, IndexError):
            summary = None
    depends = []
    for kind in ("PreDepends", "Depends"):
        for group in version.depends_list.get(kind, []):
            for dependency in group:
                name = dependency.target_pkg.name
                if name not in depends:
                    depends.append(name)
    return {"summary": summary, "depends": depends}


def read_python_apt(names, details=False):
    """``(known, installed, held, arch)`` for names, from apt's cache through apt_pkg (already initialised).

    The DepCache applies apt's preferences to the candidate, as apt-get and apt-cache policy do. With details,
    each entry of known carries ``details`` (version -> summary and depends).
    """
    cache = apt_pkg.Cache(SilentProgress())
    depcache = apt_pkg.DepCache(cache)
    policy = depcache.policy
    records = apt_pkg.PackageRecords(cache) if details else None
    known, installed, held = {}, {}, {}
    for name in names:
        try:
            package = cache[name]
        except KeyError:
            continue  # apt does not know it: apt-cache policy prints nothing for it either
        versions = list(package.version_list)
        candidate = depcache.get_candidate_ver(package)
        current = package.current_ver
        priorities = {}
        for version in versions:
            try:
                priorities[version.ver_str] = int(policy.get_priority(version))
            except (TypeError, ValueError):
                pass  # python-apt older than 1.9 gives priorities of package files only
        known[name] = {
            "installed": current.ver_str if current else None,
            "candidate": candidate.ver_str if candidate else None,
            "versions": [version.ver_str for version in versions],
            "priorities": priorities,
            "downloadable": [version.ver_str for version in versions if version.downloadable],
        }
        if details:
            known[name]["details"] = {version.ver_str: _python_apt_details(records, version) for version in versions}
        held[name] = package.selected_state == apt_pkg.SELSTATE_HOLD
        # dpkg's ii and hi: installed, not needing a reinstall (apt's HoldInst is dpkg's old 'hold' flag).
        if (current and package.current_state == apt_pkg.CURSTATE_INSTALLED
                and package.inst_state not in (apt_pkg.INSTSTATE_REINSTREQ, apt_pkg.INSTSTATE_HOLD_REINSTREQ)):
            installed[name] = current.ver_str
    return known, installed, held, apt_pkg.config.find("APT::Architecture") or None


def unreadable_preferences():
    """The apt preferences files apt_pkg would read but cannot (as a user other than root, with files of mode
    0600). apt-cache warns about them; apt_pkg ignores them silently, and its candidates then lack their pins."""
    paths = []
    main = apt_pkg.config.find_file("Dir::Etc::preferences")
    if main and os.path.exists(main):
        paths.append(main)
    parts = apt_pkg.config.find_dir("Dir::Etc::preferencesparts")
    if parts and os.path.isdir(parts):
        for name in sorted(os.listdir(parts)):
            # apt reads names of letters, digits, '_', '-' and '.' without an extension or ending in .pref.
            if PREFERENCES_NAME.match(name) and ("." not in name or name.endswith(".pref")):
                paths.append(os.path.join(parts, name))
    return [path for path in paths if os.path.isfile(path) and not os.access(path, os.R_OK)]


def _run(module, argv, ok_codes=(0,)):
    """stdout and stderr of argv run with the C locale; fails the module on an exit code not in ok_codes."""
    rc, stdout, stderr = module.run_command(argv, environ_update=C_LOCALE)
    if rc not in ok_codes:
        command = "%s %s" % (argv[0].rsplit("/", 1)[-1], argv[1])
        module.fail_json(msg="%s failed (rc %s): %s" % (command, rc, (stderr or stdout).strip() or "no output"),
                         cmd=argv, rc=rc, stdout=stdout, stderr=stderr)
    return stdout, stderr


def _binary(module, name):
    path = module.get_bin_path(name)
    if not path:
        module.fail_json(msg="%s not found: backend apt-cache needs apt and dpkg (Debian, Ubuntu)" % name)
    return path


def read_apt_cache(module, names, details=False, apt_options=()):
    """``(known, installed, held, arch)`` for names, from apt-cache policy and dpkg-query (C locale); with
    details, apt-cache show adds each version's summary and depends."""
    policy, messages = _run(module, [_binary(module, "apt-cache")] + list(apt_options) + ["policy"] + names)
    # apt exits 0 after a warning such as 'W: Unable to read /etc/apt/preferences.d/...': its answer then
    # lacks what it could not read (pins), which the user must hear of.
    for message in apt_messages(messages):
        module.warn("apt-cache policy: %s" % message)
    # dpkg-query exits 1 when a name is unknown to dpkg: that only means 'not installed'.
    dpkg, _stderr = _run(module, [_binary(module, "dpkg-query"), "--show", "--showformat", DPKG_SHOWFORMAT]
                         + names, ok_codes=(0, 1))
    try:
        known = parse_policy(policy)
        installed, held = parse_dpkg(dpkg)
    except AptPlanError as exc:
        module.fail_json(msg="could not read apt's answer: %s" % exc)
    if details and known:
        # apt-cache show exits 100 when one of the names has no record at all: the others still print.
        shown, _stderr = _run(module, [_binary(module, "apt-cache")] + list(apt_options) + ["show"] + sorted(known),
                              ok_codes=(0, 100))
        try:
            records = parse_show(shown)
        except AptPlanError as exc:
            module.fail_json(msg="could not read apt's answer: %s" % exc)
        for name, entry in known.items():
            entry["details"] = records.get(name.partition(":")[0], {})
    arch = None
    if any(":" in name for name in names):
        arch = _run(module, [_binary(module, "dpkg"), "--print-architecture"])[0].strip() or None
    return known, installed, held, arch


def add_details(plan, known, arch):
    """Adds summary and depends of each package's wanted version (else its candidate) to the plan. (Not of a
    version pins hide: which of several origins' builds a caller would get is decided by its own pins.)"""
    for name, entry in plan["packages"].items():
        key = find_package(known, name, arch)
        records = known[key].get("details", {}) if key is not None else {}
        version = entry["wanted"] or entry["candidate"]
        record = records.get(version, {}) if version else {}
        entry["summary"] = record.get("summary")
        entry["depends"] = record.get("depends", [])


def _simulate(module, scratch, wanted, removals, parts):
    """apt-get -s install of the wanted versions and removals against the scratch status (and the preferences
    directory parts, where given); (plan, problems)."""
    # Its own status file, no lock, and no binary cache written (apt would write the scratch state's cache over
    # the host's /var/cache/apt/pkgcache.bin).
    argv = [_binary(module, "apt-get"), "-s", "-o", "Dir::State::status=%s" % os.path.join(scratch, "status"),
            "-o", "Debug::NoLocking=1", "-o", "Dir::Cache::pkgcache=", "-o", "Dir::Cache::srcpkgcache="]
    if parts:
        argv += ["-o", "Dir::Etc::PreferencesParts=%s" % parts]
    argv += ["install", "--no-install-recommends", "--allow-downgrades", "--allow-change-held-packages"]
    argv += ["%s=%s" % (name, version) for name, version in sorted(wanted.items())] + ["%s-" % name for name in removals]
    rc, stdout, stderr = module.run_command(argv, environ_update=C_LOCALE)
    problems = simulation_problems(stdout + "\n" + stderr)
    if rc != 0 and not problems:
        problems = [(stderr or stdout).strip() or "apt-get -s exited %s" % rc]
    return parse_simulation(stdout), problems


def preferences_overlay(scratch, preferences):
    """A copy of apt's preferences directory in scratch with one file's content replaced (``preferences``:
    ``path`` and ``content``, the pins a caller is about to write); returns its path."""
    parts = os.path.join(scratch, "preferences.d")
    source = apt_pkg.config.find_dir("Dir::Etc::preferencesparts") if apt_pkg else ""
    shutil.copytree(source or "/etc/apt/preferences.d/", parts)
    with open(os.path.join(parts, os.path.basename(preferences["path"])), "w") as handle:
        handle.write(preferences["content"])
    return parts


def plan_change(module, plan, options, parts=None, plan_for=None):
    """The ``change`` result: the set, the moves and the transaction (module_utils/apt_change.py). ``plan_for``
    plans other package specs under the same preferences (the set at the version it moves to)."""
    shown, _stderr = _run(module, [_binary(module, "dpkg-query"), "--show", "--showformat", FAMILY_SHOWFORMAT])
    native = _run(module, [_binary(module, "dpkg"), "--print-architecture"])[0].strip() or None
    try:
        family = parse_family(shown, options["sources"], options["names"], native)
    except ValueError as exc:
        module.fail_json(msg="could not read dpkg's answer: %s" % exc)
    wanted = dict((name.partition(":")[0], version) for name, version in plan["wanted"].items())
    release = sorted(name for name, entry in family.items() if entry["held"])
    removals = sorted(name for name in options["remove"] if name in family and name not in wanted)
    scratch = tempfile.mkdtemp(prefix="gpufleet-apt-change-")
    try:
        with open(DPKG_STATUS_FILE) as handle:
            status = handle.read()
        with open(os.path.join(scratch, "status"), "w") as handle:
            handle.write(release_holds(status, set(release) | set(wanted)))
        first, problems = _simulate(module, scratch, wanted, removals, parts)
        if problems and options.get("version") and plan_for is not None:
            # apt does not downgrade a package on its own to satisfy another: on a rollback the set's other
            # packages are named at the version it moves to, where apt offers it; those apt then names in a
            # conflict (the old flavour's, on a rollback with a flavour change) are left to apt again.
            others = sorted(name for name in family if name not in wanted and name not in removals
                            and not obsolete_packages({name: family[name]}, set(), set(), options["obsolete"]))
            offered = plan_for(["%s=%s-*" % (name, options["version"]) for name in others])["wanted"]
            named = dict((name, version) for name, version in offered.items() if version)
            for _attempt in range(3):
                first, problems = _simulate(module, scratch, dict(named, **wanted), removals, parts)
                conflicting = set(problem_packages(problems)) & set(named)
                if not problems or not conflicting:
                    break
                named = dict((name, version) for name, version in named.items() if name not in conflicting)
            wanted = dict(named, **wanted)
        if problems:
            return {"family": family, "moves": [], "transaction": [], "release": release, "after": sorted(family),
                    "problems": problems}
        touched = set(first["install"]) | set(first["remove"]) | set(removals) | set(wanted)
        keep = set(upstream(version) for version in wanted.values()) | set(
            upstream(entry["to"]) for entry in first["install"].values())
        obsolete = obsolete_packages(family, touched, keep, options["obsolete"])
        final, problems = _simulate(module, scratch, wanted, sorted(set(removals) | set(obsolete)), parts)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    outside = sorted(name for name in final["remove"] if name not in family)
    if outside and not problems:
        problems = ["The change would also remove %s, which %s not part of the driver's packages: nothing is "
                    "changed; remove %s yourself if that is meant." % (
                        ", ".join(outside), "is" if len(outside) == 1 else "are", "it" if len(outside) == 1 else "them")]
    if problems:
        return {"family": family, "moves": [], "transaction": [], "release": release, "after": sorted(family),
                "problems": problems}
    added = sorted("%s=%s" % (name, entry["to"]) for name, entry in final["install"].items() if name not in family)
    shown = _run(module, [_binary(module, "apt-cache"), "show"] + added, ok_codes=(0, 100))[0] if added else ""
    after = set_after(family, final, parse_sources(shown), options["sources"])
    moves = [{"name": name, "from": entry["from"], "to": entry["to"]} for name, entry in sorted(final["install"].items())]
    moves += [{"name": name, "from": version, "to": None} for name, version in sorted(final["remove"].items())]
    changing = final["install"] or final["remove"]
    return {"family": family, "moves": moves, "transaction": transaction(wanted, final, family) if changing else [],
            "release": [name for name in release if changing], "after": after, "problems": []}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            packages=dict(type="list", elements="str", required=True),
            hold=dict(type="bool"),
            backend=dict(type="str", default="auto", choices=["auto", "python-apt", "apt-cache"]),
            details=dict(type="bool", default=False),
            change=dict(type="dict", options=dict(
                sources=dict(type="list", elements="str", default=[]),
                names=dict(type="list", elements="str", default=[]),
                remove=dict(type="list", elements="str", default=[]),
                obsolete=dict(type="list", elements="str", default=[]),
                version=dict(type="str"),
            )),
            preferences=dict(type="dict", no_log=False),
        ),
        supports_check_mode=True,
    )
    try:
        names = [name for name, _kind, _value in parse_specs(module.params["packages"])]
    except AptPlanError as exc:
        module.fail_json(msg=str(exc))

    backend = module.params["backend"]
    if backend == "auto":
        backend = "python-apt" if apt_pkg is not None else "apt-cache"
    if backend == "python-apt" and apt_pkg is None:
        module.fail_json(msg=missing_required_lib("python3-apt (the apt_pkg module)") +
                         " Or use backend=apt-cache.", exception=APT_PKG_IMPORT_ERROR)
    compare = version_compare
    if apt_pkg is not None:
        _init_apt_pkg(module)
        compare = apt_pkg_compare

    # Pins the caller is about to write (preferences): the candidates and the change are read under them.
    change, preferences = module.params["change"], module.params["preferences"]
    overlay = tempfile.mkdtemp(prefix="gpufleet-apt-plan-") if preferences else None
    try:
        parts = preferences_overlay(overlay, preferences) if overlay else None
        plan = _plan(module, names, backend, compare, parts, module.params["packages"], module.params["details"])
        if change is not None and not plan["missing"]:
            def plan_for(specs):
                return _plan(module, [spec.partition("=")[0] for spec in specs], backend, compare, parts, specs, False)
            plan["change"] = plan_change(module, plan, change, parts, plan_for)
    finally:
        if overlay:
            shutil.rmtree(overlay, ignore_errors=True)
    module.exit_json(changed=False, backend=backend, **plan)


def _plan(module, names, backend, compare, parts, packages, details):
    """The plan of packages (specs; names: their names), with details when asked, read under the preferences in
    parts."""
    known, installed, held, arch = {}, {}, {}, None
    if parts and backend == "python-apt":
        apt_pkg.config.set("Dir::Etc::PreferencesParts", parts)
    if names and backend == "python-apt":
        try:
            known, installed, held, arch = read_python_apt(names, details)
        except SystemError as exc:
            module.fail_json(msg="python-apt could not open apt's cache: %s" % exc)
        for path in unreadable_preferences():
            module.warn("python-apt: cannot read %s: its pins are left out of the candidates (run the module "
                        "as root, with become)" % path)
    elif names:
        known, installed, held, arch = read_apt_cache(module, names, details,
                                                      ["-o", "Dir::Etc::PreferencesParts=%s" % parts] if parts else [])

    try:
        plan = plan_packages(known, installed, held, packages, module.params["hold"], compare=compare, arch=arch)
    except AptPlanError as exc:
        module.fail_json(msg=str(exc))
    if details:
        add_details(plan, known, arch)
    return plan


if __name__ == "__main__":
    main()
