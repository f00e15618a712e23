"""gpufleet.node.nccl's apt preferences and its check of the CUDA release against NVIDIA's repository path, rendered
as the role renders them. The first CUDA release per path is gpufleet.node._nvidia_repo's result _nvidia_repo_path,
which nccl's preflight asks for (rendered here from _nvidia_repo's data, as after that call)."""
import pytest

from .platform import apt_stanzas, facts_for, nvidia_repo_path, render_template, task_fires, task_message

PREFLIGHT = "preflight.yml"
REPO_CHECK = "Check that NVIDIA's repository has NCCL for the CUDA release on this platform's path"
DEBIAN_12 = facts_for("Debian", "12")
UBUNTU_22 = facts_for("Ubuntu", "22.04")


def loaded(facts, **settings):
    """What nccl's preflight has after _nvidia_repo's entry point path returned _nvidia_repo_path."""
    repo = {name: settings[name] for name in ("nvidia_repo_url", "nvidia_repo_manage") if name in settings}
    return dict(settings, _nvidia_repo_path=nvidia_repo_path(facts, **repo))


@pytest.mark.parametrize("facts, settings, refused", [
    (DEBIAN_12, {}, True),                                   # nccl_cuda_version follows cuda_version, 12.1
    (DEBIAN_12, {"nccl_cuda_version": "12.3"}, False),
    (DEBIAN_12, {"cuda_version": "12.4"}, False),
    (DEBIAN_12, {"nvidia_repo_url": "http://127.0.0.1:18535/cuda"}, False),
    (UBUNTU_22, {}, False),
], ids=["debian12-12.1", "debian12-12.3", "debian12-follows-cuda_version", "debian12-mirror", "ubuntu2204-12.1"])
def test_nccl_for_a_release_the_path_lacks_is_refused(facts, settings, refused):
    assert task_fires("nccl", PREFLIGHT, REPO_CHECK, facts, **loaded(facts, **settings)) == refused


def test_the_message_names_the_path_and_what_to_do():
    message = task_message("nccl", PREFLIGHT, REPO_CHECK, DEBIAN_12, **loaded(DEBIAN_12))
    assert "no CUDA 12.1, and no NCCL built for it, for debian12" in message
    assert "starts at CUDA 12.3" in message and "nvidia_repo_url" in message


@pytest.mark.parametrize("facts, origin", [(DEBIAN_12, "Debian"), (UBUNTU_22, "Ubuntu")], ids=["debian12", "ubuntu2204"])
@pytest.mark.parametrize("settings, pin", [({}, "*+cuda12.1"), ({"nccl_version": "2.18.3-1+cuda12.1"}, "2.18.3-1+cuda12.1")],
                         ids=["release", "exact"])
def test_preferences_keep_the_distribution_s_builds_out(facts, origin, settings, pin):
    """Ubuntu 24.04's multiverse has Canonical's libnccl2 (2.18.5-1-2): the origin stanza comes first, since apt
    gives a version the priority of the first specific stanza that matches it (apt_preferences(5))."""
    stanzas = apt_stanzas(render_template("nccl", "preferences.j2", facts, **settings))
    assert stanzas == [
        {"Package": "libnccl2 libnccl-dev", "Pin": "release o=%s" % origin, "Pin-Priority": "-1"},
        {"Package": "libnccl2 libnccl-dev", "Pin": "version %s" % pin, "Pin-Priority": "1001"},
        {"Package": "libnccl2 libnccl-dev", "Pin": "version *", "Pin-Priority": "-1"},
    ]
