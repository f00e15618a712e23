"""The pure functions of roles/gpu_power/files/gpufleet-gpu-power: nvidia-smi's CSV read, and the plan.

The CSV lines are in the form the real nvidia-smi prints for ``--query-gpu=index,pci.bus_id,name,power.limit,
power.min_limit,power.max_limit,power.default_limit,persistence_mode --format=csv,noheader,nounits`` (values "[N/A]" where
unsupported; persistence_mode "Enabled" or "Disabled") and for
``--query-compute-apps=gpu_bus_id,pid,process_name --format=csv,noheader`` (nothing at all when no process runs).
"""
import importlib.machinery
import importlib.util
import pathlib

import pytest

SCRIPT = pathlib.Path(__file__).resolve().parents[3] / "roles" / "gpu_power" / "files" / "gpufleet-gpu-power"
H100 = "NVIDIA H100 80GB HBM3"


@pytest.fixture(scope="module")
def power():
    loader = importlib.machinery.SourceFileLoader("gpufleet_gpu_power", str(SCRIPT))
    spec = importlib.util.spec_from_loader("gpufleet_gpu_power", loader)
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


GPUS_CSV = ("0, 00000000:53:00.0, NVIDIA H100 80GB HBM3, 700.00, 200.00, 700.00, 700.00, Enabled\n"
            "1, 00000000:64:00.0, NVIDIA H100 80GB HBM3, 500.00, 200.00, 700.00, 700.00, Enabled\n"
            "2, 00000000:01:00.0, NVIDIA GeForce GTX 1080, [N/A], [N/A], [N/A], [N/A], Disabled\n")


def test_parse_gpus_reads_numbers_and_na(power):
    gpus = power.parse_gpus(GPUS_CSV)
    assert gpus[0] == {"index": 0, "bus_id": "00000000:53:00.0", "model": H100, "power_limit_w": 700.0,
                       "min_w": 200.0, "max_w": 700.0, "default_w": 700.0, "persistence": True}
    assert gpus[2]["power_limit_w"] is None and gpus[2]["min_w"] is None and gpus[2]["default_w"] is None
    assert gpus[2]["persistence"] is False
    assert power.GPU_FIELDS.endswith(",persistence_mode")


def persistence(gpus, mode):
    """The GPUs with persistence mode as parse_gpus reads it (True, False, None: not reported)."""
    return [dict(gpu, persistence=mode) for gpu in gpus]


def test_persistence_mode_off_refuses_a_setting_before_anything_runs(power):
    """NVIDIA's Driver Persistence guide: the software power cap and clock settings revert to the defaults once the
    driver deinitialises an idle GPU; without persistence mode the setting would not hold."""
    gpus = persistence(power.parse_gpus(GPUS_CSV)[:2], False)
    for settings in ({"power_limits_w": {H100: 500}}, {"locked_clocks_mhz": {H100: [1200, 1980]}}):
        result = power.plan(gpus, {}, settings)
        assert result["actions"] == [] and not result["changed"]
        assert len(result["errors"]) == 2
        assert result["errors"][0].startswith("GPU 00000000:53:00.0 (%s) has persistence mode Disabled" % H100)
        assert result["errors"][0].endswith("or set gpu_power_require_persistence_mode: false.")
    # read from the script's own query
    assert "GPU 00000000:01:00.0 (NVIDIA GeForce GTX 1080) has persistence mode Disabled" in power.plan(
        power.parse_gpus(GPUS_CSV), {}, {"locked_clocks_mhz": {"NVIDIA GeForce GTX 1080": [1200, 1600]}})["errors"][0]


def test_persistence_mode_off_only_warns_when_not_required(power):
    gpus = persistence(power.parse_gpus(GPUS_CSV)[:1], False)
    result = power.plan(gpus, {}, {"power_limits_w": {H100: 500}, "require_persistence_mode": False})
    assert result["errors"] == [] and result["actions"] == [["-i", "00000000:53:00.0", "-pl", "500"]]
    assert "has persistence mode Disabled" in result["warnings"][0]


