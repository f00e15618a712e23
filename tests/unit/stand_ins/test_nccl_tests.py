"""The nccl-tests stand-in tarball, laid out like GitHub's tag tarball, and the nccl role unpacking it.

Real artifact: https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.13.9.tar.gz, the nccl role's default
nccl_tests_source. GitHub names a tag tarball's single top-level directory <repository>-<tag without a leading
"v">: nccl-tests-2.13.9/. Its top level at tag v2.13.9 (github.com/NVIDIA/nccl-tests, `git ls-tree v2.13.9`) is
.gitignore, LICENSE.txt, Makefile, README.md, doc/, src/ and verifiable/; `make` at the top builds src/ into
build/ (all_reduce_perf and the other *_perf programs).

The role test runs the nccl role's own tasks (roles/nccl/tasks/bandwidth.yml, taken from the file by name) on
this machine against the stand-in tarball, twice: the first run must leave the Makefile where the build step
runs `make` (__nccl_tests_build_dir), the second must change nothing. Unpacking into the tarball's own
top-level directory, as the role did before, fails both.
"""
import io
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile

import pytest
import yaml

from .conftest import ROOT, load_builder

REAL_TOP_LEVEL = {".gitignore", "LICENSE.txt", "Makefile", "README.md", "doc", "src", "verifiable"}
ROLE = ROOT / "roles" / "nccl"
UNPACK_TASKS = ["Create the nccl-tests directory", "Create the directory of this tarball's sources",
                "Unpack the sources without their top-level directory"]


@pytest.fixture(scope="module")
def tarball():
    builder = load_builder()
    return builder.nccl_tests_tarball(builder.load_spec())


def members(data):
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        return tar.getmembers()


def test_served_at_githubs_path_for_the_roles_default_tag(tarball):
    url_path, _data = tarball
    default = yaml.safe_load((ROLE / "defaults" / "main.yml").read_text())["nccl_tests_source"]
    assert default.endswith("/" + url_path)          # .../NVIDIA/nccl-tests/archive/refs/tags/v2.13.9.tar.gz


def test_one_top_level_directory_named_like_githubs(tarball):
    url_path, data = tarball
    tag = pathlib.PurePath(url_path).name[:-len(".tar.gz")]
    top = "nccl-tests-" + tag.lstrip("v")
    assert top == "nccl-tests-2.13.9"
    names = [member.name for member in members(data)]
    assert {name.split("/")[0] for name in names} == {top}
    first_level = {name.split("/")[1] for name in names if name.count("/") >= 1}
    assert first_level <= REAL_TOP_LEVEL
    assert {"Makefile", "src", "README.md", "LICENSE.txt"} <= first_level
    assert top + "/src/Makefile" in names
    assert all(member.uid == 0 and member.mtime == 0 for member in members(data))


def test_make_at_the_top_builds_build_all_reduce_perf(tarball, tmp_path):
    _url_path, data = tarball
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(tmp_path, filter="data")
    cuda = tmp_path / "cuda"
    (cuda / "bin").mkdir(parents=True)
    (cuda / "bin" / "nvcc").write_text("#!/bin/sh\necho 'Cuda compilation tools, release 12.4, V12.4.131'\n")
    (cuda / "bin" / "nvcc").chmod(0o755)
    nccl = tmp_path / "nccl"
    (nccl / "include").mkdir(parents=True)
    (nccl / "include" / "nccl.h").write_text("/* stand-in */\n")
    source = tmp_path / "nccl-tests-2.13.9"
    subprocess.run(["make", "MPI=0", "CUDA_HOME=%s" % cuda, "NCCL_HOME=%s" % nccl], cwd=source, check=True,
                   capture_output=True)
    run = subprocess.run([str(source / "build" / "all_reduce_perf"), "-b", "1M", "-e", "1M", "-g", "2"],
                         check=True, capture_output=True, text=True)
    assert "# Avg bus bandwidth" in run.stdout


def role_tasks():
    """The unpacking tasks of bandwidth.yml, as the role has them (found by name inside its block)."""
    tasks = yaml.safe_load((ROLE / "tasks" / "bandwidth.yml").read_text())
    found = {}

    def walk(items):
        for task in items:
            if task.get("name") in UNPACK_TASKS:
                found[task["name"]] = task
            walk(task.get("block", []))
    walk(tasks)
    assert sorted(found) == sorted(UNPACK_TASKS), "bandwidth.yml no longer has the unpacking tasks by these names"
    return [found[name] for name in UNPACK_TASKS]


def without_ownership(task):
    """The task without owner/group (root on a node; the test may run as another user)."""
    return {key: ({k: v for k, v in value.items() if k not in ("owner", "group")} if isinstance(value, dict) else value)
            for key, value in task.items()}


def play(tmp_path, tarball_path, nccl_tests_dir):
    role_vars = yaml.safe_load((ROLE / "vars" / "main.yml").read_text())
    playbook = [{
        "name": "The nccl role's unpacking of nccl-tests",
        "hosts": "localhost",
        "gather_facts": False,
        "vars": {"nccl_tests_source": "https://github.com/NVIDIA/nccl-tests/archive/refs/tags/v2.13.9.tar.gz",
                 "nccl_tests_dir": str(nccl_tests_dir),
                 "__nccl_tests_tarball": str(tarball_path),
                 "__nccl_tests_build_dir": role_vars["__nccl_tests_build_dir"]},
        "tasks": [without_ownership(task) for task in role_tasks()],
    }]
    path = tmp_path / "unpack.yml"
    path.write_text(yaml.safe_dump(playbook, sort_keys=False))
    return path


@pytest.mark.skipif(not shutil.which("ansible-playbook"), reason="needs ansible-playbook (tools/venv.sh)")
def test_the_role_unpacks_githubs_layout_once(tarball, tmp_path):
    _url_path, data = tarball
    nccl_tests_dir = tmp_path / "opt" / "nccl-tests"
    tarball_path = tmp_path / "v2.13.9.tar.gz"
    tarball_path.write_bytes(data)
    playbook = play(tmp_path, tarball_path, nccl_tests_dir)
    env = dict(os.environ, ANSIBLE_LOCAL_TEMP=str(tmp_path / "tmp"), ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default",
               ANSIBLE_LOCALHOST_WARNING="false", ANSIBLE_INVENTORY_UNPARSED_WARNING="false",
               ANSIBLE_HOME=str(tmp_path / "ansible-home"), ANSIBLE_PYTHON_INTERPRETER=sys.executable)

    def run():
        result = subprocess.run(["ansible-playbook", "-i", "localhost,", "-c", "local", str(playbook)], env=env,
                                capture_output=True, text=True, check=False)
        assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
        recap = re.search(r"^localhost\s+:\s+ok=(\d+)\s+changed=(\d+)", result.stdout, re.M)
        return {"ok": int(recap.group(1)), "changed": int(recap.group(2))}

    first = run()
    build_dir = nccl_tests_dir / "v2.13.9"
    assert (build_dir / "Makefile").is_file() and (build_dir / "src" / "Makefile").is_file()
    assert sorted(os.listdir(nccl_tests_dir)) == ["v2.13.9"]
    assert first["changed"] >= 2
    assert run()["changed"] == 0
