"""gpufleet-gpu-power.service re-applies /etc/gpufleet/gpu-power.json at boot; the record has the contract's keys."""
from conftest import BUSES, BUSY, H100


def test_unit_is_enabled_and_runs_the_script_on_the_config(host):
    unit = host.file("/etc/systemd/system/gpufleet-gpu-power.service")
    assert unit.mode == 0o644 and unit.user == "root"
    text = unit.content_string
    assert "Type=oneshot" in text and "RemainAfterExit=yes" in text
    assert "After=nvidia-persistenced.service" in text
    # applied again when the driver is reloaded without a reboot (the daemon stops and starts around it)
    assert "PartOf=nvidia-persistenced.service" in text and "WantedBy=multi-user.target nvidia-persistenced.service" in text
    assert host.file("/etc/systemd/system/nvidia-persistenced.service.wants/gpufleet-gpu-power.service").is_symlink
    assert ("ExecStart=/usr/bin/python3 /usr/local/sbin/gpufleet-gpu-power apply --config /etc/gpufleet/gpu-power.json "
            "--boot") in text
    assert host.service("gpufleet-gpu-power.service").is_enabled
    assert host.file("/usr/local/sbin/gpufleet-gpu-power").mode == 0o755


def test_record_has_the_contract_keys_and_what_is_in_effect(host, record):
    assert set(record) == {"power_limits_w", "locked_clocks_mhz", "force", "require_persistence_mode", "applied", "unit"}
    assert record["require_persistence_mode"] is True
    assert record["power_limits_w"] == {H100: 500, "NVIDIA A100-SXM4-80GB": 300}
    assert record["locked_clocks_mhz"] == {H100: [1200, 1980]}
    assert record["force"] is False and record["unit"] == "gpufleet-gpu-power.service"
    assert sorted(record["applied"]) == BUSES
    for bus, entry in record["applied"].items():
        if bus == BUSY:
            # left as it was: the role has set nothing there
            assert entry == {"index": 3, "model": H100, "power_limit_w": None, "locked_clocks_mhz": None,
                             "state": "busy"}
        else:
            assert entry["power_limit_w"] == 500.0 and entry["locked_clocks_mhz"] == [1200, 1980]
            assert entry["state"] == "in_effect"
    assert host.file("/etc/gpufleet/gpu-power.json").mode == 0o644


def test_the_boot_script_plans_nothing_on_a_converged_node(host):
    out = host.check_output("/usr/bin/python3 /usr/local/sbin/gpufleet-gpu-power plan "
                            "--config /etc/gpufleet/gpu-power.json")
    assert '"changed": false' in out and '"actions": []' in out
