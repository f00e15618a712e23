"""Ubuntu 20.04 and 24.04 with Ubuntu's real driver packages (restricted, -updates and -security)."""
import json

import pytest


def branch_of(host):
    return {"gpufleet-focal": "535", "gpufleet-noble": "595"}[host.check_output("hostname")]


@pytest.mark.parametrize("package", ["nvidia-headless-{b}-server", "nvidia-utils-{b}-server",
                                     "libnvidia-compute-{b}-server"])
def test_driver_of_the_branch_installed_and_held(host, package):
    name = package.format(b=branch_of(host))
    assert host.package(name).is_installed
    assert host.package(name).version.startswith(branch_of(host) + ".")
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


def test_not_a_transitional_package(host):
    name = "nvidia-headless-%s-server" % branch_of(host)
    description = host.check_output("dpkg-query -W -f '${Description}' %s" % name)
    assert "transitional" not in description.lower()


def test_persistence_mode_on(host):
    exec_start = host.check_output("systemctl show -p ExecStart nvidia-persistenced.service")
    assert "/usr/bin/nvidia-persistenced" in exec_start and "--no-persistence-mode" not in exec_start


def test_record(host):
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["branch"] == branch_of(host) and record["source"] == "distro"


def test_baseline_on_ubuntu(host):
    """baseline's files on Ubuntu; Ubuntu's ondemand.service (package ubuntu-minimal's dependency on 20.04),
    which resets the CPU governor about a minute after boot, is masked where it is installed."""
    assert host.file("/etc/sysctl.d/60-gpufleet-baseline.conf").exists
    if host.run("systemctl cat ondemand.service").rc == 0:
        assert host.check_output("systemctl is-enabled ondemand.service || true") == "masked"
