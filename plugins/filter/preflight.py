# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The roles' preflight checks of their settings, before anything changes on a host.

One filter per check of a role's ``tasks/preflight.yml``, each documented beside this file (``<name>.yml``). Each
takes the role's settings as a dict of variable name to value (and, where a check needs it, the role's platform
data) and returns the list of errors, one sentence each, in the order the role checks them; an empty list when the
settings are valid. The role's preflight fails with the sentences joined, whatever tags the run selects.

Texts are matched whole (``re.fullmatch``). A number given where a text is expected is read as Jinja's ``match``
test reads it, as its text (``535`` for ``"535"``); other types never match. Numbers are read as Jinja's ``int`` and
``float`` filters read them: a value that is not a number is 0.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import json
import re
from collections.abc import Mapping

from ansible.errors import AnsibleFilterError

_MAJOR_MINOR = r"[0-9]+\.[0-9]+"
_RELEASE = r"[0-9]+\.[0-9]+\.[0-9]+"
_URL = r"(https?|file):/.*"
_PATH_NO_SPACE = r"/\S*"
_PATH_NO_SPACE_QUOTE = r"/[^\s\"\\]*"
# node exporter's flags: --name or --name=value without blanks, quotes or backslashes.
_EXPORTER_FLAG = r"--[a-zA-Z0-9][-a-zA-Z0-9._]*(=[^\s\"\\]*)?"
_EXPORTER_OWN_FLAGS = ("--web.listen-address", "--collector.textfile.directory")
# host:port as node exporter takes it (":9100", "127.0.0.1:9100", "[::1]:9100").
_LISTEN_ADDRESS = r"(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]*):([0-9]{1,5})"
# A pip requirement pinned to one version: name[extras] == version (=== and ~= too).
_PINNED_REQUIREMENT = r"[A-Za-z0-9][A-Za-z0-9._\[\],-]*\s*(===?|~=)\s*[A-Za-z0-9.+!*-]+"


def _settings(settings, name, keys):
    """The settings dict, checked to hold every key the filter reads (a role passes them all)."""
    if not isinstance(settings, Mapping):
        raise AnsibleFilterError("%s expects a dict of the role's settings, got %s" % (name, type(settings).__name__))
    missing = [key for key in keys if key not in settings]
    if missing:
        raise AnsibleFilterError("%s needs the settings %s" % (name, ", ".join(missing)))
    return settings


def _json(value):
    """The value as the to_json filter prints it in a message."""
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return json.dumps(str(value))


def _text(value):
    """The text Jinja's match test would read: a string, or a number's text; None for anything else."""
    if isinstance(value, str):
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    return None


def _matches(pattern, value):
    text = _text(value)
    return text is not None and re.fullmatch(pattern, text) is not None


def _number(value, kind):
    """Jinja's int or float filter: the value as a number, 0 when it is none."""
    if isinstance(value, bool):
        return kind(value)
    try:
        return kind(value)
    except (TypeError, ValueError, OverflowError):
        try:
            return kind(float(value))
        except (TypeError, ValueError, OverflowError):
            return kind(0)


def _is_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _list(value):
    """A list setting as a list; a single value is a list of one (so it is checked, not iterated as text)."""
    if isinstance(value, (list, tuple)):
        return list(value)
    return [value]


def _empty(value):
    """Whether an optional text setting is left empty ("" only: null is a value, and refused as one)."""
    return isinstance(value, str) and value == ""


# --- baseline ------------------------------------------------------------------------------------------------------

# A systemd unit name of the kinds baseline masks (systemd.unit(5): the name, then the unit type's suffix).
_UNIT_NAME = r"[A-Za-z0-9@_.:-]+\.(service|socket|timer|path|target)"
# A pattern unattended-upgrades could not be given as written: empty, or with a character apt.conf's quoting
# (apt.conf(5): values in double quotes, no escapes) or the role's template cannot carry.
_UNSAFE_PATTERN = r'\s*|.*["\\;{}].*'


