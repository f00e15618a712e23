# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's decisions: the nvidia_driver role's plan (``nvidia_driver_plan``: which GPUs take which
kernel modules, fabric manager and NVLSM, the packages and pins, what an earlier run left, whether the driver is
ready, changed, and needs a reboot), whether the apt preferences in place are this choice's
(``nvidia_driver_preferences_differ``), whether the node must reboot to run the installed driver
(``nvidia_driver_reboot_reason``), and which packages apt offers only as transitional packages of a retired branch
(``nvidia_driver_transitional``).

The filters are documented beside this file, one ``<name>.yml`` each. The driver's package names per platform,
the GPUs' device ids and the branches' lifecycle are data in the nvidia_driver role's ``vars/`` files, not code;
the evidence the role registers is read by ``module_utils/nvidia_driver_plan.py``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import datetime
import re

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.apt_sources import apt_source_components
from ansible_collections.gpufleet.node.plugins.module_utils import nvidia_driver_plan as readers

# gpu_facts states in which the running kernel module cannot serve the installed libraries.
REBOOT_STATES = ("driver_library_mismatch",)


def nvidia_driver_reboot_reason(gpu, installed_version, in_container=False):
    """Why the node must reboot to run the installed driver, or '' when it need not.

    ``gpu`` is ``ansible_facts.gpu`` from gpu_facts after the install; ``installed_version`` the driver's
    package version (``535.183.01-1``, ``535.183.01-0ubuntu0.22.04.1``). A container cannot load modules, so
    it never needs a reboot for them.
    """
    if not isinstance(gpu, dict):
        raise AnsibleFilterError("nvidia_driver_reboot_reason expects the gpu facts of gpufleet.node.gpu_facts")
    if in_container:
        return ""
    upstream = str(installed_version).split("-", maxsplit=1)[0]
    loaded = gpu.get("loaded_module_version")
    if gpu.get("state") in REBOOT_STATES:
        return "nvidia-smi reports %s (%s)" % (gpu.get("state"), gpu.get("message"))
    if not loaded:
        return "no NVIDIA kernel module is loaded; driver %s is installed" % upstream
    if loaded != upstream:
        return "the loaded kernel module is %s, the installed driver %s" % (loaded, upstream)
    return ""


# Canonical's and Debian's descriptions: "NVIDIA headless metapackage (transitional package)",
# "Transitional package for nvidia-fabricmanager-dev-510", "... (transitional dummy package)".
TRANSITIONAL_SUMMARY = re.compile(r"\btransitional\b", re.IGNORECASE)


def nvidia_driver_transitional(packages, other_branches):
    """The packages of an apt_plan result (with details) that are transitional packages, with the reason.

    ``packages`` is ``apt_plan``'s ``packages`` (name -> wanted, candidate, summary, depends);
    ``other_branches`` the names of other branches' packages. A package is transitional when its summary says
    so, or when it depends on another branch's package: Ubuntu's 570 fabric manager depends on the 580 one
    without saying so. Returns a list of ``{name, version, reason}`` in name order; a package without records
    (missing, or apt_plan run without details) is never reported.
    """
    if not isinstance(packages, dict):
        raise AnsibleFilterError("nvidia_driver_transitional expects the packages of a gpufleet.node.apt_plan result")
    other = set(other_branches or [])
    found = []
    for name in sorted(packages):
        entry = packages[name] or {}
        summary, depends = entry.get("summary"), entry.get("depends") or []
        version = entry.get("wanted") or entry.get("candidate")
        successors = [dep for dep in depends if dep in other]
        if summary and TRANSITIONAL_SUMMARY.search(summary):
            reason = "its description says %r" % summary
            if successors:
                reason += " and it depends on %s" % ", ".join(successors)
        elif successors:
            reason = "it depends on %s, of another branch" % ", ".join(successors)
        else:
            continue
        found.append({"name": name, "version": version, "reason": reason})
    return found


# --- The plan --------------------------------------------------------------------------------------------------
# Each function below takes plain values (the settings, the platform data of vars/, what the evidence readers of
# module_utils/nvidia_driver_plan.py return) and decides one thing; nvidia_driver_plan assembles them.