def test_persistence_mode_not_reported_is_not_checked_and_not_refused(power):
    gpus = persistence(power.parse_gpus(GPUS_CSV)[:1], None)
    result = power.plan(gpus, {}, {"power_limits_w": {H100: 500}})
    assert result["errors"] == [] and result["actions"] == [["-i", "00000000:53:00.0", "-pl", "500"]]
    assert "does not report persistence mode: not checked" in result["warnings"][0]
    # a line without the persistence_mode column (older callers) reads as not reported
    assert power.parse_gpus("0, 00000000:53:00.0, %s, 700.00, 200.00, 700.00, 700.00\n" % H100)[0]["persistence"] is None


def test_undoing_needs_no_persistence_mode(power):
    """Clocks unlocked and a limit back to its default are what a deinitialised GPU comes back with anyway."""
    gpus = persistence(power.parse_gpus(GPUS_CSV)[:1], False)
    record = {"00000000:53:00.0": {"power_limit_w": 500.0, "locked_clocks_mhz": [1200, 1980]}}
    result = power.plan([dict(gpus[0], power_limit_w=500.0)], {}, {}, previous=record)
    assert result["errors"] == [] and result["warnings"] == []
    assert result["actions"] == [["-i", "00000000:53:00.0", "-pl", "700"], ["-i", "00000000:53:00.0", "-rgc"]]


def test_parse_busy_groups_pids_by_bus(power):
    assert power.parse_busy("") == {}
    assert power.parse_busy("00000000:86:00.0, 4242, python3\n00000000:86:00.0, 4243, python3\n") == \
        {"00000000:86:00.0": ["4242", "4243"]}


def test_plan_sets_only_what_differs(power):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {H100: 500}})
    assert result["actions"] == [["-i", "00000000:53:00.0", "-pl", "500"]]
    assert result["changed"] and result["errors"] == []
    assert result["gpus"]["00000000:64:00.0"] == {
        "index": 1, "model": H100, "power_limit_w": 500.0, "locked_clocks_mhz": None, "state": "in_effect"}
    assert "00000000:01:00.0" not in result["gpus"]


def at(gpus, limits):
    """The GPUs with nvidia-smi's power.limit (the requested limit) as given per bus id."""
    return [dict(gpu, power_limit_w=limits.get(gpu["bus_id"], gpu["power_limit_w"])) for gpu in gpus]


def test_plan_compares_with_the_requested_limit(power):
    # power.limit is what -pl last requested: 500 on GPU 1 already; the enforced limit (gpu_facts' power_limit_w,
    # the lowest of all limiters) may be lower under a BMC cap and is not compared, else every run would set again.
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {H100: 500}})
    assert result["actions"] == [["-i", "00000000:53:00.0", "-pl", "500"]]


def test_plan_refuses_a_limit_outside_the_range_and_changes_nothing(power):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {H100: 800}})
    assert result["actions"] == [] and not result["changed"]
    assert result["errors"] == ["power_limits_w[%s] = 800 W is outside GPU 00000000:53:00.0's range 200.00-700.00 W."
                                % H100]


def test_plan_refuses_a_gpu_without_a_power_range(power):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {"NVIDIA GeForce GTX 1080": 150}})
    assert "does not report a power limit range" in result["errors"][0]


@pytest.mark.parametrize("settings, says", [
    ({"power_limits_w": {H100: "500"}}, "positive number"),
    ({"power_limits_w": {H100: True}}, "positive number"),
    ({"power_limits_w": {H100: 0}}, "positive number"),
    ({"locked_clocks_mhz": {H100: [1980, 1200]}}, "min 1980 is above max 1200"),
    ({"locked_clocks_mhz": {H100: [1200]}}, "[min, max]"),
    ({"locked_clocks_mhz": {H100: [1200.5, 1980]}}, "[min, max]"),
])
def test_plan_refuses_bad_shapes(power, settings, says):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, settings)
    assert result["actions"] == [] and says in result["errors"][0]


def test_a_model_no_gpu_has_is_a_warning(power):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {"NVIDIA A100-SXM4-80GB": 300}})
    assert result["errors"] == [] and result["actions"] == []
    assert result["warnings"][0].startswith("No GPU of model NVIDIA A100-SXM4-80GB on this node")


