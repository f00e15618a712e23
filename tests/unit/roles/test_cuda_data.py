"""gpufleet.node.cuda's decisions before anything changes, rendered as the role renders them: the releases NVIDIA's
repository has on each distribution path (its debian12 path starts at CUDA 12.3, ubuntu2404 at 12.5), the driver's
CUDA release against each toolkit (minor-version compatibility within a major release), and the apt preferences
that keep the distribution's own builds out."""
import pytest

from .platform import (ROLES, apt_stanzas, facts_for, failures_that_fire, load, nvidia_repo_path, render,
                       render_template, task_fires, task_message)

PREFLIGHT = "preflight.yml"
REPO_CHECK = "Check that NVIDIA's repository has every toolkit release on this platform's path"
MAJOR_CHECK = "Check that the driver supports the major release of every toolkit"
MINOR_WARNING = "Warn about toolkits newer than the driver within its major release (minor-version compatibility)"

DEBIAN_12 = facts_for("Debian", "12")
UBUNTU_20 = facts_for("Ubuntu", "20.04")
UBUNTU_22 = facts_for("Ubuntu", "22.04")
UBUNTU_24 = facts_for("Ubuntu", "24.04")
PLATFORMS = {"debian12": DEBIAN_12, "ubuntu2004": UBUNTU_20, "ubuntu2204": UBUNTU_22, "ubuntu2404": UBUNTU_24}


def repo_distro(facts):
    """The distribution part of NVIDIA's repository path, as gpufleet.node._nvidia_repo computes it (not copied)."""
    return nvidia_repo_path(facts)["distro"]


def with_path(facts, settings):
    """``settings`` with _nvidia_repo_path as _nvidia_repo's entry point path returns it for them (the repository
    settings are _nvidia_repo's; cuda reads only the result)."""
    repo = {name: settings[name] for name in ("nvidia_repo_url", "nvidia_repo_manage") if name in settings}
    settings.setdefault("_nvidia_repo_path", nvidia_repo_path(facts, **repo))
    return settings


def cuda(facts, expression, **settings):
    return render("cuda", facts, "{{ %s }}" % expression, **with_path(facts, settings))


def repo_check(facts, **settings):
    return task_fires("cuda", PREFLIGHT, REPO_CHECK, facts, **with_path(facts, settings))


@pytest.mark.parametrize("path, facts", PLATFORMS.items())
def test_the_path_is_nvidia_repo_s(path, facts):
    assert repo_distro(facts) == path


@pytest.mark.parametrize("path, first", [("debian12", "12.3"), ("ubuntu2004", "11.0"), ("ubuntu2204", "11.7"),
                                         ("ubuntu2404", "12.5")])
def test_first_release_on_each_path(path, first):
    assert cuda(PLATFORMS[path], "__cuda_repo_first_release") == first


def test_the_table_describes_nvidia_repo_s_default_url():
    """The first releases describe NVIDIA's repository, which is _nvidia_repo's default URL."""
    default_url = load(ROLES / "_nvidia_repo" / "defaults" / "main.yml")["nvidia_repo_url"]
    assert load(ROLES / "_nvidia_repo" / "vars" / "main.yml")["__nvidia_repo_nvidia_url"] == default_url


def test_cuda_12_1_is_refused_on_debian_12_before_anything_changes():
    """The default cuda_version (12.1) is not in NVIDIA's debian12 repository: the preflight says so."""
    assert cuda(DEBIAN_12, "__cuda_repo_too_old") == ["12.1"]
    assert repo_check(DEBIAN_12)
    message = task_message("cuda", PREFLIGHT, REPO_CHECK, DEBIAN_12, **with_path(DEBIAN_12, {}))
    assert "no CUDA 12.1 for debian12" in message
    assert "starts at CUDA 12.3" in message
    assert "12.3 or newer" in message and "nvidia_repo_url" in message


def test_an_additional_release_is_checked_too():
    assert cuda(DEBIAN_12, "__cuda_repo_too_old", cuda_version="12.4", cuda_additional_versions=["12.2", "12.3"]) == ["12.2"]


@pytest.mark.parametrize("path, version, refused", [
    ("debian12", "12.3", False), ("debian12", "12.4", False), ("debian12", "12.2", True),
    ("ubuntu2204", "12.1", False), ("ubuntu2004", "12.1", False),
    ("ubuntu2404", "12.1", True), ("ubuntu2404", "12.4", True), ("ubuntu2404", "12.5", False),
])
def test_release_against_the_path(path, version, refused):
    assert repo_check(PLATFORMS[path], cuda_version=version) == refused


@pytest.mark.parametrize("settings", [
    {"nvidia_repo_url": "http://apt-mirror.example.com/nvidia/cuda/repos"},
    {"nvidia_repo_url": "http://127.0.0.1:18535/cuda"},
    {"nvidia_repo_manage": False},
], ids=["mirror", "bench-mirror", "managed-elsewhere"])
def test_a_mirror_may_carry_any_release(settings):
    assert cuda(DEBIAN_12, "__cuda_repo_first_release", **settings) == ""
    assert not repo_check(DEBIAN_12, **settings)


