"""unattended-upgrades is told to leave alone the packages the user names (apt reads the patterns from
apt.conf.d); the GPU stack's packages are each GPU role's to guard, never baseline's."""
import re


def blacklist(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    return re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)


def test_the_users_patterns_are_seen_by_apt(host):
    assert {"^libcudnn", "^cudnn"} <= set(blacklist(host))


def test_baseline_guards_no_package_a_gpu_role_installs(host):
    """One owner: with no GPU role applied, nothing keeps the driver, CUDA or NCCL from unattended-upgrades, so
    a role told not to hold its packages (nvidia_driver_hold: false) is not overruled by baseline's file."""
    patterns = blacklist(host)
    for name in ["nvidia-driver", "libnvidia-ml1", "libcuda1", "cuda-toolkit-12-1", "libnccl2",
                 "nvidia-fabricmanager-535", "linux-modules-nvidia-535-server-generic"]:
        assert not any(re.match(pattern, name) for pattern in patterns), name
    assert any(re.match(pattern, "libcudnn9-cuda-12") for pattern in patterns)
