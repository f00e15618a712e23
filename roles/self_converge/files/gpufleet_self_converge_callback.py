"""Callback plugin of gpufleet.node.self_converge: what each host did in a converge run, as JSON.

Installed on the node as share/callback/gpufleet_self_converge.py and enabled by gpufleet-self-converge for the
converge step only (ANSIBLE_CALLBACK_PLUGINS, ANSIBLE_CALLBACKS_ENABLED). At the end of the playbook it writes the
file named by GPUFLEET_SELF_CONVERGE_RESULT: the playbook, each host's counts (ok, changed, failures, unreachable,
skipped, rescued, ignored) and the failures that ended a host's run (task, message). A playbook that never gets to
its end (a syntax error, a missing role) writes nothing, which the runner reports as such.
"""
import json
import os

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
    name: gpufleet_self_converge
    type: aggregate
    short_description: Writes what each host did in a run as JSON (gpufleet.node.self_converge)
    description:
      - At the end of the playbook, writes the hosts' counts and the failed tasks to the file named by the
        environment variable GPUFLEET_SELF_CONVERGE_RESULT.
    requirements:
      - enabled in ANSIBLE_CALLBACKS_ENABLED, with GPUFLEET_SELF_CONVERGE_RESULT set
"""

RESULT_ENV = "GPUFLEET_SELF_CONVERGE_RESULT"
MESSAGE_CHARS = 1000


def message_of(result):
    """The message of a failed or unreachable task result, shortened."""
    for key in ("msg", "stderr", "reason"):
        value = result.get(key)
        if value:
            text = str(value).strip()
            return text if len(text) <= MESSAGE_CHARS else text[:MESSAGE_CHARS] + "..."
    return ""


class CallbackModule(CallbackBase):
    """Collects the failures and the stats of a playbook run and writes them at its end."""

    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "gpufleet_self_converge"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._playbook = None
        self._failures = {}
        self._unreachable = {}

    def v2_playbook_on_start(self, playbook):
        self._playbook = os.path.basename(getattr(playbook, "_file_name", "") or "") or None

    def _entry(self, result):
        return {"host": result.host.get_name(), "task": result.task_name or result.task.get_name(),
                "message": message_of(result.result)}

    def v2_runner_on_failed(self, result, ignore_errors=False):
        if not ignore_errors:
            self._failures.setdefault(result.host.get_name(), []).append(self._entry(result))

    def v2_runner_on_unreachable(self, result):
        self._unreachable.setdefault(result.host.get_name(), []).append(self._entry(result))

    def v2_playbook_on_stats(self, stats):
        path = os.environ.get(RESULT_ENV)
        if not path:
            return
        hosts = {}
        failed_tasks = []
        for host in sorted(stats.processed):
            counts = stats.summarize(host)
            hosts[host] = {key: int(value) for key, value in counts.items()}
            # A failure a rescue handled is not one of the host's failures at the end: keep the last ones only, as
            # many as the stats count (a host stops at its first unhandled failure).
            failures = counts.get("failures", 0)
            if failures:
                failed_tasks.extend(self._failures.get(host, [])[-failures:])
            unreachable = counts.get("unreachable", 0)
            if unreachable:
                failed_tasks.extend(self._unreachable.get(host, [])[-unreachable:])
        with open(path, "w", encoding="utf-8") as stream:
            json.dump({"playbook": self._playbook, "hosts": hosts, "failed_tasks": failed_tasks}, stream, indent=2)
