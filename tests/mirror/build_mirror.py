"""Builds the local, signed apt mirror of stand-in packages the tests install (test-only code).

NVIDIA's repositories are not reachable from the bench, so packages with NVIDIA's real names, version strings
and file paths are built here from the tables of tests/mirror/packages.json. Each installs small stand-in files
(an `nvcc` that prints the real version text, a `nvidia-smi` that fails the way the real one does without a kernel
module, the persistence daemon's unit as the real package ships it).

The mirror is laid out like NVIDIA's CUDA repository: one flat repository per distribution and architecture,
`<out>/cuda/<distribution>/x86_64/` with `Packages`, `Packages.gz`, `Release`, `InRelease` and `Release.gpg`,
and each path holds only what NVIDIA publishes there (CUDA 12.1 on ubuntu2204, nothing before 12.3 on debian12).
The Release file has the fields NVIDIA's repository tooling writes (github.com/NVIDIA/cuda-repo-management,
repo-debian.sh: `Origin: NVIDIA`, `Label: NVIDIA CUDA`, the architecture, the date, MD5Sum/SHA1/SHA256 of
Packages and Packages.gz, `Acquire-By-Hash: no`); it is signed with a throwaway ed25519 key made for the build, whose
public key is `<repo dir>/gpufleet-test.pub` and fingerprint `<out>/fingerprint`.

NVIDIA's container toolkit repository is laid out as NVIDIA publishes it (the gh-pages branch of
github.com/NVIDIA/libnvidia-container, served as nvidia.github.io/libnvidia-container): one flat repository per
Debian architecture, `<out>/libnvidia-container/stable/deb/amd64/`, with `Packages`, `Packages.xz` and a clearsigned
`InRelease` only (nvidia-container-toolkit's scripts/packages-sign-all.sh), holding nvidia-container-toolkit,
nvidia-container-toolkit-base, libnvidia-container-tools and libnvidia-container1 at each version of the table, with
NVIDIA's dependencies between them and a stand-in `nvidia-ctk` (tests/mirror/nvidia-ctk-standin.py).

It also packs the nccl-tests stand-in (tests/mirror/nccl-tests-standin: the real build interface and output
format) the way GitHub serves a tag tarball: `<out>/NVIDIA/nccl-tests/archive/refs/tags/<tag>.tar.gz`, unpacking
into `nccl-tests-<tag without the v>/`.

    python3 tests/mirror/build_mirror.py OUT_DIR

Where each table comes from is in tests/unit/stand_ins/ (one test per stand-in, each naming its sources).
"""
import email.utils
import gzip
import hashlib
import io
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile

HERE = pathlib.Path(__file__).resolve().parent
ARCH = "amd64"
LIBDIR = "/usr/lib/x86_64-linux-gnu"


def load_spec():
    return json.loads((HERE / "packages.json").read_text())


# --- the tables, expanded into packages ------------------------------------------------------------------------

def _file(spec, name, **substitutions):
    entry = dict(spec["files"][name])
    for key, value in substitutions.items():
        entry["content"] = entry["content"].replace("@%s@" % key.upper(), value)
    return entry


NVCC_TEXT = """nvcc: NVIDIA (R) Cuda compiler driver
Copyright (c) {copyright} NVIDIA Corporation
Built on {built_on}
Cuda compilation tools, release {release}, V{nvcc}
Build {build}
"""

NVCC = """#!/bin/sh
# stand-in nvcc (gpufleet.node tests): prints what the real {version} nvcc prints
case "$1" in
  --version|-V)
    cat <<'TEXT'
{text}TEXT
    ;;
  *) echo "nvcc stand-in: only --version" >&2; exit 1 ;;
esac
"""


def nvcc_text(toolkit):
    """What the real nvcc of this toolkit prints for --version."""
    return NVCC_TEXT.format(**toolkit)


def toolkit_packages(toolkit):
    release, dashed = toolkit["release"], toolkit["release"].replace(".", "-")
    prefix = "/usr/local/cuda-%s" % release
    cudart = "libcudart.so.%s" % toolkit["cudart"]
    version_json = json.dumps({"cuda": {"name": "CUDA SDK", "version": toolkit["version"].split("-")[0]},
                               "cuda_nvcc": {"name": "CUDA NVCC", "version": toolkit["nvcc"]},
                               "cuda_cudart": {"name": "CUDA Runtime (cudart)", "version": toolkit["cudart"]}},
                              indent=3) + "\n"
    return [{
        "name": "cuda-toolkit-%s" % dashed, "version": toolkit["version"], "section": "multiverse/devel",
        "files": {
            prefix + "/bin/nvcc": {
                "content": NVCC.format(version=toolkit["version"].split("-")[0], text=nvcc_text(toolkit)),
                "mode": "0755"},
            prefix + "/version.json": {"content": version_json},
            prefix + "/targets/x86_64-linux/lib/" + cudart: {"content": ""},
        },
        "links": {
            prefix + "/lib64": "targets/x86_64-linux/lib",
            prefix + "/targets/x86_64-linux/lib/libcudart.so.12": cudart,
        },
    }]