# The settings the plan reads (nvidia_driver_<name>).
SETTINGS = ("source", "branch", "version", "flavour", "kernel_modules", "kernel_flavour", "fabricmanager", "verify")
# The platform data and the host's facts the plan reads.
PLATFORM = ("source", "pinning", "lifecycle", "gpu_table", "family_sources")
HOST = ("kernel", "distribution", "release", "gpu", "container", "check_mode", "reboot_required", "month")
# The GPU table: the evidence's platform.gpu_table, from the data of vars/main.yml (__nvidia_driver_open_only_ids...).
GPU_TABLE = ("open_only_ids", "open_lowest_id", "open_unclassified_from", "open_only_architectures",
             "open_only_names", "proprietary_only_architectures", "nvswitch_gen4_ids", "switch_tray_ids",
             "switch_tray_names")
# An end of life the controller's clock can pass ("June 2026"); other words ("none published") never pass.
_MONTH_YEAR = re.compile(r"^[A-Z][a-z]+ [0-9]{4}$")


def _unique(items):
    seen, found = set(), []
    for item in items:
        if item not in seen:
            seen.add(item)
            found.append(item)
    return found


def _flatten(items):
    found = []
    for item in items:
        if isinstance(item, (list, tuple)):
            found.extend(_flatten(item))
        elif item is not None:
            found.append(item)
    return found


def _int(value):
    try:
        return int(value)
    except (TypeError, ValueError):
        try:
            return int(float(value))
        except (TypeError, ValueError):
            return 0


def _pci_label(device):
    """'PCI device 10de:1db1' for 0x1db1: a GPU the messages can only name by its id."""
    return re.sub(r"^0x", "PCI device 10de:", device)


def gpu_list(gpus):
    """'0000:17:00.0 (NVIDIA B200), 0000:18:00.0 (NVIDIA B200)' of ``{address: name}``, for the messages."""
    return ", ".join("%s (%s)" % (address, name) for address, name in gpus.items())


def branch_lifecycle(lifecycle, branch, month):
    """``(end_of_life, ended)``: the branch's end of life as the lifecycle table words it ('' where the table has
    none), and whether it has passed in ``month`` ('2026-12'): 'ended', or a month and year before ``month``."""
    end_of_life = str((lifecycle.get(branch) or {}).get("end_of_life", ""))
    if end_of_life == "ended":
        return end_of_life, True
    if not _MONTH_YEAR.match(end_of_life):
        return end_of_life, False
    try:
        last = datetime.datetime.strptime(end_of_life, "%B %Y").strftime("%Y-%m")
    except ValueError:
        raise AnsibleFilterError("the lifecycle of branch %s gives end of life %r, which is not a month and a year"
                                 % (branch, end_of_life)) from None
    return end_of_life, last < month


def classify_gpus(pci, devices, table):
    """``{open_only, pre_turing, unclassified}``, each ``{address: name}``: the GPUs that require the open kernel
    modules, those that cannot run them, and those whose architecture the role cannot tell.

    ``pci`` is ``{address: device id}`` from the PCI scan (known before any driver), ``devices`` gpu_facts'
    ``[(address, name, architecture)]`` (where a driver answers). By device id: the table's open-only ids, ids
    below the open modules' lowest, and ids from ``open_unclassified_from`` up that the table does not name. By
    the driver's answer: an open-only architecture or name, a proprietary-only architecture; and a GPU whose
    architecture the driver names is never unclassified.
    """
    open_only_ids = table["open_only_ids"]
    open_only = dict((address, open_only_ids[device]) for address, device in pci.items() if device in open_only_ids)
    open_only.update((address, name) for address, name, architecture in devices
                     if architecture in table["open_only_architectures"])
    open_only.update((address, name) for address, name, _architecture in devices
                     if re.search(table["open_only_names"], name))
    pre_turing = dict((address, _pci_label(device)) for address, device in pci.items()
                      if device < table["open_lowest_id"])
    pre_turing.update((address, name) for address, name, architecture in devices
                      if architecture in table["proprietary_only_architectures"])
    answered = set(address for address, _name, architecture in devices if architecture)
    unclassified = dict((address, _pci_label(device)) for address, device in pci.items()
                        if device >= table["open_unclassified_from"] and device not in open_only_ids
                        and address not in answered)
    return {"open_only": open_only, "pre_turing": pre_turing, "unclassified": unclassified}


