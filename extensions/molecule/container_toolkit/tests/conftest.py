"""Which node a test runs on: Debian 12 (docker.io 20.10, containerd 1.6, emulated GPUs) or Ubuntu 22.04
(docker.io 29, containerd 2.2, no driver)."""
import pytest


@pytest.fixture
def debian(host):
    return host.system_info.distribution == "debian"
