"""apt_plan: what apt has to do, from apt-cache policy and dpkg-query output (as Debian 12's apt prints them)."""
import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.apt import apt_plan, parse_policy

POLICY = """libnccl2:
  Installed: 2.17.1-1+cuda12.1
  Candidate: 2.18.3-1+cuda12.1
  Version table:
     2.19.3-1+cuda12.2 -1
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
     2.18.3-1+cuda12.1 1001
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
 *** 2.17.1-1+cuda12.1 1001
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
        100 /var/lib/dpkg/status
cuda-toolkit-12-1:
  Installed: (none)
  Candidate: 12.1.1-1
  Version table:
     12.1.1-1 500
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
cuda:
  Installed: (none)
  Candidate: (none)
  Version table:
     12.2.2-1 -1
        500 http://127.0.0.1:18535/cuda/debian12/x86_64  Packages
gnupg:
  Installed: 2.2.40-1.1
  Candidate: 2.2.40-1.1+deb12u1
  Version table:
     2.2.40-1.1+deb12u1 500
        500 http://deb.debian.org/debian bookworm-updates/main amd64 Packages
 *** 2.2.40-1.1 500
        500 http://deb.debian.org/debian bookworm/main amd64 Packages
        100 /var/lib/dpkg/status
"""
DPKG = ("libnccl2 hi  2.17.1-1+cuda12.1\n"
        "gnupg ii  2.2.40-1.1\n"
        "cuda-toolkit-12-1 un  \n")        # dpkg knows it, not installed: no version


def test_parse_policy():
    packages = parse_policy(POLICY)
    assert packages["libnccl2"]["candidate"] == "2.18.3-1+cuda12.1"
    assert packages["libnccl2"]["versions"] == ["2.19.3-1+cuda12.2", "2.18.3-1+cuda12.1", "2.17.1-1+cuda12.1"]
    assert packages["cuda"]["candidate"] is None and packages["cuda-toolkit-12-1"]["installed"] is None


def test_candidate_upgrade_install_and_any_version():
    plan = apt_plan(POLICY, DPKG, ["libnccl2", "cuda-toolkit-12-1", "gnupg=*"])
    assert plan["install"] == ["libnccl2=2.18.3-1+cuda12.1", "cuda-toolkit-12-1=12.1.1-1"]
    assert plan["wanted"]["gnupg"] == "2.2.40-1.1"             # installed is enough: no upgrade behind the user's back
    assert plan["installed"] == {"libnccl2": "2.17.1-1+cuda12.1", "cuda-toolkit-12-1": None, "gnupg": "2.2.40-1.1"}
    assert plan["unresolved"] == plan["unavailable"] == []


def test_nothing_to_do_when_dpkg_has_the_versions():
    dpkg = "libnccl2 hi  2.18.3-1+cuda12.1\ncuda-toolkit-12-1 ii  12.1.1-1\n"
    assert apt_plan(POLICY, dpkg, ["libnccl2", "cuda-toolkit-12-1"])["install"] == []


def test_exact_versions_and_what_apt_cannot_give():
    plan = apt_plan(POLICY, DPKG, ["libnccl2=2.17.1-1+cuda12.1", "cuda-toolkit-12-1=12.1.0-1", "cuda", "absent"])
    assert plan["install"] == ["cuda-toolkit-12-1=12.1.0-1"]
    assert plan["unavailable"] == ["cuda-toolkit-12-1"]
    assert plan["unresolved"] == ["cuda", "absent"]


@pytest.mark.parametrize("packages", [[{"name": "x"}], ["=1.0"], "libnccl2"])
def test_bad_package_items(packages):
    with pytest.raises(AnsibleFilterError):
        apt_plan(POLICY, DPKG, packages)


def test_holds_are_set_only_where_they_differ():
    dpkg = "libnccl2 hi  2.18.3-1+cuda12.1\ngnupg ii  2.2.40-1.1\n"
    policy = POLICY.replace("Installed: 2.17.1-1+cuda12.1", "Installed: 2.18.3-1+cuda12.1")
    plan = apt_plan(policy, dpkg, ["libnccl2", "cuda-toolkit-12-1", "gnupg=*"], True)
    assert plan["held"] == {"libnccl2": True, "cuda-toolkit-12-1": False, "gnupg": False}
    assert plan["reselect"] == ["cuda-toolkit-12-1", "gnupg"]          # libnccl2 is held already
    assert apt_plan(policy, dpkg, ["libnccl2"], False)["reselect"] == ["libnccl2"]
    assert "reselect" not in apt_plan(policy, dpkg, ["libnccl2"])
