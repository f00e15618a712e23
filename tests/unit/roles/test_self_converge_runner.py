"""gpufleet.node.self_converge: the runner (roles/self_converge/files/gpufleet_self_converge.py) with stand-in Ansible
commands, its callback plugin with stand-in results, the requirements check, and the role's data per platform.

The stand-ins are small Python programs in a fake virtualenv's bin/: they record their argv and environment, act as
the real command would where the runner depends on it (ansible-pull creates the checkout, ansible-playbook has the
callback write its result) and exit with the status a test asks for."""
import fcntl
import importlib.util
import json
import os
import pathlib
import shutil
import subprocess
import sys
import textwrap

import pytest

from .platform import facts_for, render

ROOT = pathlib.Path(__file__).resolve().parents[3]
FILES = ROOT / "roles" / "self_converge" / "files"


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


runner = load("gpufleet_self_converge", FILES / "gpufleet_self_converge.py")
callback = load("gpufleet_self_converge_callback", FILES / "gpufleet_self_converge_callback.py")

# A stand-in command: records argv and the environment the runner passes, then does what behaviour.json says for it.
STAND_IN = textwrap.dedent("""\
    #!{python}
    import json, os, sys
    name = os.path.basename(sys.argv[0])
    base = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[0])))
    with open(os.path.join(base, "calls.jsonl"), "a") as out:
        out.write(json.dumps({{"name": name, "argv": sys.argv[1:], "cwd": os.getcwd(),
                              "env": {{k: v for k, v in os.environ.items() if k.startswith(("ANSIBLE_", "GPUFLEET_", "LC_")) or k == "PATH"}}}}) + "\\n")
    with open(os.path.join(base, "behaviour.json")) as stream:
        behaviour = json.load(stream).get(name, {{}})
    if name == "ansible-pull" and behaviour.get("rc", 0) == 0:
        os.makedirs(sys.argv[sys.argv.index("-d") + 1], exist_ok=True)
    if behaviour.get("result") is not None and os.environ.get("GPUFLEET_SELF_CONVERGE_RESULT"):
        with open(os.environ["GPUFLEET_SELF_CONVERGE_RESULT"], "w") as out:
            json.dump(behaviour["result"], out)
    for line in behaviour.get("print", []):
        print(line, flush=True)
    if behaviour.get("sleep"):
        import time
        time.sleep(behaviour["sleep"])
        open(os.path.join(base, name + ".finished"), "w").close()
    sys.exit(behaviour.get("rc", 0))
    """)

HOST = "node-a"
GOOD = {"playbook": "site.yml", "hosts": {HOST: {"ok": 9, "changed": 3, "failures": 0, "unreachable": 0, "skipped": 2,
                                                 "rescued": 0, "ignored": 0}}, "failed_tasks": []}


class Bench:
    """A fake virtualenv and the settings of a runner using it, all under tmp_path."""

    def __init__(self, tmp_path, source="git"):
        self.base = tmp_path
        self.venv = tmp_path / "venv"
        (self.venv / "bin").mkdir(parents=True)
        for name in ("ansible-pull", "ansible-playbook", "ansible-galaxy"):
            path = self.venv / "bin" / name
            path.write_text(STAND_IN.format(python=sys.executable))
            path.chmod(0o755)
        (tmp_path / "share" / "callback").mkdir(parents=True)
        (tmp_path / "share" / "collections.yml").write_text("---\n")
        (tmp_path / "share" / "callback" / "gpufleet_self_converge.py").write_text("")
        (tmp_path / "state").mkdir()
        self.settings = {
            "source": source, "url": "file:///srv/infra.git" if source == "git" else "", "version": "main",
            "full_clone": False, "accept_host_key": False, "verify_commit": False,
            "directory": str(tmp_path / ("checkout" if source == "git" else "copy")), "playbook": "site.yml",
            "inventory": "", "limit": HOST, "tags": [], "skip_tags": [], "requirements": "requirements.yml",
            "collections": str(tmp_path / "collections"), "venv": str(self.venv), "share": str(tmp_path / "share"),
            "record": str(tmp_path / "state" / "self-converge.json"), "log_file": str(tmp_path / "log" / "sc.log"),
            "log_max_bytes": 65536, "log_keep": 2, "lock_file": str(tmp_path / "lock" / "sc.lock")}
        if source == "local":
            os.makedirs(self.settings["directory"])
        self.behave({})

    def behave(self, behaviour):
        (self.venv / "behaviour.json").write_text(json.dumps(behaviour))

    def write_settings(self, **changes):
        self.settings.update(changes)
        path = self.base / "settings.json"
        path.write_text(json.dumps(self.settings))
        return path

    def calls(self):
        path = self.venv / "calls.jsonl"
        return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []

    def run(self, **changes):
        """(exit status, record or None, what the run printed)."""
        path = self.write_settings(**changes)
        printed = []

        class Out:
            @staticmethod
            def write(text):
                printed.append(text)

            @staticmethod
            def flush():
                pass

        log = runner.Log(self.settings["log_file"], self.settings["log_max_bytes"], self.settings["log_keep"], Out)
        status = runner.run(runner.load_settings(path), str(path), log)
        return status, runner.read_json(self.settings["record"]), "".join(printed)