def baseline_setting_errors(settings):
    """The errors of gpufleet.node.baseline's settings the argument spec cannot check."""
    s = _settings(settings, "baseline_setting_errors", (
        "baseline_swappiness", "baseline_memlock_limit", "baseline_kernel_headers_metapackage", "baseline_masked_units",
        "baseline_upgrade_guard_patterns"))
    errors = []
    swappiness = s["baseline_swappiness"]
    if not _matches(r"[0-9]+", swappiness) or _number(swappiness, int) > 200:
        errors.append("baseline_swappiness must be an integer from 0 to 200 (kernels since 5.8); got %s."
                      % _json(swappiness))
    memlock = s["baseline_memlock_limit"]
    if not (memlock == "unlimited" or (_matches(r"[0-9]+", memlock) and _number(memlock, int) > 0)):
        errors.append('baseline_memlock_limit must be "unlimited" or a positive size in KiB; got %s.' % _json(memlock))
    metapackage = s["baseline_kernel_headers_metapackage"]
    if not _matches(r"(auto|[a-z0-9][a-z0-9.+-]+)?", metapackage):
        errors.append('baseline_kernel_headers_metapackage must be auto, "" or a package name such as '
                      "linux-headers-generic-hwe-22.04; got %s." % _json(metapackage))
    units = [unit for unit in _list(s["baseline_masked_units"]) if not _matches(_UNIT_NAME, unit)]
    if units:
        errors.append("baseline_masked_units must hold unit names such as avahi-daemon.service; not: %s."
                      % _json(units))
    patterns = [pattern for pattern in _list(s["baseline_upgrade_guard_patterns"])
                if not isinstance(pattern, str) or re.fullmatch(_UNSAFE_PATTERN, pattern, re.S)]
    if patterns:
        errors.append("baseline_upgrade_guard_patterns must be non-empty patterns without quotes, backslashes, braces "
                      "or semicolons; not: %s." % _json(patterns))
    return errors


# --- nvidia_container_toolkit --------------------------------------------------------------------------------------

def nvidia_container_toolkit_setting_errors(settings):
    """The errors of gpufleet.node.nvidia_container_toolkit's settings."""
    s = _settings(settings, "nvidia_container_toolkit_setting_errors", (
        "nvidia_container_toolkit_version", "nvidia_container_toolkit_repo_url", "nvidia_container_toolkit_repo_key_url",
        "nvidia_container_toolkit_repo_key_fingerprint", "nvidia_container_toolkit_engines",
        "nvidia_container_toolkit_docker_config", "nvidia_container_toolkit_containerd_config",
        "nvidia_container_toolkit_cdi_spec"))
    errors = []
    version = s["nvidia_container_toolkit_version"]
    if not _matches(_RELEASE + r"(~rc\.[0-9]+)?-[0-9]+", version):
        errors.append('nvidia_container_toolkit_version must be an apt version of the toolkit such as "1.17.8-1"; '
                      'got %s.' % _json(version))
    for name in ("nvidia_container_toolkit_repo_url", "nvidia_container_toolkit_repo_key_url"):
        if not _matches(_URL, s[name]):
            errors.append("%s must be an http(s) or file URL; got %s." % (name, _json(s[name])))
    fingerprint = s["nvidia_container_toolkit_repo_key_fingerprint"]
    if not _matches(r"[0-9A-Fa-f]{40}", fingerprint.replace(" ", "") if isinstance(fingerprint, str) else None):
        errors.append("nvidia_container_toolkit_repo_key_fingerprint must be a full 40-hex-digit fingerprint; got %s."
                      % _json(fingerprint))
    unknown = []
    for engine in _list(s["nvidia_container_toolkit_engines"]):
        if engine not in ("docker", "containerd") and engine not in unknown:
            unknown.append(engine)
    if unknown:
        errors.append("nvidia_container_toolkit_engines may name docker and containerd only; not known: %s."
                      % ", ".join(str(engine) for engine in unknown))
    for name in ("nvidia_container_toolkit_docker_config", "nvidia_container_toolkit_containerd_config",
                 "nvidia_container_toolkit_cdi_spec"):
        if not _matches(_PATH_NO_SPACE, s[name]):
            errors.append("%s must be an absolute path without spaces; got %s." % (name, _json(s[name])))
    spec = s["nvidia_container_toolkit_cdi_spec"]
    if not (isinstance(spec, str) and spec.endswith((".yaml", ".json"))):
        errors.append("nvidia_container_toolkit_cdi_spec must end in .yaml or .json (the names CDI runtimes read); "
                      "got %s." % _json(spec))
    return errors


# --- cuda ----------------------------------------------------------------------------------------------------------

