# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The child process that isolates the NVML calls: a GPU or driver call that hangs cannot take the caller with it.

``run(timeout, library)`` forks; the child runs ``nvml_bindings.collect`` and sends its result back as one JSON line
over a pipe, writing each call it makes into memory shared with the parent, so that a child killed at the timeout
(SIGKILL) or crashed inside the library can still say where it stopped. The caller never loads the library itself.
Standard library only, Python 3.8 or newer.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import faulthandler
import json
import mmap
import os
import select
import signal
import time

from ansible_collections.gpufleet.node.plugins.module_utils.nvml_bindings import collect


def _write_all(fd, data):
    while data:
        written = os.write(fd, data)
        data = data[written:]


_LAST_CALL_SIZE = 256


def _child(write_fd, library, last_call):
    """Runs in the forked child: the gather, then the result as one JSON line. Never returns.

    The call in progress goes to last_call (memory shared with the parent, no system call per NVML call), so
    that a killed or crashed gather can say where it stopped.
    """
    status = 0
    try:
        # A crash inside the library ends the child alone; a Python stack dump of the parent's frames would
        # only be noise on the caller's stderr.
        faulthandler.disable()

        def progress(name):
            data = name.encode("ascii", "replace")[:_LAST_CALL_SIZE - 1]
            last_call[0:len(data) + 1] = data + b"\0"
        result = collect(library, progress)
        _write_all(write_fd, ("R " + json.dumps(result, sort_keys=True) + "\n").encode("utf-8"))
    except BaseException as exc:  # pylint: disable=broad-except
        try:
            message = "NVML gather failed in the child: %s: %s" % (type(exc).__name__, " ".join(str(exc).split()))
            _write_all(write_fd, ("E " + json.dumps(message) + "\n").encode("utf-8"))
        except BaseException:  # pylint: disable=broad-except
            pass
        status = 1
    finally:
        os._exit(status)  # pylint: disable=protected-access


def _empty(state, message):
    return {
        "state": state, "message": message, "nvml_return": None, "driver_version": None,
        "cuda_driver_version": None, "nvml_version": None, "count": None, "devices": [], "lost": [],
        "topology": None, "utilization": {}, "missing": [], "absent": [], "errors": [],
        "timings": {"init": None, "gather": None},
    }


def _reap(pid, grace):
    """Wait for pid up to grace seconds; True when it was reaped."""
    deadline = time.monotonic() + grace
    while True:
        try:
            done, _status = os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return True
        if done:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.01)


def run(timeout, library):
    """``collect(library)`` of nvml_bindings in a forked child killed after timeout seconds: its result, else a
    result with the state "timeout" or "error" and a message naming the call in progress (``nvml.gather``
    documents the dict)."""
    started = time.monotonic()
    read_fd, write_fd = os.pipe()
    last_call = mmap.mmap(-1, _LAST_CALL_SIZE)  # anonymous and shared: the child's writes are seen here
    try:
        pid = os.fork()
    except OSError as exc:
        os.close(read_fd)
        os.close(write_fd)
        last_call.close()
        return _empty("error", "cannot fork for the NVML gather: %s" % exc)
    if pid == 0:  # pragma: no cover - the child leaves through os._exit
        os.close(read_fd)
        _child(write_fd, library, last_call)
    os.close(write_fd)
    chunks = []
    timed_out = False
    deadline = started + timeout
    reaped = False
    try:
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                timed_out = True
                break
            ready, _writable, _errors = select.select([read_fd], [], [], remaining)
            if not ready:
                continue
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
        if timed_out:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _reap(pid, 0.5)
        else:
            _reap(pid, 1.0)
        reaped = True
    finally:
        os.close(read_fd)
        if not reaped:
            # Interrupted (a signal, an exception while reading): never leave the child hung in the driver.
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
            _reap(pid, 0.5)
    called = last_call[:].split(b"\0", 1)[0].decode("ascii", "replace") or None
    last_call.close()
    result = _read_result(b"".join(chunks), timed_out, timeout, called)
    result["timings"]["total"] = round(time.monotonic() - started, 6)
    return result


def _read_result(data, timed_out, timeout, last_call=None):
    """The child's result from what it wrote; last_call is the call in progress it left in shared memory."""
    for line in data.decode("utf-8", "replace").splitlines():
        kind, _separator, rest = line.partition(" ")
        if kind == "R" and not timed_out:
            try:
                return json.loads(rest)
            except ValueError:
                break
        elif kind == "E" and not timed_out:
            try:
                return _empty("error", json.loads(rest))
            except ValueError:
                break
    if timed_out:
        return _empty("timeout", "NVML did not answer within %ss%s; the gather was killed" % (
            timeout, " (last call: %s)" % last_call if last_call else ""))
    return _empty("error", "the NVML gather ended without a result%s" % (
        " (last call: %s)" % last_call if last_call else ""))
