"""The next release made from the real one (tests/snapshot/repack.py), for the in-branch update tests.

The real artifact it mimics: the next upload of Ubuntu's nvidia-graphics-drivers-580-server in jammy-updates
(580.196.07-0ubuntu0.22.04.1, listed on 4 December 2026), whose packages differ from 580.178.04's by version, by
the names that carry the version (nvidia-firmware-580-server-<version>) and by versioned paths
(/lib/firmware/nvidia/<version>/, libcuda.so.<version>). The package built here has those shapes, copied from the
real 580.178.04 control files (Depends on its siblings at "= version" and "<= upstream-1").
"""
import hashlib
import importlib.util
import os
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[3]
spec = importlib.util.spec_from_file_location("repack", ROOT / "tests" / "snapshot" / "repack.py")
repack = importlib.util.module_from_spec(spec)
spec.loader.exec_module(repack)

OLD = "580.178.04-0ubuntu0.22.04.1"
CONTROL = """Package: nvidia-firmware-580-server-580.178.04
Source: nvidia-graphics-drivers-580-server
Version: %s
Architecture: amd64
Maintainer: Ubuntu Core Developers <ubuntu-devel-discuss@lists.ubuntu.com>
Installed-Size: 4
Depends: libnvidia-compute-580-server (= %s), nvidia-kernel-common-580-server (<= 580.178.04-1), libc6 (>= 2.34)
Provides: nvidia-firmware-580.178.04
Section: restricted/libs
Priority: optional
Description: Firmware files used by the kernel module
 Firmware for 580.178.04, 1580.178.040 stays.
""" % (OLD, OLD)

pytestmark = pytest.mark.skipif(not any(os.access(os.path.join(d, "dpkg-deb"), os.X_OK)
                                        for d in os.environ.get("PATH", "").split(os.pathsep)),
                                reason="dpkg-deb is not installed")


@pytest.fixture
def real_shaped_deb(tmp_path):
    tree = tmp_path / "tree"
    (tree / "DEBIAN").mkdir(parents=True)
    (tree / "DEBIAN" / "control").write_text(CONTROL)
    (tree / "DEBIAN" / "postinst").write_text("#!/bin/sh\ndkms add -m nvidia-srv -v 580.178.04\n")
    (tree / "DEBIAN" / "postinst").chmod(0o755)
    firmware = tree / "lib" / "firmware" / "nvidia" / "580.178.04"
    firmware.mkdir(parents=True)
    (firmware / "gsp_ga10x.bin").write_bytes(b"\x7fELF\x00580.178.04\x00")
    lib = tree / "usr" / "lib" / "x86_64-linux-gnu"
    lib.mkdir(parents=True)
    (lib / "libcuda.so.580.178.04").write_bytes(b"\x7fELF\x00\x01")
    os.symlink("libcuda.so.580.178.04", lib / "libcuda.so.1")
    (tree / "usr" / "src").mkdir(parents=True)
    (tree / "usr" / "src" / "dkms.conf").write_text('PACKAGE_VERSION="580.178.04"\n')
    sums = "".join("%s  %s\n" % (hashlib.md5(p.read_bytes()).hexdigest(), p.relative_to(tree).as_posix())
                   for p in sorted(tree.rglob("*")) if p.is_file() and not p.is_symlink() and "DEBIAN" not in p.parts)
    (tree / "DEBIAN" / "md5sums").write_text(sums)
    deb = tmp_path / "in.deb"
    subprocess.run(["dpkg-deb", "--root-owner-group", "-b", str(tree), str(deb)], check=True, stdout=subprocess.DEVNULL)
    return deb


def contents(deb, tmp_path):
    tree = tmp_path / ("x-" + deb.name)
    subprocess.run(["dpkg-deb", "-R", str(deb), str(tree)], check=True)
    return tree


