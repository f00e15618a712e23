"""Avahi is masked and stopped; absent units are left alone; the node boots headless."""
import pytest


@pytest.mark.parametrize("unit", ["avahi-daemon.service", "avahi-daemon.socket"])
def test_avahi_masked_and_stopped(host, unit):
    state = host.run("systemctl is-enabled %s", unit).stdout.strip()
    assert state == "masked"
    assert host.run("systemctl is-active %s", unit).stdout.strip() == "inactive"


def test_absent_unit_not_masked(host):
    """cups-browsed is not installed: the role must not create a mask for it."""
    assert not host.file("/etc/systemd/system/cups-browsed.service").exists


def test_default_target_headless(host):
    assert host.check_output("systemctl get-default") == "multi-user.target"