@pytest.fixture(name="bench")
def fixture_bench(tmp_path, monkeypatch):
    monkeypatch.delenv("INVOCATION_ID", raising=False)
    return Bench(tmp_path)


# --- the commands ---------------------------------------------------------------------------------------------

def test_git_source_is_ansible_pull_running_the_collections_playbook(bench):
    settings = runner.load_settings(bench.write_settings(full_clone=True, verify_commit=True, accept_host_key=True))
    assert runner.source_argv(settings) == [
        str(bench.venv / "bin" / "ansible-pull"), "-U", "file:///srv/infra.git", "-d", settings["directory"], "--clean",
        "-i", "localhost,", "-e", "ansible_python_interpreter=%s" % (bench.venv / "bin" / "python"),
        "-C", "main", "--full", "--accept-host-key", "--verify-commit",
        str(bench.base / "share" / "collections.yml")]


def test_git_source_without_a_version_lets_git_choose(bench):
    settings = runner.load_settings(bench.write_settings(version=""))
    assert "-C" not in runner.source_argv(settings)


def test_local_source_is_ansible_playbook_on_the_copy(tmp_path):
    bench = Bench(tmp_path, source="local")
    settings = runner.load_settings(bench.write_settings())
    assert runner.source_argv(settings) == [
        str(bench.venv / "bin" / "ansible-playbook"), "-c", "local", "-i", "localhost,",
        "-e", "ansible_python_interpreter=%s" % (bench.venv / "bin" / "python"), str(bench.base / "share" / "collections.yml")]


def test_converge_runs_the_playbook_as_the_node_over_the_local_connection(bench):
    settings = runner.load_settings(bench.write_settings(
        inventory="inventory/production/hosts.yml", tags=["baseline", "cuda"], skip_tags=["pytorch"]))
    checkout = settings["directory"]
    assert runner.converge_argv(settings) == [
        str(bench.venv / "bin" / "ansible-playbook"), "-c", "local", "-e", "ansible_connection=local", "-l", HOST,
        "-i", checkout + "/inventory/production/hosts.yml", "-t", "baseline,cuda", "--skip-tags", "pytorch",
        checkout + "/site.yml"]


def test_converge_keeps_an_absolute_inventory_and_leaves_the_default_to_ansible_cfg(bench):
    settings = runner.load_settings(bench.write_settings(inventory="/etc/ansible/fleet.yml"))
    argv = runner.converge_argv(settings)
    assert argv[argv.index("-i") + 1] == "/etc/ansible/fleet.yml"
    settings = runner.load_settings(bench.write_settings(inventory=""))
    assert "-i" not in runner.converge_argv(settings)


@pytest.mark.parametrize("changes, says", [
    ({"url": ""}, "lack url"), ({"source": "svn"}, "source must be git or local"), ({"limit": ""}, "lack limit")])
def test_bad_settings_are_refused(bench, changes, says):
    with pytest.raises(runner.SettingsError, match=says):
        runner.load_settings(bench.write_settings(**changes))


# --- a run ------------------------------------------------------------------------------------------------------

