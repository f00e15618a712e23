"""Switch the emulated hardware profile on the node (nvidia-smi emulator and fake NVML) and run gpu_facts there."""
import json

import pytest


@pytest.fixture
def gather(host):
    def run(profile, check=False, faults=None, **args):
        # Faults first: the profile switch folds them into the fake NVML library's configuration.
        if faults is None:
            host.run_expect([0], "rm -f /etc/gpufleet-emulator/faults.json")
        else:
            host.run_expect([0], "printf '%%s' '%s' > /etc/gpufleet-emulator/faults.json" % json.dumps(faults))
        # The profile and its PCI devices at /sys/bus/pci/devices (the node's bound test directory).
        host.run_expect([0], "gpufleet-emulator-profile %s" % profile)
        result = host.ansible("gpufleet.node.gpu_facts", " ".join("%s=%s" % item for item in args.items()),
                              check=check)
        assert result.get("changed") is False
        return result["ansible_facts"]["gpu"]

    yield run
    host.run("rm -f /etc/gpufleet-emulator/inactive_links /etc/gpufleet-emulator/faults.json; "
             "gpufleet-emulator-profile hgx-a100-8gpu")