def toolkit_metapackages(spec, distribution):
    """The unversioned `cuda-toolkit` and `cuda` at the newest release of the path (never installed by the roles)."""
    result = []
    for meta in spec["toolkit_metapackages"]:
        if meta["distribution"] != distribution:
            continue
        toolkit = next(t for t in spec["toolkits"] if t["release"] == meta["release"])
        dashed, upstream = meta["release"].replace(".", "-"), toolkit["version"].split("-")[0]
        result += [
            {"name": "cuda-toolkit", "version": toolkit["version"],
             "depends": "cuda-toolkit-%s (>= %s)" % (dashed, upstream)},
            {"name": "cuda", "version": toolkit["version"],
             "depends": "cuda-toolkit-%s (>= %s), cuda-drivers (>= %s)" % (dashed, upstream, meta["drivers_at_least"])},
        ]
    return result


def nccl_packages(build):
    upstream = build["version"].split("-")[0]
    major, minor, patch = upstream.split(".")
    version = "%s+cuda%s" % (build["version"], build["cuda"])
    return [
        {"name": "libnccl2", "version": version, "section": "libs",
         "files": {LIBDIR + "/libnccl.so." + upstream: {"content": ""}},
         "links": {LIBDIR + "/libnccl.so.2": "libnccl.so." + upstream}},
        {"name": "libnccl-dev", "version": version, "section": "libdevel", "depends": "libnccl2 (= %s)" % version,
         "files": {"/usr/include/nccl.h": {
             "content": "/* stand-in nccl.h (gpufleet.node tests) */\n#define NCCL_MAJOR %s\n"
                        "#define NCCL_MINOR %s\n#define NCCL_PATCH %s\n"
                        "#define NCCL_SUFFIX \"\"\n" % (major, minor, patch)}},
         "links": {LIBDIR + "/libnccl.so": "libnccl.so.2"}},
    ]


def cudnn_packages(build):
    upstream = build["version"].split("-")[0]
    short = ".".join(upstream.split(".")[:3])
    major = upstream.split(".")[0]
    if build["kind"] == "libcudnn8":
        version = "%s+cuda%s" % (build["version"], build["cuda"])
        return [
            {"name": "libcudnn8", "version": version, "section": "libs",
             "files": {LIBDIR + "/libcudnn.so." + short: {"content": ""}},
             "links": {LIBDIR + "/libcudnn.so.8": "libcudnn.so." + short}},
            {"name": "libcudnn8-dev", "version": version, "section": "libdevel",
             "depends": "libcudnn8 (= %s)" % version,
             "files": {"/usr/include/x86_64-linux-gnu/cudnn_version_v8.h": {
                 "content": "/* stand-in (gpufleet.node tests) */\n#define CUDNN_MAJOR 8\n#define CUDNN_MINOR %s\n"
                            "#define CUDNN_PATCHLEVEL %s\n" % tuple(short.split(".")[1:3])}}},
        ]
    # cuDNN 9 is named per CUDA major release: libcudnn9-cuda-12, its headers and -dev package.
    suffix = build["kind"].split("libcudnn%s" % major)[1]
    version = build["version"]
    return [
        {"name": "libcudnn%s%s" % (major, suffix), "version": version, "section": "libs",
         "files": {LIBDIR + "/libcudnn.so." + short: {"content": ""}},
         "links": {LIBDIR + "/libcudnn.so.%s" % major: "libcudnn.so." + short}},
        {"name": "libcudnn%s-headers%s" % (major, suffix), "version": version, "section": "libdevel",
         "files": {"/usr/include/x86_64-linux-gnu/cudnn_version_v%s.h" % major: {
             "content": "/* stand-in (gpufleet.node tests) */\n#define CUDNN_MAJOR %s\n#define CUDNN_MINOR %s\n"
                        "#define CUDNN_PATCHLEVEL %s\n" % tuple(short.split("."))}}},
        {"name": "libcudnn%s-dev%s" % (major, suffix), "version": version, "section": "libdevel",
         "depends": "libcudnn%s%s (= %s), libcudnn%s-headers%s (= %s)" % (
             major, suffix, version, major, suffix, version)},
    ]


