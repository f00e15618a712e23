"""Locked-memory limits for RDMA, for login sessions and for systemd services."""


def test_pam_limits(host):
    conf = host.file("/etc/security/limits.d/90-gpufleet-memlock.conf")
    assert conf.mode == 0o644
    entries = [line.split() for line in conf.content_string.splitlines() if line and not line.startswith("#")]
    assert ["*", "hard", "memlock", "unlimited"] in entries
    assert ["*", "soft", "memlock", "unlimited"] in entries


def test_systemd_default_limit_is_live(host):
    """After the handler re-executed systemd, the manager itself reports the new default."""
    value = host.check_output("systemctl show --property DefaultLimitMEMLOCK --value")
    assert value == "infinity"


def test_new_service_gets_the_limit(host):
    """A service started now is given the limit. (The container lacks CAP_SYS_RESOURCE, so the kernel keeps
    the host's hard limit for the process itself; on a real host the two agree.)"""
    host.check_output("systemd-run --unit gpufleet-memlock-probe --remain-after-exit --quiet true")
    try:
        value = host.check_output("systemctl show --property LimitMEMLOCK --value gpufleet-memlock-probe")
    finally:
        host.run("systemctl stop gpufleet-memlock-probe")
    assert value == "infinity"
