"""Which emulated machine a node is: its profile (molecule.yml's host_vars)."""
import pytest


@pytest.fixture
def profile(host):
    return host.ansible.get_variables()["emulator_profile"]
