#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: gpufleet.node contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import absolute_import, division, print_function

__metaclass__ = type

DOCUMENTATION = r"""
---
module: container_engine_state
short_description: Whether a container engine runs, and what its running daemon has loaded
version_added: "0.2.0"
description:
  - Reads a container engine's systemd unit and, while the unit is active, the evidence of what the running daemon
    has loaded, so a caller can tell whether a configuration file it wrote is in effect or needs a restart (Docker, a
    reload).
  - The unit is read with C(systemctl show UNIT --property=ActiveState,CanReload,KillMode,ActiveEnterTimestamp), run
    with the C locale and C(TZ=UTC) (systemd prints timestamps in the caller's time zone).
  - Docker, while active, is asked C(docker info --format '{{json .}}'); its C(Runtimes) and C(DefaultRuntime) are
    what the running dockerd has loaded (Docker Engine API, C(GET /info)). A C(docker info) that fails, times out,
    or answers with C(ServerErrors) and no runtimes (the 20.10 client exits 0 when the daemon cannot be reached) is
    reported in RV(unknown).
  - containerd, while active, gives the second its unit last became active (C(ActiveEnterTimestamp)) and the
    modification time of its configuration file O(config), both in whole seconds; a file changed after that second
    has not been loaded.
  - Reads only. It runs the same in check mode and never reports a change. A missing C(systemctl) or C(docker), a
    host not booted with systemd or an unreachable daemon are states it reports, not failures.
author:
  - gpufleet.node maintainers (@gpufleet)
options:
  engine:
    description:
      - The container engine, C(docker) or C(containerd). It decides the evidence read while the unit is active.
    type: str
    required: true
    choices: [docker, containerd]
  unit:
    description:
      - The engine's systemd unit. C(docker.service) for Docker and C(containerd.service) for containerd when not
        given.
    type: str
  config:
    description:
      - The engine's configuration file, whose modification time is compared with the second containerd became
        active. Required with O(engine=containerd); not read for Docker, whose C(docker info) shows what it loaded.
    type: path
  timeout:
    description:
      - Seconds C(docker info) may take before it is killed and the state is reported as unknown.
    type: int
    default: 30
extends_documentation_fragment: []
attributes:
  check_mode:
    support: full
    description: The module only reads; it answers the same in check mode.
  diff_mode:
    support: none
    description: Nothing changes, so there is no diff.
  platform:
    support: full
    platforms: posix
    description: Hosts whose engines are systemd units.
requirements:
  - systemd's C(systemctl) on the managed node
  - the C(docker) command line client for O(engine=docker)
notes:
  - The state of a unit systemd does not know is C(inactive), as C(systemctl show) prints it.
  - Only C(active) counts as running; while it is C(activating), C(reloading) or C(failed) no daemon evidence is read.
seealso:
  - name: systemd.unit(5) and org.freedesktop.systemd1(5)
    description: The unit properties ActiveState, CanReload, KillMode and ActiveEnterTimestamp that systemctl show prints.
    link: https://www.freedesktop.org/software/systemd/man/latest/org.freedesktop.systemd1.html
  - name: Docker Engine API, System information (GET /info)
    description: The SystemInfo object whose Runtimes and DefaultRuntime docker info prints.
    link: https://docs.docker.com/reference/api/engine/
"""

EXAMPLES = r"""
- name: Read whether Docker runs and which runtimes it has loaded
  gpufleet.node.container_engine_state:
    engine: docker
  register: docker_state

- name: Say whether the running dockerd knows the nvidia runtime
  ansible.builtin.debug:
    msg: >-
      {{ 'nvidia is loaded' if 'nvidia' in docker_state.runtimes | default([], true)
         else 'not loaded: ' ~ (docker_state.unknown or 'runtimes ' ~ docker_state.runtimes | join(', ')) }}
  when: docker_state.state == 'active'

- name: Read containerd's unit and the mtime of its file
  gpufleet.node.container_engine_state:
    engine: containerd
    unit: containerd.service
    config: /etc/containerd/config.toml
  register: containerd_state

- name: Restart containerd when its file changed after it started
  ansible.builtin.systemd_service:
    name: containerd.service
    state: restarted
  when:
    - containerd_state.state == 'active'
    - containerd_state.unknown is not none or containerd_state.config_mtime > containerd_state.started
"""