def cuda_setting_errors(settings):
    """The errors of gpufleet.node.cuda's releases."""
    s = _settings(settings, "cuda_setting_errors", ("cuda_version", "cuda_additional_versions"))
    errors = []
    if not _matches(_MAJOR_MINOR, s["cuda_version"]):
        errors.append('cuda_version takes a major.minor release such as "12.1" (quoted, so YAML keeps it a string); '
                      'got %s.' % _json(s["cuda_version"]))
    bad = [version for version in _list(s["cuda_additional_versions"]) if not _matches(_MAJOR_MINOR, version)]
    if bad:
        errors.append('cuda_additional_versions take major.minor releases such as "12.2"; not: %s.' % _json(bad))
    return errors


# --- gpu_monitoring ------------------------------------------------------------------------------------------------

def gpu_monitoring_setting_errors(settings):
    """The errors of gpufleet.node.gpu_monitoring's listen address, exporter flags, directory and timing."""
    s = _settings(settings, "gpu_monitoring_setting_errors", (
        "gpu_monitoring_listen_address", "gpu_monitoring_node_exporter_extra_args", "gpu_monitoring_textfile_directory",
        "gpu_monitoring_interval_s", "gpu_monitoring_timeout_s"))
    errors = []
    address = s["gpu_monitoring_listen_address"]
    match = re.fullmatch(_LISTEN_ADDRESS, address) if isinstance(address, str) else None
    if not match or not 1 <= int(match.group(2)) <= 65535:
        errors.append('gpu_monitoring_listen_address must be host:port as node exporter takes it (":9100", '
                      '"127.0.0.1:9100", "[::1]:9100"), with a port from 1 to 65535; got %s.' % _json(address))
    bad_args = []
    for arg in _list(s["gpu_monitoring_node_exporter_extra_args"]):
        if not isinstance(arg, str):
            bad_args.append(str(arg))
        elif not re.fullmatch(_EXPORTER_FLAG, arg) or arg.split("=", 1)[0] in _EXPORTER_OWN_FLAGS:
            bad_args.append(arg)
    if bad_args:
        errors.append('gpu_monitoring_node_exporter_extra_args must be flags "--name" or "--name=value" without '
                      "spaces, quotes or backslashes, and not the role's own --web.listen-address or "
                      "--collector.textfile.directory (use gpu_monitoring_listen_address and "
                      "gpu_monitoring_textfile_directory); not valid: %s." % _json(bad_args))
    directory = s["gpu_monitoring_textfile_directory"]
    if not _matches(_PATH_NO_SPACE_QUOTE, directory):
        errors.append("gpu_monitoring_textfile_directory must be an absolute path without spaces or quotes; got %s."
                      % _json(directory))
    interval, timeout = s["gpu_monitoring_interval_s"], s["gpu_monitoring_timeout_s"]
    if _number(interval, int) < 5:
        errors.append("gpu_monitoring_interval_s must be at least 5 seconds; got %s." % _json(interval))
    if _number(timeout, int) < 1 or _number(timeout, int) >= _number(interval, int):
        errors.append("gpu_monitoring_timeout_s must be at least 1 and less than gpu_monitoring_interval_s (%s); "
                      "got %s." % (interval, _json(timeout)))
    return errors


# --- gpu_power -----------------------------------------------------------------------------------------------------

def _clocks_valid(clocks):
    return (isinstance(clocks, (list, tuple)) and len(clocks) == 2
            and all(isinstance(clock, int) and not isinstance(clock, bool) and clock > 0 for clock in clocks))


def gpu_power_setting_errors(settings):
    """The errors in the shapes of gpufleet.node.gpu_power's power limits and locked clocks."""
    s = _settings(settings, "gpu_power_setting_errors", ("gpu_power_limits_w", "gpu_power_locked_clocks_mhz"))
    errors = []
    limits, clocks = s["gpu_power_limits_w"], s["gpu_power_locked_clocks_mhz"]
    for name, value in (("gpu_power_limits_w", limits), ("gpu_power_locked_clocks_mhz", clocks)):
        if not isinstance(value, Mapping):
            errors.append("%s must map GPU models to settings; got %s." % (name, _json(value)))
    if isinstance(limits, Mapping):
        bad = [str(model) for model, watts in limits.items() if not _is_number(watts) or watts <= 0]
        if bad:
            errors.append("gpu_power_limits_w values must be positive numbers of watts; not valid for: %s."
                          % ", ".join(bad))
    if isinstance(clocks, Mapping):
        bad = [str(model) for model, pair in clocks.items() if not _clocks_valid(pair)]
        if bad:
            errors.append("gpu_power_locked_clocks_mhz values must be [min, max] in whole MHz above 0; not valid for: "
                          "%s." % ", ".join(bad))
        inverted = [str(model) for model, pair in clocks.items() if _clocks_valid(pair) and pair[0] > pair[1]]
        if inverted:
            errors.append("gpu_power_locked_clocks_mhz: min above max for: %s." % ", ".join(inverted))
    return errors