def test_a_good_run_records_what_converged(bench):
    bench.behave({"ansible-playbook": {"result": GOOD, "print": ["PLAY RECAP"]}})
    status, record, printed = bench.run()
    assert status == runner.EXIT_OK
    assert record["ok"] is True and record["stage"] == "converge" and record["rc"] == 0
    assert record["changed"] == 3 and record["hosts"] == GOOD["hosts"] and record["failed_tasks"] == []
    assert record["message"] == "converged: 3 changed"
    assert record["output_tail"] == []
    assert record["trigger"] == "manual"
    assert record["last_ok"] == {"time": record["time"], "commit": None}
    assert record["duration_s"] >= 0 and record["finished"] >= record["time"]
    assert [call["name"] for call in bench.calls()] == ["ansible-pull", "ansible-playbook"]
    assert "PLAY RECAP" in printed and "run ok after " in printed
    assert "PLAY RECAP" in pathlib.Path(bench.settings["log_file"]).read_text()


def test_the_callback_is_enabled_for_the_converge_step_only(bench):
    bench.behave({"ansible-playbook": {"result": GOOD}})
    bench.run()
    pull, playbook = bench.calls()
    for call in (pull, playbook):
        assert call["env"]["LC_ALL"] == "C.UTF-8"
        assert call["env"]["PATH"] == os.environ["PATH"]  # the modules find the node's Python, not the virtualenv's
        assert call["env"]["ANSIBLE_COLLECTIONS_PATH"] == bench.settings["collections"]
        assert call["env"]["GPUFLEET_SELF_CONVERGE_SETTINGS"] == str(bench.base / "settings.json")
    assert "ANSIBLE_CALLBACKS_ENABLED" not in pull["env"] and "GPUFLEET_SELF_CONVERGE_RESULT" not in pull["env"]
    assert playbook["env"]["ANSIBLE_CALLBACKS_ENABLED"] == "gpufleet_self_converge"
    assert playbook["env"]["ANSIBLE_CALLBACK_PLUGINS"] == str(bench.base / "share" / "callback")
    assert playbook["cwd"] == bench.settings["directory"]
    assert pull["cwd"] == "/"
    # the result file is the runner's to remove
    assert not os.path.exists(playbook["env"]["GPUFLEET_SELF_CONVERGE_RESULT"])


def test_a_failed_playbook_fails_the_run_and_keeps_the_last_good_one(bench):
    bench.behave({"ansible-playbook": {"result": GOOD}})
    bench.run()
    good = runner.read_json(bench.settings["record"])
    failed = {"playbook": "site.yml", "failed_tasks": [{"host": HOST, "task": "baseline : Check the settings",
                                                        "message": "baseline_swappiness must be ..."}],
              "hosts": {HOST: dict(GOOD["hosts"][HOST], changed=0, failures=1)}}
    bench.behave({"ansible-playbook": {"result": failed, "rc": 2, "print": ["fatal: [node-a]: FAILED!"]}})
    status, record, _printed = bench.run()
    assert status == runner.EXIT_FAILED
    assert record["ok"] is False and record["stage"] == "converge" and record["rc"] == 2
    assert record["failed_tasks"] == failed["failed_tasks"]
    assert record["message"] == ("the playbook failed (ansible-playbook exit status 2): "
                                 "node-a: baseline : Check the settings")
    assert "fatal: [node-a]: FAILED!" in record["output_tail"]
    assert record["last_ok"] == good["last_ok"]


def test_a_playbook_that_matches_no_host_fails(bench):
    bench.behave({"ansible-playbook": {"result": {"playbook": "site.yml", "hosts": {}, "failed_tasks": []}}})
    status, record, _printed = bench.run()
    assert status == runner.EXIT_FAILED
    assert "ran on no host: is node-a in the repository's inventory" in record["message"]


def test_a_playbook_that_never_ends_fails_with_its_output(bench):
    bench.behave({"ansible-playbook": {"rc": 1, "print": ["ERROR! the role 'gpufleet.node.baseline' was not found"]}})
    status, record, _printed = bench.run()
    assert status == runner.EXIT_FAILED
    assert record["changed"] is None and record["rc"] == 1
    assert "before the end of the playbook" in record["message"]
    assert record["output_tail"][-1] == "ERROR! the role 'gpufleet.node.baseline' was not found"