def kernel_modules(setting, flavour, open_only):
    """'open' or 'proprietary': the setting where it says, the open flavour's own, else (auto) open where a GPU
    requires them and proprietary elsewhere."""
    if setting == "open" or flavour == "open":
        return "open"
    if setting == "proprietary":
        return "proprietary"
    return "open" if open_only else "proprietary"


def fabric(setting, gpu, pci, devices, table):
    """``{switch_trays, nvswitch_gen4, fabricmanager, nvlsm}``.

    A Grace Blackwell compute tray (every GPU a GB200/GB300 by device id, or by name where the bus told nothing)
    with no NVSwitch on the PCI bus runs neither fabric manager nor NVLSM. 4th-generation NVSwitches (no PCI
    function) are told by an HGX B200/B300 GPU's device id, or by an NVSwitch fabric the GPUs report off a
    compute tray. Fabric manager: always, never, or (auto) off a compute tray where there is a fabric or a 4th
    generation; NVLSM with fabric manager on the 4th generation.
    """
    gpu = gpu if isinstance(gpu, dict) else {}
    nvswitches = _int((gpu.get("pci") or {}).get("nvswitches") or 0)
    fabric_seen = bool((gpu.get("topology") or {}).get("nvswitch", False))
    names = [name for _address, name, _architecture in devices]
    switch_trays = nvswitches == 0 and bool(
        (pci and all(device in table["switch_tray_ids"] for device in pci.values()))
        or (not pci and names and all(re.search(table["switch_tray_names"], name) for name in names)))
    nvswitch_gen4 = nvswitches == 0 and (any(device in table["nvswitch_gen4_ids"] for device in pci.values())
                                         or (fabric_seen and not switch_trays))
    fabricmanager = setting == "always" or (setting == "auto" and not switch_trays and (fabric_seen or nvswitch_gen4))
    return {"switch_trays": switch_trays, "nvswitch_gen4": nvswitch_gen4, "fabricmanager": fabricmanager,
            "nvlsm": fabricmanager and nvswitch_gen4}


def _other_branch(name, branch):
    """The name with its (last) {branch} set to ``branch``."""
    head, _sep, tail = name.rpartition("{branch}")
    return head + branch + tail


def package_choice(source, settings, kernel, pinning, modules, fabricmanager):
    """The packages of the choice, from the source's platform data (``__nvidia_driver_sources[<source>]``).

    ``open_variants``: flavour to the names it installs with the open modules (the open flavour's for server and
    open, then the source's own). ``packages``: the flavour's names (its open variant with open modules), with
    {branch}, {kernel} and {pinning} filled in; ``main`` the package whose version is the driver's;
    ``fabricmanager_packages``; ``install``: the packages, and fabric manager's where it is needed. ``pin``: what
    apt pins to the branch (at 1001). ``forbid``: every branch-named package for each other branch the source
    offers, and its unversioned names, sorted (priority -1). ``version_glob`` and ``resolve``: the main package at
    the version asked (or the newest of the branch), then the rest at apt's candidate.
    """
    branch, version, flavour = settings["branch"], settings["version"], settings["flavour"]
    flavours = source.get("flavours") or {}
    source_variants = source.get("open_variants") or {}
    open_variants = {"server": flavours["open"], "open": flavours["open"]} if "open" in flavours else {}
    open_variants.update(source_variants)
    names = (open_variants if modules == "open" else flavours).get(flavour) or []
    packages = [name.replace("{branch}", branch).replace("{kernel}", kernel).replace("{pinning}", pinning)
                for name in names]
    main = str(source.get("main") or "").replace("{branch}", branch)
    fabricmanager_packages = [name.replace("{branch}", branch) for name in source.get("fabricmanager") or []]
    install = packages + (fabricmanager_packages if fabricmanager else [])
    pinned_with = list(source.get("pinned_with") or [])
    pin = _unique(packages + fabricmanager_packages + [name.replace("{branch}", branch) for name in pinned_with])
    branch_named = _unique(name.replace("{kernel}", kernel)
                           for name in _flatten(list(flavours.values()) + list(source_variants.values())
                                                + list(source.get("fabricmanager") or []) + pinned_with)
                           if "{branch}" in name)
    others = [other for other in source.get("branches") or [] if other != branch]
    forbid = list(source.get("unversioned") or []) + sorted(
        (_other_branch(name, other) for other in others for name in branch_named), key=lambda name: name.lower())
    version_glob = (version + "-*") if version else (branch + ".*")
    return {"open_variants": open_variants, "packages": packages, "main": main,
            "fabricmanager_packages": fabricmanager_packages, "install": install, "pin": pin, "forbid": forbid,
            "version_glob": version_glob,
            "resolve": [main + "=" + version_glob] + [name for name in install if name != main]}


