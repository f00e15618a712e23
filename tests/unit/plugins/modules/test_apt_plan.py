"""apt_plan: the exact commands it runs (backend apt-cache), the plan it returns, check mode, failures, and the
python-apt backend against a fake ``apt_pkg``.

``run_command`` is mocked and answers with the real captures of tests/unit/plugins/module_utils/fixtures/apt
(apt 2.6.1 and dpkg 1.21 on Debian 12; NVIDIA's CUDA repository with the nvidia_driver role's pins, and
Debian's own nvidia-smi; see that folder's README.md). The fake ``apt_pkg`` holds the same state as the NVIDIA
capture, so both backends must return the same plan.
"""
import json
import pathlib

import pytest

from ansible.module_utils.testing import patch_module_args
from ansible_collections.gpufleet.node.plugins.module_utils.apt import version_compare
from ansible_collections.gpufleet.node.plugins.modules import apt_plan

FIXTURES = pathlib.Path(__file__).resolve().parent.parent / "module_utils" / "fixtures" / "apt"
CUDA_POLICY = (FIXTURES / "cuda-debian12.policy.txt").read_text(encoding="utf-8")
CUDA_DPKG = (FIXTURES / "cuda-debian12.dpkg.txt").read_text(encoding="utf-8")
CUDA_POLICY_UNREADABLE = (FIXTURES / "cuda-debian12.policy-unreadable-preferences.txt").read_text(encoding="utf-8")
DEBIAN_POLICY = (FIXTURES / "debian12-nvidia-smi.policy.txt").read_text(encoding="utf-8")
DEBIAN_DPKG = (FIXTURES / "debian12-nvidia-smi.dpkg.txt").read_text(encoding="utf-8")

SHOWFORMAT = "${binary:Package} ${db:Status-Abbrev} ${Version}\n"
NAMES = ["cuda-drivers-535", "nvidia-utils-535", "libnccl2", "cuda-toolkit-12-1", "cuda-drivers"]
PACKAGES = ["cuda-drivers-535=535.*", "nvidia-utils-535=535.*", "libnccl2=*+cuda12.1", "cuda-toolkit-12-1",
            "cuda-drivers=550.*"]
# What the module must answer for PACKAGES with hold=true on the NVIDIA capture, whichever backend read it.
EXPECTED_PLAN = {
    "install": ["cuda-drivers-535=535.183.01-1", "nvidia-utils-535=535.183.01-1", "cuda-toolkit-12-1=12.1.1-1"],
    "hold": ["cuda-drivers-535", "nvidia-utils-535", "cuda-toolkit-12-1"],
    "release": [],
    "missing": ["cuda-drivers"],
    "wanted": {"cuda-drivers-535": "535.183.01-1", "nvidia-utils-535": "535.183.01-1",
               "libnccl2": "2.17.1-1+cuda12.1", "cuda-toolkit-12-1": "12.1.1-1", "cuda-drivers": None},
}
DPKG_NOT_FOUND = "".join("dpkg-query: no packages found matching %s\n" % name
                         for name in ("cuda-toolkit-12-1", "cuda-drivers"))


class Commands:
    """Stands in for AnsibleModule.run_command: answers per command line, records every call."""

    def __init__(self, answers):
        self.answers = answers
        self.calls = []

    def __call__(self, args, **kwargs):
        self.calls.append((list(args), kwargs))
        return self.answers[args[0].rsplit("/", 1)[-1] + " " + args[1]]


@pytest.fixture(autouse=True)
def no_python_apt(monkeypatch):
    """The tests choose the backend: python-apt is absent unless a test puts a fake apt_pkg in."""
    monkeypatch.setattr(apt_plan, "apt_pkg", None)
    monkeypatch.setattr(apt_plan.AnsibleModule, "get_bin_path",
                        lambda self, name, required=False, opt_dirs=None: "/usr/bin/" + name)


