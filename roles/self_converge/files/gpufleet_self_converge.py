"""gpufleet-self-converge: converge this node from its infra repository, once (gpufleet.node.self_converge).

    gpufleet-self-converge [--settings FILE] run            one run: lock, source, converge, record (the timer's)
    gpufleet-self-converge [--settings FILE] collections    install the repository's collection requirements
    gpufleet-self-converge [--settings FILE] status         print the record of the last run
    gpufleet-self-converge [--settings FILE] check          check the settings and the tools a run needs

A run takes an exclusive flock(2) on the lock file first and gives up at once when another process holds it (exit
75, EX_TEMPFAIL; the unit counts that as success): a run of the timer, a manual run or an operator's
``flock LOCKFILE COMMAND`` never overlap. Then:

1. source: with ``source: git``, ``ansible-pull`` updates the checkout (``-U``, ``-C``, ``-d``, ``--clean``) and runs
   the role's ``collections.yml``, which calls ``collections`` below; with ``source: local``, ``ansible-playbook -c
   local`` runs that playbook in the copy kept on the node. The repository's collections must be installed before
   its playbook is loaded, which is why the playbook is a second step and not ansible-pull's own.
2. converge: ``ansible-playbook -c local -e ansible_connection=local -l LIMIT [-i INVENTORY] PLAYBOOK`` in the
   checkout, with the callback plugin of the share directory writing what each host did.

Everything the commands print goes to stdout (the journal, under systemd) and to the log file, which is rotated at
``log_max_bytes`` keeping ``log_keep`` older files. The record (``record``, JSON) is replaced atomically at the end
of every run that took the lock, a run stopped by SIGTERM (the unit's TimeoutStartSec) or SIGINT included;
roles/self_converge/README.md lists its fields.
"""
import argparse
import datetime
import errno
import fcntl
import hashlib
import json
import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_BUSY = 75  # EX_TEMPFAIL: another run holds the lock
DEFAULT_SETTINGS = "/etc/gpufleet/self-converge-settings.json"
SETTINGS_ENV = "GPUFLEET_SELF_CONVERGE_SETTINGS"
RESULT_ENV = "GPUFLEET_SELF_CONVERGE_RESULT"
CALLBACK = "gpufleet_self_converge"
TAIL_LINES = 20
REQUIRED = ("source", "directory", "playbook", "limit", "venv", "share", "collections", "record", "log_file",
            "lock_file")
DIGEST_FILE = ".gpufleet-requirements.sha256"


class SettingsError(Exception):
    """The settings file is missing, unreadable or lacks a required setting."""


class Stopped(Exception):
    """The run was told to stop (SIGTERM from systemd at TimeoutStartSec or systemctl stop, SIGINT from a terminal)."""


def stop(signum, _frame):
    raise Stopped(signal.Signals(signum).name)


def load_settings(path):
    """The runner's settings (written by the role) with their defaults."""
    try:
        with open(path, encoding="utf-8") as stream:
            settings = json.load(stream)
    except (OSError, ValueError) as exc:
        raise SettingsError("cannot read the settings %s: %s" % (path, exc)) from exc
    if not isinstance(settings, dict):
        raise SettingsError("the settings %s are not a JSON object" % path)
    missing = [name for name in REQUIRED if not settings.get(name)]
    if settings.get("source") == "git" and not settings.get("url"):
        missing.append("url")
    if missing:
        raise SettingsError("the settings %s lack %s" % (path, ", ".join(missing)))
    if settings["source"] not in ("git", "local"):
        raise SettingsError("the settings %s: source must be git or local, not %r" % (path, settings["source"]))
    defaults = {"url": "", "version": "", "full_clone": False, "accept_host_key": False, "verify_commit": False,
                "inventory": "", "tags": [], "skip_tags": [], "requirements": "", "log_max_bytes": 10485760,
                "log_keep": 3}
    for name, value in defaults.items():
        settings.setdefault(name, value)
    return settings


def utc_now():
    return datetime.datetime.now(datetime.timezone.utc)


def iso(moment):
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


