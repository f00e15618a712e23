# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's decisions: whether the node must reboot to run the installed driver, and which packages
apt offers only as transitional packages of a retired branch.

The filters are documented beside this file, in ``nvidia_driver_reboot_reason.yml`` and
``nvidia_driver_transitional.yml``. The driver's package names
per platform are data in the nvidia_driver role's ``vars/`` files, not code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

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


class FilterModule(object):
    """gpufleet.node driver filters."""

    def filters(self):
        return {
            "nvidia_driver_reboot_reason": nvidia_driver_reboot_reason,
            "nvidia_driver_transitional": nvidia_driver_transitional,
        }