def driver_packages(spec, driver, distribution="ubuntu2204"):
    """NVIDIA's driver packages of one release, as NVIDIA's Ubuntu repository builds them (Canonical's packaging).

    cuda-drivers-<branch> depends on the branch's packages at the release or newer (>=); nvidia-driver-<branch>
    on each of them at exactly its own version; the package names of a branch provide and conflict with the
    unversioned names (nvidia-utils, nvidia-persistenced, ...) so two branches never install together. Fabric
    manager and NSCQ carry the branch in their names up to 575 and not from 580 on (they then provide the
    branch-named name), and have their own revision. On the debian12 path cuda-drivers-580 has NVIDIA's Debian
    revision (-1). From 590 on the names carry no branch: unversioned_driver_packages.

    The kernel module layer is Canonical's (debian/templates/control.in of canonical/nvidia-graphics-drivers, which
    NVIDIA's Ubuntu packages follow): nvidia-driver-<branch> depends on nvidia-dkms-<branch>, nvidia-kernel-common-
    <branch> and nvidia-kernel-source-<branch> (the proprietary modules), nvidia-driver-<branch>-open on the -open
    DKMS and source packages; the DKMS, source and common packages provide and conflict with nvidia-dkms-kernel,
    nvidia-kernel-source and nvidia-kernel-common, so two flavours or two branches never install together. Besides
    them NVIDIA's repository has nvidia-kernel-open-<branch>, which its installation guide installs before
    cuda-drivers-<branch> for the open modules (kernel_module_packages). DKMS itself (dkms, the firmware package) is
    left out: nothing is built in a container.
    """
    packaging = spec["driver_packaging"]
    branch, upstream = driver["branch"], driver["version"]
    if int(branch) >= int(packaging["unversioned_from"]):
        return unversioned_driver_packages(spec, driver)
    own = "%s-%s" % (upstream, packaging["driver_revision"])
    revisions = dict(packaging["metapackage_revision"], **packaging.get("metapackage_revision_%s" % distribution, {}))
    meta = "%s-%s" % (upstream, revisions[branch])
    fm = "%s-%s" % (upstream, packaging["fabricmanager_revision"])
    unversioned_fm = int(branch) >= int(packaging["unversioned_fabricmanager_from"])
    files = {
        "smi": _file(spec, "nvidia-smi"),
        "persistenced": _file(spec, "nvidia-persistenced"),
        "unit": _file(spec, "nvidia-persistenced.service/canonical"),
        "fm": _file(spec, "nv-fabricmanager", upstream=upstream),
        "fm_unit": _file(spec, "nvidia-fabricmanager.service"),
    }
    fm_name = "nvidia-fabricmanager" if unversioned_fm else "nvidia-fabricmanager-%s" % branch
    nscq_name = "libnvidia-nscq" if unversioned_fm else "libnvidia-nscq-%s" % branch
    return [
        {"name": "libnvidia-compute-%s" % branch, "version": own, "section": "non-free/libs",
         "provides": "libnvidia-compute, libnvidia-ml.so.1 (= %s), libcuda.so.1 (= %s)" % (own, own),
         "conflicts": "libnvidia-compute", "replaces": "libnvidia-compute",
         "files": {LIBDIR + "/libnvidia-ml.so." + upstream: {"content": ""},
                   LIBDIR + "/libcuda.so." + upstream: {"content": ""}},
         "links": {LIBDIR + "/libnvidia-ml.so.1": "libnvidia-ml.so." + upstream,
                   LIBDIR + "/libcuda.so.1": "libcuda.so." + upstream}},
        {"name": "nvidia-utils-%s" % branch, "version": own, "section": "non-free/libs",
         "provides": "nvidia-utils, nvidia-smi", "conflicts": "nvidia-utils, nvidia-smi",
         "replaces": "nvidia-utils, nvidia-smi",
         "files": {"/usr/bin/nvidia-smi": files["smi"]}},
        {"name": "nvidia-compute-utils-%s" % branch, "version": own, "section": "non-free/libs",
         "depends": "libnvidia-compute-%s" % branch,
         "provides": "nvidia-compute-utils, nvidia-persistenced",
         "conflicts": "nvidia-compute-utils, nvidia-persistenced",
         "replaces": "nvidia-compute-utils, nvidia-persistenced",
         "files": {"/usr/bin/nvidia-persistenced": files["persistenced"],
                   "/lib/systemd/system/nvidia-persistenced.service": files["unit"]}},
        {"name": "nvidia-driver-%s" % branch, "version": own, "section": "non-free/libs",
         "depends": ", ".join(["%s-%s (= %s)" % (name, branch, own)
                               for name in ("libnvidia-compute", "nvidia-compute-utils", "nvidia-utils")]
                              + kernel_module_depends(branch, upstream, own, ""))},
        {"name": "nvidia-driver-%s-open" % branch, "version": own, "section": "non-free/libs",
         "depends": ", ".join(["%s-%s (= %s)" % (name, branch, own)
                               for name in ("libnvidia-compute", "nvidia-compute-utils", "nvidia-utils")]
                              + kernel_module_depends(branch, upstream, own, "-open"))},
        {"name": "cuda-drivers-%s" % branch, "version": meta, "section": "multiverse/devel",
         "depends": ", ".join(["%s-%s (>= %s)" % (name, branch, upstream)
                               for name in ("libnvidia-compute", "nvidia-compute-utils", "nvidia-utils")]
                              + [cuda_drivers_driver_dependency(spec, branch, upstream)])},
        {"name": fm_name, "version": fm, "section": "multiverse/devel",
         "provides": ("nvidia-fabricmanager-%s" % branch) if unversioned_fm else "nvidia-fabricmanager",
         "conflicts": "" if unversioned_fm else "nvidia-fabricmanager",
         "replaces": "" if unversioned_fm else "nvidia-fabricmanager",
         "files": {"/usr/bin/nv-fabricmanager": files["fm"],
                   "/lib/systemd/system/nvidia-fabricmanager.service": files["fm_unit"],
                   "/usr/share/nvidia/nvswitch/fabricmanager.cfg": {"content": "# stand-in (gpufleet.node tests)\n"}}},
        {"name": nscq_name, "version": fm, "section": "multiverse/devel",
         "provides": ("libnvidia-nscq-%s" % branch) if unversioned_fm else "",
         "files": {LIBDIR + "/libnvidia-nscq.so." + upstream: {"content": ""}}},
    ] + kernel_module_packages(spec, branch, upstream, own)