def module_errors(settings, distribution, gpus, lists, modules, open_variants):
    """Why the GPUs cannot run the kernel modules chosen, one sentence each (preflight fails with them): open-only
    GPUs (Grace Hopper, Blackwell) with the proprietary modules, GPUs before Turing with the open ones, and open
    modules from a flavour whose source has none."""
    errors = []
    if modules == "proprietary" and gpus["open_only"]:
        errors.append('These GPUs require the open GPU kernel modules (NVIDIA: "you must use the open-source GPU kernel '
                      'modules" on Grace Hopper and Blackwell; the proprietary driver does not support them): %s. Set '
                      "nvidia_driver_kernel_modules: auto or open (not proprietary)." % lists["open_only"])
    if modules == "open" and gpus["pre_turing"]:
        errors.append("The open GPU kernel modules support Turing and later GPUs only; these are older (Maxwell, "
                      "Pascal or Volta): %s. Use nvidia_driver_flavour server, desktop or signed with "
                      "nvidia_driver_kernel_modules: auto or proprietary." % lists["pre_turing"])
    if modules == "open" and settings["flavour"] not in open_variants:
        why = ("the GPUs require them: " + lists["open_only"]) if gpus["open_only"] \
            else "nvidia_driver_kernel_modules: open"
        errors.append("Source %s offers no open kernel modules for flavour %s on %s (%s); choose %s."
                      % (settings["source"], settings["flavour"], distribution, why, " or ".join(sorted(open_variants))))
    return errors


def installed_state(resolution, previous, settings, main):
    """``{resolved_here, ready, version}``: whether this run resolved the driver (apt_plan ran for this choice and
    was not skipped), whether the choice is installable (nothing missing) or, where the install part did not run (tags),
    recorded by an earlier run with the same source and branch; and the driver's version (apt's wanted version of
    the main package, else the earlier run's)."""
    # A resolution that does not name this choice's main package is an earlier include's of the role in the same
    # play (registered results outlive the include; the plan is rendered before this run resolves): not this run's.
    resolved_here = resolution is not None and not readers.skipped(resolution) \
        and main in (resolution.get("packages") or {})
    if resolved_here:
        ready = resolution.get("missing") == []
    else:
        ready = (previous.get("source", "") == settings["source"] and previous.get("branch", "") == settings["branch"])
    if resolved_here and ready:
        wanted = resolution.get("wanted") or {}
        if main not in wanted:
            raise AnsibleFilterError("apt_plan resolved nothing missing but gives no version for %s" % main)
        version = wanted[main]
    else:
        version = previous.get("version", "")
    return {"resolved_here": resolved_here, "ready": ready, "version": version or ""}


def driver_changed(state, pkg_plan, record_written):
    """Whether this run changed the driver's packages (apt's transaction, or what it installed, was not empty) or
    its record: then the GPU state is read again before the reboot decision."""
    if not (state["resolved_here"] and state["ready"]):
        return False
    pkg_plan = pkg_plan if isinstance(pkg_plan, dict) else {}
    change = pkg_plan.get("change")
    if isinstance(change, dict) and "transaction" in change:
        moved = change["transaction"] or []
    else:
        moved = pkg_plan.get("install") or []
    return len(moved) > 0 or readers.changed(record_written)