def test_busy_gpus_are_left_unless_forced(power):
    gpus = power.parse_gpus(GPUS_CSV)
    busy = {"00000000:53:00.0": ["4242"]}
    left = power.plan(gpus, busy, {"power_limits_w": {H100: 500}})
    assert left["actions"] == [] and not left["changed"]
    # what the role set there: nothing yet (the record of a busy GPU keeps what was set before, not a new value)
    assert left["gpus"]["00000000:53:00.0"] == {"index": 0, "model": H100, "power_limit_w": None,
                                                "locked_clocks_mhz": None, "state": "busy"}
    assert "runs compute processes (pids 4242)" in left["warnings"][0]
    forced = power.plan(gpus, busy, {"power_limits_w": {H100: 500}, "force": True})
    assert forced["actions"] == [["-i", "00000000:53:00.0", "-pl", "500"]]


def test_locked_clocks_follow_the_record_and_are_relocked_at_boot(power):
    gpus = power.parse_gpus(GPUS_CSV)[:1]
    settings = {"locked_clocks_mhz": {H100: [1200, 1980]}}
    assert power.plan(gpus, {}, settings)["actions"] == [["-i", "00000000:53:00.0", "-lgc", "1200,1980"]]
    record = {"00000000:53:00.0": {"locked_clocks_mhz": [1200, 1980]}}
    assert power.plan(gpus, {}, settings, previous=record)["actions"] == []
    assert power.plan(gpus, {}, settings, previous=record, boot=True)["actions"] == \
        [["-i", "00000000:53:00.0", "-lgc", "1200,1980"]]


def test_empty_settings_change_nothing(power):
    result = power.plan(power.parse_gpus(GPUS_CSV), {}, {"power_limits_w": {}, "locked_clocks_mhz": {}})
    assert result == {"changed": False, "actions": [], "errors": [], "warnings": [], "gpus": {}}


LOCKED_500 = {"index": 0, "model": H100, "power_limit_w": 500.0, "locked_clocks_mhz": [1200, 1980], "state": "in_effect"}


def test_clocks_no_longer_asked_for_are_unlocked(power):
    gpus = power.parse_gpus(GPUS_CSV)[:1]
    record = {"00000000:53:00.0": LOCKED_500}
    result = power.plan(at(gpus, {"00000000:53:00.0": 500.0}), {}, {"power_limits_w": {H100: 500}}, previous=record)
    assert result["actions"] == [["-i", "00000000:53:00.0", "-rgc"]] and result["changed"]
    assert result["gpus"]["00000000:53:00.0"] == dict(LOCKED_500, locked_clocks_mhz=None)
    # idle GPUs only, unless forced, as for the other settings
    busy = {"00000000:53:00.0": ["4242"]}
    left = power.plan(at(gpus, {"00000000:53:00.0": 500.0}), busy, {"power_limits_w": {H100: 500}}, previous=record)
    assert left["actions"] == [] and left["gpus"]["00000000:53:00.0"] == dict(LOCKED_500, state="busy")
    forced = power.plan(at(gpus, {"00000000:53:00.0": 500.0}), busy, {"power_limits_w": {H100: 500}, "force": True}, previous=record)
    assert forced["actions"] == [["-i", "00000000:53:00.0", "-rgc"]]


def test_a_limit_no_longer_asked_for_goes_back_to_the_default_limit(power):
    gpus = power.parse_gpus(GPUS_CSV)[:1]
    record = {"00000000:53:00.0": LOCKED_500}
    clocks_only = {"locked_clocks_mhz": {H100: [1200, 1980]}}
    result = power.plan(at(gpus, {"00000000:53:00.0": 500.0}), {}, clocks_only, previous=record)
    assert result["actions"] == [["-i", "00000000:53:00.0", "-pl", "700"]]
    assert result["gpus"]["00000000:53:00.0"] == dict(LOCKED_500, power_limit_w=None)
    # at the default already (a reboot since): nothing to do
    assert power.plan(at(gpus, {"00000000:53:00.0": 700.0}), {}, clocks_only, previous=record)["actions"] == []
    # a limit the role never set (no record of one) is not the role's to reset
    never = {"00000000:53:00.0": dict(LOCKED_500, power_limit_w=None)}
    assert power.plan(at(gpus, {"00000000:53:00.0": 500.0}), {}, clocks_only, previous=never)["actions"] == []