class Log:
    """Lines to stdout and to a log file that is rotated at max_bytes, keeping ``keep`` older files."""

    def __init__(self, path, max_bytes, keep, stream=None):
        self.path = path
        self.max_bytes = max(int(max_bytes), 1024)
        self.keep = max(int(keep), 1)
        self.stream = stream if stream is not None else sys.stdout
        self.tail = []
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)

    def rotate(self):
        """log.(keep-1) -> log.keep, ..., log -> log.1; the oldest falls off."""
        for index in range(self.keep - 1, 0, -1):
            older = "%s.%d" % (self.path, index)
            if os.path.exists(older):
                os.replace(older, "%s.%d" % (self.path, index + 1))
        if os.path.exists(self.path):
            os.replace(self.path, self.path + ".1")

    def write(self, line, keep_tail=True):
        line = line.rstrip("\n")
        self.stream.write(line + "\n")
        self.stream.flush()
        if keep_tail:
            self.tail.append(line)
            del self.tail[:-TAIL_LINES]
        data = (line + "\n").encode("utf-8", "replace")
        try:
            size = os.path.getsize(self.path)
        except OSError:
            size = 0
        if size and size + len(data) > self.max_bytes:
            self.rotate()
        with open(self.path, "ab") as stream:
            stream.write(data)

    def note(self, text):
        """A line of the runner's own, stamped."""
        self.write("%s gpufleet-self-converge[%d]: %s" % (iso(utc_now()), os.getpid(), text), keep_tail=False)


class Lock:
    """An exclusive flock(2) on ``path``, taken without waiting; what holds it is written into the file."""

    def __init__(self, path):
        self.path = path
        self.handle = None

    def acquire(self):
        """True when taken, False when another process holds it."""
        os.makedirs(os.path.dirname(self.path) or ".", exist_ok=True)
        handle = open(self.path, "a+", encoding="utf-8")  # pylint: disable=consider-using-with
        try:
            fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            handle.close()
            if exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
                return False
            raise
        handle.seek(0)
        handle.truncate()
        handle.write("pid %d since %s\n" % (os.getpid(), iso(utc_now())))
        handle.flush()
        self.handle = handle
        return True

    def holder(self):
        try:
            with open(self.path, encoding="utf-8") as stream:
                return stream.read().strip() or "unknown"
        except OSError:
            return "unknown"

    def release(self):
        if self.handle is not None:
            self.handle.close()  # closing the only descriptor releases the lock
            self.handle = None


def tool(settings, name):
    return os.path.join(settings["venv"], "bin", name)


def child_env(settings, settings_path, result_path=None):
    """The environment of the Ansible commands: a UTF-8 locale (ansible-core needs one), the collections directory,
    plain output; the callback plugin for the converge step. PATH stays the system's: the commands are named by
    their paths, and the playbook's modules find the node's own Python, not the virtualenv's."""
    env = dict(os.environ)
    env.setdefault("PATH", "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
    env.setdefault("HOME", pwd.getpwuid(os.getuid()).pw_dir)
    env.update({"LC_ALL": "C.UTF-8", "LANG": "C.UTF-8", "PYTHONUNBUFFERED": "1", "ANSIBLE_NOCOLOR": "1",
                "ANSIBLE_FORCE_COLOR": "0", "ANSIBLE_RETRY_FILES_ENABLED": "0",
                "ANSIBLE_COLLECTIONS_PATH": settings["collections"], SETTINGS_ENV: settings_path})
    env.pop(RESULT_ENV, None)
    if result_path:
        env.update({"ANSIBLE_CALLBACK_PLUGINS": os.path.join(settings["share"], "callback"),
                    "ANSIBLE_CALLBACKS_ENABLED": CALLBACK, RESULT_ENV: result_path})
    return env


def in_directory(settings, path):
    """A path of the settings inside the checkout (absolute paths stay)."""
    return path if os.path.isabs(path) else os.path.join(settings["directory"], path)


def source_argv(settings):
    """The command of the source step: ansible-pull (git) or ansible-playbook (local), running collections.yml."""
    playbook = os.path.join(settings["share"], "collections.yml")
    if settings["source"] == "git":
        # -i localhost, keeps the repository's inventory out of this step; ansible-pull then leaves the interpreter of
        # localhost to discovery, so it is named: the virtualenv's, which runs the checkout and the playbook's command.
        argv = [tool(settings, "ansible-pull"), "-U", settings["url"], "-d", settings["directory"], "--clean",
                "-i", "localhost,", "-e", "ansible_python_interpreter=" + tool(settings, "python")]
        if settings["version"]:
            argv += ["-C", settings["version"]]
        if settings["full_clone"]:
            argv.append("--full")
        if settings["accept_host_key"]:
            argv.append("--accept-host-key")
        if settings["verify_commit"]:
            argv.append("--verify-commit")
        return argv + [playbook]
    return [tool(settings, "ansible-playbook"), "-c", "local", "-i", "localhost,",
            "-e", "ansible_python_interpreter=" + tool(settings, "python"), playbook]


def converge_argv(settings):
    """The command of the converge step: the repository's playbook against this node as its inventory host."""
    argv = [tool(settings, "ansible-playbook"), "-c", "local", "-e", "ansible_connection=local",
            "-l", settings["limit"]]
    if settings["inventory"]:
        argv += ["-i", in_directory(settings, settings["inventory"])]
    if settings["tags"]:
        argv += ["-t", ",".join(settings["tags"])]
    if settings["skip_tags"]:
        argv += ["--skip-tags", ",".join(settings["skip_tags"])]
    return argv + [in_directory(settings, settings["playbook"])]


def stream(argv, env, cwd, log):
    """Runs argv, every line of its output to the log as it comes; its exit status (127 when it cannot start)."""
    log.note("$ %s" % " ".join(argv))
    try:
        process = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE,  # pylint: disable=consider-using-with
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL)
    except OSError as exc:
        log.write("cannot run %s: %s" % (argv[0], exc))
        return 127
    try:
        for raw in iter(process.stdout.readline, b""):
            log.write(raw.decode("utf-8", "replace"))
    except BaseException:
        process.terminate()  # told to stop: the command goes too (systemd signals the whole unit anyway)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
        raise
    finally:
        process.stdout.close()
    return process.wait()


