"""After the runs: the unit is not failed (the last run was good), the timer still waits, the checkout is clean."""


def test_the_service_is_not_failed(host):
    assert host.run("systemctl is-failed --quiet gpufleet-self-converge.service").rc != 0
    result = host.check_output("systemctl show --property Result --value gpufleet-self-converge.service")
    assert result == "success"


def test_the_timer_still_waits(host):
    timer = host.service("gpufleet-self-converge.timer")
    assert timer.is_enabled and timer.is_running


def test_the_checkout_is_the_repository_s_head_with_nothing_changed(host):
    head = host.check_output("git -C /srv/gpufleet-infra.git rev-parse main")
    checkout = "/opt/gpufleet/self-converge/checkout"
    assert host.check_output("git -C %s rev-parse HEAD" % checkout) == head
    assert host.check_output("git -C %s status --porcelain" % checkout) == ""