def run_module(monkeypatch, capsys, args, answers=None):
    commands = Commands(answers or {})
    monkeypatch.setattr(apt_plan.AnsibleModule, "run_command", lambda module, args, **kwargs: commands(args, **kwargs))
    with patch_module_args(args):
        with pytest.raises(SystemExit) as exit_info:
            apt_plan.main()
    result = json.loads(capsys.readouterr().out)
    assert exit_info.value.code == (1 if result.get("failed") else 0)
    return result, commands


def cuda_answers(policy=CUDA_POLICY, policy_stderr=""):
    return {"apt-cache policy": (0, policy, policy_stderr), "dpkg-query --show": (1, CUDA_DPKG, DPKG_NOT_FOUND)}


@pytest.fixture
def warned(monkeypatch):
    """The texts the module passes to AnsibleModule.warn. (How ansible-core returns warnings differs between
    releases, and it keeps them for the whole process.)"""
    texts = []
    monkeypatch.setattr(apt_plan.AnsibleModule, "warn", lambda module, text: texts.append(text))
    return texts


def plan_of(result):
    return dict((key, result[key]) for key in EXPECTED_PLAN)


# --- backend apt-cache -------------------------------------------------------------------------------------

def test_apt_cache_backend_runs_two_commands_with_exact_argv(monkeypatch, capsys):
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "hold": True}, cuda_answers())
    assert commands.calls == [
        (["/usr/bin/apt-cache", "policy"] + NAMES, {"environ_update": {"LC_ALL": "C"}}),
        (["/usr/bin/dpkg-query", "--show", "--showformat", SHOWFORMAT] + NAMES, {"environ_update": {"LC_ALL": "C"}}),
    ]
    assert result["changed"] is False
    assert result["backend"] == "apt-cache"
    assert plan_of(result) == EXPECTED_PLAN
    assert result["packages"]["cuda-drivers-535"] == {
        "wanted": "535.183.01-1", "installed": "535.161.08-1", "candidate": "535.183.01-1", "held": True,
        "action": "upgrade",
        "reason": "Installed 535.161.08-1 is older than the wanted version 535.183.01-1, apt's candidate, which "
                  "matches 535.*. dpkg holds it at 535.161.08-1.",
    }
    assert [result["packages"][name]["action"] for name in NAMES] == [
        "upgrade", "upgrade", "keep", "install", "missing"]
    assert "warnings" not in result or result["warnings"] == []


def test_check_mode_answers_the_same(monkeypatch, capsys):
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "hold": True,
                                                        "_ansible_check_mode": True}, cuda_answers())
    assert len(commands.calls) == 2
    assert result["changed"] is False and "failed" not in result
    assert plan_of(result) == EXPECTED_PLAN


def test_hold_null_leaves_holds_out(monkeypatch, capsys):
    result, _commands = run_module(monkeypatch, capsys, {"packages": PACKAGES}, cuda_answers())
    assert result["hold"] == [] and result["release"] == []
    assert result["install"] == EXPECTED_PLAN["install"]


def test_release(monkeypatch, capsys):
    result, _commands = run_module(monkeypatch, capsys, {"packages": ["libnccl2=*", "cuda-drivers-535=535.*"],
                                                         "hold": False}, cuda_answers())
    assert result["release"] == ["libnccl2", "cuda-drivers-535"] and result["hold"] == []


def test_architecture_is_asked_for_when_a_name_carries_one(monkeypatch, capsys):
    answers = {"apt-cache policy": (0, DEBIAN_POLICY, ""), "dpkg-query --show": (0, DEBIAN_DPKG, ""),
               "dpkg --print-architecture": (0, "amd64\n", "")}
    result, commands = run_module(monkeypatch, capsys, {"packages": ["libnvidia-ml1:amd64=535.*", "nvidia-smi=*"]},
                                  answers)
    assert [call[0] for call in commands.calls] == [
        ["/usr/bin/apt-cache", "policy", "libnvidia-ml1:amd64", "nvidia-smi"],
        ["/usr/bin/dpkg-query", "--show", "--showformat", SHOWFORMAT, "libnvidia-ml1:amd64", "nvidia-smi"],
        ["/usr/bin/dpkg", "--print-architecture"],
    ]
    assert result["install"] == ["libnvidia-ml1:amd64=535.309.01-0+deb12u1"]
    assert result["packages"]["libnvidia-ml1:amd64"]["installed"] == "535.261.03-1"
    assert result["packages"]["nvidia-smi"]["action"] == "keep"


