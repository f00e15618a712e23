# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver packages to install for a source, flavour, branch and platform (one place for it)."""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
name: nvidia_driver_packages
author: gpufleet.node maintainers (@gpufleet)
version_added: "0.1.0"
short_description: NVIDIA driver packages for a source, flavour, branch and platform
description:
  - Returns the driver packages, the fabric manager packages and the apt pin pattern that
    gpufleet.node.nvidia_driver installs for the given choice, or raises an error naming what is not
    available (for example the PPA on Debian).
positional: _input, flavour, branch, distribution, major_version, kernel_flavour
options:
  _input:
    description: The source, C(distro), C(ppa) or C(cuda_repo).
    type: str
    required: true
  flavour:
    description: C(server), C(desktop), C(open) or C(signed).
    type: str
    required: true
  branch:
    description: Driver branch, for example C(535).
    type: str
    required: true
  distribution:
    description: C(ansible_facts.distribution), C(Debian) or C(Ubuntu).
    type: str
    required: true
  major_version:
    description: C(ansible_facts.distribution_major_version).
    type: str
    required: true
  kernel_flavour:
    description: Kernel flavour for precompiled modules (C(generic), C(aws), ...).
    type: str
    default: generic
"""

EXAMPLES = r"""
- name: What the role would install on Ubuntu 22.04, datacenter flavour
  ansible.builtin.debug:
    msg: "{{ 'distro' | gpufleet.node.nvidia_driver_packages('server', '535', 'Ubuntu', '22') }}"
