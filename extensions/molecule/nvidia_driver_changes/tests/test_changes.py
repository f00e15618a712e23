"""Driver changes on a working node, each made by changing one setting, in order (pytest keeps file order): the
node starts with Ubuntu 22.04's real 580.178.04 packages installed and held by converge.

The in-branch update needs a second release of the same packages: the real archive serves one per branch, so the
snapshot's next/ubuntu copy serves jammy's real 580.178.04 packages repacked at 580.196.07 (only the version and
the relations naming it changed: tests/snapshot/repack.py and tests/unit/snapshot/test_repack.py). The release
the archive lists as 580.196.07 is not served by its pool (the fresh-machine issue), which is why it is not used.
"""
import json
import os
import pathlib
import re
import subprocess
import time

import pytest

from conftest import TIMES_FILE  # pylint: disable=import-error

PLAYBOOK = pathlib.Path(__file__).resolve().parents[1] / "converge.yml"
OLD, OLD_DEB = "580.178.04", "580.178.04-0ubuntu0.22.04.1"
NEXT, NEXT_DEB = "580.196.07", "580.196.07-0ubuntu0.22.04.1+repack1"
# The driver's packages on the node: those of its source packages (nvidia-graphics-drivers-580-server,
# fabric-manager-580, libnvidia-nscq-580, and 595's).
DRIVER_SOURCES = ("nvidia-graphics-drivers-", "fabric-manager-", "libnvidia-nscq-")
# The kill switch of the interrupted change: apt runs this in place of dpkg; after dpkg's unpack of the new
# packages it kills apt-get (SIGKILL) and removes itself, so the packages stay unpacked and not configured, as a
# converge killed mid-install leaves them.
KILLER = """#!/bin/sh
/usr/bin/dpkg "$@"; status=$?
case " $* " in *" --unpack "*)
  rm -f /etc/apt/apt.conf.d/00gpufleet-test-kill-apt
  kill -9 $PPID; exit 137 ;;
esac
exit $status
"""


def run_role(settings, check=False):
    """ansible-playbook converge.yml with the settings as extra variables: (rc, output, seconds)."""
    argv = ["ansible-playbook", "-i", os.environ["MOLECULE_INVENTORY_FILE"], str(PLAYBOOK), "-e", json.dumps(settings)]
    start = time.monotonic()
    result = subprocess.run(argv + (["--check"] if check else []), capture_output=True, text=True, check=False)
    return result.returncode, result.stdout + result.stderr, time.monotonic() - start


def changed_count(output):
    recap = [line for line in output.splitlines() if " changed=" in line and " ok=" in line]
    assert recap, output[-3000:]
    return int(recap[-1].split(" changed=")[1].split()[0])


def driver_packages(host):
    """{name: (version, dpkg status)} of the driver's packages installed (any state but not-installed)."""
    text = host.check_output("dpkg-query -W -f '${Package}\\t${source:Package}\\t${Version}\\t${db:Status-Abbrev}\\n'")
    found = {}
    for line in text.splitlines():
        name, source, version, status = line.split("\t")
        if source.startswith(DRIVER_SOURCES) and status[1] not in "nc":
            found[name] = (version, status.strip())
    return found


def dpkg_fingerprint(host):
    return host.check_output("(dpkg-query -W -f '${Package} ${Version} ${Status}\\n'; dpkg --get-selections) | sha256sum")


def record_seconds(label, seconds):
    times = json.loads(TIMES_FILE.read_text()) if TIMES_FILE.exists() else {}
    times[label] = seconds
    TIMES_FILE.write_text(json.dumps(times))


def change(host, label, settings, move):
    """Check mode (reports a change and names the move, changes nothing), the change, a second run (changes
    nothing); returns the change's output. move: a line check mode must print (name: from -> to)."""
    before = dpkg_fingerprint(host)
    rc, checked, check_seconds = run_role(settings, check=True)
    assert rc == 0, checked[-4000:]
    assert changed_count(checked) > 0, checked[-4000:]
    assert move in checked, checked[-4000:]
    assert dpkg_fingerprint(host) == before
    rc, output, seconds = run_role(settings)
    assert rc == 0, output[-4000:]
    # The change is seen as one: the GPUs are read again for the reboot decision (on a node that can load modules
    # the old module still runs, and the decision records the reboot; a container has none to reload).
    assert re.search(r"Read the GPU state after the install [^\n]*\n(ok|changed): ", output), output[-4000:]
    rc, again, again_seconds = run_role(settings)
    assert rc == 0 and changed_count(again) == 0, again[-4000:]
    assert re.search(r"Read the GPU state after the install [^\n]*\nskipping: ", again), again[-4000:]
    record_seconds(label, [check_seconds, seconds, again_seconds])
    assert host.check_output("dpkg --audit") == ""
    return output


def assert_held_exactly(host, packages):
    assert sorted(host.check_output("apt-mark showhold").split()) == sorted(packages)


