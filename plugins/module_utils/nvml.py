# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU facts straight from NVML (``libnvidia-ml.so.1``, installed with every driver) through ctypes: the entry point.

Standard library only, Python 3.8 or newer. The whole collection runs in a forked child process that sends
its result back as JSON over a pipe, so a GPU or driver call that hangs can be killed (SIGKILL) at the
timeout without taking the caller with it; the caller never loads the library itself.

The backend is four modules beside this one, each with one job, and this one, which the rest of the collection
imports (gpu_inventory, gpu_facts, the gpu_monitoring collector, the tests):

* ``nvml_constants``: the values of nvml.h (return codes, enums, buffer sizes, field ids), data only
* ``nvml_convert``: pure conversions of NVML's answers into fact values
* ``nvml_bindings``: the ctypes structures, the library calls and the gather they make (in the child)
* ``nvml_child``: the child process, its timeout, and reading its result back

Interface (every name below is importable from here):

* ``gather(timeout, library=LIBRARY)``: everything, as a dict (see its docstring)
* ``FUNCTIONS``: every NVML symbol the binding may call (a stand-in library must export each one)
* ``LIBRARY``, ``STATES``, ``RETURN_CODES``, ``RECOVERY_ACTIONS``, ``CLOCK_EVENT_REASONS``: nvml.h's values
* pure conversions, tested directly: ``return_code_name``, ``state_for_return``, ``clock_event_reason_names``,
  ``cpu_list``, ``relation_for_level``, ``nvlink_relations``, ``topology_matrix``, ``architecture_name``,
  ``compute_mode_name``, ``cuda_version_string``, ``fabric_names``, ``fabric_health``,
  ``row_remapper_histogram``, ``recovery_action_name``, ``struct_version``, ``reset_status``,
  ``p2p_status_name``, ``device_type_name``, ``mib``, ``watts``

Every structure layout, enum value, constant and return code is taken from NVIDIA's ``nvml.h`` as published in
github.com/NVIDIA/go-nvml, file ``gen/nvml/nvml.h`` (NVML_API_VERSION 13, commit
2f9e261fe40a7a1c54783d66805e8920564763b4, July 2026). Field names and spellings of the results follow what
``nvidia-smi -q -x`` and ``nvidia-smi topo -m`` print, so that both backends give one fact schema.

A call whose symbol the loaded library lacks (an older driver) or that answers NVML_ERROR_NOT_SUPPORTED
leaves its field None and is named in ``missing``; it never fails the whole gather.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

from ansible_collections.gpufleet.node.plugins.module_utils import nvml_child
from ansible_collections.gpufleet.node.plugins.module_utils.nvml_bindings import FUNCTIONS, struct_version
from ansible_collections.gpufleet.node.plugins.module_utils.nvml_constants import (
    CLOCK_EVENT_REASONS, LIBRARY, RECOVERY_ACTIONS, RETURN_CODES, STATES)
from ansible_collections.gpufleet.node.plugins.module_utils.nvml_convert import (
    architecture_name, clock_event_reason_names, compute_mode_name, cpu_list, cuda_version_string, device_type_name,
    fabric_health, fabric_names, mib, nvlink_relations, p2p_status_name, recovery_action_name, relation_for_level,
    reset_status, return_code_name, row_remapper_histogram, state_for_return, topology_matrix, watts)

__all__ = (
    "gather", "FUNCTIONS", "LIBRARY", "STATES", "RETURN_CODES", "RECOVERY_ACTIONS", "CLOCK_EVENT_REASONS",
    "architecture_name", "clock_event_reason_names", "compute_mode_name", "cpu_list", "cuda_version_string",
    "device_type_name", "fabric_health", "fabric_names", "mib", "nvlink_relations", "p2p_status_name",
    "recovery_action_name", "relation_for_level", "reset_status", "return_code_name", "row_remapper_histogram",
    "state_for_return", "struct_version", "topology_matrix", "watts",
)


def gather(timeout, library=LIBRARY):
    """Everything NVML says about this machine, collected in a child process killed after timeout seconds.

    Returns a dict:

    * ``state``: "ok", one of nvidia_smi.ERROR_STATES (driver_library_mismatch, driver_not_loaded, no_devices,
      gpu_lost, device_error, error), "timeout" or "library_not_found"; ``message``: one line;
      ``nvml_return``: the name of the NVML return code that decided a failing state, else None
    * ``driver_version``, ``cuda_driver_version`` ("12.2"), ``nvml_version``, ``count`` (what
      nvmlDeviceGetCount_v2 says, lost GPUs included)
    * ``devices``: the shared per-GPU fact schema, index order; ``lost``: [{index, pci_bus_id, nvml_return, call}]
      for GPUs whose handle could not be had, or on which a call answered GPU_IS_LOST; they are not in devices
    * ``topology``: gpus, matrix, nics (None), gpu_nic (None), cpu_affinity, numa_affinity, gpu_numa_id as
      ``nvidia_smi.parse_topology`` gives them; nvlink {"GPU0": [{link, active, speed_gbps,
      remote_pci_bus_id, remote_device_type}]} (GPUs without NVLink are absent); p2p {"GPU0": {"GPU1": "OK"}}
    * ``utilization``: {"GPU0": {gpu_pct, memory_pct}} (None where unreadable)
    * ``missing``: NVML calls that were absent from the library or answered NOT_SUPPORTED; ``absent``: only
      the absent ones; ``errors``: other failing calls [{call, device, nvml_return}]
    * ``timings``: init (nvmlInit_v2), gather (the rest), total (wall time in the caller), in seconds
    """
    return nvml_child.run(timeout, library)
