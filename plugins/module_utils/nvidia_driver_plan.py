# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Readers of the evidence the nvidia_driver role gathers, for its plan (the ``nvidia_driver_plan`` filter, which
makes the decisions).

Pure: nothing here runs a command or imports Ansible. Each reader takes what a task registered (or its
output) and returns plain values; a result that is not there (``None``) reads as nothing found.

The outputs read, as the role's tasks produce them:

* preflight's PCI scan, ``find -L /sys/bus/pci/devices -mindepth 2 -maxdepth 2 ( -name vendor -o -name device
  -o -name class ) -exec grep -H . {} +``: one ``<path>/<address>/<file>:<value>`` line per file, the values as
  sysfs prints them (``0x10de``, ``0x2901``, ``0x030200``)::

      /sys/bus/pci/devices/0000:17:00.0/device:0x2901

* gpu_facts' ``devices``: ``pci_bus_id`` as nvidia-smi prints it, with eight hex digits of PCI domain
  (``00000000:17:00.0``; sysfs writes four), ``name`` and ``architecture`` (null where the driver does not say).
* ``dpkg-query --show --showformat '${db:Status-Abbrev} ${binary:Package}\\n'`` with the C locale: three
  characters of selection, state and error flag (``ii ``, ``iU ``, ``hF ``, ``iHR``), then the package.
* The record an earlier run wrote (``/etc/gpufleet/nvidia-driver.json``) and other files, slurped (``content``
  in base64).
* ``systemctl show <unit> --property=FragmentPath`` (``FragmentPath=/lib/systemd/system/x.service``; empty
  after the ``=`` where no unit file exists) and the unit file's text.

Interface:

* ``pci_gpus(lines)``: ``{address: device id}`` of the NVIDIA GPUs (vendor 0x10de, class 0x0300 or 0x0302), ids
  in lower case, in the order of the scan
* ``fact_gpus(gpu)``: ``[(address, name, architecture)]`` of gpu_facts' devices, the address as sysfs writes it
* ``half_installed(lines)``: the packages dpkg left between states
* ``read_record(result)``: the earlier run's record as a dict (``{}`` where there is none)
* ``slurped_text(result)``: the text of a slurped file ('' where it was not read)
* ``unit_path(result)``, ``unit_exec(text)``, ``unit_stops_when_unneeded(text)``,
  ``unit_installable(text)``: the persistence daemon's packaged unit
* ``skipped(result)``, ``changed(result)``: Ansible's tests of the same names, on a result or None
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import base64
import json
import re

# <path>/<address>/<file>:<value> (the address is the last directory; grep -H puts the file name first).
_PCI_LINE = re.compile(r"^.*/([^/]+)/(vendor|device|class):\s*(\S+)\s*$")
NVIDIA_VENDOR = "0x10de"
# VGA compatible controller (0x0300) and 3D controller (0x0302): a GPU, not its audio function or an NVSwitch.
_DISPLAY_CLASS = re.compile(r"^0x030[02]")
# nvidia-smi's eight-digit domain (00000000:17:00.0) as sysfs writes it (0000:17:00.0).
_WIDE_DOMAIN = re.compile(r"^0{4}(?=[0-9a-f]{4}:)")
# Selection, state and error flag of db:Status-Abbrev: a state between installed and not (U unpacked,
# F half-configured, H half-installed, W triggers awaited, t triggers pending) or reinstallation required (R).
_BETWEEN_STATES = re.compile(r"^(.[UFHWt]|..R)")
_EXEC_START = re.compile(r"(?m)^ExecStart=.*$")
_STOP_WHEN_UNNEEDED = re.compile(r"(?m)^StopWhenUnneeded=(true|yes|on|1) *$")


def _mapping(value):
    return value if isinstance(value, dict) else None


def skipped(result):
    """Whether a registered result is that of a skipped task (None: the task did not run at all: False)."""
    result = _mapping(result)
    return bool(result and result.get("skipped", False))


def changed(result):
    """Whether a registered result reports a change (a loop's when any item does; None: False)."""
    result = _mapping(result)
    if not result:
        return False
    if "changed" in result:
        return bool(result["changed"])
    return any(_mapping(item) and item.get("changed") for item in result.get("results") or [])


def pci_gpus(lines):
    """``{address: device id}`` of the NVIDIA GPUs in the scan's lines (none for no output)."""
    entries = [match.groups() for match in (_PCI_LINE.match(line) for line in lines or []) if match]
    nvidia = set(address for address, name, value in entries if name == "vendor" and value == NVIDIA_VENDOR)
    display = set(address for address, name, value in entries if name == "class" and _DISPLAY_CLASS.match(value))
    return dict((address, value.lower()) for address, name, value in entries
                if name == "device" and address in nvidia and address in display)


def fact_gpus(gpu):
    """``[(address, name, architecture)]`` of gpu_facts' devices: the address in lower case with sysfs' four-digit
    domain ('' where there is none), the name ('GPU' where there is none) and the architecture ('' where the
    driver does not say)."""
    gpu = _mapping(gpu) or {}
    found = []
    for device in gpu.get("devices") or []:
        device = _mapping(device) or {}
        address = _WIDE_DOMAIN.sub("", str(device.get("pci_bus_id") or "").lower())
        found.append((address, device.get("name") or "GPU", device.get("architecture") or ""))
    return found


def half_installed(lines):
    """The packages of dpkg-query's ``${db:Status-Abbrev} ${binary:Package}`` lines that are between states."""
    return [line.split()[-1] for line in lines or [] if _BETWEEN_STATES.match(line) and line.split()]


def read_record(result):
    """The record of an earlier run from its slurp result, ``{}`` where the file was not there."""
    result = _mapping(result)
    if not result or "content" not in result:
        return {}
    record = json.loads(base64.b64decode(result["content"]).decode("utf-8"))
    if not isinstance(record, dict):
        raise ValueError("the record is not a JSON object")
    return record


def unit_path(result):
    """The unit file systemctl names in a ``--property=FragmentPath`` result ('' where the task was skipped or no
    unit file exists)."""
    result = _mapping(result)
    if not result or skipped(result):
        return ""
    return re.sub(r"^FragmentPath=", "", str(result.get("stdout") or "")).strip()


def slurped_text(result):
    """The text of a file from its slurp result ('' where it was not read: None, skipped, or not there)."""
    result = _mapping(result)
    if not result or "content" not in result:
        return ""
    return base64.b64decode(result["content"]).decode("utf-8")


def unit_exec(text):
    """The command of the unit's first ``ExecStart=`` line ('' where there is none)."""
    match = _EXEC_START.search(text or "")
    return re.sub(r"^ExecStart=", "", match.group(0)).strip() if match else ""


def unit_stops_when_unneeded(text):
    """Whether the unit stops itself when no other unit needs it (``StopWhenUnneeded=true``)."""
    return _STOP_WHEN_UNNEEDED.search(text or "") is not None


def unit_installable(text):
    """Whether the unit has an ``[Install]`` section (``systemctl enable`` can enable it)."""
    return "[Install]" in [line.strip() for line in (text or "").splitlines()]