def kernel_module_depends(branch, upstream, own, flavour):
    """What nvidia-driver-<branch>[-open] depends on for its kernel modules (control.in: the DKMS and common
    packages between the upstream version and <upstream>-1, the source package at the driver's own version)."""
    return ["nvidia-dkms-%s%s (<= %s-1)" % (branch, flavour, upstream), "nvidia-dkms-%s%s (>= %s)" % (branch, flavour, upstream),
            "nvidia-kernel-common-%s (<= %s-1)" % (branch, upstream), "nvidia-kernel-common-%s (>= %s)" % (branch, upstream),
            "nvidia-kernel-source-%s%s (= %s)" % (branch, flavour, own)]


def cuda_drivers_driver_dependency(spec, branch, upstream):
    """cuda-drivers-<branch>'s dependency on the driver: nvidia-driver-<branch> alone for 535 (its real Depends),
    from 550 any of the four driver metapackages of the branch (the real apt message for cuda-drivers-550)."""
    if int(branch) < int(spec["driver_packaging"]["kernel_modules"]["driver_alternatives_from"]):
        return "nvidia-driver-%s (>= %s)" % (branch, upstream)
    return " | ".join("nvidia-driver-%s%s (>= %s)" % (branch, variant, upstream)
                      for variant in ("", "-open", "-server", "-server-open"))


def kernel_module_packages(spec, branch, upstream, own):
    """The kernel module packages of one branch-named release: the proprietary and the open DKMS and source
    packages and the common one, with control.in's Depends, Provides, Conflicts and Replaces, and NVIDIA's
    nvidia-kernel-open-<branch> (see packages.json's driver_packaging.kernel_modules for what is unconfirmed)."""
    table = spec["driver_packaging"]["kernel_modules"]
    common = "nvidia-kernel-common-%s (<= %s-1), nvidia-kernel-common-%s (>= %s)" % (branch, upstream, branch, upstream)
    packages = [{"name": "nvidia-kernel-common-%s" % branch, "version": own, "section": "non-free/libs",
                 "provides": "nvidia-kernel-common", "conflicts": "nvidia-kernel-common",
                 "replaces": "nvidia-kernel-common"}]
    for flavour in ("", "-open"):
        source = "nvidia-kernel-source-%s%s" % (branch, flavour)
        packages += [
            {"name": source, "version": own, "section": "non-free/libs", "multi_arch": "foreign",
             "provides": "nvidia-kernel-source", "conflicts": "nvidia-kernel-source",
             "replaces": "nvidia-kernel-source"},
            {"name": "nvidia-dkms-%s%s" % (branch, flavour), "version": own, "section": "non-free/libs",
             "multi_arch": "foreign", "provides": "nvidia-dkms-kernel", "conflicts": "nvidia-dkms-kernel",
             "replaces": "nvidia-dkms-kernel",
             "depends": "%s (<= %s-1), %s (>= %s), %s" % (source, upstream, source, upstream, common)},
        ]
    packages.append({"name": "nvidia-kernel-open-%s" % branch, "version": own, "section": "multiverse/devel",
                     "depends": table["kernel_open_depends"].replace("{branch}", branch).replace("{upstream}", upstream)})
    return packages


def nvlsm_packages(spec, distribution):
    """NVLSM, the NVLink subnet manager of 4th-generation NVSwitch systems: one package named without a branch and
    versioned by date, with the configuration file fabric manager's start script is given
    (--nvlsm-config-file /usr/share/nvidia/nvlsm/nvlsm.conf)."""
    table = spec["nvlsm"]
    if distribution not in table["distributions"]:
        return []
    return [{"name": "nvlsm", "version": table["version"], "section": "multiverse/devel", "depends": table["depends"],
             "files": {path: {"content": content} for path, content in table["files"].items()}}]


PINNING_PREFERENCES = """# stand-in (gpufleet.node tests) for NVIDIA's version locking package {name}
Package: {packages}
Pin: version {version}
Pin-Priority: 1000
"""


