# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Archive components in apt's source files, one-line (``sources.list``) or deb822 (``*.sources``).

The filter is documented beside this file, in ``apt_source_components.yml``.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

# "deb [signed-by=/usr/share/keyrings/x.gpg] http://mirror/debian bookworm main non-free-firmware # comment"
_ONE_LINE = re.compile(r"^(?P<head>\s*deb\s+(?:\[[^\]]*\]\s+)?(?P<uri>\S+)\s+)(?P<suite>\S+)"
                       r"(?P<components>(?:\s+[^\s#]+)*)(?P<tail>\s*(?:#.*)?)$")
# The archive's own pockets of a release; a third-party suite such as bookworm-pgdg is not one.
POCKETS = ("", "-updates", "-security", "-backports", "-proposed")
_DISABLED = ("no", "false", "0", "off")


def _is_pocket(suite, release):
    return any(suite == release + pocket for pocket in POCKETS)


def _one_line(text, release, components):
    lines = text.split("\n")
    # Ubuntu's installer writes "jammy main restricted", "jammy universe", "jammy multiverse" on separate lines:
    # a component present on any line of the same URI and suite counts as present.
    present = {}
    for line in lines:
        match = _ONE_LINE.match(line)
        if match:
            key = (match.group("uri").rstrip("/"), match.group("suite"))
            present.setdefault(key, []).extend(match.group("components").split())
    out, matched = [], 0
    for line in lines:
        match = _ONE_LINE.match(line)
        if match and _is_pocket(match.group("suite"), release) and "main" in match.group("components").split():
            matched += 1
            key = (match.group("uri").rstrip("/"), match.group("suite"))
            missing = [component for component in components if component not in present[key]]
            if missing:
                present[key].extend(missing)
                line = "%s%s %s%s" % (match.group("head"), match.group("suite"),
                                      " ".join(match.group("components").split() + missing), match.group("tail"))
        out.append(line)
    return "\n".join(out), matched


def _fields(stanza):
    """deb822 fields of a stanza, continuation lines joined, names in lower case."""
    fields, last = {}, None
    for line in stanza.split("\n"):
        if line.startswith("#"):
            continue
        if line[:1] in (" ", "\t") and last:
            fields[last] += " " + line.strip()
            continue
        match = re.match(r"^([A-Za-z0-9-]+):[ \t]*(.*)$", line)
        if match:
            last = match.group(1).lower()
            fields[last] = match.group(2).strip()
    return fields


def _deb822(text, release, components):
    text = text.replace("\r\n", "\n")
    parts = re.split(r"(\n[ \t]*\n)", text)
    out, matched = [], 0
    for stanza in parts:
        fields = _fields(stanza) if stanza.strip() else {}
        suites = fields.get("suites", "").split()
        present = fields.get("components", "").split()
        if (fields.get("enabled", "yes").lower() not in _DISABLED and "deb" in fields.get("types", "").split()
                and "main" in present and any(_is_pocket(suite, release) for suite in suites)):
            matched += 1
            missing = [component for component in components if component not in present]
            if missing:
                # One "Components:" line with every component (a value continued on later lines is folded in).
                stanza = re.sub(r"^Components:[ \t]*.*(?:\n[ \t]+\S.*)*$",
                                lambda _match: "Components: " + " ".join(present + missing),
                                stanza, count=1, flags=re.MULTILINE | re.IGNORECASE)
        out.append(stanza)
    return "".join(out), matched


def apt_source_components(text, release, components, deb822=None):
    """``{"content", "entries"}``: the source file's text with every archive entry for ``release`` (and its
    ``-updates``/``-security``/``-backports``/``-proposed`` pockets) carrying each of ``components``, and the
    number of such entries.

    An entry is the archive's when it is a ``deb`` entry of the release or one of its pockets carrying ``main``
    (a third-party repository, ``bookworm stable`` or ``bookworm-pgdg main``, is left alone). In one-line files a
    component another line of the same URI and suite already has counts as present (Ubuntu's installer writes
    ``main restricted``, ``universe`` and ``multiverse`` on separate lines): apt warns about a component
    configured twice. ``deb822`` None guesses the format from the text (a ``Types:`` field); comments, options,
    ``deb-src`` entries and the components already there are kept as they are, in their order.
    """
    if not isinstance(text, str):
        raise AnsibleFilterError("apt_source_components expects the text of an apt source file")
    if not release or not isinstance(release, str):
        raise AnsibleFilterError("apt_source_components needs the release codename, such as bookworm")
    if isinstance(components, str) or not all(isinstance(c, str) and c for c in components):
        raise AnsibleFilterError("apt_source_components needs a list of component names")
    if deb822 is None:
        deb822 = re.search(r"^Types:", text, flags=re.MULTILINE | re.IGNORECASE) is not None
    content, entries = (_deb822 if deb822 else _one_line)(text, release, list(components))
    return {"content": content, "entries": entries}


class FilterModule(object):
    """gpufleet.node apt source filters."""

    def filters(self):
        return {
            "apt_source_components": apt_source_components,
        }
