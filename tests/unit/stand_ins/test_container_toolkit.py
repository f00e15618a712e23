"""The stand-in of NVIDIA's container toolkit repository and its packages, and the stand-in nvidia-ctk.

Real artifacts and sources:

* The repository: https://nvidia.github.io/libnvidia-container/stable/deb/<arch>/ (the gh-pages branch of
  github.com/NVIDIA/libnvidia-container), a flat repository (apt line ``deb [signed-by=...] <url>/stable/deb/$(ARCH) /``
  in NVIDIA's install guide, docs.nvidia.com/datacenter/cloud-native/container-toolkit/latest/install-guide.html).
  Its directory holds Packages, Packages.xz and a clearsigned InRelease, made by nvidia-container-toolkit's
  scripts/packages-sign-all.sh (deb-sign: apt-ftparchive packages | xz, apt-ftparchive release | gpg --clearsign);
  Packages lists ``Filename: ./<name>_<version>_amd64.deb``. The signing key is
  https://nvidia.github.io/libnvidia-container/gpgkey, fingerprint C95B321B61E88C1809C4F759DDCAE044F796ECB0
  ("NVIDIA CORPORATION (Open Source Projects) <cudatools@nvidia.com>", key id DDCAE044F796ECB0: apt's NO_PUBKEY
  DDCAE044F796ECB0 for .../stable/deb/amd64 InRelease in public logs; NVIDIA/libnvidia-container issue 171).
* The packages and their dependencies: nvidia-container-toolkit v1.17.8 packaging/debian/control
  (nvidia-container-toolkit Depends nvidia-container-toolkit-base (= version), libnvidia-container-tools
  (>= version), libnvidia-container-tools (<< 2.0.0)); libnvidia-container pkg/deb/control, and the published
  Packages entry of libnvidia-container-tools 1.17.8-1 (Section utils; Depends libc6 (>= 2.14), libcap2 (>= 1:2.10),
  libnvidia-container1 (>= 1.17.8)). Files: nvidia-container-toolkit-base.install (nvidia-container-runtime,
  nvidia-ctk, nvidia-cdi-hook in /usr/bin), nvidia-container-toolkit.install (nvidia-container-runtime-hook);
  postinst scripts of both (nvidia-ctk config --in-place; the nvidia-container-toolkit link to the hook).
* nvidia-ctk v1.17.8 (cmd/nvidia-ctk): ``--version`` is urfave/cli's "<app name> version <version>" with the app named
  "NVIDIA Container Toolkit CLI" and internal/info's "commit: <git commit>" line (v1.17.8 is f202b80a9b9d);
  ``cdi generate`` flags --output, --format (default yaml, else from the file's extension), --device-name-strategy
  (default index and uuid), --vendor nvidia.com, --class gpu, the spec saved with mode 0644 (pkg/nvcdi/spec
  builder.go), an "all" device added (transform.WithName(allDeviceName)); ``cdi list`` logs "Found %d CDI devices" and
  prints one "<kind>=<name>" per device from /etc/cdi and /var/run/cdi.
* From 1.18.0 (here 1.18.2, tag v1.18.2, commit 9e88ed39710f): nvidia-container-toolkit-base.install adds
  deployments/systemd/nvidia-cdi-refresh.service and .path to /etc/systemd/system/ and nvidia-cdi-refresh.env to
  /etc/nvidia-container-toolkit/; its postinst enables and starts them where systemd runs; the service runs
  ``nvidia-ctk cdi generate`` with NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml, which generate.go reads
  as its --output (cli.EnvVars, new in 1.18).
"""
import json
import os
import subprocess

import pytest

from .conftest import Repository

PATH = "libnvidia-container/stable/deb/amd64"
NAMES = ["libnvidia-container-tools", "libnvidia-container1", "nvidia-container-toolkit",
         "nvidia-container-toolkit-base"]


@pytest.fixture(scope="module")
def repo(mirror):
    return Repository(mirror / PATH)


def test_flat_repository_as_nvidia_publishes_it(mirror, builder):
    assert builder.load_spec()["container_toolkit"]["path"] == PATH
    names = sorted(entry.name for entry in (mirror / PATH).iterdir() if not entry.name.endswith(".deb"))
    assert names == ["InRelease", "Packages", "Packages.xz", "gpufleet-test.pub"]
    inrelease = (mirror / PATH / "InRelease").read_text()
    assert inrelease.startswith("-----BEGIN PGP SIGNED MESSAGE-----\nHash: SHA512\n")
    for index in ("Packages", "Packages.xz"):
        assert (" %s\n" % index) in inrelease