def unversioned_driver_packages(spec, driver):
    """NVIDIA's driver packages of one release from branch 590 on: the names of the branch-named scheme without
    the branch ("Ubuntu 590 and later packages": libnvidia-compute-580 -> libnvidia-compute, cuda-drivers-580
    removed, cuda-drivers kept), at <version>-1ubuntu1 as NVIDIA's ubuntu repositories version them (595.71.05-1ubuntu1
    for nvidia-fabricmanager and libnvidia-nscq, NVIDIA/gpu-driver-container#899). The same name in two branches
    is one package at two versions, so no Provides/Conflicts between branches; the branch-named packages of 580 and
    before provide and conflict with these names (driver_packages), so apt replaces them in one transaction.

    With them, the version locking packages ("Version locking packages for Ubuntu / Debian"): one per branch
    (nvidia-driver-pinning-595) and one per release (nvidia-driver-pinning-595.91.07, as NVIDIA's driver container
    installs `nvidia-driver-pinning-${DRIVER_VERSION}`), each installing an apt preferences file that keeps the
    driver's packages to its branch or release. Only one can be installed (Provides, Conflicts and Replaces
    nvidia-driver-pinning).
    """
    packaging = spec["driver_packaging"]
    branch, upstream = driver["branch"], driver["version"]
    own = "%s-%s" % (upstream, packaging["unversioned_revision"])
    files = {
        "smi": _file(spec, "nvidia-smi"),
        "persistenced": _file(spec, "nvidia-persistenced"),
        "unit": _file(spec, "nvidia-persistenced.service/canonical"),
        "fm": _file(spec, "nv-fabricmanager", upstream=upstream),
        "fm_unit": _file(spec, "nvidia-fabricmanager.service"),
    }
    user_space = ("libnvidia-compute", "nvidia-compute-utils", "nvidia-utils")
    packages = [
        {"name": "libnvidia-compute", "version": own, "section": "non-free/libs",
         "provides": "libnvidia-ml.so.1 (= %s), libcuda.so.1 (= %s)" % (own, own),
         "files": {LIBDIR + "/libnvidia-ml.so." + upstream: {"content": ""},
                   LIBDIR + "/libcuda.so." + upstream: {"content": ""}},
         "links": {LIBDIR + "/libnvidia-ml.so.1": "libnvidia-ml.so." + upstream,
                   LIBDIR + "/libcuda.so.1": "libcuda.so." + upstream}},
        {"name": "nvidia-utils", "version": own, "section": "non-free/libs", "provides": "nvidia-smi",
         "conflicts": "nvidia-smi", "replaces": "nvidia-smi",
         "files": {"/usr/bin/nvidia-smi": files["smi"]}},
        {"name": "nvidia-compute-utils", "version": own, "section": "non-free/libs",
         "depends": "libnvidia-compute (= %s)" % own, "provides": "nvidia-persistenced",
         "conflicts": "nvidia-persistenced", "replaces": "nvidia-persistenced",
         "files": {"/usr/bin/nvidia-persistenced": files["persistenced"],
                   "/lib/systemd/system/nvidia-persistenced.service": files["unit"]}},
        # The proprietary and the open kernel module trees, and their metapackages (cuda-drivers, nvidia-open).
        {"name": "nvidia-driver", "version": own, "section": "non-free/libs", "conflicts": "nvidia-driver-open",
         "depends": ", ".join("%s (= %s)" % (name, own) for name in user_space)},
        {"name": "nvidia-driver-open", "version": own, "section": "non-free/libs", "conflicts": "nvidia-driver",
         "depends": ", ".join("%s (= %s)" % (name, own) for name in user_space)},
        {"name": "cuda-drivers", "version": own, "section": "multiverse/devel",
         "depends": ", ".join("%s (>= %s)" % (name, upstream) for name in user_space + ("nvidia-driver",))},
        {"name": "nvidia-open", "version": own, "section": "multiverse/devel",
         "depends": ", ".join("%s (>= %s)" % (name, upstream) for name in user_space + ("nvidia-driver-open",))},
        {"name": "nvidia-fabricmanager", "version": own, "section": "multiverse/devel",
         "files": {"/usr/bin/nv-fabricmanager": files["fm"],
                   "/lib/systemd/system/nvidia-fabricmanager.service": files["fm_unit"],
                   "/usr/share/nvidia/nvswitch/fabricmanager.cfg": {"content": "# stand-in (gpufleet.node tests)\n"}}},
        {"name": "libnvidia-nscq", "version": own, "section": "multiverse/devel",
         "files": {LIBDIR + "/libnvidia-nscq.so." + upstream: {"content": ""}}},
    ]
    locked = " ".join(sorted(package["name"] for package in packages))
    for lock, pin, version in ((branch, branch + ".*", "%s-%s" % (branch, packaging["pinning_revision"])),
                               (upstream, upstream + "-*", "%s-%s" % (upstream, packaging["pinning_revision"]))):
        name = "nvidia-driver-pinning-" + lock
        packages.append({
            "name": name, "version": version, "section": "NVIDIA", "architecture": "all",
            "provides": "nvidia-driver-pinning", "conflicts": "nvidia-driver-pinning",
            "replaces": "nvidia-driver-pinning",
            "files": {"/etc/apt/preferences.d/" + name: {
                "content": PINNING_PREFERENCES.format(name=name, packages=locked, version=pin)}}})
    return packages


