# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Running a probe command with a hard timeout, safe to call from several threads at once.

``AnsibleModule.run_command`` has no timeout, and a process stuck on a hung GPU never closes its output:
waiting for it would hang the module. ``run_command`` here kills the process group at the timeout and, if
the process cannot die (uninterruptible sleep in the driver), leaves it behind instead of waiting.
"""

from __future__ import absolute_import, division, print_function

__metaclass__ = type

import os
import signal
import subprocess

# After a kill, how long to wait for the process to go before leaving it behind.
KILL_GRACE_SECONDS = 1


def run_command(argv, timeout):
    """Run argv with the C locale: ``(rc, stdout, stderr, timed_out)``; rc is None when it timed out."""
    env = dict(os.environ, LC_ALL="C", LANG="C")
    try:
        # run_command of AnsibleModule has no timeout (see the docstring): ansible-test 2.21 flags Popen.
        process = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env,  # pylint: disable=ansible-bad-function
                                   start_new_session=True)
    except OSError as exc:
        return 127, "", str(exc), False
    try:
        stdout, stderr = process.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        try:
            os.killpg(process.pid, signal.SIGKILL)
        except OSError:
            pass
        try:
            process.communicate(timeout=KILL_GRACE_SECONDS)
        except subprocess.TimeoutExpired:
            pass
        return None, "", "", True
    return process.returncode, stdout.decode("utf-8", "replace"), stderr.decode("utf-8", "replace"), False