RETURN = r"""
engine:
  description: The engine read, as given.
  returned: always
  type: str
  sample: docker
unit:
  description: The systemd unit read.
  returned: always
  type: str
  sample: docker.service
state:
  description:
    - The unit's ActiveState (C(active), C(inactive), C(failed), C(activating), C(deactivating), C(reloading)), or
      C(unknown) when systemctl could not be asked (not installed, or the host not booted with systemd).
  returned: always
  type: str
  sample: active
can_reload:
  description: Whether the unit can be reloaded (systemd's CanReload, an ExecReload= in the unit).
  returned: always
  type: bool
  sample: true
kill_mode:
  description:
    - How stopping the unit ends its processes (KillMode); C(process) stops the main process only, so a containerd
      stopped that way leaves its shims and containers running. Null when systemctl could not be asked.
  returned: always
  type: str
  sample: control-group
runtimes:
  description: The names of the runtimes the running dockerd has loaded, sorted; null unless O(engine=docker), the
    unit is active and C(docker info) answered with them.
  returned: always
  type: list
  elements: str
  sample: ["io.containerd.runc.v2", "nvidia", "runc"]
default_runtime:
  description: The running dockerd's default runtime; null where RV(runtimes) is null.
  returned: always
  type: str
  sample: runc
started:
  description: With O(engine=containerd) and the unit active, the epoch second it last became active
    (ActiveEnterTimestamp); null otherwise, or where systemd printed none.
  returned: always
  type: int
  sample: 1796653659
config_mtime:
  description: With O(engine=containerd) and the unit active, the modification time of O(config) in whole epoch
    seconds, 0 when the file does not exist; null otherwise, and where it cannot be read (RV(unknown) says why).
  returned: always
  type: int
  sample: 1796653702
unknown:
  description:
    - Null when the evidence could be read. Otherwise why not, in a sentence; the engine's state is then unknown and
      a caller counts its file as not loaded. With an active unit, Docker's C(docker info) failing, timing out, or
      answering without the daemon's runtimes; containerd's ActiveEnterTimestamp missing, or its file's modification
      time unreadable. With C(state=unknown), why
      systemctl could not be asked.
  returned: always
  type: str
  sample: "docker info failed: Cannot connect to the Docker daemon at unix:///var/run/docker.sock. Is the docker
    daemon running?"
"""

import os

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpufleet.node.plugins.module_utils.container_engine import (
    DOCKER_INFO_FORMAT,
    UNIT_PROPERTIES,
    containerd_loaded,
    docker_loaded,
    unit_state,
)
from ansible_collections.gpufleet.node.plugins.module_utils.process import run_command as run_with_timeout

DEFAULT_UNITS = {"docker": "docker.service", "containerd": "containerd.service"}
# Where docker is looked for besides PATH (get_bin_path adds the sbin directories).
DOCKER_DIRS = ["/usr/local/bin", "/usr/bin", "/bin"]


def read_unit(module, unit):
    """unit_state() of systemctl show, run with the C locale and UTC timestamps."""
    systemctl = module.get_bin_path("systemctl")
    if not systemctl:
        return {"state": "unknown", "can_reload": False, "kill_mode": None, "started": None,
                "unknown": "systemctl is not installed: the unit's state cannot be read"}
    argv = [systemctl, "show", unit, "--property=" + ",".join(UNIT_PROPERTIES)]
    rc, stdout, stderr = module.run_command(argv, environ_update={"LC_ALL": "C", "TZ": "UTC"})
    return unit_state(rc, stdout, stderr)


def read_docker(module, timeout):
    """docker_loaded() of docker info, killed after ``timeout`` seconds."""
    docker = module.get_bin_path("docker", opt_dirs=DOCKER_DIRS)
    if not docker:
        return {"runtimes": None, "default_runtime": None,
                "unknown": "docker info failed: the docker command is not installed"}
    rc, stdout, stderr, timed_out = run_with_timeout([docker, "info", "--format", DOCKER_INFO_FORMAT], timeout)
    return docker_loaded(rc, stdout, stderr, timed_out=timed_out, timeout=timeout)


def config_mtime(path):
    """The file's mtime in whole seconds (stat's %Y), 0 when there is no file."""
    try:
        return int(os.stat(path).st_mtime)
    except FileNotFoundError:
        return 0


def main():
    module = AnsibleModule(
        argument_spec=dict(
            engine=dict(type="str", required=True, choices=["docker", "containerd"]),
            unit=dict(type="str"),
            config=dict(type="path"),
            timeout=dict(type="int", default=30),
        ),
        required_if=[("engine", "containerd", ("config",))],
        supports_check_mode=True,
    )
    engine = module.params["engine"]
    unit = module.params["unit"] or DEFAULT_UNITS[engine]
    if module.params["timeout"] < 1:
        module.fail_json(msg="timeout must be at least 1 second, got %d" % module.params["timeout"])

    state = read_unit(module, unit)
    result = dict(changed=False, engine=engine, unit=unit, state=state["state"], can_reload=state["can_reload"],
                  kill_mode=state["kill_mode"], runtimes=None, default_runtime=None, started=None,
                  config_mtime=None, unknown=state["unknown"])
    if state["state"] == "active":
        if engine == "docker":
            result.update(read_docker(module, module.params["timeout"]))
        else:
            try:
                result.update(containerd_loaded(state, config_mtime(module.params["config"])))
            except OSError as exc:
                result.update(started=state["started"],
                              unknown="the modification time of %s cannot be read: %s" % (module.params["config"], exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()
