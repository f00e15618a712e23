"""The rollout the tests judge, run once from the controller: branch 595 over the five nodes with
playbooks/site.yml, while jobs run, in check mode first, then for real, then again (nothing left to change), each
time with Slurm and the packages of n1 and n5 watched every second from outside the play.

The nodes as prepare.yml leaves them: all on driver branch 580 (NVIDIA's ubuntu2204 path, the stand-in mirror)
except n3, already at 595. Jobs: n1 and n5 run one each that ends when the test releases it, n3 and n4 run jobs
that outlast the rollout. n2 has an uncorrected ECC error planted on its GPU 1, so its node check after the change
fails; n4's scheduler_drain_timeout is 10 s. n5 is drained and resumed through the generic command hook
(scheduler_type command, molecule.yml), the others through the role's Slurm support.
"""
import json
import os
import pathlib
import re
import subprocess
import threading
import time

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[4]
SITE = ROOT / "playbooks" / "site.yml"
CONTROLLER = "gpufleet-slurm-ctl"
NODES = ["gpufleet-slurm-n1", "gpufleet-slurm-n2", "gpufleet-slurm-n3", "gpufleet-slurm-n4", "gpufleet-slurm-n5"]
N1, N2, N3, N4, N5 = NODES
# The nodes whose job the test releases once the node has been seen draining for five seconds, and the job's name.
RELEASED = {N1: "hold-n1", N5: "hold-n5"}
REASON = "gpufleet: NVIDIA driver change"
# The operator's change and the rollout's batches: the five nodes in one batch, two of which may fail.
ROLLOUT = ["-e", "nvidia_driver_branch=595", "-e", "gpufleet_driver_batch=100%",
           "-e", "gpufleet_driver_max_fail_percentage=50"]
TIMES_FILE = pathlib.Path(os.environ.get("MOLECULE_EPHEMERAL_DIRECTORY", "/tmp")) / "slurm-drain-seconds.json"
# The driver's packages as dpkg has them (state, name, version): what the change moves.
DRIVER_PACKAGES = ("dpkg-query -W -f '${db:Status-Abbrev} ${Package} ${Version}\\n' "
                   "| grep -E ' (cuda-drivers|libnvidia-|nvidia-)' | sort")


def docker_exec(container, command, check=True):
    result = subprocess.run(["docker", "exec", container, "sh", "-c", command],
                            capture_output=True, text=True, check=False, timeout=60)
    if check:
        assert result.returncode == 0, (container, command, result.stdout, result.stderr)
    return result


def slurm_nodes():
    """{node: (state, reason)} from sinfo(1): %T the state in extended form, %E the reason."""
    out = docker_exec(CONTROLLER, "sinfo --noheader --Node --format='%N|%T|%E'").stdout
    return dict((name, (state, reason)) for name, state, reason in (line.split("|", 2) for line in out.splitlines()))


def slurm_jobs():
    """{job name: (job id, state, node)} from squeue(1)."""
    out = docker_exec(CONTROLLER, "squeue --noheader --format='%j|%i|%T|%N'").stdout
    return dict((name, (job, state, node)) for name, job, state, node in (line.split("|") for line in out.splitlines()))


def driver_packages(node):
    return docker_exec(node, DRIVER_PACKAGES).stdout


def drained(state):
    return "drain" in state


def submit(name, node):
    """A batch job on the node that runs until /tmp/release-<name> appears there."""
    docker_exec(CONTROLLER, "sbatch --job-name=%s --nodelist=%s --output=/dev/null --chdir=/tmp "
                            "--wrap='while [ ! -e /tmp/release-%s ]; do sleep 1; done'" % (name, node, name))


def release(name, node):
    docker_exec(node, "touch /tmp/release-%s" % name)


class Watcher(threading.Thread):
    """Samples Slurm's nodes and jobs and the driver packages of n1 and n5 every second while a run goes on."""

    def __init__(self):
        super().__init__(daemon=True)
        self.samples = []
        self.done = threading.Event()

    def run(self):
        while not self.done.is_set():
            self.samples.append({"time": time.monotonic(), "nodes": slurm_nodes(), "jobs": slurm_jobs(),
                                 "packages": dict((node, driver_packages(node)) for node in RELEASED)})
            self.done.wait(1)