# --- nccl ----------------------------------------------------------------------------------------------------------

def nccl_setting_errors(settings):
    """The errors of gpufleet.node.nccl's CUDA release, NCCL version and bandwidth settings."""
    s = _settings(settings, "nccl_setting_errors", (
        "nccl_cuda_version", "nccl_version", "nccl_tests_efficiency", "nccl_tests_min_fraction", "nccl_tests_checksum"))
    errors = []
    cuda, version = s["nccl_cuda_version"], s["nccl_version"]
    if not _matches(_MAJOR_MINOR, cuda):
        errors.append('nccl_cuda_version must be a CUDA release such as "12.1"; got %s.' % _json(cuda))
    cuda_text = _text(cuda) or ""
    if not _empty(version) and not _matches(r"[0-9]+\.[0-9]+\.[0-9]+-[0-9]+\+cuda" + re.escape(cuda_text), version):
        errors.append('nccl_version must be empty or a package version built for CUDA %s, such as "2.18.3-1+cuda%s"; '
                      'got %s.' % (cuda_text, cuda_text, _json(version)))
    for name in ("nccl_tests_efficiency", "nccl_tests_min_fraction"):
        if not 0 < _number(s[name], float) <= 1:
            errors.append("%s must be in (0, 1]; got %s." % (name, _json(s[name])))
    checksum = s["nccl_tests_checksum"]
    if not _empty(checksum) and not _matches(r"sha(256|512):[0-9a-fA-F]+", checksum):
        errors.append("nccl_tests_checksum must be empty or sha256:<hex> / sha512:<hex>; got %s." % _json(checksum))
    return errors


def nccl_config_errors(settings, debug_settings):
    """The errors of the settings gpufleet.node.nccl writes to /etc/nccl.conf."""
    s = _settings(settings, "nccl_config_errors", ("nccl_config", "nccl_config_allow_debug"))
    config = s["nccl_config"]
    if not isinstance(config, Mapping):
        return ["nccl_config must map NCCL_* names to values; got %s." % _json(config)]
    errors = []
    bad_names = [str(name) for name in config if not re.fullmatch(r"NCCL_[A-Z0-9_]+", str(name))]
    if bad_names:
        errors.append("nccl_config names must be NCCL_* (capitals, digits, underscores); not valid: %s."
                      % ", ".join(bad_names))
    bad_values = [str(name) for name, value in config.items()
                  if not isinstance(value, (str, int, float))
                  or (isinstance(value, str) and (not value.strip() or re.search(r"[\r\n]", value)))]
    if bad_values:
        errors.append("nccl_config values must be one-line strings, numbers or booleans; not valid for: %s."
                      % ", ".join(bad_values))
    debug = [] if s["nccl_config_allow_debug"] else [str(name) for name in config if name in _list(debug_settings)]
    if debug:
        errors.append("Debug settings (%s) slow every job and flood its logs: set them per job, or "
                      "nccl_config_allow_debug: true." % ", ".join(debug))
    return errors


# --- pytorch -------------------------------------------------------------------------------------------------------

def pytorch_setting_errors(settings):
    """The errors of gpufleet.node.pytorch's versions, requirement list and paths."""
    s = _settings(settings, "pytorch_setting_errors", (
        "pytorch_version", "pytorch_torchvision_version", "pytorch_cuda_version", "pytorch_extra_packages",
        "pytorch_venv", "pytorch_check_cpu_procs"))
    errors = []
    if not _matches(_RELEASE, s["pytorch_version"]):
        errors.append('pytorch_version must be a release such as "2.5.1"; got %s.' % _json(s["pytorch_version"]))
    torchvision = s["pytorch_torchvision_version"]
    if not _empty(torchvision) and not _matches(_RELEASE, torchvision):
        errors.append('pytorch_torchvision_version must be empty or a release such as "0.20.1"; got %s.'
                      % _json(torchvision))
    cuda = s["pytorch_cuda_version"]
    if not _empty(cuda) and not _matches(_MAJOR_MINOR, cuda):
        errors.append('pytorch_cuda_version must be a CUDA release such as "12.1", or "" for a CPU build; got %s.'
                      % _json(cuda))
    unpinned = [package for package in _list(s["pytorch_extra_packages"]) if not _matches(_PINNED_REQUIREMENT, package)]
    if unpinned:
        errors.append("pytorch_extra_packages must each be pinned with == (the same environment on every node); "
                      "not: %s." % _json(unpinned))
    venv = s["pytorch_venv"]
    if not (isinstance(venv, str) and venv.startswith("/")):
        errors.append("pytorch_venv must be an absolute path; got %s." % _json(venv))
    if _number(s["pytorch_check_cpu_procs"], int) < 1:
        errors.append("pytorch_check_cpu_procs must be at least 1; got %s." % _json(s["pytorch_check_cpu_procs"]))
    return errors


