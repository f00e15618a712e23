"""The health verdict of a node (plugins/module_utils/health.py), tested directly: one test per gate (healthy
passes, the planted fault fails with its reason, unknown is a warning only), the thresholds, the Xids of the kernel
log, real captures of idle GPUs and the facts both backends of gpu_facts gather from emulated hardware. The filters
that wrap the verdict are tested in tests/unit/plugins/filter/test_fleet.py.

The facts follow the field names of gpufleet.node.gpu_facts (issue 15). Reason names of clock events are those of
``nvidia-smi -q -x`` (``clocks_event_reason_*``, e.g. an A100 on 535 in ../shared/fixtures 31-a100-...-xml) and of
nvml.h's ``nvmlClocksEventReason*`` masks (NVIDIA/go-nvml gen/nvml/nvml.h); fabric states those of nvml.h's
``NVML_GPU_FABRIC_STATE_*`` as nvidia-smi prints them ("Completed", "In Progress", "N/A").
"""
import copy
import re

import pytest

from ansible_collections.gpufleet.node.plugins.module_utils.health import (
    THRESHOLDS, HealthError, gpufleet_health_thresholds, gpufleet_node_health, xid_events)


DEVICE = {
    "index": 0, "name": "NVIDIA A100-SXM4-80GB", "persistence_mode": True, "compute_mode": "Default",
    "ecc_mode": {"current": True, "pending": True},
    "ecc_errors_uncorrected_volatile": 0, "ecc_errors_uncorrected_aggregate": 0, "ecc_errors_corrected_volatile": 0,
    "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None},
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "recovery_action": None, "reset_required": False, "drain_and_reset_recommended": False,
    "fabric": {"state": None, "status": None},
    "clock_event_reasons_active": ["gpu_idle"], "temperature_c": 33, "power_draw_w": 60.0,
    "pcie": {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16, "replay_counter": 0},
}


def healthy(**topology):
    gpu = {"state": "ok", "count": 2, "attached_gpus": 2, "pci": {"nvidia_gpus": 2, "nvswitches": 0},
           "devices": [copy.deepcopy(DEVICE), dict(copy.deepcopy(DEVICE), index=1)],
           "topology": {"gpus": ["GPU0", "GPU1"], "nvswitch": False, "nvlink_pair_list": [["GPU0", "GPU1", 4]],
                        "nvlink_links_active": 2, "nvlink_links_inactive": 0, "nvlink_gpus_all_inactive": [],
                        "nvlink": {"GPU0": [{"link": 0, "active": True}], "GPU1": [{"link": 0, "active": True}]}}}
    gpu["topology"].update(topology)
    return gpu


def with_device(changes, index=1, **topology):
    gpu = healthy(**topology)
    gpu["devices"][index].update(changes)
    return gpu


def test_healthy_node():
    assert gpufleet_node_health(healthy(), {}) == {"failures": [], "warnings": []}
    assert gpufleet_node_health(healthy(), {}, {}) == {"failures": [], "warnings": []}