def leftovers(previous, install, records):
    """The earlier choice's top packages that this one neither installs nor depends on (removed in the change's
    transaction: apt does not remove a package once asked for by name on its own)."""
    depends = set(_flatten((record or {}).get("depends") or [] for record in records.values()))
    return [name for name in _unique(previous.get("packages") or []) if name not in install and name not in depends]


def change_set(previous, previous_held, remove, version, forbid, settings, lifecycle, family_sources):
    """What gpufleet.node._pkg's change entry point moves (apt_plan's option change): the driver's source package
    families, what an earlier run installed or held, the leftovers to remove, the release the set moves to (the
    upstream version: the dependencies the pins do not name follow it), and the names of other branches (those the
    pins forbid, and any name carrying another branch the role knows as a word of its own, not after a version:
    nvidia-kernel-source-580-server once 595 is chosen, not the 204 of linux-modules-nvidia-580-server-5.15.0-204)."""
    others = "|".join(branch for branch in lifecycle if branch != settings["branch"])
    return {"sources": list(family_sources),
            "names": _unique(list(previous_held) + list(previous.get("packages") or [])),
            "remove": remove,
            "version": re.sub(r"-[^-]*$", "", re.sub(r"^[0-9]+:", "", version)),
            "obsolete": ["^%s$" % re.escape(name) for name in forbid] + [r"(^|(?<![0-9.])-)(%s)(-|$)" % others]}


def persistenced(fragment, packaged):
    """``{path, text, exec, needs_dropin, static}`` of the persistence daemon's packaged unit: a drop-in is needed
    where the package runs it without persistence mode or stops it when unneeded; a unit without [Install] is
    static (enabled through multi-user.target's wants)."""
    text = readers.slurped_text(packaged)
    command = readers.unit_exec(text)
    return {"path": readers.unit_path(fragment), "text": text, "exec": command,
            "needs_dropin": "--no-persistence-mode" in command or readers.unit_stops_when_unneeded(text),
            "static": text != "" and not readers.unit_installable(text)}


def archive_entries(archive_files, release, components):
    """How many entries for the release (with main) the archive's source files have (slurp results of a loop)."""
    results = (archive_files if isinstance(archive_files, dict) else {}).get("results") or []
    return sum(apt_source_components(readers.slurped_text(result), release, components)["entries"]
               for result in results if isinstance(result, dict) and "content" in result)


def _part(value, name, keys=()):
    if not isinstance(value, dict):
        raise AnsibleFilterError("nvidia_driver_plan expects the evidence's %s as a dict" % name)
    missing = [key for key in keys if key not in value]
    if missing:
        raise AnsibleFilterError("nvidia_driver_plan: the evidence's %s lacks %s" % (name, ", ".join(missing)))
    return value


