"""Reads what a node runs, for playbooks/fleet_facts.yml: CUDA (/usr/local/cuda), NCCL (dpkg), torch (the
gpufleet.node.pytorch virtualenv, argv[1]) and whether fabric manager is active. Prints JSON; never fails."""
import glob
import json
import os
import subprocess
import sys


def run(argv):
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=20, check=False)
    except (OSError, subprocess.TimeoutExpired):
        return None


def cuda():
    try:
        with open("/usr/local/cuda/version.json") as stream:
            return json.load(stream)["cuda"]["version"]
    except (OSError, ValueError, KeyError):
        return None


def nccl():
    result = run(["dpkg-query", "--show", "--showformat", "${db:Status-Abbrev} ${Version}", "libnccl2"])
    if result is None or result.returncode != 0 or not result.stdout.startswith(("ii", "hi")):
        return None
    return result.stdout.split()[-1].split("-")[0]


def torch(venv):
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "torch-*.dist-info"))
    return os.path.basename(found[0])[len("torch-"):-len(".dist-info")] if found else None


def fabricmanager():
    result = run(["systemctl", "is-active", "nvidia-fabricmanager"])
    return None if result is None else result.stdout.strip() == "active"


print(json.dumps({"cuda": cuda(), "nccl": nccl(), "torch": torch(sys.argv[1] if len(sys.argv) > 1 else
                  "/opt/gpufleet/pytorch"), "fabricmanager_active": fabricmanager()}))