NVIDIA_CTK_STANDIN = HERE / "nvidia-ctk-standin.py"
CONTAINER_TOOLKIT_STUB = """#!/bin/sh
# stand-in {name} {version} (gpufleet.node tests): the file NVIDIA's package installs; it runs nothing here.
echo "{name} stand-in (gpufleet.node tests): not functional in a test node" >&2
exit 1
"""


def _upstream_tuple(upstream):
    """"1.18.2" -> (1, 18, 2), to compare upstream versions of the container toolkit."""
    return tuple(int(part) for part in re.findall(r"\d+", upstream)[:3])


def container_toolkit_packages(spec, version, commit):
    """NVIDIA's four container toolkit packages of one release, with the Depends of their control files
    (nvidia-container-toolkit packaging/debian/control; libnvidia-container pkg/deb/control, whose tools package
    gets its libnvidia-container1 dependency from the library's shlibs) and the files of their .install lists."""
    upstream = version.split("-")[0]
    table = spec["container_toolkit"]

    def stub(name):
        return {"content": CONTAINER_TOOLKIT_STUB.format(name=name, version=upstream), "mode": "0755"}

    # The file carries no interpreter line (ansible-test's shebang rule); the packaged command gets one.
    ctk = "#!/usr/bin/python3\n" + NVIDIA_CTK_STANDIN.read_text().replace("@VERSION@", version).replace("@UPSTREAM@", upstream)
    base_files = {"/usr/bin/nvidia-ctk": {"content": ctk.replace("@COMMIT@", commit), "mode": "0755"},
                  "/usr/bin/nvidia-container-runtime": stub("nvidia-container-runtime"),
                  "/usr/bin/nvidia-cdi-hook": stub("nvidia-cdi-hook"),
                  "/usr/share/gpufleet-standin/nvidia-container-runtime-config.toml": table["files"]["config.toml"]}
    # packaging/debian/nvidia-container-toolkit-base.postinst
    base_postinst = ("#!/bin/sh\nset -e\ncase \"$1\" in\n  configure)\n    /usr/bin/nvidia-ctk --quiet config "
                     "--config-file=/etc/nvidia-container-runtime/config.toml --in-place\n")
    if _upstream_tuple(upstream) >= _upstream_tuple(table["cdi_refresh_from"]):
        # From 1.18.0: nvidia-cdi-refresh's units and environment file (nvidia-container-toolkit-base.install), and
        # the postinst that enables and starts them where systemd runs (its words and order, as published).
        for name, directory in (("nvidia-cdi-refresh.service", "/etc/systemd/system/"),
                                ("nvidia-cdi-refresh.path", "/etc/systemd/system/"),
                                ("nvidia-cdi-refresh.env", "/etc/nvidia-container-toolkit/")):
            base_files[directory + name] = table["files"][name]
        base_postinst += (
            "    if command -v systemctl >/dev/null 2>&1; then\n"
            "      SYSTEMD_STATE=$(systemctl is-system-running 2>/dev/null || true)\n"
            "      case \"$SYSTEMD_STATE\" in\n"
            "        running|degraded)\n"
            "          systemctl daemon-reload || echo \"Warning: Failed to reload systemd daemon\" >&2\n"
            "          systemctl enable --now nvidia-cdi-refresh.path || echo \"Warning: Failed to enable "
            "nvidia-cdi-refresh.path\" >&2\n"
            "          systemctl enable --now nvidia-cdi-refresh.service || echo \"Warning: Failed to enable "
            "nvidia-cdi-refresh.service\" >&2\n"
            "          echo \"Regenerating NVIDIA CDI specification...\"\n"
            "          systemctl start nvidia-cdi-refresh.service || echo \"Warning: Failed to trigger CDI refresh\" >&2\n"
            "          ;;\n"
            "      esac\n"
            "    fi\n")
    base_postinst += "  ;;\nesac\nexit 0\n"
    return [
        {"name": "libnvidia-container1", "version": version, "section": "libs", "multi_arch": "same",
         "files": {LIBDIR + "/libnvidia-container.so." + upstream: {"content": ""},
                   LIBDIR + "/libnvidia-container-go.so." + upstream: {"content": ""}},
         "links": {LIBDIR + "/libnvidia-container.so.1": "libnvidia-container.so." + upstream,
                   LIBDIR + "/libnvidia-container-go.so.1": "libnvidia-container-go.so." + upstream}},
        {"name": "libnvidia-container-tools", "version": version, "section": "utils",
         "depends": "libc6 (>= 2.14), libcap2 (>= 1:2.10), libnvidia-container1 (>= %s)" % upstream,
         "files": {"/usr/bin/nvidia-container-cli": stub("nvidia-container-cli")}},
        {"name": "nvidia-container-toolkit-base", "version": version, "section": "utils",
         "breaks": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook, "
                   "nvidia-container-toolkit (<= 1.10.0-1)",
         "replaces": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook",
         "files": base_files,
         "postinst": base_postinst},
        {"name": "nvidia-container-toolkit", "version": version, "section": "utils",
         "depends": "nvidia-container-toolkit-base (= %s), libnvidia-container-tools (>= %s), "
                    "libnvidia-container-tools (<< 2.0.0)" % (version, version),
         "breaks": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook",
         "replaces": "nvidia-container-runtime (<= 3.5.0-1), nvidia-container-runtime-hook",
         "files": {"/usr/bin/nvidia-container-runtime-hook": stub("nvidia-container-runtime-hook")},
         # packaging/debian/nvidia-container-toolkit.postinst
         "postinst": "#!/bin/sh\nset -e\ncase \"$1\" in\n  configure)\n    if [ -f /usr/bin/nvidia-container-runtime-hook ] "
                     "&& [ ! -e /usr/bin/nvidia-container-toolkit ]; then\n      ln -s /usr/bin/nvidia-container-runtime-hook "
                     "/usr/bin/nvidia-container-toolkit\n    fi\n  ;;\nesac\nexit 0\n"},
    ]