# --- nvidia_driver -------------------------------------------------------------------------------------------------

def nvidia_driver_setting_errors(settings, sources, platform):
    """The errors of gpufleet.node.nvidia_driver's source, branch, version, flavour and MIG settings, against the
    sources the platform offers (``__nvidia_driver_sources``: source name to its ``branches`` and ``flavours``)."""
    s = _settings(settings, "nvidia_driver_setting_errors", (
        "nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_source", "nvidia_driver_flavour",
        "nvidia_driver_mig", "nvidia_driver_mig_consent", "nvidia_driver_kernel_modules"))
    if not isinstance(sources, Mapping):
        raise AnsibleFilterError("nvidia_driver_setting_errors expects the platform's sources as a dict, got %s"
                                 % type(sources).__name__)
    errors = []
    branch, version = s["nvidia_driver_branch"], s["nvidia_driver_version"]
    source_name, flavour = s["nvidia_driver_source"], s["nvidia_driver_flavour"]
    branch_valid = _matches(r"[0-9]{3}", branch)
    if not branch_valid:
        errors.append('nvidia_driver_branch must be three digits such as "535"; got %s.' % _json(branch))
    branch_text = _text(branch) or ""
    if not _empty(version) and not _matches(re.escape(branch_text) + r"\.[0-9]+(\.[0-9]+)?", version):
        errors.append("nvidia_driver_version must be empty or a version on branch %s such as %s.183.01; got %s."
                      % (branch_text, branch_text, _json(version)))
    source = sources.get(source_name) if isinstance(source_name, str) else None
    if source is None:
        errors.append("nvidia_driver_source %s is not available on %s; %s."
                      % (source_name, platform, "choose " + " or ".join(sorted(sources)) if sources
                         else "no source of the driver is known there"))
    else:
        branches = [str(offered) for offered in source.get("branches") or []]
        if branch_valid and branch_text not in branches:
            errors.append("Branch %s is not offered by source %s on %s (NVIDIA's support matrix and the archive's "
                          "packages); choose %s." % (branch_text, source_name, platform, ", ".join(branches)))
        flavours = source.get("flavours") or {}
        if flavour not in flavours:
            errors.append("nvidia_driver_flavour %s is not available from source %s on %s; choose %s."
                          % (flavour, source_name, platform, ", ".join(sorted(flavours))))
    mig = s["nvidia_driver_mig"]
    if not isinstance(mig, Mapping) or any(
            not re.fullmatch(r"[0-9]+", str(index)) or not isinstance(enabled, bool) for index, enabled in mig.items()):
        errors.append("nvidia_driver_mig maps GPU indexes to true or false; got %s." % _json(mig))
    if mig and not s["nvidia_driver_mig_consent"]:
        errors.append("nvidia_driver_mig needs nvidia_driver_mig_consent: true, since changing MIG mode resets the GPU.")
    if flavour == "open" and s["nvidia_driver_kernel_modules"] == "proprietary":
        errors.append("nvidia_driver_flavour open installs the open kernel modules, nvidia_driver_kernel_modules says "
                      "proprietary; choose flavour server for the proprietary modules.")
    return errors


class FilterModule(object):
    """The preflight checks of the roles' settings."""

    def filters(self):
        return {
            "baseline_setting_errors": baseline_setting_errors,
            "nvidia_container_toolkit_setting_errors": nvidia_container_toolkit_setting_errors,
            "cuda_setting_errors": cuda_setting_errors,
            "gpu_monitoring_setting_errors": gpu_monitoring_setting_errors,
            "gpu_power_setting_errors": gpu_power_setting_errors,
            "nccl_setting_errors": nccl_setting_errors,
            "nccl_config_errors": nccl_config_errors,
            "pytorch_setting_errors": pytorch_setting_errors,
            "nvidia_driver_setting_errors": nvidia_driver_setting_errors,
        }