def test_inrelease_checks_with_the_published_key(mirror, tmp_path):
    keyring = tmp_path / "key.gpg"
    subprocess.run(["gpg", "--batch", "--yes", "--dearmor", "-o", str(keyring), str(mirror / PATH / "gpufleet-test.pub")],
                   check=True)
    subprocess.run(["gpgv", "--keyring", str(keyring), str(mirror / PATH / "InRelease")], check=True,
                   capture_output=True)


def test_real_names_versions_and_dependencies(repo):
    assert sorted(repo.packages) == NAMES
    for version in ("1.17.7-1", "1.17.8-1", "1.17.9-1", "1.18.2-1"):
        upstream = version.split("-", maxsplit=1)[0]
        assert repo.field("nvidia-container-toolkit", version, "Depends") == (
            "nvidia-container-toolkit-base (= %s), libnvidia-container-tools (>= %s), "
            "libnvidia-container-tools (<< 2.0.0)" % (version, version))
        assert repo.field("libnvidia-container-tools", version, "Depends") == (
            "libc6 (>= 2.14), libcap2 (>= 1:2.10), libnvidia-container1 (>= %s)" % upstream)
        assert repo.field("libnvidia-container1", version, "Multi-Arch") == "same"
        assert repo.field("nvidia-container-toolkit", version, "Filename") == (
            "./nvidia-container-toolkit_%s_amd64.deb" % version)


def test_files_of_the_install_lists(repo, tmp_path):
    base = repo.unpack("nvidia-container-toolkit-base", "1.17.8-1", tmp_path)
    for name in ("nvidia-ctk", "nvidia-container-runtime", "nvidia-cdi-hook"):
        assert os.access(base / "usr/bin" / name, os.X_OK), name
    toolkit = repo.unpack("nvidia-container-toolkit", "1.17.8-1", tmp_path)
    assert os.access(toolkit / "usr/bin/nvidia-container-runtime-hook", os.X_OK)
    lib = repo.unpack("libnvidia-container1", "1.17.8-1", tmp_path)
    assert os.readlink(lib / "usr/lib/x86_64-linux-gnu/libnvidia-container.so.1") == "libnvidia-container.so.1.17.8"


@pytest.fixture
def ctk(repo, tmp_path):
    root = repo.unpack("nvidia-container-toolkit-base", "1.17.8-1", tmp_path)
    return str(root / "usr/bin/nvidia-ctk")


def fake_smi(tmp_path, lines, rc=0):
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    smi = bindir / "nvidia-smi"
    smi.write_text("#!/bin/sh\nprintf '%s'\nexit %d\n" % ("".join(line + "\\n" for line in lines), rc))
    smi.chmod(0o755)
    return dict(os.environ, PATH="%s:%s" % (bindir, os.environ["PATH"]))


def test_version_output(ctk):
    out = subprocess.run([ctk, "--version"], check=True, capture_output=True, text=True).stdout
    assert out == "NVIDIA Container Toolkit CLI version 1.17.8\ncommit: f202b80a9b9d0db00d9b1d73c0128c8962c55f4d\n"


def test_cdi_generate_writes_the_spec_and_list_reads_it(ctk, tmp_path):
    env = fake_smi(tmp_path, ["0, GPU-aaaa", "1, GPU-bbbb"])
    spec = tmp_path / "cdi" / "nvidia.yaml"
    result = subprocess.run([ctk, "cdi", "generate", "--output=%s" % spec], env=env, capture_output=True, text=True,
                            check=False)
    assert result.returncode == 0, result.stderr
    assert "level=info msg=\"Generated CDI spec with version 0.5.0\"" in result.stderr
    assert oct(spec.stat().st_mode & 0o777) == "0o644"
    text = spec.read_text()
    assert text.startswith("---\ncdiVersion: 0.5.0\n") and "kind: nvidia.com/gpu" in text
    listed = subprocess.run([ctk, "cdi", "list", "--spec-dir", str(spec.parent)], env=env, capture_output=True,
                            text=True, check=True)
    assert listed.stdout.split() == sorted(["nvidia.com/gpu=0", "nvidia.com/gpu=1", "nvidia.com/gpu=GPU-aaaa",
                                            "nvidia.com/gpu=GPU-bbbb", "nvidia.com/gpu=all"])
    assert 'msg="Found 5 CDI devices"' in listed.stderr


def test_cdi_generate_json_from_extension_and_stdout(ctk, tmp_path):
    env = fake_smi(tmp_path, ["0, GPU-aaaa"])
    out = tmp_path / "nvidia.json"
    subprocess.run([ctk, "cdi", "generate", "--output", str(out), "--device-name-strategy=uuid"], env=env, check=True,
                   capture_output=True)
    assert [d["name"] for d in json.loads(out.read_text())["devices"]] == ["GPU-aaaa", "all"]
    printed = subprocess.run([ctk, "cdi", "generate"], env=env, check=True, capture_output=True, text=True).stdout
    assert printed.startswith("---\ncdiVersion:")