def test_apt_warnings_are_passed_on(monkeypatch, capsys, warned):
    policy, warning = CUDA_POLICY_UNREADABLE.rsplit("W: ", 1)
    result, _commands = run_module(monkeypatch, capsys, {"packages": ["cuda-drivers"]},
                                   cuda_answers(policy, "W: " + warning))
    assert warned == ["apt-cache policy: W: Unable to read /etc/apt/preferences.d/gpufleet-nvidia-driver"
                      " - open (13: Permission denied)"]
    assert result["install"] == ["cuda-drivers=550.54.15-1"]


def test_apt_cache_failing_fails_the_module(monkeypatch, capsys):
    message = ("E: The value 'nonexistent' is invalid for APT::Default-Release as such a release is not available "
               "in the sources\n")
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES},
                                  {"apt-cache policy": (100, "", message)})
    assert result["failed"] is True
    assert result["msg"] == "apt-cache policy failed (rc 100): " + message.strip()
    assert result["rc"] == 100 and result["cmd"] == ["/usr/bin/apt-cache", "policy"] + NAMES
    assert len(commands.calls) == 1                     # dpkg-query is not asked once apt-cache failed


def test_dpkg_query_failing_fails_the_module(monkeypatch, capsys):
    answers = {"apt-cache policy": (0, CUDA_POLICY, ""),
               "dpkg-query --show": (2, "", "dpkg-query: error: parsing file '/var/lib/dpkg/status' near line 7\n")}
    result, _commands = run_module(monkeypatch, capsys, {"packages": PACKAGES}, answers)
    assert result["failed"] is True
    assert result["msg"].startswith("dpkg-query --show failed (rc 2): dpkg-query: error: parsing file")


def test_output_that_is_not_apt_cache_policy_fails_the_module(monkeypatch, capsys):
    answers = {"apt-cache policy": (0, "Package: libnccl2\nVersion: 2.18.3-1+cuda12.1\n", ""),
               "dpkg-query --show": (0, "", "")}
    result, _commands = run_module(monkeypatch, capsys, {"packages": ["libnccl2"]}, answers)
    assert result["failed"] is True and result["msg"].startswith("could not read apt's answer: not apt-cache policy")


def test_missing_apt_cache_fails_clearly(monkeypatch, capsys):
    monkeypatch.setattr(apt_plan.AnsibleModule, "get_bin_path", lambda self, name, required=False, opt_dirs=None: None)
    result, commands = run_module(monkeypatch, capsys, {"packages": ["libnccl2"]})
    assert result["failed"] is True
    assert result["msg"] == "apt-cache not found: backend apt-cache needs apt and dpkg (Debian, Ubuntu)"
    assert commands.calls == []


@pytest.mark.parametrize("packages,message", [
    (["libnccl2=2.*.3"], "'libnccl2=2.*.3': '*' may only start or end the version pattern"),
    (["libnccl2", "libnccl2=*"], "libnccl2 is asked for twice ('libnccl2' and 'libnccl2=*')"),
    (["=1.0"], "'=1.0': '' is not a package name"),
])
def test_malformed_items_fail_before_any_command(monkeypatch, capsys, packages, message):
    result, commands = run_module(monkeypatch, capsys, {"packages": packages})
    assert result["failed"] is True and result["msg"].startswith(message)
    assert commands.calls == []


def test_no_packages_no_commands(monkeypatch, capsys):
    result, commands = run_module(monkeypatch, capsys, {"packages": [], "hold": True})
    assert commands.calls == []
    assert (result["install"], result["hold"], result["missing"], result["packages"]) == ([], [], [], {})


# --- backend python-apt, against a fake apt_pkg ------------------------------------------------------------

