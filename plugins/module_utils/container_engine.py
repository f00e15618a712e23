# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure readers of what a container engine's service and daemon say about themselves.

The functions take the text a command printed (and its exit status) and return plain data; none runs a command or
touches ``AnsibleModule``. What cannot be read is returned as a reason, never raised: the caller reports it as the
state "unknown", which the nvidia_container_toolkit role counts as "not loaded".

Interface:

* ``parse_systemctl_show(text)``: ``systemctl show UNIT --property=...`` as a dict of property to value
* ``unit_state(rc, stdout, stderr)``: the unit's ``state``, ``can_reload``, ``kill_mode`` and ``started`` (the
  epoch second it last became active), and ``unknown`` (why the unit could not be read, or None)
* ``parse_systemd_timestamp(text)``: an ``ActiveEnterTimestamp`` printed in UTC as epoch seconds
* ``docker_loaded(rc, stdout, stderr)``: ``runtimes``, ``default_runtime`` and ``unknown`` from
  ``docker info --format '{{json .}}'``
* ``containerd_loaded(unit, config_mtime)``: ``started``, ``config_mtime`` and ``unknown``, the evidence of whether
  containerd has loaded its file (its file's mtime against the second it became active)

systemctl show (systemd.unit(5) and org.freedesktop.systemd1(5), "Properties"): one ``Name=value`` line per
property asked with ``--property=`` (a comma-separated list), in systemd's own order, an empty value where the unit
has none (``ActiveEnterTimestamp=`` for a unit that never ran). A unit that does not exist is shown too, as
``ActiveState=inactive``, with exit status 0. ``ActiveEnterTimestamp`` is printed as ``%a %Y-%m-%d %H:%M:%S %Z`` in
the caller's time zone (systemd's format_timestamp()); with ``TZ=UTC`` the zone is ``UTC``. Without ``TZ`` the
zone is the host's, and a zone name such as ``CET`` cannot be turned back into an offset: systemd 245 prints
``TZ=Europe/Berlin`` as the word ``Europe`` where tzdata is missing.

