# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The archive's entries in apt's source files, one-line (``sources.list``) or deb822 (``*.sources``): their
components (``apt_source_components``) and their mirror (``apt_source_mirror``); and the pattern that finds a
repository's entries however a file writes its URI (``apt_source_uri_pattern``).

The filters are documented beside this file, in ``apt_source_components.yml``, ``apt_source_mirror.yml`` and
``apt_source_uri_pattern.yml``.
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


def _archive_uris(text, release, deb822):
    """The URIs that carry ``main`` for a pocket of ``release``: the archive's own (and its security archive)."""
    uris = set()
    if deb822:
        for stanza in re.split(r"\n[ \t]*\n", text):
            fields = _fields(stanza)
            if ("main" in fields.get("components", "").split()
                    and any(_is_pocket(suite, release) for suite in fields.get("suites", "").split())):
                uris.update(uri.rstrip("/") for uri in fields.get("uris", "").split())
    else:
        for line in text.split("\n"):
            match = _ONE_LINE.match(line)
            if match and _is_pocket(match.group("suite"), release) and "main" in match.group("components").split():
                uris.add(match.group("uri").rstrip("/"))
    return uris


def _with_signed_by(options, signed_by):
    """One-line options ``[a=b c=d]`` with signed-by set (or kept as they are when signed_by is empty)."""
    if not signed_by:
        return options
    kept = [option for option in (options or "").strip("[] ").split() if not option.startswith("signed-by=")]
    return "[%s] " % " ".join(kept + ["signed-by=" + signed_by])


_ONE_LINE_PARTS = re.compile(r"^(?P<indent>\s*)(?P<type>deb)\s+(?P<options>\[[^\]]*\]\s+)?(?P<uri>\S+)(?P<rest>\s.*)$")


def _mirror_one_line(text, release, uri, signed_by):
    archive = _archive_uris(text, release, False)
    out, matched = [], 0
    for line in text.split("\n"):
        match = _ONE_LINE_PARTS.match(line)
        suite = (match.group("rest").split() or [""])[0] if match else ""
        if match and match.group("uri").rstrip("/") in archive and _is_pocket(suite, release):
            matched += 1
            line = "%s%s %s%s%s" % (match.group("indent"), match.group("type"),
                                    _with_signed_by(match.group("options"), signed_by), uri, match.group("rest"))
        out.append(line)
    return "\n".join(out), matched


def _set_field(stanza, name, value):
    """The stanza with field ``name`` (continuation lines included) set to ``value``, or added at its end."""
    pattern = r"^%s:[ \t]*.*(?:\n[ \t]+\S.*)*$" % name
    if re.search(pattern, stanza, flags=re.MULTILINE | re.IGNORECASE):
        return re.sub(pattern, lambda _match: "%s: %s" % (name, value), stanza, count=1,
                      flags=re.MULTILINE | re.IGNORECASE)
    return stanza.rstrip("\n") + "\n%s: %s" % (name, value) + ("\n" if stanza.endswith("\n") else "")


def _mirror_deb822(text, release, uri, signed_by):
    text = text.replace("\r\n", "\n")
    archive = _archive_uris(text, release, True)
    parts = re.split(r"(\n[ \t]*\n)", text)
    out, matched = [], 0
    for stanza in parts:
        fields = _fields(stanza) if stanza.strip() else {}
        uris = [entry.rstrip("/") for entry in fields.get("uris", "").split()]
        if uris and all(entry in archive for entry in uris) and any(
                _is_pocket(suite, release) for suite in fields.get("suites", "").split()):
            matched += 1
            stanza = _set_field(stanza, "URIs", uri)
            if signed_by:
                stanza = _set_field(stanza, "Signed-By", signed_by)
        out.append(stanza)
    return "".join(out), matched


def apt_source_mirror(text, release, uri, signed_by="", deb822=None):
    """``{"content", "entries"}``: the source file's text with every entry of the distribution's archive for
    ``release`` (and its pockets) served from ``uri`` instead, and the number of such entries.

    The archive's entries are those whose URI carries ``main`` for the release or one of its pockets (on Debian
    that is the archive and its security archive), and every other entry of the release's pockets at the same
    URIs (Ubuntu's installer puts ``universe`` on lines of its own); a third-party repository keeps its URI.
    ``signed_by``, when given, becomes the entries' ``signed-by`` (a mirror that signs with its own key), else
    their options stay as they are (a mirror that keeps the archive's signatures). ``deb-src`` entries (a mirror
    rarely carries sources), comments and the order of everything are kept.
    """
    if not isinstance(text, str):
        raise AnsibleFilterError("apt_source_mirror expects the text of an apt source file")
    if not release or not isinstance(release, str):
        raise AnsibleFilterError("apt_source_mirror needs the release codename, such as bookworm")
    if not isinstance(uri, str) or not re.match(r"^(https?|file)://\S+$", uri):
        raise AnsibleFilterError("apt_source_mirror needs the mirror's URL (http://, https:// or file://); got %r" % (uri,))
    if signed_by and (not isinstance(signed_by, str) or not signed_by.startswith("/")):
        raise AnsibleFilterError("apt_source_mirror: signed_by must be a keyring's absolute path; got %r" % (signed_by,))
    if deb822 is None:
        deb822 = re.search(r"^Types:", text, flags=re.MULTILINE | re.IGNORECASE) is not None
    content, entries = (_mirror_deb822 if deb822 else _mirror_one_line)(text, release, uri.rstrip("/"), signed_by or "")
    return {"content": content, "entries": entries}


# dpkg's architecture names, as a repository URI may carry one in a path segment (NVIDIA's container toolkit
# repository: <url>/stable/deb/amd64/), where a source file may write apt's $(ARCH) instead (sources.list(5)).
DPKG_ARCHITECTURES = ("amd64", "arm64", "armhf", "armel", "i386", "ppc64el", "s390x", "riscv64")


def apt_source_uri_pattern(uri):
    """A regular expression that finds ``uri`` in apt source files as they may write it: with or without its
    trailing slash, and with apt's ``$(ARCH)`` in place of a path segment that is a dpkg architecture (NVIDIA's own
    list line for its container toolkit is ``deb [signed-by=...] <url>/stable/deb/$(ARCH) /``), followed by white
    space or the end."""
    if not isinstance(uri, str) or not re.match(r"^(https?|file)://\S+$", uri):
        raise AnsibleFilterError("apt_source_uri_pattern needs a repository URL (http://, https:// or file://); got %r"
                                 % (uri,))
    parts = []
    for segment in uri.rstrip("/").split("/"):
        escaped = re.escape(segment)
        parts.append("(?:%s|\\$\\(ARCH\\))" % escaped if segment in DPKG_ARCHITECTURES else escaped)
    return "/".join(parts) + "/?(?:\\s|$)"


class FilterModule(object):
    """gpufleet.node apt source filters."""

    def filters(self):
        return {
            "apt_source_components": apt_source_components,
            "apt_source_mirror": apt_source_mirror,
            "apt_source_uri_pattern": apt_source_uri_pattern,
        }
