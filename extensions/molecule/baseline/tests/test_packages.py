"""The build tools the NVIDIA DKMS build needs are installed."""
import pytest


@pytest.mark.parametrize("name", ["build-essential", "dkms", "kmod", "pciutils"])
def test_package_installed(host, name):
    assert host.package(name).is_installed


def test_headers_skipped_in_container(host):
    """In a container the running kernel is the host's: no headers are installed for it."""
    kernel = host.check_output("uname -r")
    assert not host.package("linux-headers-" + kernel).is_installed