def test_a_model_removed_from_both_maps_is_undone_and_leaves_the_record(power):
    gpus = power.parse_gpus(GPUS_CSV)[:1]
    record = {"00000000:53:00.0": LOCKED_500}
    other = {"power_limits_w": {"NVIDIA A100-SXM4-80GB": 300}}
    result = power.plan(at(gpus, {"00000000:53:00.0": 500.0}), {}, other, previous=record)
    assert result["actions"] == [["-i", "00000000:53:00.0", "-pl", "700"], ["-i", "00000000:53:00.0", "-rgc"]]
    assert result["gpus"] == {}
    assert power.record_of(result, record, ran=True) == {}
    # not run (plan only): the record keeps saying what is still set
    assert power.record_of(result, record, ran=False) == record


def test_the_record_says_applied_only_for_what_ran(power):
    """A plan whose actions do not run (check mode, or --tags gpu_power_boot without the apply step) must not record
    them as done; the next full run still locks the clocks."""
    gpus = power.parse_gpus(GPUS_CSV)[:2]
    settings = {"power_limits_w": {H100: 500}, "locked_clocks_mhz": {H100: [1200, 1980]}}
    first = power.plan(gpus, {}, settings)
    assert power.record_of(first, {}, ran=False) == {}
    assert power.record_of(first, {}, ran=True) == first["gpus"]
    later = power.plan(at(gpus, {"00000000:53:00.0": 500.0, "00000000:64:00.0": 500.0}), {}, settings, previous=power.record_of(first, {}, ran=False))
    assert ["-i", "00000000:53:00.0", "-lgc", "1200,1980"] in later["actions"]
    assert ["-i", "00000000:64:00.0", "-lgc", "1200,1980"] in later["actions"]
    # a GPU with nothing to do is recorded from the plan, one with actions keeps its previous entry
    previous = {"00000000:53:00.0": LOCKED_500, "00000000:64:00.0": dict(LOCKED_500, index=1, locked_clocks_mhz=None)}
    partly = power.plan(at(gpus, {"00000000:53:00.0": 500.0, "00000000:64:00.0": 500.0}), {}, settings, previous=previous)
    assert partly["actions"] == [["-i", "00000000:64:00.0", "-lgc", "1200,1980"]]
    assert power.record_of(partly, previous, ran=False) == previous
    assert power.record_of(partly, previous, ran=True)["00000000:64:00.0"]["locked_clocks_mhz"] == [1200, 1980]


@pytest.mark.parametrize("rc, out, err, why", [
    (0, "Power limit for GPU 00000000:53:00.0 was set to 500.00 W from 700.00 W.\nAll done.\n", "", None),
    (0, 'GPU clocks set to "(gpuClkMin 1200, gpuClkMax 1980)" for GPU 00000000:53:00.0\nAll done.\n', "", None),
    # A GPU that does not support the setting: nvidia-smi exits 0 (a laptop RTX 4050 with -pl; Pascal with -lgc)
    (0, "Changing power management limit is not supported for GPU: 00000000:01:00.0.\nTreating as warning and moving "
        "on.\nAll done.\n", "",
     "not applied: Changing power management limit is not supported for GPU: 00000000:01:00.0."),
    (0, "Setting locked GPU clocks is not supported for GPU 00000000:01:00.0.\nTreating as warning and moving on.\n"
        "All done.\n", "", "not applied: Setting locked GPU clocks is not supported for GPU 00000000:01:00.0."),
    (4, "", "Failed to set power management limit for GPU 00000000:01:00.0: Insufficient Permissions\n",
     "exit 4: Failed to set power management limit for GPU 00000000:01:00.0: Insufficient Permissions"),
    (0, "", "", 'no "All done.": '),
])
def test_a_setting_is_applied_only_when_nvidia_smi_says_so(power, rc, out, err, why):
    assert power.refusal(rc, out, err) == why