def test_a_failed_checkout_stops_before_the_playbook(bench):
    bench.behave({"ansible-pull": {"rc": 1, "print": ["fatal: repository not found"]}})
    status, record, _printed = bench.run()
    assert status == runner.EXIT_FAILED
    assert record["stage"] == "source" and record["rc"] == 1
    assert record["message"].startswith("ansible-pull could not update the checkout")
    assert [call["name"] for call in bench.calls()] == ["ansible-pull"]


def test_a_missing_copy_fails_without_running_anything(tmp_path):
    bench = Bench(tmp_path, source="local")
    os.rmdir(bench.settings["directory"])
    status, record, _printed = bench.run()
    assert status == runner.EXIT_FAILED and record["rc"] is None
    assert "is not there" in record["message"] and bench.calls() == []


# git reads the commit; the newest-core node (tools/newest-core.sh) runs these tests without it.
@pytest.mark.skipif(shutil.which("git") is None, reason="no git here to make the checkout with")
def test_the_commit_is_the_checkout_s(bench):
    checkout = bench.settings["directory"]
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(["git", "init", "-q", checkout], check=True)
    subprocess.run(git + ["-C", checkout, "commit", "-q", "--allow-empty", "-m", "x"], check=True)
    head = subprocess.run(["git", "-C", checkout, "rev-parse", "HEAD"], capture_output=True, text=True,
                          check=True).stdout.strip()
    bench.behave({"ansible-playbook": {"result": GOOD}})
    record = bench.run()[1]
    assert record["commit"] == head and record["last_ok"]["commit"] == head


def test_under_systemd_the_trigger_is_systemd(bench, monkeypatch):
    monkeypatch.setenv("INVOCATION_ID", "0123456789abcdef")
    bench.behave({"ansible-playbook": {"result": GOOD}})
    assert bench.run()[1]["trigger"] == "systemd"


