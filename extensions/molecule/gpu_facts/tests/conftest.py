"""Switch the emulator's hardware profile on the node and run gpu_facts there."""
import pytest


@pytest.fixture
def gather(host):
    def run(profile, check=False, **args):
        # The profile and its PCI devices at /sys/bus/pci/devices (the node's bound test directory).
        host.run_expect([0], "gpufleet-emulator-profile %s" % profile)
        result = host.ansible("gpufleet.node.gpu_facts", " ".join("%s=%s" % item for item in args.items()),
                              check=check)
        assert result.get("changed") is False
        return result["ansible_facts"]["gpu"]

    yield run
    host.run("gpufleet-emulator-profile hgx-a100-8gpu; rm -f /etc/gpufleet-emulator/inactive_links")