def nvidia_driver_plan(evidence):
    """The nvidia_driver role's plan from the evidence known when it is read (a registered result not there yet is
    None): ``settings``, ``platform``, ``host`` and ``results`` (the sidecar nvidia_driver_plan.yml lists each key
    it reads and returns)."""
    _part(evidence, "whole")
    settings = _part(evidence.get("settings"), "settings", SETTINGS)
    platform = _part(evidence.get("platform"), "platform", PLATFORM)
    host = _part(evidence.get("host"), "host", HOST)
    results = _part(evidence.get("results") or {}, "results")
    table = _part(platform["gpu_table"], "platform.gpu_table", GPU_TABLE)
    source = platform["source"] if isinstance(platform["source"], dict) else {}
    gpu = host["gpu"] if isinstance(host["gpu"], dict) else None
    container = bool(host["container"])
    try:
        previous = readers.read_record(results.get("record"))
    except ValueError as error:
        raise AnsibleFilterError("the record of an earlier run cannot be read: %s" % error) from error

    plan = {"kernel": settings["kernel_flavour"] or host["kernel"]}
    plan["branch_end_of_life"], plan["branch_ended"] = branch_lifecycle(platform["lifecycle"], settings["branch"],
                                                                        host["month"])
    # The GPUs: by PCI device id before any driver, by gpu_facts where the driver answers.
    pci = readers.pci_gpus((results.get("pci_scan") or {}).get("stdout_lines"))
    devices = readers.fact_gpus(gpu)
    gpus = classify_gpus(pci, devices, table)
    plan.update(pci_gpus=pci, open_only_gpus=gpus["open_only"], pre_turing_gpus=gpus["pre_turing"],
                unclassified_gpus=gpus["unclassified"],
                gpu_list=dict((kind, gpu_list(found)) for kind, found in gpus.items()),
                kernel_modules=kernel_modules(settings["kernel_modules"], settings["flavour"], gpus["open_only"]))
    plan.update(fabric(settings["fabricmanager"], gpu, pci, devices, table))
    # The packages and pins.
    plan.update(package_choice(source, settings, plan["kernel"], str(platform["pinning"] or ""),
                               plan["kernel_modules"], plan["fabricmanager"]))
    plan["module_errors"] = module_errors(settings, host["distribution"], gpus, plan["gpu_list"],
                                          plan["kernel_modules"], plan["open_variants"])
    resolution = results.get("resolution") if isinstance(results.get("resolution"), dict) else None
    records = (resolution or {}).get("packages") or {}
    plan["archive_entries"] = archive_entries(results.get("archive_files"), host["release"],
                                              source.get("components") or [])
    plan["transitional"] = nvidia_driver_transitional(records, plan["forbid"])
    # What an earlier run left, and what this one does about it.
    previous_held = previous["held"] if "held" in previous else previous.get("packages", [])
    plan.update(previous=previous, previous_held=list(previous_held or []),
                half_installed=readers.half_installed((results.get("dpkg_states") or {}).get("stdout_lines")))
    plan["leftovers"] = leftovers(previous, plan["install"], records)
    state = installed_state(resolution, previous, settings, plan["main"])
    plan.update(state)
    plan["change"] = change_set(previous, plan["previous_held"], plan["leftovers"], state["version"],
                                plan["forbid"], settings, platform["lifecycle"], platform["family_sources"])
    plan["changed"] = driver_changed(state, results.get("pkg_plan"), results.get("record_written"))
    branch_packages = list(((results.get("branch_packages") or {}).get("packages") or {}).items())
    # apt_plan's installed is null for a package dpkg does not have installed.
    plan["branch_installed"] = [name for name, entry in branch_packages
                                if not isinstance(entry, dict) or entry.get("installed", True) is not None]
    plan["branch_held"] = [name for name, entry in branch_packages if isinstance(entry, dict) and entry.get("held")]
    # After the install: the GPUs' state (read again when the driver changed), the services, verify.
    plan["reboot_reason"] = (nvidia_driver_reboot_reason(gpu, state["version"], container)
                             if gpu is not None and state["ready"] and state["version"] else "")
    plan["persistenced"] = persistenced(results.get("persistenced_fragment"), results.get("persistenced_packaged"))
    plan["verify"] = bool(not host["check_mode"] and state["ready"]
                          and (settings["verify"] == "always"
                               or (settings["verify"] == "auto" and not container and not host["reboot_required"])))
    return plan


def nvidia_driver_preferences_differ(current, wanted):
    """Whether the apt preferences in place (the slurp result of the file, None or a failed slurp where there is
    none) are not ``wanted`` (the text the role writes), comment lines aside."""
    if not isinstance(wanted, str):
        raise AnsibleFilterError("nvidia_driver_preferences_differ expects the text of the preferences wanted")

    def lines(text):
        return [line for line in text.splitlines() if not line.startswith("#")]

    return lines(readers.slurped_text(current)) != lines(wanted)


class FilterModule(object):
    """gpufleet.node driver filters."""

    def filters(self):
        return {
            "nvidia_driver_plan": nvidia_driver_plan,
            "nvidia_driver_preferences_differ": nvidia_driver_preferences_differ,
            "nvidia_driver_reboot_reason": nvidia_driver_reboot_reason,
            "nvidia_driver_transitional": nvidia_driver_transitional,
        }