def packages_for(spec, distribution):
    """Every package of one distribution path, as dictionaries build_deb takes."""
    packages = []
    for toolkit in spec["toolkits"]:
        if distribution in toolkit["distributions"]:
            packages += toolkit_packages(toolkit)
    packages += toolkit_metapackages(spec, distribution)
    for build in spec["nccl"]:
        if distribution in build["distributions"]:
            packages += nccl_packages(build)
    for build in spec["cudnn"]:
        if distribution in build["distributions"]:
            packages += cudnn_packages(build)
    packages += nvlsm_packages(spec, distribution)
    drivers = [driver for driver in spec["drivers"] if distribution in driver["distributions"]]
    pinning = set()
    for driver in drivers:
        for package in driver_packages(spec, driver, distribution):
            if package["name"] not in pinning:   # a branch's pinning package once, not once per release
                packages.append(package)
            if package["name"] == "nvidia-driver-pinning-" + driver["branch"]:
                pinning.add(package["name"])
    # Up to 580, the unversioned cuda-drivers follows the newest branch-named branch (from 590 it is the driver's
    # own metapackage, built with each release above).
    named = [driver for driver in drivers
             if int(driver["branch"]) < int(spec["driver_packaging"]["unversioned_from"])]
    if named:
        newest = max(named, key=lambda driver: [int(part) for part in driver["version"].split(".")])
        revisions = dict(spec["driver_packaging"]["metapackage_revision"],
                         **spec["driver_packaging"].get("metapackage_revision_%s" % distribution, {}))
        meta = "%s-%s" % (newest["version"], revisions[newest["branch"]])
        packages.append({"name": "cuda-drivers", "version": meta, "section": "multiverse/devel",
                         "depends": "cuda-drivers-%s (= %s)" % (newest["branch"], meta)})
    return packages


# --- building ---------------------------------------------------------------------------------------------------

def build_deb(work, pool, package):
    root = work / ("%s_%s" % (package["name"], package["version"]))
    (root / "DEBIAN").mkdir(parents=True)
    control = [
        "Package: %s" % package["name"],
        "Version: %s" % package["version"],
        "Architecture: %s" % package.get("architecture", ARCH),
        "Maintainer: gpufleet.node tests <tests@gpufleet.invalid>",
        "Section: %s" % package.get("section", "multiverse/devel"),
        "Priority: optional",
        "Description: stand-in for %s (gpufleet.node tests)" % package["name"],
    ]
    for field in ("Depends", "Provides", "Conflicts", "Breaks", "Replaces", "Multi-Arch"):
        if package.get(field.lower().replace("-", "_")):
            control.insert(3, "%s: %s" % (field, package[field.lower().replace("-", "_")]))
    (root / "DEBIAN" / "control").write_text("\n".join(control) + "\n")
    if package.get("postinst"):
        (root / "DEBIAN" / "postinst").write_text(package["postinst"])
        (root / "DEBIAN" / "postinst").chmod(0o755)
    for path, spec in package.get("files", {}).items():
        target = root / path.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(spec["content"].replace("@VERSION@", package["version"]))
        target.chmod(int(spec.get("mode", "0644"), 8))
    for link, source in package.get("links", {}).items():
        target = root / link.lstrip("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(source, target)
    name = "%s_%s_%s.deb" % (package["name"], package["version"], package.get("architecture", ARCH))
    subprocess.run(["dpkg-deb", "--root-owner-group", "-Zxz", "--build", str(root), str(pool / name)], check=True,
                   stdout=subprocess.DEVNULL)


def release_text(repo, architecture):
    """A Release file with the fields and layout of NVIDIA's (cuda-repo-management, repo-debian.sh)."""
    files = [repo / "Packages", repo / "Packages.gz"]
    lines = ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Architecture: %s" % architecture,
             "Date: %s" % email.utils.formatdate(usegmt=True)]
    for title, algorithm, width in (("MD5Sum", "md5", 48), ("SHA1", "sha1", 40), ("SHA256", "sha256", 16)):
        lines.append(title + ":")
        for path in files:
            data = path.read_bytes()
            lines.append(" %s %*d %s" % (hashlib.new(algorithm, data).hexdigest(), width, len(data), path.name))
    lines.append("Acquire-By-Hash: no")
    return "\n".join(lines) + "\n"