@pytest.fixture(scope="module")
def installed(host):
    """The driver converge installed, every package at 580.178.04 and held, from a mirror (the snapshot's
    next/ubuntu copy, molecule.yml) that also serves the next release."""
    packages = driver_packages(host)
    assert packages and {version for version, _status in packages.values()} == {OLD_DEB}
    assert "nvidia-firmware-580-server-580.178.04" in packages
    assert_held_exactly(host, packages)
    assert NEXT_DEB in host.check_output("apt-cache policy nvidia-utils-580-server")
    return packages


def test_a_in_branch_update_moves_every_package_of_the_release(host, installed):
    change(host, "(a) in-branch update 580.178.04 -> 580.196.07",
           {"nvidia_driver_version": NEXT},
           "nvidia-firmware-580-server-580.178.04: %s -> removed" % OLD_DEB)
    now = driver_packages(host)
    assert {version for version, _status in now.values()} == {NEXT_DEB}
    # The firmware is named for its release: the old one goes, the new one comes.
    assert set(now) == set(installed) - {"nvidia-firmware-580-server-580.178.04"} | {"nvidia-firmware-580-server-580.196.07"}
    assert_held_exactly(host, now)
    assert '"version": "%s"' % NEXT_DEB in host.file("/etc/gpufleet/nvidia-driver.json").content_string


def test_d_rollback_is_the_same_plan_downwards(host, installed):
    change(host, "(d) rollback 580.196.07 -> 580.178.04",
           {"nvidia_driver_version": OLD},
           "nvidia-dkms-580-server: %s -> %s" % (NEXT_DEB, OLD_DEB))
    now = driver_packages(host)
    assert now == installed
    assert_held_exactly(host, now)


def test_c_flavour_change_to_the_open_modules(host, installed):
    output = change(host, "(c) flavour server -> open (580.178.04)",
                    {"nvidia_driver_version": OLD, "nvidia_driver_flavour": "open"},
                    "nvidia-dkms-580-server-open: not installed -> %s" % OLD_DEB)
    now = driver_packages(host)
    for name in ("nvidia-headless-580-server", "nvidia-dkms-580-server", "nvidia-kernel-source-580-server",
                 "nvidia-headless-no-dkms-580-server"):
        assert name not in now and name + "-open" in now, output[-3000:]
    assert {version for version, _status in now.values()} == {OLD_DEB}
    assert_held_exactly(host, now)


def test_e_a_change_killed_half_way_completes_on_the_next_run(host, installed):
    settings = {"nvidia_driver_version": NEXT, "nvidia_driver_flavour": "open"}
    host.run_expect([0], "printf '%%s' '%s' > /usr/local/sbin/dpkg-killing-apt && chmod 755 /usr/local/sbin/dpkg-killing-apt"
                    % KILLER.replace("'", "'\\''"))
    host.run_expect([0], "echo 'Dir::Bin::dpkg \"/usr/local/sbin/dpkg-killing-apt\";' > /etc/apt/apt.conf.d/00gpufleet-test-kill-apt")
    try:
        rc, killed, _seconds = run_role(settings)
    finally:
        host.run("rm -f /etc/apt/apt.conf.d/00gpufleet-test-kill-apt")
    assert rc != 0, killed[-3000:]
    # the one transaction is what failed: apt-get killed after dpkg unpacked
    assert "Move the packages in one apt transaction" in killed and "non-zero return code" in killed, killed[-3000:]
    half = host.check_output("dpkg --audit")
    assert half, "the kill left nothing half-installed: " + killed[-3000:]
    # the holds lifted for the transaction are set again although apt died
    held = set(host.check_output("apt-mark showhold").split())
    assert {"nvidia-utils-580-server", "libnvidia-compute-580-server"} <= held, held
    output = change(host, "(e) the interrupted update, run again", settings, "nvidia-headless-580-server-open: ")
    assert "An earlier run was interrupted" in output, output[-3000:]
    now = driver_packages(host)
    assert {version for version, _status in now.values()} == {NEXT_DEB}
    assert all(status == "hi" for _version, status in now.values()), now
    assert "nvidia-headless-580-server-open" in now and "nvidia-firmware-580-server-580.178.04" not in now
    assert_held_exactly(host, now)


def test_b_branch_change_to_595(host, installed):
    """From 580 (open, 580.196.07 after (e)) to 595 with the server flavour: Canonical's 595-server packages of
    jammy-updates (595.112.07; 590-server is now a transitional package that depends on them, so 595 is the next
    branch with real packages on Ubuntu 22.04). Every 580 package goes in the same transaction."""
    change(host, "(b) branch 580 -> 595 (and open -> server)",
           {"nvidia_driver_branch": "595", "nvidia_driver_version": "", "nvidia_driver_flavour": "server"},
           "nvidia-utils-580-server: %s -> removed" % NEXT_DEB)
    now = driver_packages(host)
    assert now and all(version.startswith("595.") for version, _status in now.values()), now
    assert not [name for name in now if "580" in name], now
    assert "nvidia-headless-595-server" in now and "nvidia-fabricmanager-595" in now
    assert_held_exactly(host, now)
    assert '"branch": "595"' in host.file("/etc/gpufleet/nvidia-driver.json").content_string