class FakeVersion:
    def __init__(self, ver_str, priority, downloadable=True):
        self.ver_str, self.priority, self.downloadable = ver_str, priority, downloadable


class FakePackage:
    def __init__(self, versions, candidate=None, current=None, current_state=0, selected_state=0, inst_state=0):
        self.version_list = versions
        self.candidate = candidate
        self.current_ver = current
        self.current_state, self.selected_state, self.inst_state = current_state, selected_state, inst_state


class FakePolicy:
    def get_priority(self, version):
        return version.priority


class FakeConfig:
    def __init__(self, arch, etc):
        self.arch, self.etc = arch, etc

    def find(self, key):
        return {"APT::Architecture": self.arch}[key]

    def find_file(self, key):
        return {"Dir::Etc::preferences": str(self.etc / "preferences")}[key]

    def find_dir(self, key):
        return {"Dir::Etc::preferencesparts": str(self.etc / "preferences.d")}[key]


class FakeAptPkg:
    """The part of python-apt's apt_pkg the module uses, holding the state of the NVIDIA capture."""

    CURSTATE_NOT_INSTALLED, CURSTATE_UNPACKED, CURSTATE_CONFIG_FILES, CURSTATE_INSTALLED = 0, 1, 5, 6
    SELSTATE_UNKNOWN, SELSTATE_INSTALL, SELSTATE_HOLD, SELSTATE_DEINSTALL = 0, 1, 2, 3
    INSTSTATE_OK, INSTSTATE_REINSTREQ, INSTSTATE_HOLD, INSTSTATE_HOLD_REINSTREQ = 0, 1, 2, 3

    def __init__(self, etc):
        self.config = FakeConfig("amd64", etc)
        self.calls = []
        self.packages = {}
        self.progress = None
        fake = self

        def installed(versions, candidate, current, held):
            return FakePackage(versions, candidate, current, self.CURSTATE_INSTALLED,
                               self.SELSTATE_HOLD if held else self.SELSTATE_INSTALL, self.INSTSTATE_OK)

        v535_183, v535_161 = FakeVersion("535.183.01-1", 1001), FakeVersion("535.161.08-1", 1001)
        self.packages["cuda-drivers-535"] = installed([v535_183, v535_161], v535_183, v535_161, True)
        u535_183, u535_161 = FakeVersion("535.183.01-1", 1001), FakeVersion("535.161.08-1", 1001)
        self.packages["nvidia-utils-535"] = installed([u535_183, u535_161], u535_183, u535_161, False)
        nccl = [FakeVersion("2.19.3-1+cuda12.2", 500), FakeVersion("2.18.3-1+cuda12.1", 500),
                FakeVersion("2.17.1-1+cuda12.1", 500)]
        self.packages["libnccl2"] = installed(nccl, nccl[0], nccl[2], True)
        toolkit = FakeVersion("12.1.1-1", 500)
        self.packages["cuda-toolkit-12-1"] = FakePackage([toolkit], toolkit)
        self.packages["cuda-drivers"] = FakePackage([FakeVersion("550.54.15-1", -1)], None)

        class Cache:
            def __init__(self, progress):
                fake.calls.append("Cache")
                fake.progress = progress

            def __getitem__(self, name):
                return fake.packages[name]

        class DepCache:
            def __init__(self, cache):
                fake.calls.append("DepCache")
                self.policy = FakePolicy()

            def get_candidate_ver(self, package):
                return package.candidate

        self.Cache, self.DepCache = Cache, DepCache

    def init_config(self):
        self.calls.append("init_config")

    def init_system(self):
        self.calls.append("init_system")

    def version_compare(self, left, right):
        self.calls.append("version_compare")
        return 7 * version_compare(left, right)          # apt's answer is any int: only its sign counts


@pytest.fixture
def fake_apt_pkg(monkeypatch, tmp_path):
    (tmp_path / "preferences.d").mkdir()
    fake = FakeAptPkg(tmp_path)
    monkeypatch.setattr(apt_plan, "apt_pkg", fake)
    return fake


