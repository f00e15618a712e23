"""The next release of a driver branch, made from the real one: its packages repacked with a higher version.

An in-branch driver update (580.178.04 -> the next 580 release) is the change a fleet makes most often, but the
archive serves one release per branch at a time (jammy-updates lists 580.196.07 of nvidia-graphics-drivers-580-server
while its pool answers 404; jammy-security serves 580.178.04). So tests/snapshot/assemble.py serves, beside the
snapshot, a copy of the distribution whose index also lists the snapshot's own release of NEXT's sources repacked
at NEXT's version: the same files, where only the version and whatever names it were changed:

- the control fields: Version (the upstream version replaced, the Debian revision marked ``+repack1``), package
  names that carry the version (``nvidia-firmware-580-server-580.178.04``) and every relation that names either;
- paths that carry the upstream version (``/lib/firmware/nvidia/580.178.04/``, ``libcuda.so.580.178.04``,
  ``/usr/src/nvidia-srv-580.178.04``) and symbolic links pointing at them, so two releases install side by side
  where the real ones do (the firmware package is co-installable by name);
- text files that name the upstream version (maintainer scripts, ``dkms.conf``'s PACKAGE_VERSION, conffiles),
  and DEBIAN/md5sums computed again. Binary files (ELF libraries and programs) are left byte for byte.

The result is as the next upload would look to dpkg and apt: its relations ask for the same versions of its
siblings, its versioned packages are new names, its firmware and sources land in new directories.
"""

import hashlib
import os
import pathlib
import re
import shutil
import subprocess
import tempfile

# What assemble.py serves at OUT/next/<distribution>: the real release of these sources in the snapshot, and
# the same packages at `to`. `to` is the upload jammy-updates lists but does not serve (REFERENCE, 5 December 2026).
NEXT = {"distribution": "ubuntu", "codename": "jammy", "suite": "jammy-updates",
        "sources": ["nvidia-graphics-drivers-580-server", "fabric-manager-580", "libnvidia-nscq-580"],
        "to": "580.196.07"}
MARK = "+repack1"
RELATION_FIELDS = ("Depends", "Pre-Depends", "Recommends", "Suggests", "Provides", "Conflicts", "Breaks",
                   "Replaces", "Enhances")


def split_version(version):
    """(epoch with its colon or "", upstream, revision or "") of a Debian version."""
    epoch, _colon, rest = version.rpartition(":")
    upstream, dash, revision = rest.rpartition("-")
    if not dash:
        upstream, revision = rest, ""
    return (epoch + ":" if epoch else ""), upstream, revision


def new_version(version, to):
    """The repacked upload's version: the upstream version replaced, the revision kept and marked."""
    epoch, _upstream, revision = split_version(version)
    return "%s%s-%s%s" % (epoch, to, revision or "0", MARK)


def rename(text, old_upstream, to):
    """A name or path with the upstream version in it, at the new one (never a part of a longer number)."""
    return re.sub(r"(?<![0-9])(?<![0-9]\.)%s(?![0-9])" % re.escape(old_upstream), to, text)


def control(text, to):
    """The control file of the repacked package: Version, versioned names and the relations that name them."""
    version = re.search(r"^Version: *(\S+)", text, re.MULTILINE).group(1)
    _epoch, old_upstream, _revision = split_version(version)
    repacked = new_version(version, to)
    lines = []
    for line in text.splitlines():
        name, sep, value = line.partition(":")
        if line.startswith((" ", "\t")) or not sep:
            lines.append(line)
        elif name == "Version":
            lines.append("Version: " + repacked)
        elif name in ("Package", "Source") + RELATION_FIELDS:
            lines.append(name + ":" + rename(value.replace(version, repacked), old_upstream, to))
        else:
            lines.append(line)
    return "\n".join(lines) + "\n", version, repacked


def is_text(path):
    with open(path, "rb") as handle:
        return b"\0" not in handle.read(8192)


def repack_tree(tree, old_upstream, to):
    """Renames paths and link targets, and rewrites text files, of an unpacked package (dpkg-deb -R layout)."""
    # Deepest first, so a renamed directory does not move the paths still to be visited.
    for path in sorted(tree.rglob("*"), key=lambda p: len(p.parts), reverse=True):
        if path.is_symlink():
            target = os.readlink(path)
            if old_upstream in target:
                path.unlink()
                os.symlink(rename(target, old_upstream, to), path)
        elif path.is_file() and is_text(path):
            data = path.read_text(encoding="utf-8", errors="surrogateescape")
            if old_upstream in data:
                path.write_text(rename(data, old_upstream, to), encoding="utf-8", errors="surrogateescape")
        if old_upstream in path.name:
            path.rename(path.with_name(rename(path.name, old_upstream, to)))


def md5sums(tree):
    lines = []
    for path in sorted(tree.rglob("*")):
        relative = path.relative_to(tree)
        if relative.parts[0] == "DEBIAN" or path.is_symlink() or not path.is_file():
            continue
        lines.append("%s  %s\n" % (hashlib.md5(path.read_bytes()).hexdigest(), relative.as_posix()))
    return "".join(lines)


def repack(deb, out_dir, to):
    """Repacks one real .deb at upstream version `to` into out_dir; returns (path, control text)."""
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-repack-"))
    try:
        tree = work / "tree"
        subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
        text, version, repacked = control((tree / "DEBIAN" / "control").read_text(encoding="utf-8"), to)
        _epoch, old_upstream, _revision = split_version(version)
        repack_tree(tree, old_upstream, to)
        (tree / "DEBIAN" / "control").write_text(text, encoding="utf-8")
        if (tree / "DEBIAN" / "md5sums").exists():
            (tree / "DEBIAN" / "md5sums").write_text(md5sums(tree))
        package = re.search(r"^Package: *(\S+)", text, re.MULTILINE).group(1)
        arch = re.search(r"^Architecture: *(\S+)", text, re.MULTILINE).group(1)
        target = pathlib.Path(out_dir) / ("%s_%s_%s.deb" % (package, repacked.split(":")[-1], arch))
        target.parent.mkdir(parents=True, exist_ok=True)
        # gzip at level 1: the content is what matters here, and xz would cost minutes over the whole driver.
        subprocess.run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "-b", str(tree), str(target)], check=True,
                       stdout=subprocess.DEVNULL)
        return target, text
    finally:
        shutil.rmtree(work, ignore_errors=True)


def stanza(text, filename, deb):
    """The index entry of a repacked file: its control fields, where it lies, its size and hashes."""
    data = pathlib.Path(deb).read_bytes()
    return (text.rstrip("\n") + "\nFilename: %s\nSize: %d\nMD5sum: %s\nSHA256: %s"
            % (filename, len(data), hashlib.md5(data).hexdigest(), hashlib.sha256(data).hexdigest()))
