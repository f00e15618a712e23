# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's reboot decision: whether the node must reboot to run the installed driver.

The filter is documented beside this file, in ``nvidia_driver_reboot_reason.yml``. The driver's package names
per platform are data in the nvidia_driver role's ``vars/`` files, not code.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

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


class FilterModule(object):
    """gpufleet.node driver filters."""

    def filters(self):
        return {
            "nvidia_driver_reboot_reason": nvidia_driver_reboot_reason,
        }
