# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The files apt-get could not download, and what the plan meant to do with their packages.

The filter is documented beside this file, in ``apt_fetch_failures.yml``; the parser of apt-get's output is
``module_utils.apt_fetch``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.module_utils.apt_fetch import parse_fetch_failures

# What a plan entry (gpufleet.node.apt_plan's packages[NAME]) adds to a failure.
PLAN_FIELDS = ("action", "installed")


def _output(value):
    """The text to read: a string, or the stdout and stderr of a registered command result."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        parts = [value.get(key) for key in ("stdout", "stderr")]
        return "\n".join(part for part in parts if isinstance(part, str))
    raise AnsibleFilterError("apt_fetch_failures expects apt-get's output or a registered command result, not %s"
                             % type(value).__name__)


def _epoch_of(version, wanted):
    """The plan's version where it is the file's version with an epoch the pool file name left out."""
    if isinstance(wanted, str) and isinstance(version, str) and ":" in wanted and ":" not in version \
            and wanted.split(":", 1)[1] == version:
        return wanted
    return version


def apt_fetch_failures(output, packages=None):
    """The files apt-get could not download (``module_utils.apt_fetch.parse_fetch_failures``), each with
    ``action`` and ``installed`` from ``packages`` (apt_plan's ``packages``) where the plan names the package (None
    for a dependency apt added), and the plan's epoch where the file name left it out."""
    if packages is not None and not isinstance(packages, dict):
        raise AnsibleFilterError("apt_fetch_failures: packages must be the packages dict of a gpufleet.node.apt_plan "
                                 "result")
    failures = parse_fetch_failures(_output(output))
    for failure in failures:
        entry = (packages or {}).get(failure["package"]) if failure["package"] else None
        entry = entry if isinstance(entry, dict) else {}
        for field in PLAN_FIELDS:
            failure[field] = entry.get(field)
        failure["version"] = _epoch_of(failure["version"], entry.get("wanted"))
    return failures


class FilterModule(object):
    """gpufleet.node apt download filters."""

    def filters(self):
        return {
            "apt_fetch_failures": apt_fetch_failures,
        }