def test_a_run_told_to_stop_stops_its_command_and_records_why(bench):
    """systemd's TimeoutStartSec (or systemctl stop) sends SIGTERM: the playbook is stopped and the record says so."""
    import signal  # pylint: disable=import-outside-toplevel
    import time  # pylint: disable=import-outside-toplevel

    bench.behave({"ansible-playbook": {"sleep": 30, "print": ["PLAY [The GPU nodes]"]}})
    path = bench.write_settings()
    process = subprocess.Popen([sys.executable, str(FILES / "gpufleet_self_converge.py"), "--settings", str(path), "run"],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    log = pathlib.Path(bench.settings["log_file"])
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not (log.exists() and "PLAY [The GPU nodes]" in log.read_text()):
        time.sleep(0.1)
    process.send_signal(signal.SIGTERM)
    output = process.communicate(timeout=60)[0]
    record = runner.read_json(bench.settings["record"])
    assert process.returncode == runner.EXIT_FAILED, output
    assert record["ok"] is False and record["stage"] == "converge"
    assert record["message"].startswith("stopped by SIGTERM in the converge step")
    assert not (bench.venv / "ansible-playbook.finished").exists()
    assert not list(pathlib.Path(bench.settings["lock_file"]).parent.glob("gpufleet-self-converge-result.*"))


# --- the lock ------------------------------------------------------------------------------------------------

def test_a_second_holder_of_the_lock_is_refused_until_the_first_lets_go(tmp_path):
    first, second = runner.Lock(str(tmp_path / "l")), runner.Lock(str(tmp_path / "l"))
    assert first.acquire()
    assert not second.acquire()
    assert first.holder().startswith("pid %d since " % os.getpid())
    first.release()
    assert second.acquire()
    second.release()


def test_a_run_that_finds_the_lock_held_does_nothing(bench):
    """As while an operator runs ``flock LOCKFILE COMMAND``: another open file description holds the lock."""
    os.makedirs(os.path.dirname(bench.settings["lock_file"]))
    with open(bench.settings["lock_file"], "w", encoding="utf-8") as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        status, record, printed = bench.run()
    assert status == runner.EXIT_BUSY == 75
    assert record is None and bench.calls() == []
    assert "holds the lock" in printed


# --- the log ---------------------------------------------------------------------------------------------------

def test_the_log_is_rotated_and_bounded(tmp_path):
    class Sink:
        @staticmethod
        def write(_text):
            pass

        @staticmethod
        def flush():
            pass

    path = tmp_path / "log" / "self-converge.log"
    log = runner.Log(str(path), 4096, 2, Sink)
    for number in range(400):
        log.write("line %04d %s" % (number, "x" * 40))
    files = sorted(p.name for p in path.parent.iterdir())
    assert files == ["self-converge.log", "self-converge.log.1", "self-converge.log.2"]
    assert all((path.parent / name).stat().st_size <= 4096 for name in files)
    assert path.read_text().splitlines()[-1].startswith("line 0399 ")
    # the newest rotated file holds the lines just before the current file's first
    first_now = int(path.read_text().splitlines()[0].split()[1])
    assert int((path.parent / "self-converge.log.1").read_text().splitlines()[-1].split()[1]) == first_now - 1
    assert log.tail[-1].startswith("line 0399 ") and len(log.tail) == runner.TAIL_LINES


def test_the_record_is_replaced_whole(tmp_path):
    path = tmp_path / "record.json"
    runner.write_json(str(path), {"a": 1})
    runner.write_json(str(path), {"b": 2})
    assert json.loads(path.read_text()) == {"b": 2}
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [p.name for p in tmp_path.iterdir()] == ["record.json"]


# --- the verdict ------------------------------------------------------------------------------------------------

def test_an_unreachable_host_fails_the_run_even_with_exit_status_0():
    hosts = {HOST: dict(GOOD["hosts"][HOST], unreachable=1)}
    verdict = runner.verdict(0, {"hosts": hosts, "failed_tasks": []}, HOST)
    ok, message = verdict[0], verdict[4]
    assert not ok and message.startswith("the playbook failed")


def test_changed_counts_every_host():
    hosts = {"a": {"changed": 2}, "b": {"changed": 5}}
    assert runner.verdict(0, {"hosts": hosts, "failed_tasks": []}, "a,b")[:2] == (True, 7)


# --- the collections ---------------------------------------------------------------------------------------------

def test_collections_are_installed_again_only_when_the_requirements_or_the_tarball_change(bench):
    checkout = pathlib.Path(bench.settings["directory"])
    (checkout / "vendor").mkdir(parents=True)
    (checkout / "requirements.yml").write_text(
        "---\ncollections:\n  - name: vendor/gpufleet-node.tar.gz\n    type: file\n  - community.general\n")
    tarball = checkout / "vendor" / "gpufleet-node.tar.gz"
    tarball.write_bytes(b"release one")
    settings = runner.load_settings(bench.write_settings())

    def install():
        out = []

        class Out:
            write = staticmethod(out.append)
            flush = staticmethod(lambda: None)

        assert runner.collections(settings, Out) == runner.EXIT_OK
        return json.loads("".join(out).strip().splitlines()[-1])["changed"]

    assert install() is True
    galaxy = [call for call in bench.calls() if call["name"] == "ansible-galaxy"]
    assert galaxy[0]["argv"] == ["collection", "install", "-r", str(checkout / "requirements.yml"),
                                 "-p", bench.settings["collections"], "--force"]
    assert galaxy[0]["cwd"] == str(checkout)
    assert install() is False
    tarball.write_bytes(b"release one, rebuilt")
    assert install() is True
    assert len([call for call in bench.calls() if call["name"] == "ansible-galaxy"]) == 2


def test_a_failed_install_is_tried_again_next_time(bench):
    checkout = pathlib.Path(bench.settings["directory"])
    checkout.mkdir()
    (checkout / "requirements.yml").write_text("---\ncollections: [community.general]\n")
    settings = runner.load_settings(bench.write_settings())
    bench.behave({"ansible-galaxy": {"rc": 1}})
    sink = type("Sink", (), {"write": staticmethod(lambda _t: None), "flush": staticmethod(lambda: None)})
    assert runner.collections(settings, sink) == runner.EXIT_FAILED
    bench.behave({})
    assert runner.collections(settings, sink) == runner.EXIT_OK
    assert len([call for call in bench.calls() if call["name"] == "ansible-galaxy"]) == 2


def test_no_requirements_file_installs_nothing(bench):
    os.makedirs(bench.settings["directory"])
    settings = runner.load_settings(bench.write_settings())
    sink = type("Sink", (), {"write": staticmethod(lambda _t: None), "flush": staticmethod(lambda: None)})
    assert runner.collections(settings, sink) == runner.EXIT_OK
    assert bench.calls() == []


def test_local_sources_are_the_file_and_dir_entries():
    text = textwrap.dedent("""\
        ---
        collections:
          - name: vendor/gpufleet-node.tar.gz
            type: file
          - name: ./collections/site_local
            type: dir
          - name: community.general
            version: 9.0.0
          - community.docker
          - name: other.tgz
        """)
    assert runner.local_sources(text) == ["vendor/gpufleet-node.tar.gz", "./collections/site_local", "other.tgz"]
    assert runner.local_sources("[not: yaml") == []


# --- check -------------------------------------------------------------------------------------------------------

def test_check_names_what_a_run_lacks(bench, monkeypatch):
    monkeypatch.setattr(runner.shutil, "which", lambda _name: None)
    (bench.venv / "bin" / "ansible-galaxy").unlink()
    settings = runner.load_settings(bench.write_settings())
    out = []
    sink = type("Sink", (), {"write": staticmethod(out.append)})
    assert runner.check(settings, sink) == runner.EXIT_FAILED
    problems = json.loads("".join(out))["problems"]
    assert problems == ["%s is missing" % (bench.venv / "bin" / "ansible-galaxy"),
                        "git is missing (ansible-pull checks the repository out with it)"]


# --- the callback plugin -------------------------------------------------------------------------------------------

class FakeHost:
    def __init__(self, name):
        self.name = name

    def get_name(self):
        return self.name


class FakeResult:
    def __init__(self, host, task, result):
        self.host = FakeHost(host)
        self.task_name = task
        self.task = None
        self.result = result


class FakeStats:
    def __init__(self, counts):
        self.processed = {host: 1 for host in counts}
        self.counts = counts

    def summarize(self, host):
        base = {"ok": 0, "changed": 0, "failures": 0, "unreachable": 0, "skipped": 0, "rescued": 0, "ignored": 0}
        base.update(self.counts[host])
        return base


def test_the_callback_writes_the_failures_that_ended_a_host_s_run(tmp_path, monkeypatch):
    path = tmp_path / "result.json"
    monkeypatch.setenv("GPUFLEET_SELF_CONVERGE_RESULT", str(path))
    plugin = callback.CallbackModule()
    plugin.v2_playbook_on_start(type("Playbook", (), {"_file_name": "/x/site.yml"})())
    plugin.v2_runner_on_failed(FakeResult("a", "probe", {"msg": "ignored"}), ignore_errors=True)
    plugin.v2_runner_on_failed(FakeResult("a", "rescued one", {"msg": "handled by a rescue"}))
    plugin.v2_runner_on_failed(FakeResult("a", "Check the settings", {"msg": "x" * 1500}))
    plugin.v2_runner_on_unreachable(FakeResult("b", "Gathering Facts", {"msg": "ssh: no route"}))
    plugin.v2_playbook_on_stats(FakeStats({"a": {"ok": 4, "failures": 1, "rescued": 1}, "b": {"unreachable": 1},
                                           "c": {"ok": 5, "changed": 2}}))
    result = json.loads(path.read_text())
    assert result["playbook"] == "site.yml"
    assert result["hosts"]["c"]["changed"] == 2 and result["hosts"]["a"]["rescued"] == 1
    expected = [("a", "Check the settings"), ("b", "Gathering Facts")]
    assert [(task["host"], task["task"]) for task in result["failed_tasks"]] == expected
    assert len(result["failed_tasks"][0]["message"]) == callback.MESSAGE_CHARS + 3
    assert result["failed_tasks"][1]["message"] == "ssh: no route"


def test_the_callback_writes_nothing_without_its_variable(tmp_path, monkeypatch):
    monkeypatch.delenv("GPUFLEET_SELF_CONVERGE_RESULT", raising=False)
    monkeypatch.chdir(tmp_path)
    callback.CallbackModule().v2_playbook_on_stats(FakeStats({"a": {}}))
    assert list(tmp_path.iterdir()) == []


def test_the_callback_s_name_is_the_file_the_role_installs():
    copy = [task for task in yaml_tasks("configure.yml") if task.get("name") == "Install the callback plugin that writes what each host did"][0]
    assert pathlib.Path(copy["ansible.builtin.copy"]["dest"]).stem == callback.CallbackModule.CALLBACK_NAME == runner.CALLBACK


def yaml_tasks(name):
    import yaml  # pylint: disable=import-outside-toplevel
    return yaml.safe_load((ROOT / "roles" / "self_converge" / "tasks" / name).read_text())


# --- the requirements check ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lines, rc, says", [
    (["pytest==%s" % pytest.__version__], 0, "every requirement is met"),
    (["pytest==0.0.1"], 1, "installed: "),
    (["no-such-distribution-gpufleet==1.0"], 1, "not installed"),
])
def test_requirements_met(tmp_path, lines, rc, says):
    path = tmp_path / "requirements.txt"
    path.write_text("# pinned\n" + "\n".join(lines) + "\n")
    result = subprocess.run([sys.executable, str(FILES / "requirements_met.py"), str(path)], capture_output=True,
                            text=True, check=False)
    assert (result.returncode, says in result.stdout) == (rc, True), result.stdout + result.stderr