def commit_of(directory):
    """The commit checked out in directory, or None (not a git work tree, or no git)."""
    if not os.path.exists(os.path.join(directory, ".git")) or shutil.which("git") is None:
        return None
    result = subprocess.run(["git", "-C", directory, "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=False)
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def read_json(path):
    try:
        with open(path, encoding="utf-8") as stream:
            return json.load(stream)
    except (OSError, ValueError):
        return None


def write_json(path, data):
    """Replaces path atomically (a temporary file in the same directory, renamed), mode 0644."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".%s." % os.path.basename(path), dir=directory)
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as output:
            json.dump(data, output, indent=2, sort_keys=True)
            output.write("\n")
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def verdict(rc, summary, limit):
    """(ok, changed, hosts, failed_tasks, message) of the converge step from ansible-playbook's exit status and
    what the callback wrote (None when the playbook never got to its end)."""
    if summary is None:
        return (False, None, {}, [], "ansible-playbook ended with %d before the end of the playbook (a syntax error, a "
                "missing role or collection?); output_tail and the log say why" % rc)
    hosts = summary.get("hosts") or {}
    failed_tasks = summary.get("failed_tasks") or []
    changed = sum(int(stats.get("changed", 0)) for stats in hosts.values())
    bad_hosts = sorted(name for name, stats in hosts.items()
                       if int(stats.get("failures", 0)) or int(stats.get("unreachable", 0)))
    if not hosts:
        return (False, changed, hosts, failed_tasks,
                "the playbook ran on no host: is %s in the repository's inventory, and does the play target it?"
                % limit)
    if bad_hosts or rc != 0:
        names = "; ".join("%s: %s" % (task.get("host"), task.get("task")) for task in failed_tasks)
        return (False, changed, hosts, failed_tasks, "the playbook failed (ansible-playbook exit status %d)%s"
                % (rc, ": " + names if names else ""))
    return True, changed, hosts, failed_tasks, "converged: %d changed" % changed


def ansible_core_version():
    try:
        from importlib import metadata  # pylint: disable=import-outside-toplevel
        return metadata.version("ansible-core")
    except Exception:  # pylint: disable=broad-except
        return None


def run(settings, settings_path, log):
    """One run; returns the exit status."""
    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    lock = Lock(settings["lock_file"])
    if not lock.acquire():
        log.note("another process holds the lock %s (last taken by %s): this run does nothing"
                 % (settings["lock_file"], lock.holder()))
        return EXIT_BUSY
    try:
        return locked_run(settings, settings_path, log)
    except Stopped:  # before the run had its record to write
        return EXIT_FAILED
    finally:
        lock.release()


def locked_run(settings, settings_path, log):
    started = utc_now()
    clock = time.monotonic()
    previous = read_json(settings["record"]) or {}
    record = {"time": iso(started), "source": settings["source"], "url": settings["url"] or None,
              "version": settings["version"] or None, "directory": settings["directory"],
              "playbook": settings["playbook"], "limit": settings["limit"], "commit": None, "ok": False,
              "stage": "source", "rc": None, "changed": None, "hosts": {}, "failed_tasks": [], "message": "",
              "output_tail": [], "ansible_core": ansible_core_version(), "log": settings["log_file"],
              "trigger": "systemd" if os.environ.get("INVOCATION_ID") else "manual",
              "last_ok": previous.get("last_ok")}
    log.note("run started (%s %s, playbook %s, limit %s)" % (
        settings["source"], settings["url"] or settings["directory"], settings["playbook"], settings["limit"]))
    ok = False
    try:
        if settings["source"] == "local" and not os.path.isdir(settings["directory"]):
            record.update(rc=None, message="the copy %s is not there" % settings["directory"])
            log.write(record["message"])
        else:
            cwd = settings["directory"] if settings["source"] == "local" else "/"
            rc = stream(source_argv(settings), child_env(settings, settings_path), cwd, log)
            record["commit"] = commit_of(settings["directory"])
            record["rc"] = rc
            if rc != 0:
                what = "ansible-pull could not update the checkout or" if settings["source"] == "git" else "could not"
                record["message"] = "%s install the repository's collections (exit status %d)" % (what, rc)
            else:
                ok = converge(settings, settings_path, log, record)
    except Stopped as exc:
        ok = False
        record["message"] = ("stopped by %s in the %s step (the unit's TimeoutStartSec, systemctl stop, or Ctrl-C)"
                             % (exc, record["stage"]))
    finally:
        finished = utc_now()
        record.update(ok=ok, finished=iso(finished), duration_s=round(time.monotonic() - clock, 1))
        if ok:
            record["last_ok"] = {"time": record["time"], "commit": record["commit"]}
        else:
            record["output_tail"] = list(log.tail)
        write_json(settings["record"], record)
        log.note("run %s after %.1f s: %s" % ("ok" if ok else "FAILED", record["duration_s"], record["message"]))
    return EXIT_OK if ok else EXIT_FAILED


def converge(settings, settings_path, log, record):
    """The converge step; fills the record and returns whether the node converged."""
    record["stage"] = "converge"
    # in the lock's directory (/run/lock, a tmpfs): a run killed outright leaves nothing behind for long
    handle, result_path = tempfile.mkstemp(prefix="gpufleet-self-converge-result.",
                                           dir=os.path.dirname(settings["lock_file"]))
    os.close(handle)
    os.unlink(result_path)  # the callback writes it at the end of the playbook; absent means it never got there
    try:
        rc = stream(converge_argv(settings), child_env(settings, settings_path, result_path), settings["directory"],
                    log)
        summary = read_json(result_path)
    finally:
        if os.path.exists(result_path):
            os.unlink(result_path)
    ok, changed, hosts, failed_tasks, message = verdict(rc, summary, settings["limit"])
    record.update(rc=rc, changed=changed, hosts=hosts, failed_tasks=failed_tasks, message=message)
    return ok


def requirements_digest(settings):
    """sha256 over the requirements file and every local file or directory entry it names (a tarball replaced under
    the same version must be installed again), or None when there is no requirements file."""
    path = in_directory(settings, settings["requirements"])
    if not settings["requirements"] or not os.path.isfile(path):
        return None
    digest = hashlib.sha256()
    with open(path, "rb") as stream_:
        content = stream_.read()
    digest.update(content)
    for name in local_sources(content.decode("utf-8", "replace")):
        source = in_directory(settings, name)
        digest.update(("\0%s\0" % name).encode("utf-8"))
        if os.path.isfile(source):
            with open(source, "rb") as stream_:
                for block in iter(lambda: stream_.read(1 << 20), b""):
                    digest.update(block)
    return digest.hexdigest()


def local_sources(text):
    """The local paths (a tarball or a directory of the repository) that a requirements file names for its
    collections: entries of type file or dir, or whose name is a path or a tarball."""
    import yaml  # pylint: disable=import-outside-toplevel  # ansible-core's dependency, in the virtualenv

    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    entries = data.get("collections") if isinstance(data, dict) else data
    found = []
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, str):
            entry = {"name": entry}
        if not isinstance(entry, dict):
            continue
        name = str(entry.get("name") or "")
        if entry.get("type") in ("file", "dir", "subdirs") or name.endswith((".tar.gz", ".tgz")) \
                or name.startswith(("./", "../", "/")):
            found.append(name)
    return found


def collections(settings, out):
    """Installs the repository's requirements into the collections directory when they (or the local files they
    name) changed since the last install; prints a JSON line {"changed": bool, "digest": ...} last."""
    digest = requirements_digest(settings)
    marker = os.path.join(settings["collections"], DIGEST_FILE)
    if digest is None:
        if settings["requirements"]:
            out.write("no %s in %s: no collections to install\n" % (settings["requirements"], settings["directory"]))
        out.write(json.dumps({"changed": False, "digest": None}) + "\n")
        return EXIT_OK
    try:
        with open(marker, encoding="utf-8") as stream_:
            installed = stream_.read().strip()
    except OSError:
        installed = ""
    if installed == digest:
        out.write(json.dumps({"changed": False, "digest": digest}) + "\n")
        return EXIT_OK
    os.makedirs(settings["collections"], exist_ok=True)
    argv = [tool(settings, "ansible-galaxy"), "collection", "install", "-r",
            in_directory(settings, settings["requirements"]), "-p", settings["collections"], "--force"]
    out.write("$ %s\n" % " ".join(argv))
    out.flush()
    result = subprocess.run(argv, cwd=settings["directory"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            text=True, check=False)
    out.write(result.stdout)
    if result.returncode != 0:
        out.write("ansible-galaxy failed with exit status %d\n" % result.returncode)
        return EXIT_FAILED
    with open(marker, "w", encoding="utf-8") as stream_:
        stream_.write(digest + "\n")
    out.write(json.dumps({"changed": True, "digest": digest}) + "\n")
    return EXIT_OK


def check(settings, out):
    """What a run needs and lacks (the commands of the virtualenv, git for ansible-pull, the callback plugin, the
    copy kept on the node); prints a JSON object {"ok": bool, "problems": [...]}."""
    problems = []
    for name in ("ansible-pull", "ansible-playbook", "ansible-galaxy"):
        if not os.access(tool(settings, name), os.X_OK):
            problems.append("%s is missing" % tool(settings, name))
    if settings["source"] == "git" and shutil.which("git") is None:
        problems.append("git is missing (ansible-pull checks the repository out with it)")
    for path in (os.path.join(settings["share"], "collections.yml"),
                 os.path.join(settings["share"], "callback", CALLBACK + ".py")):
        if not os.path.isfile(path):
            problems.append("%s is missing" % path)
    if settings["source"] == "local" and not os.path.isdir(settings["directory"]):
        problems.append("the copy %s is not there" % settings["directory"])
    out.write(json.dumps({"ok": not problems, "problems": problems, "ansible_core": ansible_core_version()}) + "\n")
    return EXIT_OK if not problems else EXIT_FAILED


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--settings", default=os.environ.get(SETTINGS_ENV) or DEFAULT_SETTINGS,
                        help="the settings file the role writes (default %(default)s)")
    parser.add_argument("command", nargs="?", default="run", choices=("run", "collections", "status", "check"))
    args = parser.parse_args(argv)
    try:
        settings = load_settings(args.settings)
    except SettingsError as exc:
        sys.stderr.write("gpufleet-self-converge: %s\n" % exc)
        return EXIT_USAGE
    if args.command == "status":
        record = read_json(settings["record"])
        if record is None:
            sys.stderr.write("gpufleet-self-converge: no record yet at %s\n" % settings["record"])
            return EXIT_FAILED
        sys.stdout.write(json.dumps(record, indent=2, sort_keys=True) + "\n")
        return EXIT_OK if record.get("ok") else EXIT_FAILED
    if args.command == "collections":
        return collections(settings, sys.stdout)
    if args.command == "check":
        return check(settings, sys.stdout)
    log = Log(settings["log_file"], settings["log_max_bytes"], settings["log_keep"])
    return run(settings, os.path.abspath(args.settings), log)


if __name__ == "__main__":
    sys.exit(main())