def test_auto_uses_python_apt_when_it_imports(monkeypatch, capsys, fake_apt_pkg):
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "hold": True})
    assert commands.calls == []
    assert result["backend"] == "python-apt"
    assert plan_of(result) == EXPECTED_PLAN
    assert fake_apt_pkg.calls[:4] == ["init_config", "init_system", "Cache", "DepCache"]
    assert "version_compare" in fake_apt_pkg.calls
    # A progress object, so that apt_pkg does not print 'Reading package lists...' into the module's JSON.
    assert callable(fake_apt_pkg.progress.update) and callable(fake_apt_pkg.progress.done)


def test_both_backends_return_the_same_plan(monkeypatch, capsys, fake_apt_pkg):
    python_apt, _commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "hold": True})
    apt_cache, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "hold": True,
                                                           "backend": "apt-cache"}, cuda_answers())
    assert len(commands.calls) == 2
    assert (python_apt["backend"], apt_cache["backend"]) == ("python-apt", "apt-cache")
    for result in (python_apt, apt_cache):
        del result["backend"]
        result.pop("invocation", None)   # from ansible-core 2.21 only there when the controller asks for it
    assert python_apt == apt_cache


def test_python_apt_states(monkeypatch, capsys, fake_apt_pkg):
    packages = fake_apt_pkg.packages
    nvsmi = FakeVersion("535.161.08-1", 500)
    packages["nvidia-persistenced-535"] = FakePackage([nvsmi], nvsmi, None, fake_apt_pkg.CURSTATE_CONFIG_FILES)
    packages["nvidia-fabricmanager-535"] = FakePackage([nvsmi], nvsmi, nvsmi, fake_apt_pkg.CURSTATE_INSTALLED,
                                                       fake_apt_pkg.SELSTATE_HOLD, fake_apt_pkg.INSTSTATE_REINSTREQ)
    result, _commands = run_module(monkeypatch, capsys, {"packages": [
        "nvidia-persistenced-535", "nvidia-fabricmanager-535", "no-such-package"], "hold": False})
    assert result["install"] == ["nvidia-persistenced-535=535.161.08-1", "nvidia-fabricmanager-535=535.161.08-1"]
    assert result["packages"]["nvidia-fabricmanager-535"]["held"] is True
    assert result["release"] == ["nvidia-fabricmanager-535"]
    assert result["missing"] == ["no-such-package"]


def test_python_apt_warns_about_preferences_it_cannot_read(monkeypatch, capsys, fake_apt_pkg, tmp_path, warned):
    pin = tmp_path / "preferences.d" / "gpufleet-nvidia-driver"
    pin.write_text("Package: cuda-drivers\nPin: version *\nPin-Priority: -1\n")
    (tmp_path / "preferences.d" / "ignored.txt").write_text("")         # apt skips this name; so does the check
    monkeypatch.setattr(apt_plan.os, "access", lambda path, mode: not path.endswith("gpufleet-nvidia-driver"))
    result, _commands = run_module(monkeypatch, capsys, {"packages": ["libnccl2"]})
    assert result["wanted"] == {"libnccl2": "2.19.3-1+cuda12.2"}
    assert warned == [
        "python-apt: cannot read %s: its pins are left out of the candidates (run the module as root, with become)"
        % pin]


def test_python_apt_asked_for_but_absent(monkeypatch, capsys):
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "backend": "python-apt"})
    assert result["failed"] is True
    assert "python3-apt (the apt_pkg module)" in result["msg"] and "backend=apt-cache" in result["msg"]
    assert commands.calls == []


def test_python_apt_failing_to_open_the_cache(monkeypatch, capsys, fake_apt_pkg):
    def broken(progress):
        raise SystemError("E:Malformed entry 1 in list file /etc/apt/sources.list.d/cuda.list (Component)")
    fake_apt_pkg.Cache = broken
    result, _commands = run_module(monkeypatch, capsys, {"packages": PACKAGES})
    assert result["failed"] is True
    assert result["msg"] == ("python-apt could not open apt's cache: E:Malformed entry 1 in list file "
                             "/etc/apt/sources.list.d/cuda.list (Component)")


