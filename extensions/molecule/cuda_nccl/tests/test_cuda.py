"""cuda: the versioned toolkits side by side (12.4 and 12.3, what NVIDIA's debian12 path has), never the
unversioned metapackages, /usr/local/cuda through alternatives, nvcc on PATH, libraries in the linker's path,
all held."""
import pytest


@pytest.mark.parametrize("name, version", [
    ("cuda-toolkit-12-4", "12.4.1-1"),
    ("cuda-toolkit-12-3", "12.3.2-1"),
])
def test_installed_and_held(host, name, version):
    assert host.package(name).version == version
    assert host.check_output("dpkg-query -W -f '${Status}' %s" % name).startswith("hold ")


@pytest.mark.parametrize("name", ["cuda", "cuda-toolkit", "cuda-drivers", "nvidia-utils-535"])
def test_no_metapackage_and_no_driver(host, name):
    assert not host.package(name).is_installed


def test_metapackages_are_pinned_away(host):
    assert "Candidate: (none)" in host.check_output("apt-cache policy cuda-toolkit")
    assert "Candidate: (none)" in host.check_output("apt-cache policy cuda")


def test_usr_local_cuda_is_the_12_4_alternative(host):
    assert host.file("/usr/local/cuda").linked_to == "/usr/local/cuda-12.4"
    query = host.check_output("update-alternatives --query cuda")
    assert "Alternative: /usr/local/cuda-12.3" in query
    assert "Status: manual" in query


@pytest.mark.parametrize("nvcc, release", [
    ("/usr/local/cuda-12.4/bin/nvcc", "Cuda compilation tools, release 12.4, V12.4.131"),
    ("/usr/local/cuda-12.3/bin/nvcc", "Cuda compilation tools, release 12.3, V12.3.107"),
])
def test_each_nvcc_reports_its_release(host, nvcc, release):
    assert release in host.check_output("%s --version" % nvcc)


def test_login_shell_finds_nvcc(host):
    assert "release 12.4," in host.check_output("bash -lc 'nvcc --version'")


def test_linker_searches_the_cuda_libraries(host):
    """The stand-in libraries are not ELF files, so ldconfig does not list them; it must scan their directory."""
    assert host.file("/etc/ld.so.conf.d/gpufleet-cuda.conf").contains("^/usr/local/cuda/targets/x86_64-linux/lib$")
    scanned = host.check_output("ldconfig -v -N 2>/dev/null | grep '^/usr/local/cuda'")
    assert scanned.startswith("/usr/local/cuda/targets/x86_64-linux/lib:")


def test_unattended_upgrades_guard(host):
    guard = host.file("/etc/apt/apt.conf.d/52gpufleet-cuda").content_string
    assert '"^cuda\\-toolkit\\-12\\-4$";' in guard
