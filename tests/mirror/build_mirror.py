"""Builds the local, signed apt mirror of stand-in packages the tests install (test-only code).

NVIDIA's repositories are not reachable from the bench, so packages with NVIDIA's real names and version
strings are built here from tests/mirror/packages.json: each installs small stand-in files (a `nvcc` that
prints the real version text, a `nvidia-smi` that fails the way the real one does without a kernel module).

The repository is laid out like NVIDIA's CUDA repository, a flat one per distribution and architecture
(`<out>/cuda/debian12/x86_64/` with `Packages`, `Release`, `InRelease`, `Release.gpg`), signed with a
throwaway ed25519 key made for the build. The public key is `<repo dir>/gpufleet-test.pub` and its
fingerprint `<out>/fingerprint`. It also packs the nccl-tests stand-in (tests/mirror/nccl-tests-standin, the real
build interface and output format) as `<out>/nccl-tests/nccl-tests-standin.tar.gz`, as a mirror would serve
NVIDIA's nccl-tests release tarball.

    python3 tests/mirror/build_mirror.py OUT_DIR
"""
import json
import os
import pathlib
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent


def build_deb(work, pool, package):
    root = work / ("%s_%s" % (package["name"], package["version"]))
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        "Package: %s" % package["name"],
        "Version: %s" % package["version"],
        "Architecture: %s" % package.get("architecture", "amd64"),
        "Maintainer: gpufleet.node tests <tests@gpufleet.invalid>",
        "Section: %s" % package.get("section", "multiverse/devel"),
        "Priority: optional",
        "Description: stand-in for %s (gpufleet.node tests)" % package["name"],
    ]
    for field in ("Depends", "Provides", "Conflicts", "Replaces"):
        if package.get(field.lower()):
            control.insert(3, "%s: %s" % (field, package[field.lower()]))
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    for path, spec in package.get("files", {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spec["content"].replace("@VERSION@", package["version"]))
        target.chmod(int(spec.get("mode", "0644"), 8))
    for link, source in package.get("links", {}).items():
        target = root / link.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(source, target)
    name = "%s_%s_%s.deb" % (package["name"], package["version"], package.get("architecture", "amd64"))
    deb = pool / name
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(deb)], check=True,
                   stdout=subprocess.DEVNULL)


def sign(repo, gnupg_home, key_id):
    gpg = ["gpg", "--homedir", str(gnupg_home), "--batch", "--yes", "--local-user", key_id]
    subprocess.run(gpg + ["--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")], check=True)
    subprocess.run(gpg + ["-abs", "-o", str(repo / "Release.gpg"), str(repo / "Release")], check=True)


def pack_nccl_tests(out):
    """A reproducible tarball of the nccl-tests stand-in, one top-level directory like a release tarball."""
    source = HERE / "nccl-tests-standin"
    (out / "nccl-tests").mkdir()

    def normalise(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        return info

    with tarfile.open(out / "nccl-tests" / "nccl-tests-standin.tar.gz", "w:gz") as tar:
        for path in sorted(source.rglob("*")):
            tar.add(path, arcname="nccl-tests-standin/" + str(path.relative_to(source)), recursive=False,
                    filter=normalise)


def main(out):
    out = pathlib.Path(out).resolve()
    spec = json.loads((HERE / "packages.json").read_text())
    if out.exists():
        shutil.rmtree(out)
    out.mkdir(parents=True)
    gnupg_home = pathlib.Path(tempfile.mkdtemp(prefix="gpufleet-mirror-gpg-"))
    try:
        subprocess.run(["gpg", "--homedir", str(gnupg_home), "--batch", "--passphrase", "", "--quick-gen-key",
                        "gpufleet.node test mirror <mirror@gpufleet.invalid>", "ed25519", "sign", "never"],
                       check=True, stderr=subprocess.DEVNULL)
        listing = subprocess.run(["gpg", "--homedir", str(gnupg_home), "--with-colons", "--list-keys"],
                                 check=True, capture_output=True, text=True).stdout
        fingerprint = next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))
        armored = subprocess.run(["gpg", "--homedir", str(gnupg_home), "--armor", "--export", fingerprint],
                                 check=True, capture_output=True, text=True).stdout
        for repo_path, packages in spec["repositories"].items():
            repo = out / repo_path
            repo.mkdir(parents=True)
            with tempfile.TemporaryDirectory() as work:
                for package in packages:
                    build_deb(pathlib.Path(work), repo, package)
            packages_index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True,
                                            capture_output=True, text=True).stdout
            (repo / "Packages").write_text(packages_index)
            subprocess.run("gzip -9kn Packages", shell=True, cwd=repo, check=True)
            release = subprocess.run(
                ["apt-ftparchive", "-o", "APT::FTPArchive::Release::Origin=gpufleet-test",
                 "-o", "APT::FTPArchive::Release::Label=gpufleet-test", "release", "."],
                cwd=repo, check=True, capture_output=True, text=True).stdout
            (repo / "Release").write_text(release)
            sign(repo, gnupg_home, fingerprint)
            (repo / "gpufleet-test.pub").write_text(armored)
        (out / "fingerprint").write_text(fingerprint + "\n")
        pack_nccl_tests(out)
    finally:
        shutil.rmtree(gnupg_home, ignore_errors=True)
    print("mirror built in %s (key %s)" % (out, fingerprint))


if __name__ == "__main__":
    main(sys.argv[1])