docker info (Docker Engine API, ``GET /info``, the SystemInfo object): ``Runtimes`` maps each runtime's name to its
``path`` (and ``runtimeArgs``; from API 1.44 a ``status`` too) and ``DefaultRuntime`` names the default. The CLI's
``--format '{{json .}}'`` prints that object with ``ClientInfo`` added (docker/cli cli/command/system/info.go).
When the daemon cannot be reached, the 20.10 client (Debian 12's docker.io) still exits 0 and prints only
``ServerErrors`` and ``ClientInfo``; newer clients (28, 29) exit 1 and print empty server fields
(``"Runtimes": null``) with the error on stderr.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import calendar
import json
import re
import time

__all__ = [
    "DOCKER_INFO_FORMAT",
    "UNIT_PROPERTIES",
    "containerd_loaded",
    "docker_loaded",
    "parse_systemctl_show",
    "parse_systemd_timestamp",
    "unit_state",
]

# The properties read from systemctl show: whether the unit runs, whether it can reload (ExecReload= set), how its
# stop ends its processes, and when it last became active.
UNIT_PROPERTIES = ("ActiveState", "CanReload", "KillMode", "ActiveEnterTimestamp")
# docker info's Go template for its whole answer as JSON (not Jinja: modules are not templated).
DOCKER_INFO_FORMAT = "{{json .}}"
# "Mon 2026-12-07 14:27:39 UTC": weekday, date, time and the zone, which must be UTC (systemctl run with TZ=UTC).
_UTC_TIMESTAMP = re.compile(r"^[A-Za-z]+ (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}) UTC$")
# A reason quotes at most this much of a command's output.
_QUOTE_CHARS = 300


def _one_line(text):
    """Output as one line (newlines to spaces, runs of blanks to one), shortened for a message."""
    line = " ".join((text or "").split())
    if len(line) > _QUOTE_CHARS:
        line = line[:_QUOTE_CHARS] + "..."
    return line


def parse_systemctl_show(text):
    """``{property: value}`` from ``systemctl show``'s ``Name=value`` lines; lines without ``=`` are left out."""
    properties = {}
    for line in (text or "").splitlines():
        name, sep, value = line.partition("=")
        if sep and name:
            properties[name] = value
    return properties


def parse_systemd_timestamp(text):
    """The epoch second of a systemd timestamp printed in UTC (``Mon 2026-12-07 14:27:39 UTC``); None for an empty
    value, ``n/a`` or a timestamp in another zone."""
    match = _UTC_TIMESTAMP.match((text or "").strip())
    if not match:
        return None
    try:
        return calendar.timegm(time.strptime(match.group(1), "%Y-%m-%d %H:%M:%S"))
    except ValueError:
        return None


def unit_state(rc, stdout, stderr):
    """What ``systemctl show UNIT --property=ActiveState,CanReload,KillMode,ActiveEnterTimestamp`` (run with
    ``TZ=UTC``) says about the unit.

    Returns ``state`` (its ActiveState, such as ``active``, ``inactive`` or ``failed``; ``unknown`` when systemctl
    could not be asked, for example on a host not booted with systemd), ``can_reload`` (bool), ``kill_mode``
    (``process``, ``control-group``, ``mixed``, ``none``; None when not read), ``started`` (the epoch second of
    ActiveEnterTimestamp, None when it has none or it cannot be read) and ``unknown`` (why systemctl could not be
    read, else None).
    """
    properties = parse_systemctl_show(stdout) if rc == 0 else {}
    state = properties.get("ActiveState", "")
    if rc != 0 or not state:
        reason = _one_line(stderr) or _one_line(stdout) or "no ActiveState in its output"
        return {"state": "unknown", "can_reload": False, "kill_mode": None, "started": None,
                "unknown": "systemctl show failed (exit status %s): %s" % (rc, reason)}
    return {
        "state": state,
        "can_reload": properties.get("CanReload", "") == "yes",
        "kill_mode": properties.get("KillMode") or None,
        "started": parse_systemd_timestamp(properties.get("ActiveEnterTimestamp", "")),
        "unknown": None,
    }


def _names(runtimes):
    return sorted(str(name) for name in runtimes)


def docker_loaded(rc, stdout, stderr, timed_out=False, timeout=None):
    """What the running dockerd has loaded, from ``docker info --format '{{json .}}'``: ``runtimes`` (the names
    of its runtimes, sorted), ``default_runtime`` and ``unknown``.

    ``unknown`` is None when the answer holds the daemon's runtimes; else it says why not, beginning with
    ``docker info failed:`` (a non-zero exit, a timeout, ``ServerErrors`` in an answer that exited 0) or
    ``docker info answered without`` (no JSON object, no ``Runtimes``), and ``runtimes`` and ``default_runtime``
    are None.
    """
    def unknown(reason):
        return {"runtimes": None, "default_runtime": None, "unknown": reason}

    if timed_out:
        return unknown("docker info failed: no answer in %s seconds" % timeout)
    if rc != 0:
        return unknown("docker info failed (exit status %s): %s"
                       % (rc, _one_line(stderr) or _one_line(stdout) or "no output"))
    try:
        info = json.loads(stdout)
    except ValueError:
        return unknown("docker info answered without JSON: %s" % (_one_line(stdout) or "no output"))
    if not isinstance(info, dict):
        return unknown("docker info answered without a JSON object: %s" % _one_line(stdout))
    errors = info.get("ServerErrors") or []
    if errors:
        return unknown("docker info failed: %s" % _one_line(" ".join(str(error) for error in errors)))
    runtimes = info.get("Runtimes")
    if not isinstance(runtimes, dict) or not runtimes:
        return unknown("docker info answered without the daemon's runtimes (Runtimes: %s)" % json.dumps(runtimes))
    default = info.get("DefaultRuntime")
    return {"runtimes": _names(runtimes), "default_runtime": default if isinstance(default, str) else None,
            "unknown": None}


def containerd_loaded(unit, config_mtime):
    """The evidence of whether an active containerd has loaded its file: ``started`` (the epoch second its unit
    became active, from ``unit_state``), ``config_mtime`` (the file's mtime in whole seconds, 0 where there is no
    file) and ``unknown`` (None, or why ``started`` could not be read: systemd printed no ActiveEnterTimestamp in
    UTC)."""
    if unit.get("started") is None:
        return {"started": None, "config_mtime": config_mtime,
                "unknown": "systemctl show gave no ActiveEnterTimestamp in UTC for the active unit"}
    return {"started": unit["started"], "config_mtime": config_mtime, "unknown": None}
