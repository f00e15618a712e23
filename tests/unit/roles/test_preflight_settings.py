"""Each role's settings check in tasks/preflight.yml, rendered as Ansible renders it (the role's defaults, vars and
platform data, the task's vars, the collection's preflight filters): the defaults pass on every platform the role
supports, one bad setting fires the check with its sentence, and the check runs whatever tags are selected (the
preflight is imported with every tag of the role, its include_role with always). Every error itself is tested in
tests/unit/plugins/filter/test_preflight.py."""
import pytest

from .platform import ROLES, facts_for, find_task, load, task_fires, task_message

PREFLIGHT = "preflight.yml"
PLATFORMS = [("Debian", "12"), ("Ubuntu", "20.04"), ("Ubuntu", "22.04"), ("Ubuntu", "24.04")]
# role, the check's task name, a bad setting and the sentence it gives.
CHECKS = [
    ("baseline", "Check the settings", {"baseline_swappiness": 250},
     "baseline_swappiness must be an integer from 0 to 200 (kernels since 5.8); got 250."),
    ("nvidia_container_toolkit", "Check the settings", {"nvidia_container_toolkit_engines": ["docker", "podman"]},
     "nvidia_container_toolkit_engines may name docker and containerd only; not known: podman."),
    ("cuda", "Check the releases (cuda_version and cuda_additional_versions)", {"cuda_version": "12"},
     'cuda_version takes a major.minor release such as "12.1" (quoted, so YAML keeps it a string); got "12".'),
    ("gpu_monitoring", "Check the listen address, the exporter's flags, the directory and the timing",
     {"gpu_monitoring_timeout_s": 60},
     "gpu_monitoring_timeout_s must be at least 1 and less than gpu_monitoring_interval_s (30); got 60."),
    ("gpu_power", "Check the settings' shapes", {"gpu_power_limits_w": {"NVIDIA H100 80GB HBM3": "500W"}},
     "gpu_power_limits_w values must be positive numbers of watts; not valid for: NVIDIA H100 80GB HBM3."),
    ("nccl", "Check the release, the version and the bandwidth settings", {"nccl_version": "2.18.3-1+cuda12.4"},
     'nccl_version must be empty or a package version built for CUDA 12.1, such as "2.18.3-1+cuda12.1"; '
     'got "2.18.3-1+cuda12.4".'),
    ("nccl", "Check /etc/nccl.conf's settings", {"nccl_config": {"NCCL_DEBUG": "INFO"}},
     "Debug settings (NCCL_DEBUG) slow every job and flood its logs: set them per job, or "
     "nccl_config_allow_debug: true."),
    ("pytorch", "Check the versions, the requirement list and the paths", {"pytorch_extra_packages": ["numpy"]},
     'pytorch_extra_packages must each be pinned with == (the same environment on every node); not: ["numpy"].'),
    ("nvidia_driver", "Check the settings (source, branch, version, flavour and MIG)", {"nvidia_driver_branch": "58"},
     'nvidia_driver_branch must be three digits such as "535"; got "58".'),
]


# Where a default is not offered: the default driver branch 580 is not on Debian 12 (the archive has 535) nor on
# Ubuntu 20.04 (NVIDIA's support matrix), so nodes there set 535.
PLATFORM_SETTINGS = {
    ("nvidia_driver", ("Debian", "12")): {"nvidia_driver_branch": "535"},
    ("nvidia_driver", ("Ubuntu", "20.04")): {"nvidia_driver_branch": "535"},
}


def ids(check):
    return "%s: %s" % (check[0], check[1])


@pytest.mark.parametrize("platform", PLATFORMS, ids=" ".join)
@pytest.mark.parametrize("role, name, bad, message", CHECKS, ids=[ids(check) for check in CHECKS])
def test_the_defaults_pass(platform, role, name, bad, message):
    settings = PLATFORM_SETTINGS.get((role, platform), {})
    assert task_fires(role, PREFLIGHT, name, facts_for(*platform), **settings) is False


def test_the_default_branch_is_refused_where_it_is_not_offered():
    message = task_message("nvidia_driver", PREFLIGHT, CHECKS[-1][1], facts_for("Debian", "12"))
    assert message == ("Branch 580 is not offered by source distro on Debian 12.7 (NVIDIA's support matrix and the "
                       "archive's packages); choose 535.")


@pytest.mark.parametrize("role, name, bad, message", CHECKS, ids=[ids(check) for check in CHECKS])
def test_a_bad_setting_fails_with_its_sentence(role, name, bad, message):
    facts = facts_for("Ubuntu", "22.04")
    assert task_fires(role, PREFLIGHT, name, facts, **bad) is True
    assert task_message(role, PREFLIGHT, name, facts, **bad) == message


def test_the_driver_check_reads_the_platforms_sources():
    """Branch 535 is not offered on Ubuntu 24.04 by any source (NVIDIA's support matrix): said with the platform."""
    facts = facts_for("Ubuntu", "24.04")
    name = CHECKS[-1][1]
    message = task_message("nvidia_driver", PREFLIGHT, name, facts, nvidia_driver_branch="535")
    assert message.startswith("Branch 535 is not offered by source ")
    assert " on Ubuntu 24.04 (NVIDIA's support matrix and the archive's packages); choose " in message


@pytest.mark.parametrize("role, name", sorted(set((check[0], check[1]) for check in CHECKS)))
def test_the_check_runs_whatever_tags_are_selected(role, name):
    """tasks/main.yml imports preflight.yml with every tag of the role (or always), and the check has no tags of its
    own that would leave it out."""
    task = find_task(role, PREFLIGHT, name)
    assert "tags" not in task
    imports = [item for item in load(ROLES / role / "tasks" / "main.yml")
               if (item.get("ansible.builtin.import_tasks") or item.get("import_tasks")) == PREFLIGHT]
    assert len(imports) == 1
    tags = imports[0].get("tags") or []
    role_tags = set()
    for item in load(ROLES / role / "tasks" / "main.yml"):
        role_tags.update(item.get("tags") or [])
    assert "always" in tags or role_tags <= set(tags), (role, sorted(role_tags - set(tags)))
