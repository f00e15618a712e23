# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA runtime merged into a container engine's own configuration file, keeping everything else in it.

Each filter is documented in its own file beside this one (``container_runtime_docker.yml``,
``container_runtime_containerd.yml``). Both take the file's current text and return the text to write: the same
text when the file already holds the runtime as asked (so a second run changes nothing, byte for byte), else the
merged settings written out. The runtime entries are the ones NVIDIA's own ``nvidia-ctk runtime configure`` writes
(NVIDIA/nvidia-container-toolkit v1.17.8: pkg/config/engine/docker/docker.go ``AddRuntime``, a ``runtimes.<name>``
of ``{"path": ..., "args": []}``; pkg/config/engine/containerd/config.go ``AddRuntime``, ``runtime_type`` and
``options.BinaryName`` under ``plugins.<CRI plugin>.containerd.runtimes.<name>``, the options of an existing
``runc`` runtime copied first; containerd.go ``criRuntimePluginName``: ``cri`` for config version 1,
``io.containerd.grpc.v1.cri`` for 2, ``io.containerd.cri.v1.runtime`` for 3).
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import copy
import datetime
import json
import math
import re

from ansible.errors import AnsibleFilterError

try:
    import tomllib  # Python 3.11+, which every supported controller runs (ansible-core 2.18+)
except ImportError:  # pragma: no cover
    tomllib = None

# containerd's built-in default runtime, which a default of "nvidia" given up returns to.
CONTAINERD_DEFAULT_RUNTIME = "runc"
CRI_PLUGIN = {1: "cri", 2: "io.containerd.grpc.v1.cri", 3: "io.containerd.cri.v1.runtime"}
_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


# --- Docker: /etc/docker/daemon.json ------------------------------------------------------------------------------

def container_runtime_docker(text, runtime="nvidia", path="nvidia-container-runtime", default=False):
    """daemon.json's text with ``runtimes.<runtime>`` set to NVIDIA's entry, every other key kept in its place.

    ``default`` true makes it ``default-runtime``; false removes ``default-runtime`` only where it names this runtime.
    An empty or missing file (``text`` empty or None) gives a file with only the runtime. A file that is not a JSON
    object, or whose ``runtimes`` is not an object, is refused.
    """
    _check_name(runtime)
    current = {}
    if text is not None and text.strip():
        try:
            current = json.loads(text)
        except ValueError as exc:
            raise AnsibleFilterError("daemon.json is not valid JSON (%s); fix or remove it, nothing was changed." % exc)
        if not isinstance(current, dict):
            raise AnsibleFilterError("daemon.json holds a JSON %s, not an object; dockerd would refuse it. Fix or remove "
                                     "it, nothing was changed." % type(current).__name__.replace("dict", "object"))
    merged = copy.deepcopy(current)
    runtimes = merged.setdefault("runtimes", {})
    if not isinstance(runtimes, dict):
        raise AnsibleFilterError("daemon.json's \"runtimes\" is not an object; fix it, nothing was changed.")
    runtimes[runtime] = {"path": path, "args": []}
    if default:
        merged["default-runtime"] = runtime
    elif merged.get("default-runtime") == runtime:
        del merged["default-runtime"]
    if text is not None and text.strip() and merged == current:
        return text
    # nvidia-ctk writes the file with json.MarshalIndent(config, "", "    ").
    return json.dumps(merged, indent=4) + "\n"


# --- containerd: /etc/containerd/config.toml ----------------------------------------------------------------------