# gate: (planted change on GPU1, its reason, the unknown value, the warning's words, the threshold that turns it off)
GATES = [
    ({"ecc_errors_uncorrected_volatile": 3}, "GPU1: 3 uncorrected ECC errors since the driver loaded (max 0)",
     {"ecc_errors_uncorrected_volatile": None}, "uncorrected ECC errors not reported (GPU1)",
     {"gpufleet_health_ecc_uncorrected_volatile_max": 3}),
    ({"remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}},
     "GPU1: row remapping pending (reset the GPU)",
     {"remapped_rows": None}, "memory repair (remapped rows, retired pages) not reported (GPU1)",
     {"gpufleet_health_fail_on_remapped_rows_pending": False}),
    ({"remapped_rows": {"correctable": 0, "uncorrectable": 9, "pending": False, "failure": True}},
     "GPU1: row remapping failed (replace the GPU)", None, None,
     {"gpufleet_health_fail_on_remapped_rows_failure": False}),
    ({"remapped_rows": None, "retired_pages": {"single_bit_ecc": 0, "double_bit_ecc": 2, "pending": True}},
     "GPU1: retired pages pending (reset the GPU)", None, None,
     {"gpufleet_health_fail_on_retired_pages_pending": False}),
    ({"reset_required": True}, "GPU1: reset required",
     {"reset_required": None}, "reset required not reported (GPU1)", {"gpufleet_health_fail_on_reset_required": False}),
    ({"recovery_action": "drain_p2p"}, "GPU1: recovery action drain_p2p (stop peer-to-peer work, then read the action again)",
     None, None, {"gpufleet_health_fail_on_recovery_action": False}),
    ({"recovery_action": "recover_imex_domain"}, "GPU1: recovery action recover_imex_domain (recover the IMEX domain)",
     None, None, {"gpufleet_health_fail_on_recovery_action": False}),
    ({"recovery_action": "unknown (6)"},
     "GPU1: recovery action unknown (6) (an action this collection does not know: see NVIDIA's documentation)",
     None, None, {"gpufleet_health_fail_on_recovery_action": False}),
    ({"drain_and_reset_recommended": True}, "GPU1: drain and reset recommended",
     {"drain_and_reset_recommended": None}, "drain and reset recommended not reported (GPU1)",
     {"gpufleet_health_fail_on_drain_and_reset_recommended": False}),
    ({"fabric": {"state": "In Progress", "status": "N/A"}}, "GPU1: NVLink fabric In Progress, not Completed (fabric manager)",
     None, None, {"gpufleet_health_require_fabric_completed": False}),
    ({"fabric": {"state": "Completed", "status": "NVML_ERROR_UNKNOWN"}}, "GPU1: NVLink fabric Completed with status NVML_ERROR_UNKNOWN",
     None, None, {"gpufleet_health_require_fabric_completed": "false"}),
    ({"clock_event_reasons_active": ["gpu_idle", "hw_thermal_slowdown", "sw_power_cap"]}, "GPU1: hw_thermal_slowdown while idle",
     {"clock_event_reasons_active": None}, "clock event reasons not reported (GPU1)",
     {"gpufleet_health_slowdown_reasons_when_idle": []}),
    ({"pcie": {"gen_current": 4, "gen_max": 4, "width_current": 8, "width_max": 16}}, "GPU1: PCIe x8 of x16",
     {"pcie": {"gen_current": 4, "gen_max": 4, "width_current": None, "width_max": 16}}, "PCIe link width not reported (GPU1)",
     {"gpufleet_health_require_pcie_width_max": False}),
    ({"pcie": {"gen_current": 3, "gen_max": 4, "width_current": 16, "width_max": 16}, "utilization_gpu_pct": 87},
     "GPU1: PCIe gen 3 of 4 while busy",
     {"pcie": {"gen_current": None, "gen_max": 4, "width_current": 16, "width_max": 16}}, "PCIe link generation not reported (GPU1)",
     {"gpufleet_health_require_pcie_gen_max": False}),
    ({"compute_mode": "Exclusive_Process"}, "GPU1: compute mode Exclusive_Process, not Default",
     {"compute_mode": None}, "compute mode not reported (GPU1)", {"gpufleet_health_require_compute_mode_default": False}),
    # The lifetime count survives a driver reload (the volatile one does not): 0 since the reload, 600 in its life.
    ({"ecc_errors_uncorrected_aggregate": 600}, "GPU1: 600 uncorrected ECC errors in its lifetime (max 512)",
     {"ecc_errors_uncorrected_aggregate": None}, "lifetime uncorrected ECC errors not reported (GPU1)",
     {"gpufleet_health_ecc_uncorrected_aggregate_max": None}),
    ({"sram_threshold_exceeded": True},
     "GPU1: SRAM error threshold exceeded (NVIDIA's RMA criterion: run the field diagnostic)", None, None,
     {"gpufleet_health_fail_on_sram_threshold_exceeded": False}),
    ({"row_remapper_histogram": {"max": 638, "high": 0, "partial": 0, "low": 0, "none": 2}},
     "GPU1: 2 memory banks without spare rows (max 0; the next uncorrectable error there fails the row remapping)",
     None, None, {"gpufleet_health_row_remapper_banks_exhausted_max": 2}),
    ({"repair_pending": {"channel": True, "tpc": True}}, "GPU1: channel and TPC repair pending (reset the GPU)", None, None,
     {"gpufleet_health_fail_on_repair_pending": False}),
    ({"fabric": {"state": "Completed", "status": "Success", "health": {
        "summary": "Unhealthy", "degraded_bandwidth": True, "route_recovery_in_progress": True, "route_unhealthy": False,
        "access_timeout_recovery": None, "incorrect_configuration": "none", "partition_assigned": True}}},
     "GPU1: NVLink fabric unhealthy: bandwidth degraded, route recovery in progress", None, None,
     {"gpufleet_health_fail_on_fabric_unhealthy": False}),
    ({"fabric": {"state": "Completed", "status": "Success", "health": {
        "summary": None, "degraded_bandwidth": None, "route_recovery_in_progress": None, "route_unhealthy": None,
        "access_timeout_recovery": None, "incorrect_configuration": "insufficient_nvlinks", "partition_assigned": None}}},
     "GPU1: NVLink fabric degraded: incorrect configuration (insufficient nvlinks)", None, None,
     {"gpufleet_health_fail_on_fabric_unhealthy": "no"}),
    ({"mig_mode": {"current": True, "pending": True}, "remapped_rows": None,
      "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None}, "recovery_action": "gpu_reset"},
     "GPU1: recovery action gpu_reset (reset the GPU)",
     {"mig_mode": {"current": True, "pending": True}, "remapped_rows": None,
      "retired_pages": {"single_bit_ecc": None, "double_bit_ecc": None, "pending": None}},
     "row remapping under MIG (turn MIG off to read it) not reported (GPU1)",
     {"gpufleet_health_fail_on_recovery_action": False, "gpufleet_health_fail_on_reset_required": False}),
]


@pytest.mark.parametrize("fault, reason, unknown, warning, off", GATES, ids=[gate[1] for gate in GATES])
def test_each_gate(fault, reason, unknown, warning, off):
    health = gpufleet_node_health(with_device(fault))
    assert health["failures"] == [reason]
    assert gpufleet_node_health(with_device(fault), None, off)["failures"] == []
    if unknown is not None:
        health = gpufleet_node_health(with_device(unknown))
        assert health["failures"] == []
        assert [w for w in health["warnings"] if "not reported" in w] == [warning + ": not checked"]


def test_a_recovery_action_is_said_once_and_counts_before_the_reset_flags():
    # A DRAIN_P2P GPU with 7 lifetime uncorrectable errors and 900 uncorrectable remapped rows passed before the
    # action was gated (the current-hardware issue's example); now it fails by the action's name.
    gpu = with_device({"recovery_action": "drain_and_reset", "reset_required": True, "drain_and_reset_recommended": True})
    assert gpufleet_node_health(gpu)["failures"] == ["GPU1: recovery action drain_and_reset (drain the GPU's work, then reset it)"]
    off = {"gpufleet_health_fail_on_recovery_action": False}
    assert gpufleet_node_health(gpu, None, off)["failures"] == ["GPU1: reset required", "GPU1: drain and reset recommended"]
    # An action that says nothing of a reset is still an answer: the reset flags are not "not reported".
    gpu = with_device({"recovery_action": "drain_p2p", "reset_required": None, "drain_and_reset_recommended": None})
    assert gpufleet_node_health(gpu, None, off) == {"failures": [], "warnings": []}


def test_the_new_memory_and_fabric_facts_when_null_or_healthy_pass_silently():
    """A null SRAM threshold, histogram, repair status or fabric health (older drivers) neither fails nor warns; a
    healthy histogram and fabric pass; limited capacity and a recovery in progress only warn."""
    for changes in ({"sram_threshold_exceeded": None, "row_remapper_histogram": None, "repair_pending": None},
                    {"sram_threshold_exceeded": False, "repair_pending": {"channel": False, "tpc": False},
                     "row_remapper_histogram": {"max": 640, "high": 0, "partial": 0, "low": 0, "none": 0}},
                    {"fabric": {"state": "Completed", "status": "Success", "health": None}}):
        assert gpufleet_node_health(with_device(changes)) == {"failures": [], "warnings": []}
    limited = with_device({"fabric": {"state": "Completed", "status": "Success", "health": {
        "summary": "Limited Capacity", "degraded_bandwidth": False, "route_recovery_in_progress": None,
        "route_unhealthy": False, "access_timeout_recovery": True, "incorrect_configuration": "none",
        "partition_assigned": True}}})
    assert gpufleet_node_health(limited) == {"failures": [], "warnings": [
        "GPU1: NVLink fabric limited capacity, access timeout recovery in progress"]}
    # ECC off: the lifetime count is not said twice (the volatile gate says ECC is off)
    off = with_device({"ecc_mode": {"current": False, "pending": False}, "ecc_errors_uncorrected_volatile": None,
                       "ecc_errors_uncorrected_aggregate": None})
    assert gpufleet_node_health(off) == {"failures": [], "warnings": ["GPU1: ECC is off, uncorrected errors are not counted"]}


def test_the_current_hardware_issues_example_fails_by_each_fact():
    """The issue's GPU: DRAIN_P2P, 7 lifetime uncorrectable errors (none since the reload), 900 uncorrectable remapped
    rows with banks exhausted, a TPC repair pending and the SRAM threshold exceeded, behind a fabric that completed but
    runs with degraded bandwidth. It passed every gate before; each fact now fails it by name."""
    gpu = with_device({"recovery_action": "drain_p2p", "ecc_errors_uncorrected_volatile": 0,
                       "ecc_errors_uncorrected_aggregate": 7,
                       "remapped_rows": {"correctable": 0, "uncorrectable": 900, "pending": False, "failure": False},
                       "row_remapper_histogram": {"max": 500, "high": 100, "partial": 20, "low": 10, "none": 10},
                       "repair_pending": {"channel": False, "tpc": True}, "sram_threshold_exceeded": True,
                       "fabric": {"state": "Completed", "status": "Success", "health": {
                           "summary": "Healthy", "degraded_bandwidth": True, "route_recovery_in_progress": False,
                           "route_unhealthy": False, "access_timeout_recovery": False,
                           "incorrect_configuration": "none", "partition_assigned": True}}})
    assert gpufleet_node_health(gpu)["failures"] == [
        "GPU1: SRAM error threshold exceeded (NVIDIA's RMA criterion: run the field diagnostic)",
        "GPU1: 10 memory banks without spare rows (max 0; the next uncorrectable error there fails the row remapping)",
        "GPU1: TPC repair pending (reset the GPU)",
        "GPU1: recovery action drain_p2p (stop peer-to-peer work, then read the action again)",
        "GPU1: NVLink fabric degraded: bandwidth degraded"]
    strict = gpufleet_node_health(gpu, None, {"gpufleet_health_ecc_uncorrected_aggregate_max": 0})["failures"]
    assert "GPU1: 7 uncorrected ECC errors in its lifetime (max 0)" in strict


def test_fewer_gpus_than_the_pci_bus_shows():
    gpu = healthy()
    gpu["pci"]["nvidia_gpus"] = 3
    assert gpufleet_node_health(gpu)["failures"] == ["GPUs: 3 on the PCI bus, the driver sees 2"]
    gpu = healthy(attached_gpus=None)
    gpu["attached_gpus"] = 3
    assert gpufleet_node_health(gpu)["failures"] == ["GPUs: the driver counts 3 attached, answers for 2 (lost GPUs?)"]
    gpu["pci"]["nvidia_gpus"] = None
    gpu["attached_gpus"] = 2
    assert gpufleet_node_health(gpu) == {"failures": [], "warnings": ["GPUs on the PCI bus not reported (node): not checked"]}
    gpu["pci"]["nvidia_gpus"] = 3
    assert gpufleet_node_health(gpu, {}, {"require_all_pci_gpus": False})["failures"] == []


def test_inactive_nvlinks():
    gpu = healthy(nvlink_links_inactive=2)
    gpu["topology"]["nvlink"]["GPU1"] = [{"link": 0, "active": True}, {"link": 2, "active": False}, {"link": 5, "active": False}]
    assert gpufleet_node_health(gpu)["failures"] == ["NVLink inactive: GPU1 link 2,5"]
    health = gpufleet_node_health(gpu, {}, {"gpufleet_health_nvlink_inactive_max": 2})
    assert health == {"failures": [], "warnings": ["NVLink inactive (2 allowed): GPU1 link 2,5"]}
    assert gpufleet_node_health(gpu, {}, {"gpufleet_health_nvlink_inactive_max": None})["failures"] == []


def test_a_gpu_with_all_links_down_fails_even_with_no_link_listed():
    gpu = healthy(nvlink_gpus_all_inactive=["GPU1"])
    gpu["topology"]["nvlink"]["GPU1"] = []
    assert gpufleet_node_health(gpu)["failures"] == ["NVLink inactive: GPU1 all links"]
    assert gpufleet_node_health(gpu, {}, {"nvlink_inactive_max": 8})["failures"] == ["NVLink inactive: GPU1 all links"]


def test_bridgeless_nvlink_cards_are_not_a_fault():
    """A100/H100 PCIe or RTX A6000 cards without a bridge report every link down (NVIDIA/NVSentinel PR 1481, an
    A100 80GB PCIe: "link 0..11 currently down"): with no GPU using NVLink, that is NVLink not fitted."""
    links = [{"link": number, "active": False} for number in range(12)]
    gpu = healthy(nvlink_gpus_all_inactive=["GPU0", "GPU1"], nvlink_links_active=0, nvlink_links_inactive=0,
                  nvlink_pair_list=[], nvlink={"GPU0": list(links), "GPU1": list(links)})
    health = gpufleet_node_health(gpu)
    assert health["failures"] == []
    assert health["warnings"] == ["NVLink: every link of GPU0, GPU1 is down and no GPU uses NVLink (no bridges fitted?)"]
    # On an NVSwitch board NVLink is in use whatever the links say: all links down fails.
    gpu["topology"]["nvswitch"] = True
    assert gpufleet_node_health(gpu)["failures"] == ["NVLink inactive: GPU0 all links; GPU1 all links"]


def test_a_gpu_the_driver_does_not_list_is_judged_by_its_gate():
    """gpu_facts says device_error when the PCI bus shows more GPUs than the driver lists; the gate decides, so
    that a host with a GPU bound to vfio-pci can turn it off."""
    gpu = healthy(nvlink_links_active=2)
    gpu.update(state="device_error", message="the PCI bus shows 3 NVIDIA GPUs, the driver lists 2", lost_gpus=[])
    gpu["pci"]["nvidia_gpus"] = 3
    assert gpufleet_node_health(gpu)["failures"] == ["GPUs: 3 on the PCI bus, the driver sees 2"]
    assert gpufleet_node_health(gpu, {}, {"gpufleet_health_require_all_pci_gpus": False})["failures"] == []
    lost = dict(gpu, state="gpu_lost", lost_gpus=["00000000:07:00.0"], attached_gpus=3)
    assert gpufleet_node_health(lost, {}, {"gpufleet_health_require_all_pci_gpus": False})["failures"][0].startswith(
        "driver: gpu_lost")


def test_a_counted_inactive_link_without_the_list_still_fails():
    gpu = healthy(nvlink_links_inactive=1)
    assert gpufleet_node_health(gpu)["failures"] == ["NVLink inactive: 1 links"]


def test_slowdown_while_busy_or_of_unknown_load_is_a_warning():
    busy = with_device({"clock_event_reasons_active": ["hw_slowdown", "sw_power_cap"], "utilization_gpu_pct": 98})
    assert gpufleet_node_health(busy) == {"failures": [], "warnings": ["GPU1: hw_slowdown while busy"]}
    # no gpu_idle and no utilisation: the load is unknown (real idle GPUs in P8 may lack gpu_idle)
    unknown = with_device({"clock_event_reasons_active": ["hw_slowdown", "sw_power_cap"]})
    assert gpufleet_node_health(unknown) == {"failures": [], "warnings": ["GPU1: hw_slowdown while its load is unknown"]}
    # utilisation, where the facts carry it, decides over the gpu_idle reason
    idle = with_device({"clock_event_reasons_active": ["hw_slowdown"], "utilization_gpu_pct": 0})
    assert gpufleet_node_health(idle)["failures"] == ["GPU1: hw_slowdown while idle"]
    loaded = with_device({"clock_event_reasons_active": ["gpu_idle", "hw_slowdown"], "utilization_gpu_pct": 40})
    assert gpufleet_node_health(loaded)["failures"] == []
    # or the node-level utilisation of the NVML backend
    nvml = with_device({"clock_event_reasons_active": ["hw_slowdown"]})
    nvml["utilization"] = {"GPU1": {"gpu_pct": 0, "memory_pct": 0}}
    assert gpufleet_node_health(nvml)["failures"] == ["GPU1: hw_slowdown while idle"]
    # sw_power_cap is not watched by default; it can be
    capped = with_device({"clock_event_reasons_active": ["gpu_idle", "sw_power_cap"]})
    assert gpufleet_node_health(capped)["failures"] == []
    watched = {"slowdown_reasons_when_idle": "sw_power_cap, hw_slowdown"}
    assert gpufleet_node_health(capped, {}, watched)["failures"] == ["GPU1: sw_power_cap while idle"]


def test_pcie_gen_below_max_of_unknown_load_is_only_a_warning():
    """An idle RTX 3090 (P8, 0 %) reports only sw_power_cap and runs its link at gen 1 of 4 (telegraf testdata)."""
    gpu = with_device({"pcie": {"gen_current": 1, "gen_max": 4, "width_current": 16, "width_max": 16},
                       "clock_event_reasons_active": ["sw_power_cap"]})
    assert gpufleet_node_health(gpu) == {"failures": [], "warnings": ["GPU1: PCIe gen 1 of 4 (normal when idle)"]}


def test_pcie_gen_below_max_while_idle_is_only_a_warning():
    gpu = with_device({"pcie": {"gen_current": 1, "gen_max": 4, "width_current": 16, "width_max": 16}})
    assert gpufleet_node_health(gpu) == {"failures": [], "warnings": ["GPU1: PCIe gen 1 of 4 (normal when idle)"]}


def test_ecc_off_is_said_not_failed():
    gpu = with_device({"ecc_errors_uncorrected_volatile": None, "ecc_mode": {"current": False, "pending": False}})
    assert gpufleet_node_health(gpu) == {"failures": [], "warnings": ["GPU1: ECC is off, uncorrected errors are not counted"]}


def test_unknown_values_are_gathered_per_gate():
    gpu = healthy()
    for device in gpu["devices"]:
        device.update(compute_mode=None, reset_required=None)
    health = gpufleet_node_health(gpu)
    assert health["failures"] == []
    assert health["warnings"] == ["compute mode not reported (GPU0, GPU1): not checked",
                                  "reset required not reported (GPU0, GPU1): not checked"]


def test_fabric_not_applicable_is_neither_failure_nor_warning():
    for state in (None, "N/A", "Not Supported"):
        assert gpufleet_node_health(with_device({"fabric": {"state": state, "status": None}})) == {"failures": [], "warnings": []}
    done = with_device({"fabric": {"state": "Completed", "status": "Success"}})
    assert gpufleet_node_health(done) == {"failures": [], "warnings": []}


def test_fabric_manager_probe_on_an_nvswitch_node():
    gpu = healthy(nvswitch=True)
    assert gpufleet_node_health(gpu, {"fabricmanager_active": True}) == {"failures": [], "warnings": []}
    assert gpufleet_node_health(gpu, {"fabricmanager_active": False})["failures"] == [
        "fabric manager not active on an NVSwitch system"]
    assert gpufleet_node_health(gpu, {}) == {"failures": [], "warnings": ["fabric manager state not reported (node): not checked"]}


def test_every_failure_is_named_in_order():
    gpu = healthy(nvswitch=True)
    gpu["pci"]["nvidia_gpus"] = 3
    gpu["topology"]["nvlink"]["GPU1"] = [{"link": 0, "active": True}, {"link": 5, "active": False}]
    gpu["devices"][0].update(persistence_mode=False, ecc_errors_uncorrected_volatile=2, compute_mode="Prohibited")
    gpu["devices"][1]["pcie"].update(width_current=8)
    health = gpufleet_node_health(gpu, {"fabricmanager_active": False})
    assert health["failures"] == [
        "GPUs: 3 on the PCI bus, the driver sees 2",
        "NVLink inactive: GPU1 link 5",
        "GPU0: persistence mode off",
        "GPU0: 2 uncorrected ECC errors since the driver loaded (max 0)",
        "GPU0: compute mode Prohibited, not Default",
        "GPU1: PCIe x8 of x16",
        "fabric manager not active on an NVSwitch system",
    ]


def test_a_silent_driver_is_one_failure():
    health = gpufleet_node_health({"state": "driver_not_loaded", "message": "no module"})
    assert health["failures"] == ["driver: driver_not_loaded (no module)"]


def test_persistence_off_is_a_failure_unless_the_node_is_meant_to_run_without_it():
    gpu = with_device({"persistence_mode": False}, index=0)
    assert gpufleet_node_health(gpu)["failures"] == ["GPU0: persistence mode off"]
    assert gpufleet_node_health(gpu, {"persistence_expected": False})["failures"] == []


def test_thresholds_defaults_and_overrides():
    defaults = gpufleet_health_thresholds()
    assert sorted(defaults) == sorted(THRESHOLDS)
    assert defaults["ecc_uncorrected_volatile_max"] == 0 and defaults["require_compute_mode_default"] is True
    assert defaults["slowdown_reasons_when_idle"] == ["hw_power_brake_slowdown", "hw_slowdown", "hw_thermal_slowdown",
                                                      "sw_thermal_slowdown"]
    # values as -e name=value gives them (strings), with and without the prefix
    resolved = gpufleet_health_thresholds({"gpufleet_health_ecc_uncorrected_volatile_max": "4", "require_pcie_gen_max": "no",
                                           "gpufleet_health_nvlink_inactive_max": "null"})
    assert resolved["ecc_uncorrected_volatile_max"] == 4 and resolved["require_pcie_gen_max"] is False
    assert resolved["nvlink_inactive_max"] is None


@pytest.mark.parametrize("overrides, words", [
    ({"gpufleet_health_ecc_uncorrected_max": 0}, "unknown health threshold gpufleet_health_ecc_uncorrected_max"),
    ({"gpufleet_health_ecc_uncorrected_volatile_max": -1}, "gpufleet_health_ecc_uncorrected_volatile_max must be a whole number"),
    ({"gpufleet_health_ecc_uncorrected_volatile_max": "lots"}, "gpufleet_health_ecc_uncorrected_volatile_max must be a whole number"),
    ({"gpufleet_health_ecc_uncorrected_volatile_max": True}, "gpufleet_health_ecc_uncorrected_volatile_max must be a whole number"),
    ({"gpufleet_health_require_compute_mode_default": "maybe"}, "gpufleet_health_require_compute_mode_default must be true or false"),
    ({"gpufleet_health_slowdown_reasons_when_idle": ["hw_slowdwn"]}, "unknown clock event reason hw_slowdwn"),
    ({"gpufleet_health_slowdown_reasons_when_idle": 3}, "must be a list of clock event reasons"),
    (["gpufleet_health_nvlink_inactive_max"], "expects a mapping"),
])
def test_bad_thresholds_are_named(overrides, words):
    with pytest.raises(HealthError, match=re.escape(words)):
        gpufleet_health_thresholds(overrides)
    with pytest.raises(HealthError, match=re.escape(words)):
        gpufleet_node_health(healthy(), {}, overrides)


@pytest.mark.parametrize("gpu", [None, [], {"count": 2}, "ok"])
def test_what_is_not_gpu_facts_is_refused(gpu):
    with pytest.raises(HealthError, match="gpufleet_node_health expects the gpu facts of gpufleet.node.gpu_facts"):
        gpufleet_node_health(gpu)


def test_a_health_error_is_a_value_error():
    """Callers without Ansible (the gpu_monitoring collector) catch it as the standard library's ValueError."""
    with pytest.raises(ValueError):
        gpufleet_health_thresholds({"gpufleet_health_nvlink_inactive_max": "two"})


@pytest.mark.parametrize("capture, failures", [
    ("61-a10g-", ["GPU0: PCIe x8 of x16"]),       # an AWS A10G: x8 of x16 (the platform's wiring), idle at gen 1
    ("64-rtx-3060-", []),
    ("65-dual-rtx-a5000-", []),
    ("66-rtx-3090-", []),                          # idle at gen 1 of 4 with only sw_power_cap active: no failure
])
def test_real_captures_of_idle_gpus(capture, failures):
    """The gates over real ``nvidia-smi -q -x`` captures (tests/unit/plugins/module_utils/fixtures/nvidia-smi, each
    with its SOURCE): idle GPUs in good order fail nothing but what they really show."""
    import pathlib
    from ansible_collections.gpufleet.node.plugins.module_utils.nvidia_smi import parse_query_xml
    fixtures = pathlib.Path(__file__).resolve().parents[2] / "plugins" / "module_utils" / "fixtures" / "nvidia-smi"
    (path,) = list(fixtures.glob(capture + "*/q-x.xml"))
    query = parse_query_xml(path.read_text(errors="replace"))
    gpu = {"state": "ok", "count": len(query["gpus"]), "attached_gpus": query["attached_gpus"],
           "pci": {"nvidia_gpus": len(query["gpus"])}, "devices": query["gpus"], "topology": {}}
    health = gpufleet_node_health(gpu, {"persistence_expected": False})      # workstations and cloud VMs
    assert health["failures"] == failures
    assert not [warning for warning in health["warnings"] if "while busy" in warning]


# ------------------------------------------------------------------------------------------------------------------
# The gates over the facts both backends of gpu_facts gather from the emulated hardware (tests/emulator: the
# nvidia-smi emulator and the fake libnvidia-ml.so.1 built from the same profile), with the faults the fleet
# scenario plants (extensions/molecule/fleet/plant-faults.yml) and one more: the unit-level run of that scenario.
EMULATED = [
    ("hgx-a100-8gpu", None, []),
    ("hgx-a100-8gpu", {"gpus": {"0": {"fabric_state": "Completed", "fabric_status": "Success"}}}, []),
    ("hgx-a100-8gpu", {"gpus": {"0": {"fabric_state": "In Progress", "fabric_status": None}}},
     ["GPU0: NVLink fabric In Progress, not Completed (fabric manager)"]),
    ("pairs-4gpu", {"inactive_links": [[0, 2]], "all_links_inactive": [3],
                    "gpus": {"1": {"ecc_dram_uncorrectable_volatile": 2, "ecc_dram_uncorrectable_aggregate": 2},
                             "2": {"remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}}}},
     ["NVLink inactive: GPU0 link 2; GPU3 all links", "GPU1: 2 uncorrected ECC errors since the driver loaded (max 0)",
      "GPU2: row remapping pending (reset the GPU)"]),
    ("pcie-4gpu", {"gpus": {"0": {"compute_mode": "Exclusive_Process"},
                            "3": {"clock_event_reasons": ["gpu_idle", "hw_thermal_slowdown"], "temperature_c": 91}}},
     ["GPU0: compute mode Exclusive_Process, not Default", "GPU3: hw_thermal_slowdown while idle"]),
    # Faults of newer drivers, the same through both backends: the SRAM threshold (555+), exhausted banks (the A100
    # profile gives its 640 banks), a pending repair (590+), a lifetime count past the remapper's 512.
    ("hgx-a100-8gpu", {"gpus": {"1": {"sram_threshold_exceeded": True, "row_remapper_banks_exhausted": 3},
                                "2": {"repair_pending": {"channel": True, "tpc": False}},
                                "4": {"ecc_dram_uncorrectable_aggregate": 600, "ecc_sram_uncorrectable_aggregate": 1}}},
     ["GPU1: SRAM error threshold exceeded (NVIDIA's RMA criterion: run the field diagnostic)",
      "GPU1: 3 memory banks without spare rows (max 0; the next uncorrectable error there fails the row remapping)",
      "GPU2: channel repair pending (reset the GPU)",
      "GPU4: 601 uncorrected ECC errors in its lifetime (max 512)"]),
]


def test_mig_and_fabric_health_on_emulated_hardware(emulated_node, monkeypatch):
    """A MIG GPU's remapped rows are not reported by either backend (NOT_SUPPORTED; N/A in -q -x): a warning, and the
    recovery action it carries still fails it. A fabric health planted in the fake NVML (the v3 struct) fails a
    Completed/Success GPU with the decoded mask; a library that knows only the v2 struct still gives the mask."""
    faults = {"gpus": {"3": {"mig": True, "recovery_action": "gpu_reset",
                             "remapped_rows": {"correctable": 0, "uncorrectable": 1, "pending": True, "failure": False}}}}
    for backend in ("nvml", "nvidia_smi"):
        gpu = emulated_node("hgx-a100-8gpu", faults, backend, monkeypatch)
        assert gpu["devices"][3]["mig_mode"]["current"] is True and gpu["devices"][3]["remapped_rows"] is None, backend
        health = gpufleet_node_health(gpu, {"fabricmanager_active": True, "persistence_expected": False})
        assert health["failures"] == ["GPU3: recovery action gpu_reset (reset the GPU)"], backend
        assert "row remapping under MIG (turn MIG off to read it) not reported (GPU3): not checked" in health["warnings"]
    for version in (3, 2):
        unhealthy = {"summary": "Unhealthy", "degraded_bandwidth": True, "route_unhealthy": True, "version": version}
        gpu = emulated_node("hgx-h100-8gpu", {"gpus": {"5": {"fabric_health": unhealthy}}}, "nvml", monkeypatch)
        assert gpu["devices"][5]["fabric"]["state"] == "Completed"
        health = gpufleet_node_health(gpu, {"fabricmanager_active": True, "persistence_expected": False})
        assert health["failures"] == ["GPU5: NVLink fabric %s: bandwidth degraded, route unhealthy" % (
            "unhealthy" if version == 3 else "degraded")], version


@pytest.fixture(scope="module")
def emulated_node(tmp_path_factory, fake_nvml_library):
    import importlib.util
    import json
    import pathlib
    import shutil
    import sys
    from ansible_collections.gpufleet.node.plugins.modules import gpu_facts
    emulation = pathlib.Path(__file__).resolve().parents[4] / "tests" / "emulator"
    work = tmp_path_factory.mktemp("emulated")
    library = fake_nvml_library   # tests/unit/plugins/conftest.py
    spec = importlib.util.spec_from_file_location("gpufleet_emulator_profile_h", str(emulation / "emulator_profile.py"))
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    script = work / "nvidia-smi"
    script.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, emulation / "nvidia_smi_emulator.py"))
    script.chmod(0o755)

    def gather(name, faults, backend, monkeypatch):
        config, pci = work / ("config-" + backend), work / ("pci-" + backend)
        shutil.rmtree(str(config), ignore_errors=True)
        shutil.rmtree(str(pci), ignore_errors=True)
        config.mkdir()
        pci.mkdir()
        profile = json.loads((emulation / "profiles" / (name + ".json")).read_text(encoding="utf-8"))
        if faults is not None:
            (config / "faults.json").write_text(json.dumps(faults), encoding="utf-8")
        (config / "nvml.conf").write_text(tool.render_nvml_conf(profile, name, faults), encoding="utf-8")
        tool.lay_out_pci(profile, str(pci))
        monkeypatch.setenv("GPUFLEET_EMULATOR_CONFIG", str(config))
        monkeypatch.setenv("GPUFLEET_NVML_CONF", str(config / "nvml.conf"))
        monkeypatch.setenv("GPUFLEET_EMULATOR_PROFILE", name)
        monkeypatch.setattr(gpu_facts, "loaded_module_version", lambda: profile["driver_version"])
        return gpu_facts.gather({"nvidia_smi_path": str(script), "nvml_library": str(library), "timeout": 10,
                                 "gather_subset": ["all"], "pci_devices_path": str(pci), "backend": backend})

    return gather


@pytest.mark.parametrize("profile, faults, failures", EMULATED, ids=["%s-%d" % (p[0], i) for i, p in enumerate(EMULATED)])
@pytest.mark.parametrize("backend", ["nvml", "nvidia_smi"])
def test_the_gates_on_emulated_hardware(emulated_node, monkeypatch, backend, profile, faults, failures):
    gpu = emulated_node(profile, faults, backend, monkeypatch)
    assert gpu["state"] == "ok" and gpu["source"] == backend, gpu["message"]
    health = gpufleet_node_health(gpu, {"fabricmanager_active": True, "persistence_expected": False})
    assert health["failures"] == failures


# Xid lines as the driver writes them to the kernel log (NVIDIA's Xid catalog; journalctl -k and dmesg forms).
XID_79 = "2026-12-05T03:12:44+0000 node7 kernel: NVRM: Xid (PCI:0000:3b:00): 79, pid=1122, name=python, GPU has fallen off the bus."
XID_48 = ("[ 8812.441] NVRM: Xid (PCI:0000:1c:00): 48, pid=2217, name=torchrun, An uncorrectable double bit error (DBE) "
          "has been detected on GPU in the framebuffer at partition 1, subpartition 0.")
XID_13 = "[ 9000.120] NVRM: Xid (PCI:0000:1c:00.0): 13, pid=2217, name=torchrun, Graphics Exception: ESR 0x50df30=0x4c0e0f 0x50df34=0x20"


def test_xid_events_reads_the_drivers_lines_only():
    assert xid_events([XID_79, "NVRM: GPU 0000:3b:00.0: GPU has fallen off the bus.", XID_13, None]) == [
        ((0, 0x3b, 0), 79, "pid=1122, name=python, GPU has fallen off the bus."),
        ((0, 0x1c, 0), 13, "pid=2217, name=torchrun, Graphics Exception: ESR 0x50df30=0x4c0e0f 0x50df34=0x20")]


def xid_probe(*lines, source="journal"):
    return {"kernel_xids": {"source": source, "lines": list(lines), "lines_total": len(lines), "error": None}}


def test_critical_xids_fail_the_gpu_they_name():
    gpu = healthy()
    gpu["devices"][0]["pci_bus_id"], gpu["devices"][1]["pci_bus_id"] = "00000000:1C:00.0", "00000000:3B:00.0"
    health = gpufleet_node_health(gpu, xid_probe(XID_48, XID_13, XID_48, XID_79))
    assert health["failures"] == [
        "GPU0: Xid 48 (2 times) since boot (pid=2217, name=torchrun, An uncorrectable double bit error (DBE) has been "
        "detected on GPU in the framebuffer at partition 1, subpartition 0.)",
        "GPU1: Xid 79 since boot (pid=1122, name=python, GPU has fallen off the bus.)"]
    # 13 (an application's fault) is not critical by default; the list is the user's to change, [] turns it off
    assert gpufleet_node_health(gpu, xid_probe(XID_13))["failures"] == []
    assert len(gpufleet_node_health(gpu, xid_probe(XID_13), {"gpufleet_health_critical_xids": "13"})["failures"]) == 1
    assert gpufleet_node_health(gpu, xid_probe(XID_79), {"gpufleet_health_critical_xids": []})["failures"] == []


def test_an_xid_of_a_gpu_the_driver_lost_is_named_by_its_address():
    gpu = dict(healthy(), state="gpu_lost", message="GPU 00000000:3B:00.0 is lost")
    assert gpufleet_node_health(gpu, xid_probe(XID_79))["failures"] == [
        "driver: gpu_lost (GPU 00000000:3B:00.0 is lost)",
        "PCI 0000:3b:00: Xid 79 since boot (pid=1122, name=python, GPU has fallen off the bus.)"]


def test_a_kernel_log_that_cannot_be_read_is_said():
    unread = {"kernel_xids": {"source": None, "lines": [], "lines_total": 0,
                              "error": "journalctl: no kernel messages; dmesg: Operation not permitted"}}
    assert gpufleet_node_health(healthy(), unread) == {"failures": [], "warnings": [
        "kernel log for Xids (journalctl: no kernel messages; dmesg: Operation not permitted) not reported (node): not checked"]}
    # a caller that read no kernel log (no kernel_xids) is not told it did not
    assert gpufleet_node_health(healthy(), {}) == {"failures": [], "warnings": []}


@pytest.mark.parametrize("value", [["79", "x"], [0], "79,-1", [True], {"79": 1}])
def test_critical_xids_must_be_xid_numbers(value):
    with pytest.raises(HealthError, match="gpufleet_health_critical_xids must be a list of Xid numbers"):
        gpufleet_health_thresholds({"critical_xids": value})


def test_a_failed_self_converge_run_is_a_warning_with_when_and_why():
    run = {"ok": False, "time": "2026-12-07T14:03:12Z", "message": "the playbook failed (ansible-playbook exit status 2)",
           "commit": "3f7f13c2", "changed": None, "last_ok": {"time": "2026-12-07T13:03:10Z", "commit": "0a1b2c3d"}}
    assert gpufleet_node_health(healthy(), {"self_converge": run}) == {"failures": [], "warnings": [
        "self-converge: the last run (2026-12-07T14:03:12Z) failed (the playbook failed (ansible-playbook exit status 2));"
        " last converged 2026-12-07T13:03:10Z"]}
    never = gpufleet_node_health(healthy(), {"self_converge": dict(run, last_ok=None)})["warnings"]
    assert never[0].endswith("; never converged")
    # a good run, or a node that does not converge itself, says nothing
    assert gpufleet_node_health(healthy(), {"self_converge": dict(run, ok=True)})["warnings"] == []
    assert gpufleet_node_health(healthy(), {"self_converge": None})["warnings"] == []
