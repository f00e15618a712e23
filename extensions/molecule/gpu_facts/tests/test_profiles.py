"""gpu_facts on the node, for each emulated hardware profile: count, matrix, pairs, state."""
import pytest


def test_nvswitch_node(gather):
    gpu = gather("hgx-a100-8gpu")
    assert gpu["state"] == "ok"
    assert gpu["count"] == 8
    assert gpu["driver_version"] == "535.183.01"
    assert gpu["cuda_driver_version"] == "12.2"
    assert gpu["topology"]["matrix"]["GPU0"] == dict(("GPU%d" % i, "NV12") for i in range(1, 8))
    assert gpu["topology"]["nvlink_pairs"] == 28
    assert gpu["topology"]["nvlink_all_to_all"] is True
    assert gpu["topology"]["nvswitch"] is True
    assert gpu["topology"]["nvlink_links_active"] == 96
    assert gpu["pci"] == {"nvidia_gpus": 8, "nvswitches": 6}
    assert [d["pci_bus_id"] for d in gpu["devices"]][:2] == ["00000000:07:00.0", "00000000:0A:00.0"]


def test_bridged_pairs(gather):
    gpu = gather("pairs-4gpu")
    assert gpu["count"] == 4
    assert gpu["topology"]["matrix"]["GPU0"] == {"GPU1": "NV4", "GPU2": "SYS", "GPU3": "SYS"}
    assert gpu["topology"]["nvlink_pair_list"] == [["GPU0", "GPU1", 4], ["GPU2", "GPU3", 4]]
    assert gpu["topology"]["nvlink_all_to_all"] is False
    assert gpu["topology"]["cpu_affinity"]["GPU2"] == "1,3,5,7,9,11"


def test_pcie_only(gather):
    gpu = gather("pcie-4gpu")
    assert gpu["state"] == "ok"
    assert gpu["pci"] == {"nvidia_gpus": 4, "nvswitches": 0}
    assert gpu["topology"]["nvlink_pairs"] == 0
    assert set(gpu["topology"]["matrix"]["GPU3"].values()) == {"NODE"}
    assert gpu["topology"]["shape"] == "4 GPUs, no NVLink"
    assert gpu["topology"]["nvswitch"] is False


@pytest.mark.parametrize("profile, state", [("mismatch", "driver_library_mismatch"), ("no-devices", "no_devices")])
def test_failure_states(gather, profile, state):
    gpu = gather(profile)
    assert gpu["state"] == state
    assert gpu["message"]


def test_hung_nvidia_smi(gather):
    gpu = gather("hung", timeout=2)
    assert gpu["state"] == "timeout"


def test_inactive_link_is_reported(gather, host):
    host.run_expect([0], "echo '2 7' > /etc/gpufleet-emulator/inactive_links")
    gpu = gather("hgx-a100-8gpu")
    assert gpu["topology"]["nvlink_links_inactive"] == 1
    assert gpu["topology"]["nvlink"]["GPU2"][7]["active"] is False


def test_check_mode(gather):
    gpu = gather("hgx-a100-8gpu", check=True)
    assert gpu["state"] == "ok" and gpu["count"] == 8


def test_not_installed(gather, host):
    host.run_expect([0], "mv /usr/local/bin/nvidia-smi /usr/local/bin/nvidia-smi.away")
    try:
        gpu = gather("hgx-a100-8gpu")
    finally:
        host.run_expect([0], "mv /usr/local/bin/nvidia-smi.away /usr/local/bin/nvidia-smi")
    assert gpu["state"] == "not_installed"


def test_pci_tree_is_the_nodes_own_directory(host):
    """The emulated devices lie in the directory bound at the real path; the rest of /sys is the kernel's."""
    assert host.check_output("findmnt -n -o FSTYPE --mountpoint /sys/bus/pci/devices") not in ("", "sysfs")
    assert host.check_output("stat -f -c %T /sys/bus/pci") == "sysfs"
    assert host.check_output("cat /sys/bus/pci/devices/0000:07:00.0/vendor") == "0x10de"
