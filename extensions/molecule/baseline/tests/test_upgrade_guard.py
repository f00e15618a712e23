"""unattended-upgrades is told to leave the GPU stack alone (apt reads the patterns from apt.conf.d)."""
import re


def test_blacklist_patterns_seen_by_apt(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    patterns = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    for expected in ["^nvidia-", "^libnvidia-", "^cuda-", "^libcuda", "^libnccl"]:
        assert expected in patterns


def test_patterns_cover_the_real_package_names(host):
    dump = host.check_output("apt-config dump Unattended-Upgrade::Package-Blacklist")
    patterns = re.findall(r'^Unattended-Upgrade::Package-Blacklist:: "(.*)";$', dump, re.M)
    real_names = ["nvidia-driver", "libnvidia-ml1", "libcuda1", "cuda-toolkit-12-1", "libnccl2",
                  "nvidia-fabricmanager-535", "linux-modules-nvidia-535-server-generic"]
    for name in real_names:
        assert any(re.match(p, name) for p in patterns), name
    assert not any(re.match(p, "linux-image-amd64") for p in patterns)