def sign(repo, gnupg_home, key_id):
    gpg = ["gpg", "--homedir", str(gnupg_home), "--batch", "--yes", "--local-user", key_id]
    subprocess.run(gpg + ["--clearsign", "-o", str(repo / "InRelease"), str(repo / "Release")], check=True)
    subprocess.run(gpg + ["--armor", "--detach-sign", "-o", str(repo / "Release.gpg"), str(repo / "Release")],
                   check=True)


def build_container_toolkit_repo(spec, out, gnupg_home, key_id, armored):
    """The flat repository as nvidia-container-toolkit's scripts/packages-sign-all.sh (deb-sign) makes it:
    apt-ftparchive packages into Packages and Packages.xz, apt-ftparchive release clearsigned into InRelease."""
    table = spec["container_toolkit"]
    repo = out / table["path"]
    repo.mkdir(parents=True)
    with tempfile.TemporaryDirectory() as work:
        for version, commit in table["versions"].items():
            for package in container_toolkit_packages(spec, version, commit):
                build_deb(pathlib.Path(work), repo, package)
    packages_index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True,
                                    capture_output=True, text=True).stdout
    (repo / "Packages").write_text(packages_index)
    subprocess.run(["xz", "-k", "Packages"], cwd=repo, check=True)
    release = subprocess.run(["apt-ftparchive", "release", "."], cwd=repo, check=True, capture_output=True).stdout
    subprocess.run(["gpg", "--homedir", str(gnupg_home), "--batch", "--yes", "--local-user", key_id, "--clearsign",
                    "--personal-digest-preferences", "sha512", "-o", str(repo / "InRelease")],
                   input=release, check=True)
    (repo / "gpufleet-test.pub").write_text(armored)


def nccl_tests_tarball(spec):
    """(URL path, bytes) of the nccl-tests stand-in packed like GitHub's tag tarball: one top-level directory
    nccl-tests-<tag without its leading v>, reproducible (owner root, mtime 0, sorted)."""
    tag = spec["nccl_tests"]["tag"]
    top = "nccl-tests-" + (tag[1:] if tag.startswith("v") else tag)
    source = HERE / "nccl-tests-standin"

    def normalise(info):
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        info.mtime = 0
        return info

    raw = io.BytesIO()
    with tarfile.open(fileobj=raw, mode="w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(source, arcname=top, recursive=False, filter=normalise)
        for path in sorted(source.rglob("*")):
            if "__pycache__" in path.parts:
                continue
            tar.add(path, arcname="%s/%s" % (top, path.relative_to(source)), recursive=False, filter=normalise)
    packed = io.BytesIO()
    with gzip.GzipFile(fileobj=packed, mode="wb", mtime=0) as stream:
        stream.write(raw.getvalue())
    return "NVIDIA/nccl-tests/archive/refs/tags/%s.tar.gz" % tag, packed.getvalue()


def main(out):
    out = pathlib.Path(out).resolve()
    spec = load_spec()
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
        for repo_path, repository in spec["repositories"].items():
            repo = out / repo_path
            repo.mkdir(parents=True)
            with tempfile.TemporaryDirectory() as work:
                for package in packages_for(spec, repository["distribution"]):
                    build_deb(pathlib.Path(work), repo, package)
            packages_index = subprocess.run(["apt-ftparchive", "packages", "."], cwd=repo, check=True,
                                            capture_output=True, text=True).stdout
            (repo / "Packages").write_text(packages_index)
            subprocess.run(["gzip", "-9kn", "Packages"], cwd=repo, check=True)
            (repo / "Release").write_text(release_text(repo, pathlib.PurePath(repo_path).name))
            sign(repo, gnupg_home, fingerprint)
            (repo / "gpufleet-test.pub").write_text(armored)
        build_container_toolkit_repo(spec, out, gnupg_home, fingerprint, armored)
        (out / "fingerprint").write_text(fingerprint + "\n")
        url_path, tarball = nccl_tests_tarball(spec)
        (out / url_path).parent.mkdir(parents=True)
        (out / url_path).write_bytes(tarball)
    finally:
        shutil.rmtree(gnupg_home, ignore_errors=True)
    print("mirror built in %s (key %s): %s" % (out, fingerprint, ", ".join(spec["repositories"])))


if __name__ == "__main__":
    main(sys.argv[1])