def test_cdi_generate_without_a_driver_fails_as_the_real_one(ctk, tmp_path):
    env = fake_smi(tmp_path, [], rc=9)
    result = subprocess.run([ctk, "cdi", "generate", "--output=%s" % (tmp_path / "x.yaml")], env=env,
                            capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert "failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND" in result.stderr
    assert not (tmp_path / "x.yaml").exists()


def test_only_the_commands_used(ctk):
    result = subprocess.run([ctk, "runtime", "configure", "--runtime=docker"], capture_output=True, text=True, check=False)
    assert result.returncode == 2 and "not part of the stand-in" in result.stderr


def postinst(mirror, repo, name, version):
    deb = mirror / PATH / repo.field(name, version, "Filename")
    return subprocess.run(["dpkg-deb", "-I", str(deb), "postinst"], check=True, capture_output=True, text=True).stdout


def test_1_18_ships_nvidia_cdi_refresh_as_published(mirror, repo, tmp_path):
    base = repo.unpack("nvidia-container-toolkit-base", "1.18.2-1", tmp_path)
    service = (base / "etc/systemd/system/nvidia-cdi-refresh.service").read_text()
    for line in ("ConditionPathExists=|/usr/bin/nvidia-smi", "ConditionPathExists=/usr/bin/nvidia-ctk",
                 "Type=oneshot", "Environment=NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml",
                 "EnvironmentFile=-/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env",
                 "ExecCondition=/usr/bin/grep -qE '/(nvidia|nvidia-current)\\\\.ko' /lib/modules/%v/modules.dep",
                 "ExecStart=/usr/bin/nvidia-ctk cdi generate", "Restart=on-failure", "WantedBy=multi-user.target"):
        assert line in service.splitlines(), line
    path = (base / "etc/systemd/system/nvidia-cdi-refresh.path").read_text().splitlines()
    assert [line for line in path if line.startswith("PathChanged=")] == [
        "PathChanged=/lib/modules/%v/modules.dep", "PathChanged=/lib/modules/%v/modules.dep.bin",
        "PathChanged=/usr/bin/nvidia-ctk"]
    assert "# NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml" in (
        base / "etc/nvidia-container-toolkit/nvidia-cdi-refresh.env").read_text().splitlines()
    script = postinst(mirror, repo, "nvidia-container-toolkit-base", "1.18.2-1")
    assert script.index("systemctl enable --now nvidia-cdi-refresh.path") < script.index(
        "systemctl enable --now nvidia-cdi-refresh.service") < script.index("systemctl start nvidia-cdi-refresh.service")
    # 1.17: none of it
    old = repo.unpack("nvidia-container-toolkit-base", "1.17.8-1", tmp_path / "old")
    assert not (old / "etc/systemd").exists()
    assert "nvidia-cdi-refresh" not in postinst(mirror, repo, "nvidia-container-toolkit-base", "1.17.8-1")


def test_1_18_cdi_generate_takes_its_output_from_the_environment(repo, tmp_path):
    new = str(repo.unpack("nvidia-container-toolkit-base", "1.18.2-1", tmp_path / "new") / "usr/bin/nvidia-ctk")
    old = str(repo.unpack("nvidia-container-toolkit-base", "1.17.8-1", tmp_path / "old") / "usr/bin/nvidia-ctk")
    env = dict(fake_smi(tmp_path, ["0, GPU-aaaa"]), NVIDIA_CTK_CDI_OUTPUT_FILE_PATH=str(tmp_path / "run" / "nvidia.yaml"))
    assert subprocess.run([new, "--version"], check=True, capture_output=True, text=True).stdout == (
        "NVIDIA Container Toolkit CLI version 1.18.2\ncommit: 9e88ed39710fd94c7e49fbb26d96492c45e574fb\n")
    assert subprocess.run([new, "cdi", "generate"], env=env, check=True, capture_output=True, text=True).stdout == ""
    assert (tmp_path / "run" / "nvidia.yaml").read_text().startswith("---\ncdiVersion: 0.5.0\n")
    (tmp_path / "run" / "nvidia.yaml").unlink()
    printed = subprocess.run([old, "cdi", "generate"], env=env, check=True, capture_output=True, text=True).stdout
    assert printed.startswith("---\ncdiVersion:") and not (tmp_path / "run" / "nvidia.yaml").exists()