def test_backend_apt_cache_still_compares_with_apt_pkg_when_present(monkeypatch, capsys, fake_apt_pkg):
    result, commands = run_module(monkeypatch, capsys, {"packages": PACKAGES, "backend": "apt-cache"},
                                  cuda_answers())
    assert len(commands.calls) == 2 and result["backend"] == "apt-cache"
    assert "version_compare" in fake_apt_pkg.calls and "Cache" not in fake_apt_pkg.calls


# --- details (summary and depends, to tell a transitional package) ----------------------------------------

UBUNTU_SHOW = (FIXTURES / "ubuntu2204-nvidia-headless.show.txt").read_text(encoding="utf-8")
UBUNTU_POLICY = """nvidia-headless-535-server:
  Installed: (none)
  Candidate: 535.309.01-0ubuntu0.22.04.2
  Version table:
     535.309.01-0ubuntu0.22.04.2 500
        500 http://archive.example/ubuntu jammy-updates/restricted amd64 Packages
nvidia-headless-580-server:
  Installed: (none)
  Candidate: 580.178.04-0ubuntu0.22.04.1
  Version table:
     580.178.04-0ubuntu0.22.04.1 500
        500 http://archive.example/ubuntu jammy-updates/restricted amd64 Packages
"""


def test_details_come_from_apt_cache_show(monkeypatch, capsys):
    answers = {"apt-cache policy": (0, UBUNTU_POLICY, ""), "dpkg-query --show": (1, "", ""),
               "apt-cache show": (0, UBUNTU_SHOW, "")}
    result, commands = run_module(monkeypatch, capsys, {
        "packages": ["nvidia-headless-535-server=535.*", "nvidia-headless-580-server"], "details": True}, answers)
    assert commands.calls[-1][0] == ["/usr/bin/apt-cache", "show", "nvidia-headless-535-server",
                                     "nvidia-headless-580-server"]
    old, new = result["packages"]["nvidia-headless-535-server"], result["packages"]["nvidia-headless-580-server"]
    assert old["summary"] == "NVIDIA headless metapackage (transitional package)"
    assert old["depends"] == ["nvidia-headless-580-server"]
    assert new["depends"] == ["nvidia-headless-no-dkms-580-server", "nvidia-dkms-580-server"]


def test_without_details_no_show_and_no_fields(monkeypatch, capsys):
    answers = {"apt-cache policy": (0, UBUNTU_POLICY, ""), "dpkg-query --show": (1, "", "")}
    result, commands = run_module(monkeypatch, capsys, {"packages": ["nvidia-headless-535-server"]}, answers)
    assert len(commands.calls) == 2
    assert "summary" not in result["packages"]["nvidia-headless-535-server"]


def test_no_details_of_a_version_pins_hide(monkeypatch, capsys):
    """An earlier choice's preferences pin the branch below 0: nothing is wanted and apt has no candidate. Which
    build the caller would get (NVIDIA's or the archive's) is decided by the pins it writes next, so no record
    is guessed (the newest offered was the archive's transitional build where NVIDIA's was meant)."""
    pinned = UBUNTU_POLICY.replace("Candidate: 535.309.01-0ubuntu0.22.04.2", "Candidate: (none)").replace(
        "     535.309.01-0ubuntu0.22.04.2 500", "     535.309.01-0ubuntu0.22.04.2 -1")
    answers = {"apt-cache policy": (0, pinned, ""), "dpkg-query --show": (1, "", ""),
               "apt-cache show": (0, UBUNTU_SHOW, "")}
    result, _commands = run_module(monkeypatch, capsys, {
        "packages": ["nvidia-headless-535-server=535.*"], "details": True}, answers)
    entry = result["packages"]["nvidia-headless-535-server"]
    assert entry["wanted"] is None and entry["action"] == "missing"
    assert entry["summary"] is None and entry["depends"] == []