def site(*extra, release_jobs=False):
    """ansible-playbook site.yml --tags nvidia_driver with the rollout's settings; returns rc, output, seconds and
    the samples taken meanwhile. release_jobs: release the job of each node of RELEASED once Slurm has shown the
    node draining for five seconds; "released" says when, per node."""
    argv = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(SITE), "--tags", "nvidia_driver"]
    argv += ROLLOUT + list(extra)
    watcher = Watcher()
    watcher.start()
    start = time.monotonic()
    process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    released = {}
    while release_jobs and len(released) < len(RELEASED) and process.poll() is None and time.monotonic() - start < 900:
        for node, job in RELEASED.items():
            draining = [sample for sample in watcher.samples if sample["nodes"][node][0] == "draining"]
            if node not in released and len(draining) >= 5:
                released[node] = time.monotonic()
                release(job, node)
        time.sleep(1)
    output, _errors = process.communicate(timeout=900)
    seconds = time.monotonic() - start
    watcher.done.set()
    watcher.join()
    return {"rc": process.returncode, "output": output, "seconds": seconds, "samples": watcher.samples,
            "released": released}


def record_seconds(label, result):
    """The run's seconds, and those of the check run it started (the scheduler's message says them)."""
    times = json.loads(TIMES_FILE.read_text()) if TIMES_FILE.exists() else {}
    took = re.search(r"the check run took ([0-9]+):([0-9]+):([0-9.]+)", result["output"])
    check = int(took.group(1)) * 3600 + int(took.group(2)) * 60 + float(took.group(3)) if took else None
    times[label] = [result["seconds"], check]
    TIMES_FILE.write_text(json.dumps(times))


@pytest.fixture(scope="session")
def before():
    """What the nodes run before the rollout, with the jobs started (each running before anything else)."""
    submit("hold-n1", N1)
    submit("hold-n3", N3)
    submit("hold-n4", N4)
    submit("hold-n5", N5)
    for _attempt in range(30):
        if [state for _job, state, _node in slurm_jobs().values()] == ["RUNNING"] * 4:
            break
        time.sleep(1)
    jobs = slurm_jobs()
    assert sorted(jobs) == ["hold-n1", "hold-n3", "hold-n4", "hold-n5"] \
        and {state for _name, state, _node in jobs.values()} == {"RUNNING"}
    return {"packages": dict((node, driver_packages(node)) for node in NODES), "nodes": slurm_nodes(), "jobs": jobs}


@pytest.fixture(scope="session")
def check_run(before):  # pylint: disable=redefined-outer-name,unused-argument
    """Check mode on nodes the change disrupts (n1 and n5, running a job each) and one it does not (n3)."""
    result = site("--check", "--limit", "%s,%s,%s" % (N1, N3, N5))
    record_seconds("site.yml --check on n1, n3 and n5 (nothing drained, nothing changed)", result)
    result["packages"] = dict((node, driver_packages(node)) for node in NODES)
    return result


@pytest.fixture(scope="session")
def rollout(check_run):  # pylint: disable=redefined-outer-name,unused-argument
    result = site(release_jobs=True)
    record_seconds("site.yml, the rollout (the jobs of n1 and n5 released after 5 s of draining)", result)
    result["packages"] = dict((node, driver_packages(node)) for node in NODES)
    result["nodes"] = slurm_nodes()
    result["jobs"] = slurm_jobs()
    return result


@pytest.fixture(scope="session")
def second_run(rollout):  # pylint: disable=redefined-outer-name,unused-argument
    """The rollout again on the nodes it finished (n4, still waiting for its job, left out)."""
    result = site("--limit", "!" + N4)
    record_seconds("site.yml again (without n4)", result)
    result["packages"] = dict((node, driver_packages(node)) for node in NODES)
    result["nodes"] = slurm_nodes()
    return result


def pytest_sessionstart(session):  # pylint: disable=unused-argument
    TIMES_FILE.unlink(missing_ok=True)


def pytest_terminal_summary(terminalreporter):
    if TIMES_FILE.exists():
        terminalreporter.write_sep("-", "seconds per run: the run / its check run")
        for label, (seconds, check) in json.loads(TIMES_FILE.read_text()).items():
            terminalreporter.write_line("%-70s %.0f / %s" % (label, seconds, "-" if check is None else "%.0f" % check))