"""

RETURN = r"""
_value:
  description: C(packages) (the driver), C(fabricmanager) (fabric manager and NSCQ, for NVSwitch systems),
    C(main) (the package whose version is the driver's), C(pin) (the names pinned to the branch) and C(forbid)
    (the names of other branches' packages, and the unversioned metapackage, that apt must never install).
  type: dict
"""

from ansible.errors import AnsibleFilterError

REBOOT_STATES = ("driver_library_mismatch",)

# Package names by source and platform family; "{b}" is the branch, "{k}" the kernel flavour.
UBUNTU_DISTRO = {
    "server": ["nvidia-headless-{b}-server", "nvidia-utils-{b}-server"],
    "desktop": ["nvidia-driver-{b}"],
    "open": ["nvidia-headless-{b}-server-open", "nvidia-utils-{b}-server"],
    "signed": ["linux-modules-nvidia-{b}-server-{k}", "nvidia-headless-no-dkms-{b}-server", "nvidia-utils-{b}-server"],
}
UBUNTU_PPA = {
    "server": ["nvidia-headless-{b}", "nvidia-utils-{b}"],
    "desktop": ["nvidia-driver-{b}"],
    "open": ["nvidia-headless-{b}-open", "nvidia-utils-{b}"],
}
DEBIAN_DISTRO = {
    # The headless compute set: kernel module (DKMS), nvidia-smi, the CUDA and NVML libraries, persistence.
    "server": ["nvidia-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"],
    "open": ["nvidia-open-kernel-dkms", "nvidia-smi", "libcuda1", "libnvidia-ml1", "nvidia-persistenced"],
}
CUDA_REPO = {
    "server": ["cuda-drivers-{b}"],
    "open": ["nvidia-kernel-open-{b}", "cuda-drivers-{b}"],
}
FABRICMANAGER = {
    "ubuntu_distro": ["nvidia-fabricmanager-{b}", "libnvidia-nscq-{b}"],
    "cuda_repo": ["nvidia-fabricmanager-{b}", "libnvidia-nscq-{b}"],
}
SUPPORTED = {("Debian", "12"), ("Ubuntu", "20"), ("Ubuntu", "22")}
# Debian names its driver packages without the branch; these come with the driver at the same version.
DEBIAN_SUPPORT = ["nvidia-kernel-support", "nvidia-alternative", "libnvidia-ptxjitcompiler1", "libnvidia-cfg1",
                  "firmware-nvidia-gsp"]
# Branches whose branch-named packages are pinned away (apt preferences list names: exact names cost apt a
# hash lookup, while a regex or glob pattern is matched against every package on every apt call, seconds each).
# NVIDIA's (and Ubuntu's) branch-named packages besides the ones a source installs, also kept to the branch.
BRANCH_NAMED = ["nvidia-driver-{b}", "nvidia-utils-{b}", "nvidia-headless-{b}", "nvidia-dkms-{b}",
                "nvidia-kernel-common-{b}", "nvidia-kernel-source-{b}", "nvidia-compute-utils-{b}",
                "nvidia-persistenced-{b}", "libnvidia-compute-{b}", "libnvidia-gl-{b}", "libnvidia-decode-{b}",
                "libnvidia-encode-{b}", "libnvidia-extra-{b}", "libnvidia-cfg1-{b}"]
KNOWN_BRANCHES = ["470", "510", "515", "520", "525", "530", "535", "545", "550", "555", "560", "565", "570",
                  "575", "580", "590"]


def nvidia_driver_packages(source, flavour, branch, distribution, major_version, kernel_flavour="generic"):
    """See DOCUMENTATION."""
    platform = (str(distribution), str(major_version))
    if platform not in SUPPORTED:
        raise AnsibleFilterError("the NVIDIA %s driver is not supported by gpufleet.node on %s %s"
                                 % (branch, distribution, major_version))
    ubuntu = distribution == "Ubuntu"
    if source == "distro":
        table, fabric = (UBUNTU_DISTRO, FABRICMANAGER["ubuntu_distro"]) if ubuntu else (DEBIAN_DISTRO, [])
    elif source == "ppa":
        if not ubuntu:
            raise AnsibleFilterError("the graphics-drivers PPA is for Ubuntu; on %s use source distro or cuda_repo"
                                     % distribution)
        table, fabric = UBUNTU_PPA, []
    elif source == "cuda_repo":
        table, fabric = CUDA_REPO, FABRICMANAGER["cuda_repo"]
    else:
        raise AnsibleFilterError("unknown driver source %r" % source)
    if flavour not in table:
        raise AnsibleFilterError("flavour %r is not available from source %s on %s (choose from %s)"
                                 % (flavour, source, distribution, ", ".join(sorted(table))))
    packages = [name.format(b=branch, k=kernel_flavour) for name in table[flavour]]
    fabricmanager = [name.format(b=branch) for name in fabric]
    support = [] if ubuntu or source != "distro" else DEBIAN_SUPPORT
    branch_named = set(name for names in table.values() for name in names + fabric if "{b}" in name)
    if ubuntu or source != "distro":
        branch_named.update(BRANCH_NAMED)
    forbid = sorted(set(name.format(b=other, k=kernel_flavour) for other in KNOWN_BRANCHES if other != str(branch)
                        for name in branch_named))
    # The branch's other packages are pinned too: an exact version of the main package depends on exactly the same
    # version of them, which apt only picks when it is their candidate.
    pin = packages + fabricmanager + support
    if ubuntu or source != "distro":
        branch_packages = [name.format(b=branch) for name in BRANCH_NAMED]
        pin += [name for name in branch_packages + [n + "-server" for n in branch_packages] if name not in pin]
    return {
        "packages": packages,
        "main": packages[-1] if source != "distro" or ubuntu else "nvidia-smi",
        "fabricmanager": fabricmanager,
        "pin": pin,
        "forbid": (["cuda-drivers"] if source == "cuda_repo" else []) + forbid,
    }


def nvidia_cuda_repo_path(facts):
    """NVIDIA's CUDA repository path for a host, ``<distro>/<arch>`` (``ubuntu2204/x86_64``, ``debian12/sbsa``),
    from its ansible_facts: one place for nvidia_driver, cuda and nccl, which share the repository."""
    try:
        if facts["distribution"] == "Ubuntu":
            distro = "ubuntu" + str(facts["distribution_version"]).replace(".", "")
        else:
            distro = str(facts["distribution"]).lower() + str(facts["distribution_major_version"])
        arch = "sbsa" if facts["architecture"] == "aarch64" else facts["architecture"]
    except (KeyError, TypeError) as exc:
        raise AnsibleFilterError("nvidia_cuda_repo_path needs ansible_facts with distribution and architecture "
                                 "(missing %s)" % exc)
    return "%s/%s" % (distro, arch)


def nvidia_driver_reboot_reason(gpu, installed_version, in_container=False):
    """Why the node must reboot to run the installed driver, or '' when it need not.

    ``gpu`` is ``ansible_facts.gpu`` from gpu_facts after the install; ``installed_version`` the driver's
    package version (``535.183.01-1``, ``535.183.01-0ubuntu0.22.04.1``). A container cannot load modules, so
    it never needs a reboot for them.
    """
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
            "nvidia_driver_packages": nvidia_driver_packages,
            "nvidia_driver_reboot_reason": nvidia_driver_reboot_reason,
            "nvidia_cuda_repo_path": nvidia_cuda_repo_path,
        }