def test_nvidia_s_url_set_explicitly_is_still_nvidia_s():
    assert repo_check(DEBIAN_12, nvidia_repo_url="https://developer.download.nvidia.com/compute/cuda/repos/")


def test_an_unknown_path_is_not_checked():
    assert nvidia_repo_path(DEBIAN_12, __nvidia_repo_distro="debian13")["first_cuda_release"] == ""


def gpu(cuda_driver_version, driver_version="535.183.01"):
    return dict(DEBIAN_12, gpu={"state": "ok", "driver_version": driver_version,
                                "cuda_driver_version": cuda_driver_version})


def driver_checks(facts, **settings):
    settings.setdefault("nvidia_repo_manage", False)
    return (task_fires("cuda", PREFLIGHT, MAJOR_CHECK, facts, **settings),
            task_fires("cuda", PREFLIGHT, MINOR_WARNING, facts, **settings))


@pytest.mark.parametrize("driver_cuda, versions, refused, warned", [
    ("12.2", ["12.1"], False, False),
    ("12.2", ["12.2"], False, False),
    ("12.2", ["12.4"], False, True),        # minor-version compatibility: runs, with limits
    ("12.2", ["12.1", "12.8"], False, True),
    ("12.2", ["13.0"], True, False),        # a newer major release cannot run
    ("12.2", ["12.4", "13.0"], True, True),
    ("13.0", ["12.1"], False, False),
    ("11.8", ["12.1"], True, False),
])
def test_driver_against_toolkits(driver_cuda, versions, refused, warned):
    settings = {"cuda_version": versions[0], "cuda_additional_versions": versions[1:]}
    assert driver_checks(gpu(driver_cuda), **settings) == (refused, warned)


def test_no_driver_no_check():
    facts = dict(DEBIAN_12, gpu={"state": "no_driver", "driver_version": None, "cuda_driver_version": None})
    assert driver_checks(facts, cuda_version="13.0") == (False, False)


def test_the_messages_name_the_releases_and_the_limits():
    refusal = task_message("cuda", PREFLIGHT, MAJOR_CHECK, gpu("12.2"), cuda_version="13.0", nvidia_repo_manage=False)
    assert "driver 535.183.01 supports CUDA up to 12.2, older than CUDA 13.0" in refusal
    assert "CUDA 12.x releases" in refusal
    warning = task_message("cuda", PREFLIGHT, MINOR_WARNING, gpu("12.2"), cuda_version="12.4", nvidia_repo_manage=False)
    assert "older than CUDA 12.4" in warning and "minor-version compatibility" in warning
    assert "PTX" in warning and "cudaErrorUnsupportedPtxVersion" in warning


@pytest.mark.parametrize("facts, origin", [(DEBIAN_12, "Debian"), (UBUNTU_22, "Ubuntu")], ids=["debian12", "ubuntu2204"])
def test_preferences_keep_the_distribution_s_builds_out(facts, origin):
    """apt gives a version the priority of the first specific stanza that matches it (apt_preferences(5); apt's
    pkgPolicy::CreatePin keeps the first pin per version): the origin stanza comes before every version stanza."""
    text = render_template("cuda", "preferences.j2", facts, cuda_cudnn="8", cuda_additional_versions=["12.2"])
    stanzas = apt_stanzas(text)
    assert text.startswith("#")
    assert stanzas[0] == {"Package": "cuda-toolkit-12-1 cuda-toolkit-12-2 libcudnn8 libcudnn8-dev",
                          "Pin": "release o=%s" % origin, "Pin-Priority": "-1"}
    assert stanzas[1]["Package"].split() == ["cuda", "cuda-toolkit", "cuda-runtime", "cuda-libraries", "cuda-compiler"]
    assert stanzas[2] == {"Package": "libcudnn8 libcudnn8-dev", "Pin": "version *+cuda12.1", "Pin-Priority": "1001"}
    assert len(stanzas) == 3
    assert "\n\n\n" not in text


def test_preferences_without_cudnn():
    stanzas = apt_stanzas(render_template("cuda", "preferences.j2", DEBIAN_12))
    assert [s["Pin"] for s in stanzas] == ["release o=Debian", "version *"]
    assert stanzas[0]["Package"] == "cuda-toolkit-12-1"


@pytest.mark.parametrize("versions, refused", [(["12.4"], False), (["12.1", "12.8"], False), (["13.0"], True)])
def test_preflight_refuses_only_a_newer_major_release(versions, refused):
    """Whatever the checks are called: a 12.x toolkit on a driver that reports 12.2 is not refused."""
    settings = with_path(UBUNTU_22, {"cuda_version": versions[0], "cuda_additional_versions": versions[1:],
                                     "nvidia_repo_manage": False})
    assert bool(failures_that_fire("cuda", PREFLIGHT, gpu("12.2"), **settings)) == refused
