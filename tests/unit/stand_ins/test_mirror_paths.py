"""The stand-in mirror per distribution path, against NVIDIA's CUDA repository as published.

Real artifact: https://developer.download.nvidia.com/compute/cuda/repos/<distribution>/x86_64/, a flat apt
repository per distribution. Sources:

* Layout and Release fields: github.com/NVIDIA/cuda-repo-management, repo-debian.sh (Packages, Packages.gz,
  Release with "Origin: NVIDIA", "Label: NVIDIA CUDA", MD5Sum/SHA1/SHA256 of both indexes,
  "Acquire-By-Hash: no", Release.gpg and InRelease).
* debian12 starts at CUDA 12.3 (cuda-12-3 12.3.0-1, October 2023; github.com/NVIDIA/nvidia-docker/issues/1791
  "Debian 12: incomplete repository"); the first release per path is gpufleet.node.cuda's platform data
  (roles/cuda/vars/Debian.yml), which this test reads rather than repeats.
* ubuntu2204 has cuda-toolkit-12-1 12.1.1-1 and libnccl2 2.17.1-1+cuda12.1 (nvidia/cuda:12.1.1 images),
  2.18.3-1+cuda12.1, 2.19.3-1+cuda12.2 (nvidia/cuda:12.2.2 image Dockerfiles, NV_LIBNCCL_PACKAGE_VERSION).
* debian12's NCCL builds: 2.19.3-1+cuda12.3 (nvidia/cuda:12.3.0 Dockerfile), 2.20.5-1+cuda12.4 and
  2.21.5-1+cuda12.4 (NCCL's own builds for CUDA 12.4), 2.22.3-1+cuda12.6 (nvidia/cuda:12.6.0). That NVIDIA's
  debian12 path carries libnccl2 at all is unconfirmed (no listing of it was found); the toolkits are confirmed.
* cuDNN: ubuntu2204 has libcudnn8 8.9.0.131-1+cuda12.1 and 8.9.7.29-1+cuda12.2; debian12 has only cuDNN 9,
  named per CUDA major (libcudnn9-cuda-12_9.10.1.4-1_amd64.deb on the debian12 path, in public Dockerfiles).
"""
import hashlib
import re
import subprocess

import yaml

from .conftest import ROOT


def first_releases():
    return yaml.safe_load((ROOT / "roles" / "_nvidia_repo" / "vars" / "main.yml").read_text())[
        "__nvidia_repo_first_cuda_releases"]


def release_of_toolkit(name):
    return name[len("cuda-toolkit-"):].replace("-", ".")


def as_tuple(release):
    return tuple(int(part) for part in release.split("."))


def test_one_flat_repository_per_distribution_path(mirror, builder):
    paths = sorted(builder.load_spec()["repositories"])
    assert paths == ["cuda/debian12/x86_64", "cuda/ubuntu2204/x86_64"]
    for path in paths:
        names = sorted(entry.name for entry in (mirror / path).iterdir() if not entry.name.endswith(".deb"))
        assert names == ["InRelease", "Packages", "Packages.gz", "Release", "Release.gpg", "gpufleet-test.pub"]


def test_release_file_as_nvidia_writes_it(mirror, builder):
    for path in builder.load_spec()["repositories"]:
        repo = mirror / path
        release = (repo / "Release").read_text()
        assert release.startswith("Origin: NVIDIA\nLabel: NVIDIA CUDA\nArchitecture: x86_64\nDate: ")
        assert release.rstrip().endswith("Acquire-By-Hash: no")
        for index in ("Packages", "Packages.gz"):
            digest = hashlib.sha256((repo / index).read_bytes()).hexdigest()
            assert re.search(r"^ %s +%d %s$" % (digest, (repo / index).stat().st_size, re.escape(index)), release, re.M)


def test_signatures_check_with_the_published_key(mirror, builder, tmp_path):
    for path in builder.load_spec()["repositories"]:
        repo = mirror / path
        keyring = tmp_path / ("%s.gpg" % path.replace("/", "-"))
        subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(repo / "gpufleet-test.pub")],
                       check=True)
        subprocess.run(["gpgv", "--keyring", str(keyring), str(repo / "InRelease")], check=True, capture_output=True)
        subprocess.run(["gpgv", "--keyring", str(keyring), str(repo / "Release.gpg"), str(repo / "Release")],
                       check=True, capture_output=True)


