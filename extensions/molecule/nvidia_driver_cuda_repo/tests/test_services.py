"""On the (emulated) NVSwitch node: persistence daemon and fabric manager run; the verify found them."""


def test_persistenced_running(host):
    service = host.service("nvidia-persistenced")
    assert service.is_enabled and service.is_running


def test_fabricmanager_running_on_nvswitch_node(host):
    service = host.service("nvidia-fabricmanager")
    assert service.is_enabled and service.is_running


def test_gpu_facts_after_the_role(host):
    gpu = host.ansible("gpufleet.node.gpu_facts", check=False)["ansible_facts"]["gpu"]
    assert gpu["state"] == "ok"
    assert all(device["persistence_mode"] for device in gpu["devices"])
    assert gpu["topology"]["nvswitch"] is True
