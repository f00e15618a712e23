# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""GPU metrics for node exporter's textfile collector (gpufleet.node.gpu_monitoring; run by its systemd timer).

    python3 gpufleet-gpu-metrics.py /etc/gpufleet/gpu-metrics.json

Gathers the GPU facts with the collection's own code (gpu_facts' gather: NVML or nvidia-smi), judges them with the
collection's health gates (module_utils/health.py, the verdict validate.yml gives through the filter
gpufleet_node_health) and writes the metrics (module_utils/gpu_metrics.py's render) atomically to the settings'
``textfile``. The code lies beside this file under ansible_collections/gpufleet/node, where the role copies it
(the files its vars list as ``__gpu_monitoring_code``): module_utils only, standard library and nothing of Ansible,
which the node does not have. A node without a GPU or driver gets metrics that say so (gpufleet_gpu_facts_ok 0
with the state).
"""
import json
import os
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from ansible_collections.gpufleet.node.plugins.module_utils import gpu_inventory, gpu_metrics, gpu_stack  # noqa: E402
from ansible_collections.gpufleet.node.plugins.module_utils.health import gpufleet_node_health  # noqa: E402


def hostname_label(settings):
    """The Hostname label's value: the settings' ``hostname`` (gpu_monitoring_hostname, or the inventory name the
    role chose on a container node), else the host name of the machine at each collection (dcgm-exporter's
    os.Hostname()); None without the label (``hostname_label`` false)."""
    if not settings.get("hostname_label", True):
        return None
    return settings.get("hostname") or socket.gethostname()


def main(argv):
    with open(argv[1]) as stream:
        settings = json.load(stream)
    started = time.time()
    try:
        gpu = gpu_inventory.gather({"backend": settings.get("backend", "auto"), "nvidia_smi_path": None,
                                    "nvml_library": None, "timeout": int(settings.get("timeout_s", 10)),
                                    "gather_subset": ["all"], "pci_devices_path": "/sys/bus/pci/devices"})
    except Exception as exc:  # pylint: disable=broad-except
        gpu = gpu_inventory.empty_facts()
        gpu["message"] = "gather failed: %s: %s" % (type(exc).__name__, exc)
    probes = {"persistence_expected": bool(settings.get("persistence_expected", True)),
              "fabricmanager_active": gpu_stack.fabricmanager() if (gpu.get("topology") or {}).get("nvswitch") else None}
    try:
        health = gpufleet_node_health(gpu, probes, settings.get("health_thresholds") or {})
    except Exception as exc:  # pylint: disable=broad-except
        sys.stderr.write("health gates failed: %s\n" % exc)
        health = None
    hostname = hostname_label(settings)
    text = gpu_metrics.render(gpu, health=health, hostname=hostname, timestamp=round(started, 3))
    gpu_metrics.write_atomically(settings["textfile"], text)
    verdict = ("health unknown" if health is None else "; ".join(health["failures"]) if health["failures"]
               else "healthy")
    print("%s: state %s, %d GPUs, %s" % (settings["textfile"], gpu.get("state"), gpu.get("count") or 0, verdict))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
