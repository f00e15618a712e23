"""The real nvidia-smi cannot reach a driver in a container: gpu_facts says exactly that."""


def test_real_nvidia_smi_fails_without_a_module(host):
    out = host.run("nvidia-smi")
    assert out.rc != 0
    assert "Failed to initialize NVML" in out.stdout + out.stderr or "couldn't communicate" in out.stdout


def test_gpu_facts_reports_driver_not_loaded(host):
    gpu = host.ansible("gpufleet.node.gpu_facts", check=False)["ansible_facts"]["gpu"]
    assert gpu["state"] == "driver_not_loaded", gpu["message"]
    assert gpu["nvidia_smi"] == "/usr/bin/nvidia-smi"
    assert gpu["loaded_module_version"] is None


def test_persistenced_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_no_reboot_recorded_in_a_container(host):
    assert not host.file("/run/gpufleet/reboot-required").exists


def test_record_of_the_install(host):
    import json
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["source"] == "distro" and record["branch"] == "535"
    assert record["version"].startswith("535.")