def test_only_the_version_and_what_names_it_change(real_shaped_deb, tmp_path):
    deb, text = repack.repack(real_shaped_deb, tmp_path / "out", "580.196.07")
    new = "580.196.07-0ubuntu0.22.04.1+repack1"
    assert deb.name == "nvidia-firmware-580-server-580.196.07_%s_amd64.deb" % new
    fields = subprocess.run(["dpkg-deb", "-f", str(deb)], check=True, stdout=subprocess.PIPE, text=True).stdout
    assert "Package: nvidia-firmware-580-server-580.196.07\n" in fields
    assert "Version: %s\n" % new in fields
    assert ("Depends: libnvidia-compute-580-server (= %s), nvidia-kernel-common-580-server (<= 580.196.07-1), "
            "libc6 (>= 2.34)\n" % new) in fields
    assert "Provides: nvidia-firmware-580.196.07\n" in fields
    # Everything else is the real control file's, the description included (prose is not rewritten).
    assert fields.replace("580.196.07", "580.178.04").replace(repack.MARK, "") == CONTROL
    assert " Firmware for 580.178.04, 1580.178.040 stays.\n" in fields
    assert text == fields

    tree = contents(deb, tmp_path)
    # Versioned paths move; the binary's bytes do not change; the link follows its target.
    assert (tree / "lib/firmware/nvidia/580.196.07/gsp_ga10x.bin").read_bytes() == b"\x7fELF\x00580.178.04\x00"
    assert not (tree / "lib/firmware/nvidia/580.178.04").exists()
    assert os.readlink(tree / "usr/lib/x86_64-linux-gnu/libcuda.so.1") == "libcuda.so.580.196.07"
    assert (tree / "usr/lib/x86_64-linux-gnu/libcuda.so.580.196.07").read_bytes() == b"\x7fELF\x00\x01"
    # Text files name the new release; md5sums describe the new tree.
    assert (tree / "usr/src/dkms.conf").read_text() == 'PACKAGE_VERSION="580.196.07"\n'
    assert "-v 580.196.07" in (tree / "DEBIAN/postinst").read_text()
    assert os.access(tree / "DEBIAN/postinst", os.X_OK)
    sums = dict(reversed(line.split("  ", 1)) for line in (tree / "DEBIAN/md5sums").read_text().splitlines())
    assert sorted(sums) == ["lib/firmware/nvidia/580.196.07/gsp_ga10x.bin",
                            "usr/lib/x86_64-linux-gnu/libcuda.so.580.196.07", "usr/src/dkms.conf"]
    assert sums["usr/src/dkms.conf"] == hashlib.md5(b'PACKAGE_VERSION="580.196.07"\n').hexdigest()


def test_a_longer_number_that_contains_the_version_is_not_touched():
    assert repack.rename("1580.178.040 2.580.178.04 580.178.04 580.178.04-1 so.580.178.04", "580.178.04", "580.196.07") == \
        "1580.178.040 2.580.178.04 580.196.07 580.196.07-1 so.580.196.07"


@pytest.mark.parametrize("version, expected", [
    ("580.178.04-0ubuntu0.22.04.1", "580.196.07-0ubuntu0.22.04.1+repack1"),
    ("1:580.178.04-1", "1:580.196.07-1+repack1"),
    ("580.178.04", "580.196.07-0+repack1"),
])
def test_new_version_keeps_epoch_and_revision(version, expected):
    assert repack.new_version(version, "580.196.07") == expected


def test_the_index_entry_names_the_file_and_its_hashes(real_shaped_deb, tmp_path):
    deb, text = repack.repack(real_shaped_deb, tmp_path / "out", "580.196.07")
    entry = repack.stanza(text, "pool/restricted/n/nvidia-graphics-drivers-580-server/" + deb.name, deb)
    data = deb.read_bytes()
    assert entry.startswith("Package: nvidia-firmware-580-server-580.196.07\n")
    assert "\nSize: %d\n" % len(data) in entry
    assert entry.endswith("\nSHA256: %s" % hashlib.sha256(data).hexdigest())