def test_no_toolkit_before_the_first_release_of_the_path(repositories):
    firsts = first_releases()
    for distribution, repo in repositories.items():
        toolkits = [release_of_toolkit(name) for name in repo.packages if re.match(r"^cuda-toolkit-\d+-\d+$", name)]
        assert toolkits, distribution
        assert min(as_tuple(release) for release in toolkits) >= as_tuple(firsts[distribution]), (distribution, toolkits)


def test_debian12_has_no_cuda_12_1_nor_a_build_for_it(repositories):
    repo = repositories["debian12"]
    assert "cuda-toolkit-12-1" not in repo.packages and "cuda-toolkit-12-2" not in repo.packages
    first = as_tuple(first_releases()["debian12"])
    assert not [v for v in repo.versions("libnccl2") if as_tuple(v.split("+cuda")[1]) < first]
    assert "libcudnn8" not in repo.packages
    assert repo.versions("libcudnn9-cuda-12") == ["9.10.1.4-1"]


def test_ubuntu2204_has_cuda_12_1_update_1_and_its_nccl(repositories):
    repo = repositories["ubuntu2204"]
    assert repo.versions("cuda-toolkit-12-1") == ["12.1.1-1"]
    assert {"2.17.1-1+cuda12.1", "2.18.3-1+cuda12.1"} <= set(repo.versions("libnccl2"))
    assert repo.versions("libcudnn8") == ["8.9.0.131-1+cuda12.1", "8.9.7.29-1+cuda12.2"]


def test_every_nccl_build_is_for_a_cuda_release_of_the_path_or_later(repositories):
    """NCCL is published per CUDA release (+cuda<release>); a path has builds only for releases it carries or
    newer ones, and each libnccl-dev needs its libnccl2 at the same version."""
    for distribution, repo in repositories.items():
        toolkits = sorted((release_of_toolkit(n) for n in repo.packages if re.match(r"^cuda-toolkit-\d+-\d+$", n)),
                          key=as_tuple)
        for version in repo.versions("libnccl2"):
            assert re.match(r"^\d+\.\d+\.\d+-1\+cuda\d+\.\d+$", version)
            assert as_tuple(version.split("+cuda")[1]) >= as_tuple(toolkits[0]), (distribution, version)
            assert repo.field("libnccl-dev", version, "Depends") == "libnccl2 (= %s)" % version


def test_unversioned_metapackages_follow_the_newest_release_of_the_path(repositories):
    for distribution, repo in repositories.items():
        newest = max((release_of_toolkit(n) for n in repo.packages if re.match(r"^cuda-toolkit-\d+-\d+$", n)),
                     key=as_tuple)
        dashed = newest.replace(".", "-")
        assert repo.versions("cuda-toolkit") == repo.versions("cuda-toolkit-" + dashed), distribution
        assert repo.field("cuda", repo.versions("cuda")[0], "Depends").startswith("cuda-toolkit-%s (>= " % dashed)


def emulated_inventory(tmp_path, os_name):
    """The inventory tools/lib.sh's emulated_inventory writes for one node of the path (fingerprints made up)."""
    cache = tmp_path / os_name
    for part in ("mirror", "snapshot"):
        (cache / part).mkdir(parents=True)
        (cache / part / "fingerprint").write_text("0" * 40 + "\n")
    out = cache / "inventory.yml"
    subprocess.run(["bash", "-c", 'source tools/lib.sh && emulated_inventory "$1" node=hgx-a100-8gpu', "-", str(out)],
                   cwd=ROOT, check=True, env={"PATH": "/usr/bin:/bin", "GPUFLEET_CACHE": str(cache), "NODE_OS": os_name})
    return yaml.safe_load(out.read_text())["gpu_nodes"]["vars"]


def test_emulated_nodes_get_the_roles_default_branch_on_every_path(tmp_path, builder):
    """Both paths serve NVIDIA's 580 builds (NVIDIA's debian12 path has cuda-drivers-580: 580.105.08-1 in the NVIDIA
    developer forums' report of it), so emulated nodes need not pin the end-of-life 535 there."""
    default = yaml.safe_load((ROOT / "roles" / "nvidia_driver" / "defaults" / "main.yml").read_text())["nvidia_driver_branch"]
    spec = builder.load_spec()
    for os_name in ("debian12", "ubuntu2204"):
        settings = emulated_inventory(tmp_path, os_name)
        branch = str(settings.get("nvidia_driver_branch", default))
        assert branch == default, os_name
        assert [d for d in spec["drivers"] if d["branch"] == branch and os_name in d["distributions"]], os_name
