"""The stand-in toolkits: cuda-toolkit-X-Y installs /usr/local/cuda-X.Y/bin/nvcc printing the real version text.

Real artifact: NVIDIA's cuda-toolkit-X-Y packages (install prefix /usr/local/cuda-X.Y, nvcc in bin/, the runtime
under targets/x86_64-linux/lib with lib64 a link to it, version.json at the top) and `nvcc --version` of each
release. The version lines, as captured from real installs in public logs and bug reports:

* 12.1.1: "Built on Mon_Apr__3_17:16:06_PDT_2023", "release 12.1, V12.1.105", "cuda_12.1.r12.1/compiler.32688072_0"
* 12.2.2: "Built on Tue_Aug_15_22:02:13_PDT_2023", "release 12.2, V12.2.140", "cuda_12.2.r12.2/compiler.33191640_0"
* 12.3.2: "Built on Wed_Nov_22_10:17:15_PST_2023", "release 12.3, V12.3.107", "cuda_12.3.r12.3/compiler.33567101_0"
* 12.4.1: "Built on Thu_Mar_28_02:18:24_PDT_2024", "release 12.4, V12.4.131", "cuda_12.4.r12.4/compiler.34097967_0"

(for example the nvcc output quoted in pytorch's minifier repro headers and llama.cpp build guides). The runtime's
own versions differ from nvcc's on 12.3 and 12.4 (libcudart 12.3.101 and 12.4.127, NV_CUDA_CUDART_VERSION in the
nvidia/cuda image Dockerfiles).
"""
import json
import subprocess

import pytest

from .conftest import load_builder

REAL = {  # release: (package version, the "Cuda compilation tools" line), from the captures cited above
    "12.1": ("12.1.1-1", "Cuda compilation tools, release 12.1, V12.1.105"),
    "12.2": ("12.2.2-1", "Cuda compilation tools, release 12.2, V12.2.140"),
    "12.3": ("12.3.2-1", "Cuda compilation tools, release 12.3, V12.3.107"),
    "12.4": ("12.4.1-1", "Cuda compilation tools, release 12.4, V12.4.131"),
}
TOOLKITS = load_builder().load_spec()["toolkits"]


@pytest.mark.parametrize("toolkit", TOOLKITS, ids=[t["release"] for t in TOOLKITS])
def test_nvcc_prints_the_real_version_text(repositories, tmp_path, builder, toolkit):
    release = toolkit["release"]
    assert REAL[release][0] == toolkit["version"]
    for distribution in toolkit["distributions"]:
        root = repositories[distribution].unpack("cuda-toolkit-" + release.replace(".", "-"), toolkit["version"],
                                                 tmp_path / distribution)
        prefix = root / ("usr/local/cuda-" + release)
        printed = subprocess.run([str(prefix / "bin" / "nvcc"), "--version"], check=True, capture_output=True,
                                 text=True).stdout
        assert printed == builder.nvcc_text(toolkit)
        assert printed.splitlines()[3] == REAL[release][1]
        assert printed.splitlines()[0] == "nvcc: NVIDIA (R) Cuda compiler driver"
        version = json.loads((prefix / "version.json").read_text())
        assert version["cuda"]["version"] == toolkit["version"].split("-")[0]
        assert version["cuda_nvcc"]["version"] == REAL[release][1].split(", V")[1]
        assert (prefix / "lib64").readlink().as_posix() == "targets/x86_64-linux/lib"
        assert (prefix / "targets/x86_64-linux/lib/libcudart.so.12").readlink().as_posix() == \
            "libcudart.so." + toolkit["cudart"]
