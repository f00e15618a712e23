"""Switch the emulator's hardware profile on the node and run gpu_facts there."""
import pytest

PCI = "/var/lib/gpufleet-emulator/pci/devices"


@pytest.fixture
def gather(host):
    def run(profile, check=False, **args):
        host.run_expect([0], "echo %s > /etc/gpufleet-emulator/profile" % profile)
        args.setdefault("pci_devices_path", PCI)
        result = host.ansible("gpufleet.node.gpu_facts", " ".join("%s=%s" % item for item in args.items()),
                              check=check)
        assert result.get("changed") is False
        return result["ansible_facts"]["gpu"]

    yield run
    host.run("echo hgx-a100-8gpu > /etc/gpufleet-emulator/profile; rm -f /etc/gpufleet-emulator/inactive_links")