def test_requirements_met_without_a_file_is_2(tmp_path):
    result = subprocess.run([sys.executable, str(FILES / "requirements_met.py"), str(tmp_path / "none")],
                            capture_output=True, text=True, check=False)
    assert result.returncode == 2


# --- the role's data --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("distribution, version, interpreter, packages", [
    ("Debian", "12", "/usr/bin/python3", ["python3.11-venv", "git"]),
    ("Ubuntu", "22.04", "/usr/bin/python3.11", ["python3.11-venv", "git"]),
    ("Ubuntu", "24.04", "/usr/bin/python3", ["python3.12-venv", "git"]),
])
def test_the_platform_s_interpreter_and_packages(distribution, version, interpreter, packages):
    facts = facts_for(distribution, version)
    probe = {"rc": 0, "stdout": packages[0][len("python"):-len("-venv")] + "\n"}
    assert render("self_converge", facts, "{{ __self_converge_interpreter }}") == interpreter
    assert render("self_converge", facts, "{{ __self_converge_os_packages }}",
                  __self_converge_python_probe=probe) == packages
    assert render("self_converge", facts, "{{ __self_converge_os_packages }}", __self_converge_python_probe=probe,
                  self_converge_source="local") == packages[:1]


def test_a_missing_interpreter_is_read_from_its_name():
    """Ubuntu 22.04 before the role ran: no python3.11 yet, its version from the name, so its venv package is known."""
    facts = facts_for("Ubuntu", "22.04")
    missing = {"rc": 2, "stdout": ""}
    assert render("self_converge", facts, "{{ __self_converge_python_version }}",
                  __self_converge_python_probe=missing) == "3.11"
    assert render("self_converge", facts, "{{ __self_converge_python_version }}", __self_converge_python_probe=missing,
                  self_converge_python="/opt/python/bin/python") == ""


