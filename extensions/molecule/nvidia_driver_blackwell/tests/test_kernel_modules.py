"""Both Blackwell nodes: the open GPU kernel modules of NVIDIA's repository for branch 580, held, and not the
proprietary ones (NVIDIA: Blackwell "must use the open-source GPU kernel modules"). The role chose them from the
GPUs' PCI device ids (10de:2901 B200, 10de:2941 GB200), with the default nvidia_driver_kernel_modules: auto."""
import json

import pytest


def held(host, name):
    return host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["nvidia-kernel-open-580", "cuda-drivers-580", "nvidia-driver-580-open",
                                  "nvidia-dkms-580-open", "nvidia-kernel-source-580-open"])
def test_open_modules_of_branch_580_installed_and_held(host, name):
    package = host.package(name)
    assert package.is_installed and package.version.startswith("580."), name
    assert held(host, name)


@pytest.mark.parametrize("name", ["nvidia-driver-580", "nvidia-dkms-580", "nvidia-kernel-source-580"])
def test_proprietary_modules_not_installed(host, name):
    assert not host.package(name).is_installed


def test_record_names_the_open_modules(host):
    record = json.loads(host.file("/etc/gpufleet/nvidia-driver.json").content_string)
    assert record["source"] == "cuda_repo" and record["branch"] == "580"
    assert "nvidia-kernel-open-580" in record["packages"]
    assert record["version"] == host.package("cuda-drivers-580").version
