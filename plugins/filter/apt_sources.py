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

# "deb [signed-by=/usr/share/keyrings/x.gpg] http://mirror/debian bookworm main non-free-firmware"
_ONE_LINE = re.compile(r"^(?P<head>\s*deb(?:-src)?\s+(?:\[[^\]]*\]\s+)?\S+\s+)(?P<suite>\S+)(?P<components>(?:\s+[^\s#]+)*)"
                       r"(?P<tail>\s*(?:#.*)?)$")


def _for_release(suite, release):
    """Whether an entry's suite is the release or one of its pockets (bookworm, bookworm-updates, ...)."""
    return suite == release or suite.startswith(release + "-")


def _merge(present, wanted):
    """present followed by the wanted components it lacks; components are compared as whole words, so
    non-free-firmware is not non-free."""
    return present + [component for component in wanted if component not in present]


def _one_line(text, release, components):
    lines, matched = [], 0
    for line in text.split("\n"):
        match = _ONE_LINE.match(line)
        if match and _for_release(match.group("suite"), release) and "main" in match.group("components").split():
            matched += 1
            merged = _merge(match.group("components").split(), components)
            line = "%s%s %s%s" % (match.group("head"), match.group("suite"), " ".join(merged), match.group("tail"))
        lines.append(line)
    return "\n".join(lines), matched


def _deb822(text, release, components):
    out, matched = [], 0
    for stanza in re.split(r"(\n[ \t]*\n)", text):
        if not stanza.strip():
            out.append(stanza)
            continue
        fields = dict((m.group(1).lower(), m.group(2).strip())
                      for m in re.finditer(r"^([A-Za-z-]+):[ \t]*(.*)$", stanza, flags=re.MULTILINE))
        suites = fields.get("suites", "").split()
        enabled = fields.get("enabled", "yes").lower() != "no"
        if (enabled and "main" in fields.get("components", "").split()
                and any(_for_release(suite, release) for suite in suites)):
            matched += 1
            merged = " ".join(_merge(fields["components"].split(), components))
            stanza = re.sub(r"^(Components:)[ \t]*.*$", lambda m: "%s %s" % (m.group(1), merged), stanza,
                            count=1, flags=re.MULTILINE | re.IGNORECASE)
        out.append(stanza)
    return "".join(out), matched


def apt_source_components(text, release, components, deb822=None):
    """``{"content", "entries"}``: the source file's text with every entry for ``release`` (and its
    ``-updates``/``-security``/... pockets) carrying each of ``components``, and the number of such entries.
    An entry is the archive's when its suite is the release or a pocket of it and it carries ``main`` (a
    third-party repository for the same release, such as ``bookworm stable``, is left alone).

    ``deb822`` None guesses the format from the text (a ``Types:`` field); other entries, comments and the
    components already there are kept as they are, in their order.
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