@pytest.mark.parametrize("core, python, unsupported", [
    ("2.19.14", "3.10", True), ("2.19.14", "3.11", False), ("2.19.14", "3.13", False), ("2.19.14", "3.14", True),
    ("2.20.1", "3.11", True), ("2.20.1", "3.12", False), ("2.22.0", "3.8", False)])
def test_ansible_core_s_control_node_pythons(core, python, unsupported):
    facts = facts_for("Debian", "12")
    assert render("self_converge", facts, "{{ __self_converge_python_unsupported }}",
                  self_converge_ansible_core_version=core,
                  __self_converge_python_probe={"rc": 0, "stdout": python}) is unsupported


def test_the_settings_file_has_what_the_runner_requires():
    facts = facts_for("Ubuntu", "22.04")
    settings = render("self_converge", facts, "{{ __self_converge_settings }}", inventory_hostname="node-a",
                      self_converge_repo_url="file:///srv/infra.git")
    assert set(runner.REQUIRED) <= set(settings)
    assert settings["record"] == "/etc/gpufleet/self-converge.json"
    assert settings["limit"] == "node-a" and settings["url"] == "file:///srv/infra.git"
    assert settings["log_max_bytes"] == 10485760 and settings["full_clone"] is False
    local = render("self_converge", facts, "{{ __self_converge_settings }}", inventory_hostname="node-a",
                   self_converge_source="local")
    assert local["directory"] == "/opt/gpufleet/self-converge/local" and local["url"] == ""
