#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_facts
short_description: NVIDIA GPU inventory, NVLink topology and health as facts, from NVML or nvidia-smi
version_added: "0.1.0"
description:
  - Reads the GPUs of the host through one of two backends and returns one fact schema under C(ansible_facts.gpu);
    C(gpu.source) says which backend the facts came from.
  - The C(nvml) backend calls NVIDIA's management library, C(libnvidia-ml.so.1) (installed with every driver),
    through ctypes in a child process that is killed at the timeout, with one library initialisation for
    everything. NVML is the interface NVIDIA documents for tools; its return codes give the states, not English
    text. It alone reports the compute capability, each NVLink link's remote end and P2P status; it does not
    see NICs (C(topology.nics) and C(topology.gpu_nic) are null).
  - The C(nvidia_smi) backend runs C(nvidia-smi -q -x), C(nvidia-smi topo -m) and C(nvidia-smi nvlink -s)
    concurrently, each at most once, with the C locale and a timeout.
  - Both read the PCI IDs of the host to count NVIDIA GPUs and to find NVSwitches (C(10de:1af1) for the A100
    generation, C(10de:22a3) for the H100 generation), and C(/proc/driver/nvidia/version) for the loaded kernel
    module. The state follows from comparing what they report (listed GPUs, attached GPUs, GPUs on the PCI
    bus, lost GPUs).
  - A missing driver, an unloaded driver, a driver/library mismatch or a lost GPU are reported in C(gpu.state)
    and C(gpu.message); the module does not fail for them.
  - Needs nothing on the node beyond the Python standard library.
author:
  - gpufleet.node maintainers (@gpufleet)