def container_runtime_containerd(text, runtime="nvidia", path="/usr/bin/nvidia-container-runtime", default=False,
                                 version=2):
    """config.toml's text with the runtime under the CRI plugin of the file's config version, every setting kept.

    ``version`` is the config version written into an empty or missing file (2 for containerd 1.x, 3 for 2.x);
    a file with settings but no ``version`` is version 1, as containerd reads it. Settings are kept, comments are not
    (the file is written anew when something changes, as nvidia-ctk does).
    """
    _check_name(runtime)
    if tomllib is None:  # pragma: no cover
        raise AnsibleFilterError("container_runtime_containerd needs Python 3.11 or later on the controller (tomllib).")
    current = {}
    if text is not None and text.strip():
        try:
            current = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            raise AnsibleFilterError("config.toml is not valid TOML (%s); containerd would refuse it. Fix or remove it, "
                                     "nothing was changed." % exc)
    merged = copy.deepcopy(current)
    if not current:
        merged["version"] = int(version)
    file_version = merged.get("version", 1)
    if file_version not in CRI_PLUGIN:
        raise AnsibleFilterError("config.toml has version = %r; containerd knows versions 1, 2 and 3. Nothing was changed."
                                 % (file_version,))
    cri = _table(merged, ["plugins", CRI_PLUGIN[file_version], "containerd"])
    runtimes = _table(cri, ["runtimes"], prefix="plugins.%s.containerd." % CRI_PLUGIN[file_version])
    entry = runtimes.get(runtime)
    if not isinstance(entry, dict):
        # Like nvidia-ctk: start from the runc runtime's settings (SystemdCgroup and the like), else the defaults.
        entry = copy.deepcopy(runtimes.get(CONTAINERD_DEFAULT_RUNTIME)) if isinstance(
            runtimes.get(CONTAINERD_DEFAULT_RUNTIME), dict) else {}
        runtimes[runtime] = entry
    entry["runtime_type"] = "io.containerd.runc.v2"
    options = entry.setdefault("options", {})
    if not isinstance(options, dict):
        options = entry["options"] = {}
    options["BinaryName"] = path
    if default:
        cri["default_runtime_name"] = runtime
    elif cri.get("default_runtime_name") == runtime:
        cri["default_runtime_name"] = CONTAINERD_DEFAULT_RUNTIME
    if text is not None and text.strip() and merged == current:
        return text
    return toml_dumps(merged)


def _table(root, keys, prefix=""):
    node = root
    for index, key in enumerate(keys):
        child = node.setdefault(key, {})
        if not isinstance(child, dict):
            raise AnsibleFilterError("config.toml's %s%s is not a table; fix it, nothing was changed."
                                     % (prefix, ".".join(keys[:index + 1])))
        node = child
    return node


def _check_name(runtime):
    if not isinstance(runtime, str) or not _BARE_KEY.match(runtime):
        raise AnsibleFilterError("The runtime name must be letters, digits, '-' and '_'; got %r." % (runtime,))


# --- a TOML writer for what tomllib reads ---------------------------------------------------------------------------

def toml_key(key):
    return key if _BARE_KEY.match(key) else _toml_string(key)


def _toml_string(value):
    out = []
    for char in value:
        if char in ('"', "\\"):
            out.append("\\" + char)
        elif char == "\n":
            out.append("\\n")
        elif char == "\t":
            out.append("\\t")
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\u%04x" % ord(char))
        else:
            out.append(char)
    return '"%s"' % "".join(out)


def toml_value(value):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _toml_string(value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, list):
        return "[%s]" % ", ".join(toml_value(item) for item in value)
    if isinstance(value, dict):
        return "{%s}" % ", ".join("%s = %s" % (toml_key(k), toml_value(v)) for k, v in value.items())
    raise AnsibleFilterError("Cannot write %r as TOML." % (value,))


def _is_table_array(value):
    return isinstance(value, list) and value and all(isinstance(item, dict) for item in value)


def toml_dumps(data):
    """TOML text for a dict as tomllib returns it: keys in their order, scalars before sub-tables, containerd's
    two-space indentation per table level. tomllib.loads(toml_dumps(d)) == d."""
    lines = []
    _dump_table(data, [], lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _dump_table(table, path, lines, array_item=False):
    """Write ``table`` at ``path``; return whether a header line was written for it.

    A table with only sub-tables needs no header of its own (theirs define it), except an item of an array of
    tables (``array_item``), whose ``[[...]]`` header is always written: without it the item's first sub-table
    would land in the previous item, or outside the array.
    """
    indent = "  " * max(len(path) - 1, 0)
    scalars = [(k, v) for k, v in table.items() if not isinstance(v, dict) and not _is_table_array(v)]
    tables = [(k, v) for k, v in table.items() if isinstance(v, dict)]
    arrays = [(k, v) for k, v in table.items() if _is_table_array(v)]
    header = None
    if array_item:
        header = "%s[[%s]]" % (indent, ".".join(toml_key(k) for k in path))
    elif path and (scalars or not (tables or arrays)):
        header = "%s[%s]" % (indent, ".".join(toml_key(k) for k in path))
    if header is not None:
        lines.append("")
        lines.append(header)
    for key, value in scalars:
        lines.append("%s%s%s = %s" % (indent, "  " if path else "", toml_key(key), toml_value(value)))
    for key, value in tables:
        _dump_table(value, path + [key], lines)
    for key, value in arrays:
        for item in value:
            _dump_table(item, path + [key], lines, array_item=True)
    return header is not None


class FilterModule(object):
    def filters(self):
        return {
            "container_runtime_docker": container_runtime_docker,
            "container_runtime_containerd": container_runtime_containerd,
        }