options:
  backend:
    description:
      - Where the facts come from. C(auto) uses NVML when its library loads and nvidia-smi otherwise; where NVML
        lacks calls (an older driver's library), the device fields they would give are filled from
        C(nvidia-smi -q -x) and C(gpu.source) is C(nvml+nvidia_smi). C(nvml) and C(nvidia_smi) use only that one.
    type: str
    choices: [auto, nvml, nvidia_smi]
    default: auto
  nvml_library:
    description:
      - The NVML library to load. By default C(libnvidia-ml.so.1), found by the dynamic loader.
    type: path
  nvidia_smi_path:
    description:
      - Path of C(nvidia-smi). By default it is looked up on C(PATH) and then in C(/usr/bin),
        C(/usr/local/nvidia/bin), C(/usr/local/cuda/bin) and C(/opt/nvidia/bin).
    type: path
  timeout:
    description:
      - Seconds the NVML child process, or each nvidia-smi command, may run. One still running then is killed
        and the state is C(timeout).
    type: int
    default: 30
  gather_subset:
    description:
      - What to return. C(inventory) gives the devices, driver and counts (nvidia-smi backend C(nvidia-smi -q -x)),
        C(topology) the GPU-to-GPU matrix and affinities (C(nvidia-smi topo -m)), C(nvlink) the NVLink links
        (C(nvidia-smi nvlink -s)). C(all) is all three. NVML reads everything in one pass either way.
    type: list
    elements: str
    choices: [all, inventory, topology, nvlink]
    default: [all]
  pci_devices_path:
    description:
      - Directory of PCI devices to read vendor and device IDs from (one subdirectory per device with
        C(vendor), C(device) and C(class) files). Change it only for a chroot or a test tree.
    type: path
    default: /sys/bus/pci/devices
  stack:
    description:
      - Also read what the node runs on its GPUs, returned as C(ansible_facts.gpu_stack) - the CUDA toolkit, NCCL,
        torch, fabric manager, the container runtime, the metrics endpoint, the last self-converge run and the
        driver's Xid lines in the kernel log - in the same module run, after the GPUs. C(playbooks/fleet_facts.yml) (so
        C(validate.yml) and C(report.yml)) and the node check of M(gpufleet.node.scheduler) use it.
    type: bool
    default: false
  pytorch_venv:
    description:
      - The virtualenv whose torch C(gpu_stack.torch) reports (M(gpufleet.node.pytorch)'s C(pytorch_venv)).
    type: path
    default: /opt/gpufleet/pytorch
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: The module only reads; it runs the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  facts:
    support: full
    description: Everything is returned under C(ansible_facts.gpu), and with O(stack) under C(ansible_facts.gpu_stack).
notes:
  - Use it in C(gather_facts) with C(ansible_facts_modules), or as a task.
  - A command that cannot be parsed leaves its part of the facts empty and says why in C(gpu.errors).
seealso:
  - name: nvidia-smi documentation
    description: The NVIDIA System Management Interface.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
  - name: NVML API reference
    description: NVIDIA Management Library, the C interface both backends rest on.
    link: https://docs.nvidia.com/deploy/nvml-api/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  gpufleet.node.gpu_facts:

- name: Only the inventory, quickly
  gpufleet.node.gpu_facts:
    gather_subset: [inventory]
    timeout: 10

- name: The GPUs and what runs on them (CUDA, NCCL, torch, fabric manager, Xids), in one module run
  gpufleet.node.gpu_facts:
    stack: true

- name: Stop unless every GPU is up
  ansible.builtin.assert:
    that:
      - ansible_facts['gpu']['state'] == 'ok'
      - ansible_facts['gpu']['count'] == ansible_facts['gpu']['pci']['nvidia_gpus']
    fail_msg: "{{ ansible_facts['gpu']['message'] }}"

# In a play's fact gathering, next to setup:
#   - hosts: gpu_nodes
#     vars:
#       ansible_facts_modules: [ansible.builtin.setup, gpufleet.node.gpu_facts]
"""

RETURN = r"""
ansible_facts:
  description: Facts to add to ansible_facts.
  returned: always
  type: dict
  contains:
    gpu:
      description: The GPU facts of the host.
      returned: always
      type: dict
      contains:
        state:
          description:
            - C(ok), C(not_installed) (neither NVML's library nor nvidia-smi), C(driver_not_loaded),
              C(driver_library_mismatch), C(no_devices), C(gpu_lost) (a GPU the driver cannot reach; see
              C(lost_gpus)), C(device_error) (the driver lists fewer GPUs than it says are attached or than the PCI
              bus shows, or NVML failed on a device), C(timeout) or C(error) (anything else, e.g. a loaded kernel
              module that does not answer).
          returned: always
          type: str
          sample: ok
        message:
          description: The line that explains the state.
          returned: always
          type: str
          sample: 8 GPUs, driver 535.183.01
        source:
          description: Where the facts came from, C(nvml), C(nvidia_smi) or C(nvml+nvidia_smi) (NVML, with
            device fields its library lacks filled from C(nvidia-smi -q -x)); null when nothing could be read.
          returned: always
          type: str
          sample: nvml
        nvml_library:
          description: The NVML library the C(nvml) backend loaded; null when it was not used.
          returned: always
          type: str
          sample: libnvidia-ml.so.1
        nvml_missing:
          description: NVML calls the library lacks or does not support on this hardware (their fields are null).
          returned: always
          type: list
          elements: str
          sample: ["nvmlDeviceGetGpuFabricInfo"]
        nvml_version:
          description: NVML's version (NVML backend); null from nvidia-smi.
          returned: always
          type: str
          sample: "12.535.183.01"
        lost_gpus:
          description: PCI bus IDs of GPUs the driver reports as lost (nvidia-smi's "GPU is lost" lines, or NVML's
            C(NVML_ERROR_GPU_IS_LOST) for a device or a call on it); null for a GPU whose handle NVML cannot get at all
            (its bus id is then unknown).
          returned: always
          type: list
          elements: str
          sample: ["00000000:07:00.0"]
        errors:
          description: Per command that failed or could not be parsed, what it printed or why.
          returned: always
          type: dict
          sample: {"topo -m": "Failed to initialize NVML: Unknown Error"}
        nvidia_smi:
          description: Path of the nvidia-smi used, or null when none was found.
          returned: always
          type: str
          sample: /usr/bin/nvidia-smi
        driver_version:
          description: Driver version reported by nvidia-smi.
          returned: always
          type: str
          sample: 535.183.01
        cuda_driver_version:
          description: The newest CUDA version the driver supports.
          returned: always
          type: str
          sample: "12.2"
        loaded_module_version:
          description: Version of the loaded kernel module, from /proc/driver/nvidia/version; null when none is loaded.
          returned: always
          type: str
          sample: 535.183.01
        count:
          description: Number of GPUs the driver lists (and answers for).
          returned: always
          type: int
          sample: 8
        attached_gpus:
          description: The number of attached GPUs the driver states (C(attached_gpus) of the XML, NVML's device
            count); can differ from C(count) when a GPU is lost.
          returned: always
          type: int
          sample: 8
        devices:
          description:
            - One entry per GPU the driver answers for, in index order (PCI bus order). Both backends fill every
              field; a value either cannot read is null, never a neighbour's value or a made-up zero.
            - "Where each field comes from (nvidia-smi C(-q -x) element / NVML call): C(name) product_name /
              nvmlDeviceGetName; C(uuid) uuid / nvmlDeviceGetUUID; C(serial) serial / nvmlDeviceGetSerial;
              C(pci_bus_id) pci/pci_bus_id / nvmlDeviceGetPciInfo_v3; C(minor_number) minor_number /
              nvmlDeviceGetMinorNumber; C(module_id) gpu_module_id or platformInfo/module_id /
              nvmlDeviceGetModuleId; C(architecture) product_architecture / nvmlDeviceGetArchitecture;
              C(compute_capability) none / nvmlDeviceGetCudaComputeCapability; C(compute_mode) compute_mode /
              nvmlDeviceGetComputeMode; C(memory_total_mib), C(memory_reserved_mib), C(memory_used_mib),
              C(memory_free_mib) fb_memory_usage/total, reserved, used, free / nvmlDeviceGetMemoryInfo_v2
              (nvmlMemory_v2_t; nvmlDeviceGetMemoryInfo on a library without it, no reserved then);
              C(utilization_gpu_pct) utilization/gpu_util / nvmlDeviceGetUtilizationRates; C(mig_mode),
              C(mig_devices) mig_mode, mig_devices / nvmlDeviceGetMigMode and the MIG device calls;
              C(persistence_mode) persistence_mode / nvmlDeviceGetPersistenceMode; C(ecc_mode) ecc_mode /
              nvmlDeviceGetEccMode; the ECC counts ecc_errors (dram_*, sram_*, or single_bit/double_bit) /
              nvmlDeviceGetTotalEccErrors, else nvmlDeviceGetMemoryErrorCounter; C(retired_pages) retired_pages /
              nvmlDeviceGetRetiredPages and nvmlDeviceGetRetiredPagesPendingStatus; C(remapped_rows)
              remapped_rows / nvmlDeviceGetRemappedRows; C(row_remapper_histogram) remapped_rows/row_remapper_histogram /
              nvmlDeviceGetRowRemapperHistogram; C(sram_threshold_exceeded) ecc_errors/aggregate/sram_threshold_exceeded /
              nvmlDeviceGetSramEccErrorStatus; C(repair_pending) ecc_errors/channel_repair_pending, tpc_repair_pending /
              nvmlDeviceGetRepairStatus; C(recovery_action) gpu_recovery_action / field value 230;
              C(reset_required), C(drain_and_reset_recommended) the recovery action where it tells, else
              gpu_reset_status / field values 226, 227;
              C(fabric) fabric / nvmlDeviceGetGpuFabricInfoV (v3, else v2), else nvmlDeviceGetGpuFabricInfo;
              C(clock_event_reasons_active) clocks_event_reasons or
              clocks_throttle_reasons / nvmlDeviceGetCurrentClocksEventReasons (else ...ThrottleReasons);
              C(temperature_c) temperature/gpu_temp / nvmlDeviceGetTemperature; C(power_draw_w)
              power_draw (drivers from 570: average_power_draw, else instant_power_draw) / nvmlDeviceGetPowerUsage;
              C(power_draw_average_w) gpu_power_readings/average_power_draw / field value 185
              (NVML_FI_DEV_POWER_AVERAGE); C(power_draw_instant_w) gpu_power_readings/instant_power_draw / field
              value 186 (NVML_FI_DEV_POWER_INSTANT);
              C(power_limit_w) current or enforced power limit / nvmlDeviceGetEnforcedPowerLimit; C(pcie)
              pci_gpu_link_info and replay_counter / the PCIe link and replay counter calls; C(vbios_version)
              vbios_version / nvmlDeviceGetVbiosVersion."
          returned: always
          type: list
          elements: dict
          contains:
            index:
              description: nvidia-smi index.
              type: int
              sample: 0
            name:
              description: Product name.
              type: str
              sample: NVIDIA A100-SXM4-80GB
            uuid:
              description: GPU UUID.
              type: str
              sample: GPU-513536b6-7d19-9063-b049-1e69664bb298
            serial:
              description: Board serial number.
              type: str
              sample: "1650522003820"
            pci_bus_id:
              description: PCI address with domain.
              type: str
              sample: "00000000:07:00.0"
            minor_number:
              description: Minor number of /dev/nvidiaN (need not equal the index).
              type: int
              sample: 0
            module_id:
              description: Module (SXM slot) ID where reported.
              type: int
              sample: 1
            memory_total_mib:
              description: Frame buffer size in MiB.
              type: int
              sample: 81920
            memory_used_mib:
              description: Frame buffer allocated in MiB, without the memory the driver and firmware reserve (NVML
                C(nvmlDeviceGetMemoryInfo_v2) C(used) of C(nvmlMemory_v2_t), what DCGM exports as
                C(DCGM_FI_DEV_FB_USED); nvidia-smi's C(fb_memory_usage/used)). A driver before 510, which has no
                C(nvmlDeviceGetMemoryInfo_v2) and prints no C(reserved), counts its reservation in here
                (C(nvmlDeviceGetMemoryInfo) C(used)), as DCGM does then.
              type: int
              sample: 0
            memory_reserved_mib:
              description: Frame buffer the driver and firmware reserve, in MiB (NVML C(nvmlDeviceGetMemoryInfo_v2)
                C(reserved), DCGM's C(DCGM_FI_DEV_FB_RESERVED); nvidia-smi's C(fb_memory_usage/reserved), printed
                from driver 510); null where the source does not say (older drivers).
              type: int
              sample: 869
            memory_free_mib:
              description: Free frame buffer in MiB (NVML C(nvmlDeviceGetMemoryInfo_v2) C(free); C(fb_memory_usage/free)).
                With a reservation reported, total is about reserved + used + free (each rounded down to a MiB).
              type: int
              sample: 80999
            mig_mode:
              description: MIG mode, C(current) and C(pending) (true, false, or null where unsupported).
              type: dict
              sample: {"current": false, "pending": false}
            mig_devices:
              description: MIG devices with C(index), C(gpu_instance_id), C(compute_instance_id),
                C(memory_total_mib) and C(multiprocessor_count).
              type: list
              elements: dict
              sample: []
            persistence_mode:
              description: Whether persistence mode is on.
              type: bool
              sample: true
            ecc_mode:
              description: ECC mode, C(current) and C(pending).
              type: dict
              sample: {"current": true, "pending": true}
            ecc_errors_uncorrected_volatile:
              description: Uncorrectable ECC errors since the driver loaded, where reported.
              type: int
              sample: 0
            retired_pages:
              description: Retired pages (C(single_bit_ecc), C(double_bit_ecc), C(pending)) where reported.
              type: dict
              sample: {"single_bit_ecc": 0, "double_bit_ecc": 0, "pending": false}
            pcie:
              description: PCIe link C(gen_current), C(gen_max), C(width_current) and C(width_max), and
                C(replay_counter) (link-level retransmissions; a rising count means a marginal link).
              type: dict
              sample: {"gen_current": 4, "gen_max": 4, "width_current": 16, "width_max": 16, "replay_counter": 0}
            power_limit_w:
              description: Enforced power limit in watts.
              type: float
              sample: 400.0
            vbios_version:
              description: VBIOS version.
              type: str
              sample: 92.00.36.00.02
            architecture:
              description: Architecture as nvidia-smi prints it (C(product_architecture); NVML
                C(nvmlDeviceGetArchitecture)).
              type: str
              sample: Ampere
            compute_capability:
              description: CUDA compute capability, C(major.minor) (NVML C(nvmlDeviceGetCudaComputeCapability) only;
                null from nvidia-smi).
              type: str
              sample: "8.0"
            compute_mode:
              description: Compute mode as printed (C(Default), C(Exclusive_Process), C(Prohibited)).
              type: str
              sample: Default
            temperature_c:
              description: GPU core temperature in degrees Celsius (C(temperature/gpu_temp); NVML GPU sensor).
              type: int
              sample: 34
            power_draw_w:
              description: Board power draw in watts as C(nvmlDeviceGetPowerUsage) reads it, what DCGM exports as
                C(DCGM_FI_DEV_POWER_USAGE) and nvidia-smi prints as C(power_draw) (C(power.draw)). nvml.h, on that
                call, says it is averaged over 1 s on Ampere (except GA100) and newer GPUs, instantaneous on GA100
                and older. Drivers from 570 print no C(power_draw) in C(-q -x); there it is C(average_power_draw),
                or C(instant_power_draw) on a GPU without an average (nvml.h's rule above).
              type: float
              sample: 67.03
            power_draw_average_w:
              description: Board power averaged over 1 s, in watts (NVML field value 185, C(NVML_FI_DEV_POWER_AVERAGE),
                scope GPU; C(gpu_power_readings/average_power_draw), printed from driver 570). null where the source
                does not say (GA100 and older GPUs, drivers before NVML 12.2, C(-q -x) of drivers before 570).
              type: float
              sample: 11.6
            power_draw_instant_w:
              description: Instantaneous board power in watts (NVML field value 186, C(NVML_FI_DEV_POWER_INSTANT),
                DCGM's C(DCGM_FI_DEV_POWER_USAGE_INSTANT); C(gpu_power_readings/instant_power_draw), printed from
                driver 570). null where the source does not say (drivers before NVML 12.2, C(-q -x) of drivers
                before 570).
              type: float
              sample: 11.63
            clock_event_reasons_active:
              description: Active clock event (throttle) reasons, sorted, without the C(clocks_event_reason_) or
                C(clocks_throttle_reason_) prefix (C(gpu_idle), C(sw_power_cap), C(hw_slowdown),
                C(hw_thermal_slowdown), C(hw_power_brake_slowdown), C(sw_thermal_slowdown), ...); an empty list when
                none is active, null when not reported.
              type: list
              elements: str
              sample: ["gpu_idle"]
            ecc_errors_uncorrected_aggregate:
              description: Uncorrectable ECC errors over the GPU's life, DRAM plus every SRAM counter, where reported.
              type: int
              sample: 0
            ecc_errors_corrected_volatile:
              description: Corrected ECC errors since the driver loaded, DRAM plus SRAM, where reported.
              type: int
              sample: 0
            remapped_rows:
              description: Row remapping (A100 and newer), C(correctable) and C(uncorrectable) counts, C(pending) (a
                reset is needed to remap) and C(failure) (a remap failed, so the GPU needs service); null where
                unsupported.
              type: dict
              sample: {"correctable": 0, "uncorrectable": 0, "pending": false, "failure": false}
            row_remapper_histogram:
              description: Memory banks by the spare rows they have left, C(max) (all), C(high), C(partial), C(low)
                and C(none) (no spare row left; NVIDIA's RMA policy fails the next uncorrectable error there); null where
                not reported (MIG enabled, older drivers).
              type: dict
              sample: {"max": 640, "high": 0, "partial": 0, "low": 0, "none": 0}
            sram_threshold_exceeded:
              description: Whether the SRAM error threshold of NVIDIA's field diagnostic is exceeded (its RMA
                criterion for SRAM; drivers from 555, NVML needs root); null where not reported.
              type: bool
              sample: false
            repair_pending:
              description: Whether a C(channel) (HBM) or C(tpc) repair waits for a GPU reset (drivers from 590); null
                where not reported.
              type: dict
              sample: {"channel": false, "tpc": false}
            utilization_gpu_pct:
              description: GPU utilisation in percent over the driver's last sample period (C(utilization/gpu_util);
                NVML C(nvmlDeviceGetUtilizationRates)); the health gates call a GPU at 0 idle.
              type: int
              sample: 0
            recovery_action:
              description:
                - What the driver asks to be done with the GPU (drivers from 570; nvml.h's nvmlDeviceGpuRecoveryAction_t,
                  C(<gpu_recovery_action>) in C(-q -x)), by name - C(none), C(gpu_reset), C(node_reboot), C(drain_p2p),
                  C(drain_and_reset), C(recover_imex_domain) (NVML 595) - or C(unknown (N)) for a value or words
                  newer than this collection; null where the driver does not report it.
                - The health gate C(gpufleet_health_fail_on_recovery_action) fails a GPU with any action but C(none).
              type: str
              sample: none
            reset_required:
              description: Whether the driver asks for a GPU reset (the recovery action where it tells, else
                C(gpu_reset_status) or NVML's deprecated field 226); null where not reported.
              type: bool
              sample: false
            drain_and_reset_recommended:
              description: Whether the driver recommends draining the GPU's work and resetting it; null where not
                reported.
              type: bool
              sample: false
            fabric:
              description: NVSwitch fabric registration of the GPU (H100 generation and newer), C(state) (e.g.
                C(Completed), C(In Progress)) and C(status) (e.g. C(Success)); each null where N/A. C(health), null
                where not reported, holds C(summary) (C(Healthy), C(Unhealthy), C(Limited Capacity)),
                C(degraded_bandwidth), C(route_recovery_in_progress), C(route_unhealthy), C(access_timeout_recovery),
                C(partition_assigned) (each true, false or null) and C(incorrect_configuration) (C(none) or the fault,
                e.g. C(insufficient_nvlinks)), decoded from nvml.h's health mask and summary.
              type: dict
              sample: {"state": "Completed", "status": "Success", "health": {"summary": "Healthy", "degraded_bandwidth": false,
                       "route_recovery_in_progress": false, "route_unhealthy": false, "access_timeout_recovery": false,
                       "incorrect_configuration": "none", "partition_assigned": true}}
        topology:
          description: The GPU interconnect (nvidia-smi C(topo -m) and C(nvlink -s); NVML's NVLink, topology and
            affinity calls) and the PCI IDs.
          returned: always
          type: dict
          contains:
            gpus:
              description: GPU labels in matrix order.
              type: list
              elements: str
              sample: ["GPU0", "GPU1"]
            matrix:
              description: GPU label to GPU label to the relation exactly as printed (C(NV12), C(SYS), ...); self omitted.
              type: dict
              sample: {"GPU0": {"GPU1": "NV12"}, "GPU1": {"GPU0": "NV12"}}
            cpu_affinity:
              description: Per GPU label, the CPU affinity as printed, or null where absent or unreadable.
              type: dict
              sample: {"GPU0": "0-23,48-71"}
            numa_affinity:
              description: Per GPU label, the NUMA affinity as printed, or null.
              type: dict
              sample: {"GPU0": "0"}
            gpu_numa_id:
              description: Per GPU label, the GPU NUMA ID as printed (C(N/A) included), or null.
              type: dict
              sample: {"GPU0": "N/A"}
            nics:
              description: NIC names (through the NIC Legend where printed); null from NVML, which does not see NICs.
              type: list
              elements: str
              sample: ["mlx5_0"]
            gpu_nic:
              description: GPU label to NIC name to relation; null from NVML.
              type: dict
              sample: {"GPU0": {"mlx5_0": "PXB"}}
            p2p:
              description: GPU label to GPU label to NVLink P2P status (NVML C(nvmlDeviceGetP2PStatus)); null from
                nvidia-smi.
              type: dict
              sample: {"GPU0": {"GPU1": "OK"}}
            nvlink:
              description: Per GPU label with NVLink, its links (C(link), C(active), C(speed_gbps)), and from NVML
                C(remote_pci_bus_id) and C(remote_device_type) (C(gpu), C(switch), C(ibmnpu), C(unknown); null from
                nvidia-smi). GPUs without NVLink are absent.
              type: dict
              sample: {"GPU0": [{"link": 0, "active": true, "speed_gbps": 25.0, "remote_pci_bus_id": "00000000:C5:00.0",
                        "remote_device_type": "switch"}]}
            nvlink_gpus_all_inactive:
              description: GPU labels whose NVLink links are all down (nvidia-smi prints one line for such a GPU instead
                of its links, so they are not counted in C(nvlink_links_inactive)).
              type: list
              elements: str
              sample: []
            nvlink_links_active:
              description: Active NVLink links over all GPUs.
              type: int
              sample: 96
            nvlink_links_inactive:
              description: Inactive NVLink links over all GPUs.
              type: int
              sample: 0
            nvlink_pairs:
              description: Number of GPU pairs joined by NVLink.
              type: int
              sample: 28
            nvlink_pair_list:
              description: The NVLink pairs as C([first, second, links]).
              type: list
              elements: list
              sample: [["GPU0", "GPU1", 12]]
            nvlink_max_links:
              description: The widest NVLink bond (0 without NVLink).
              type: int
              sample: 12
            nvlink_all_to_all:
              description: Whether every GPU pair is joined by NVLink; null when a relation could not be read.
              type: bool
              sample: true
            nvswitch:
              description: Whether the node has NVSwitches, from any evidence - NVSwitches on the PCI bus (gen 2
                10de:1af1, gen 3 10de:22a3), a GPU reporting a fabric state, or an NVLink whose far end is a switch
                (the 4th generation, HGX B200/B300, has no PCI function).
              type: bool
              sample: true
            shape:
              description: The NVLink shape in words.
              type: str
              sample: 8 GPUs, NV12 all-to-all
        pci:
          description: NVIDIA devices on the PCI bus.
          returned: always
          type: dict
          contains:
            nvidia_gpus:
              description: NVIDIA display and 3D controllers (GPUs) on the bus; null when the bus cannot be read.
              type: int
              sample: 8
            nvswitches:
              description: NVSwitches on the bus.
              type: int
              sample: 6
        summary:
          description: The node at a glance.
          returned: always
          type: dict
          contains:
            models:
              description: Product name to count.
              type: dict
              sample: {"NVIDIA A100-SXM4-80GB": 8}
            total_memory_mib:
              description: Frame buffer of all GPUs in MiB.
              type: int
              sample: 655360
            homogeneous:
              description: Whether every GPU is the same model.
              type: bool
              sample: true
        timings:
          description: Seconds each command (nvidia-smi) or phase (C(nvml init), C(nvml gather)) took and the
            module's wall time for them (C(wall)).
          returned: always
          type: dict
          sample: {"-q -x": 0.31, "topo -m": 0.29, "nvlink -s": 0.3, "wall": 0.32}
    gpu_stack:
      description: What the node runs on its GPUs; each field but C(kernel_xids) null where it cannot be read
        (C(kernel_xids) is always a dict, its C(source) null and its C(error) saying why when no log could be read).
      returned: when O(stack) is true
      type: dict
      contains:
        cuda:
          description: The CUDA toolkit's version from C(/usr/local/cuda/version.json).
          type: str
          sample: "12.8.1"
        nccl:
          description: The upstream version of the installed C(libnccl2) package.
          type: str
          sample: "2.26.5"
        torch:
          description: The torch version installed in O(pytorch_venv).
          type: str
          sample: "2.7.1+cu128"
        fabricmanager_active:
          description: Whether C(systemctl is-active nvidia-fabricmanager) prints C(active); null when it prints no
            state (systemctl missing, not answering in time, or no systemd to ask).
          type: bool
        container_runtime:
          description:
            - From M(gpufleet.node.nvidia_container_toolkit)'s record, C(/etc/gpufleet/container-runtime.json),
              each engine only while its configuration still names the runtime, the CDI spec only while it
              exists - C(toolkit), C(engines) (name to C(runtime), C(default), C(restart_pending)), C(cdi). Null
              without the record.
          type: dict
        monitoring:
          description:
            - From M(gpufleet.node.gpu_monitoring)'s record, C(/etc/gpufleet/monitoring.json) - C(listen_address),
              C(metrics_path), C(active) (the exporter's service), C(textfile_age_s) (the GPU metrics file's age),
              C(interval_s). Null without the record.
          type: dict
        self_converge:
          description:
            - The last run of the timer of the role C(gpufleet.node.self_converge), from its record
              C(/etc/gpufleet/self-converge.json) - C(ok), C(time), C(message), C(commit), C(changed), C(last_ok).
              Null without the record.
          type: dict
        kernel_xids:
          description:
            - >-
              The driver's Xid lines (C(NVRM: Xid)) in the kernel log since boot, from the journal or else
              C(dmesg) - C(source) (C(journal), C(dmesg) or null), C(lines) (the newest 1000), C(lines_total),
              C(error) (why no source showed kernel messages, e.g. in a container).
          type: dict
          sample: {"source": "journal", "lines": [], "lines_total": 0, "error": null}
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils import gpu_inventory, gpu_stack
from ansible_collections.gpufleet.node.plugins.module_utils.gpu_inventory import (  # noqa: F401  pylint: disable=unused-import
    BACKENDS,
    PARTS,
    SUBCOMMANDS,  # read by tools/bench/gpu_facts_bench.py through this module
    empty_facts,
    loaded_module_version,
)


def gather(params):
    """gpu_inventory.gather with this module's ``loaded_module_version`` (tests replace it here)."""
    return gpu_inventory.gather(params, read_module_version=loaded_module_version)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            backend=dict(type="str", default="auto", choices=list(BACKENDS)),
            nvidia_smi_path=dict(type="path"),
            nvml_library=dict(type="path"),
            timeout=dict(type="int", default=30),
            gather_subset=dict(type="list", elements="str", default=["all"],
                               choices=["all"] + list(PARTS)),
            pci_devices_path=dict(type="path", default="/sys/bus/pci/devices"),
            stack=dict(type="bool", default=False),
            pytorch_venv=dict(type="path", default=gpu_stack.DEFAULT_VENV),
        ),
        supports_check_mode=True,
    )
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % module.params["timeout"])
    try:
        facts = gather(module.params)
    except Exception as exc:  # pylint: disable=broad-except
        # Never a traceback: an unexpected failure is a state to report like any other.
        facts = empty_facts()
        facts["message"] = "gpu_facts could not gather: %s: %s" % (type(exc).__name__, exc)
    ansible_facts = {"gpu": facts}
    # After the GPUs, not beside them: the NVML backend forks its child, which a thread running meanwhile could leave
    # holding a lock the child needs.
    if module.params["stack"]:
        ansible_facts["gpu_stack"] = gpu_stack.gather(module.params["pytorch_venv"])
    module.exit_json(changed=False, ansible_facts=ansible_facts)


if __name__ == "__main__":
    main()
