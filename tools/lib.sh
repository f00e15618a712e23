# shellcheck shell=bash
# Shared helpers for the test-bench scripts in tools/. Sourced, never run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
CACHE="${GPUFLEET_CACHE:-$ROOT/.cache}"
VENV="$ROOT/.venv"
# Where the image inputs and the built root filesystem are cached across clones of the project.
IMAGE_CACHE="${GPUFLEET_IMAGE_CACHE:-/var/cache/gpufleet-node}"
IMAGE_REPO="gpufleet-node"
# The node images (tools/node-image.sh), one per OS a node can run: gpufleet-node:<os>. debian12 is the default
# (also tagged gpufleet-node:bookworm, its earlier name).
NODE_OS_CHOICES=(debian12 ubuntu2004 ubuntu2204 ubuntu2404)
IMAGE_TAG_STABLE="$IMAGE_REPO:debian12"
export ROOT CACHE VENV IMAGE_CACHE IMAGE_REPO IMAGE_TAG_STABLE

# Ansible keeps its files in the project cache, not in /root.
export ANSIBLE_HOME="$CACHE/ansible-home"
export ANSIBLE_LOCAL_TMP="$CACHE/ansible-tmp"
# Third-party collections (tools/collections.sh) and this checkout, linked in as gpufleet.node.
export GPUFLEET_DEPS_PATH="$CACHE/collections"
export GPUFLEET_SELF_PATH="$CACHE/self"
export ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_SELF_PATH:$GPUFLEET_DEPS_PATH"
export ANSIBLE_FORCE_COLOR="${ANSIBLE_FORCE_COLOR:-0}"
export MOLECULE_NO_LOG="${MOLECULE_NO_LOG:-false}"
export PATH="$VENV/bin:$PATH"
# The stand-in apt mirror (tools/mirror.sh), bound into the Molecule nodes.
export GPUFLEET_MIRROR_DIR="$CACHE/mirror"
export GPUFLEET_WHEELHOUSE="$CACHE/wheelhouse"
# The frozen snapshot of the real distribution packages (tools/snapshot.sh), served on
# 127.0.0.1 by serve_snapshot below.
export GPUFLEET_SNAPSHOT_DIR="$CACHE/snapshot"
# The fake libnvidia-ml.so.1 of the emulated GPUs (tools/fake-nvml.sh), copied onto test nodes by tests/emulator/install.yml.
export GPUFLEET_FAKE_NVML="$CACHE/fake-nvml/libnvidia-ml.so.1"

# pip without the machine's noise about index locations that are absent.
pip_quiet() { "$VENV/bin/pip" "$@" 2> >(grep -v "is ignored: it is neither a file nor a directory" >&2); }

# Starts a node container: run_node [--os OS] [--tmp-exec] NAME [docker run options]. OS (or env NODE_OS; default debian12) is
# one of NODE_OS_CHOICES and picks the image gpufleet-node:OS (tools/node-image.sh OS builds it). systemd as PID 1
# with default capabilities (no --privileged), host network and cgroup namespace, the cgroup tree read-only, tmpfs
# on /run, /run/lock and /tmp, the stand-in mirror and the wheelhouse bound read-only, and a fresh host directory
# of its own, $CACHE/pci/NAME, bound read-write at /sys/bus/pci/devices for the emulated PCI devices
# (tests/emulator). The same containers as Molecule's (extensions/molecule/create.yml).
run_node() {
  local os=${NODE_OS:-debian12} tmp=/tmp
  if [[ ${1:-} == --os ]]; then os=${2:?run_node --os needs an OS}; shift 2; fi
  if [[ ${1:-} == --tmp-exec ]]; then tmp=/tmp:exec; shift; fi   # ansible-test runs programs from /tmp
  [[ " ${NODE_OS_CHOICES[*]} " == *" $os "* ]] || die "run_node: unknown node OS '$os'; choose one of ${NODE_OS_CHOICES[*]}"
  docker image inspect "$IMAGE_REPO:$os" >/dev/null 2>&1 \
    || die "run_node: no image $IMAGE_REPO:$os; build it with tools/node-image.sh $os"
  local name=${1:?run_node needs a container name}; shift
  local pci="$CACHE/pci/$name"
  rm -rf "$pci" && mkdir -p "$pci"
  docker run -d --name "$name" --network host --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:ro \
    --tmpfs /run --tmpfs /run/lock --tmpfs "$tmp" -v "$GPUFLEET_MIRROR_DIR:/srv/gpufleet-mirror:ro" \
    -v "$GPUFLEET_WHEELHOUSE:/srv/gpufleet-wheels:ro" -v "$pci:/sys/bus/pci/devices" \
    "$@" "$IMAGE_REPO:$os" >/dev/null
}

# Removes node containers started by run_node, and their PCI directories: rm_node NAME...
rm_node() {
  local name
  for name in "$@"; do
    docker rm -f "$name" >/dev/null 2>&1 || true
    rm -rf "${CACHE:?}/pci/$name"
  done
}

# Writes an inventory of emulated node containers: emulated_inventory FILE NODE=PROFILE... . The driver, CUDA
# and NCCL come from NVIDIA's repository as an air-gapped fleet gets them, from a mirror: here the stand-in
# mirror of tests/mirror, served on 127.0.0.1 by tools/demo-emulate.yml (tests/mirror/serve.yml); the
# distribution's packages from the snapshot of its archive (tools/snapshot.sh, served by serve_snapshot); torch
# from the offline wheelhouse. Each node's emulated PCI tree is at its own /sys/bus/pci/devices (run_node). The nodes run
# NODE_OS (default debian12), which decides the repository path and what it offers: ubuntu2204 has CUDA 12.1 (the
# product's target); debian12 starts at 12.3, so there the newest release, 12.4, which the emulated 535 drivers
# (CUDA 12.2) run by minor-version compatibility. The wheelhouse's torch is built for Python 3.11: Ubuntu 22.04
# nodes use its python3.11 (tools/demo-emulate.yml installs it from the archive). Every node serves GPU metrics
# (gpufleet_monitoring), each on its own loopback port from 19101 on, since the containers share the host's network.
emulated_inventory() {
  local file=$1 pair os=${NODE_OS:-debian12} cuda port=19101; shift
  case $os in
    debian12) cuda=12.4 ;;
    ubuntu2204) cuda=12.1 ;;
    *) die "emulated_inventory: the stand-in mirror has no path for $os (debian12, ubuntu2204)" ;;
  esac
  {
    echo "gpu_nodes:"
    echo "  vars:"
    echo "    ansible_connection: community.docker.docker_api   # the Docker SDK, no docker CLI process per task"
    echo "    ansible_python_interpreter: /usr/bin/python3"
    echo "    nvidia_driver_source: cuda_repo"
    echo "    nvidia_repo_url: http://127.0.0.1:18535/cuda"
    echo "    nvidia_repo_key_url: http://127.0.0.1:18535/cuda/$os/x86_64/gpufleet-test.pub"
    echo "    nvidia_repo_key_fingerprint: $(cat "$GPUFLEET_MIRROR_DIR/fingerprint")"
    echo "    gpufleet_os_mirror_url: http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/{{ ansible_facts['distribution'] | lower }}"
    echo "    gpufleet_os_mirror_key_url: http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/gpufleet-snapshot.pub"
    echo "    gpufleet_os_mirror_key_fingerprint: $(cat "$GPUFLEET_SNAPSHOT_DIR/fingerprint")"
    echo "    cuda_version: '$cuda'"
    # The driver: the role's default branch (580), which both paths of the stand-in mirror serve.
    echo "    pytorch_version: '2.13.0'        # the CPU build in the wheelhouse (tools/wheelhouse.sh)"
    [[ $os == debian12 ]] || echo "    pytorch_python: /usr/bin/python3.11"
    echo "    pytorch_cuda_version: ''"
    echo "    pytorch_torchvision_version: ''"
    echo "    pytorch_no_index: true"
    echo "    pytorch_find_links: [/srv/gpufleet-wheels]"
    echo "    pytorch_check_socket_ifname: lo"
    echo "    gpufleet_monitoring: true"
    echo "  hosts:"
    for pair in "$@"; do
      echo "    ${pair%%=*}: {emulator_profile: ${pair#*=}, gpu_monitoring_listen_address: '127.0.0.1:$port'}"
      port=$((port + 1))
    done
  } >"$file"
}

# Serves the snapshot of the real distribution packages (tools/snapshot.sh) on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT
# from this machine (the nodes share its network) while the calling script runs, and exports what the roles'
# mirror variables need (extensions/molecule/config.yml, emulated_inventory): the port and the snapshot key's
# fingerprint. A server already answering there is used as it is. serve_snapshot --detached leaves the server
# running after the script ends (tools/serve-snapshot.sh, for `molecule test` as typed) and says "started".
export GPUFLEET_SNAPSHOT_PORT=${GPUFLEET_SNAPSHOT_PORT:-19535}
SNAPSHOT_SERVER_PIDFILE="$CACHE/snapshot-server.pid"
serve_snapshot() {
  [[ -s "$GPUFLEET_SNAPSHOT_DIR/fingerprint" ]] || die "no snapshot in $GPUFLEET_SNAPSHOT_DIR; build it with tools/snapshot.sh"
  GPUFLEET_SNAPSHOT_FINGERPRINT=$(cat "$GPUFLEET_SNAPSHOT_DIR/fingerprint")
  export GPUFLEET_SNAPSHOT_FINGERPRINT
  local served
  if served=$(snapshot_fingerprint_served); then
    [[ "$served" == "$GPUFLEET_SNAPSHOT_FINGERPRINT" ]] \
      || die "127.0.0.1:$GPUFLEET_SNAPSHOT_PORT serves another snapshot; stop that server or set GPUFLEET_SNAPSHOT_PORT"
    return
  fi
  if [[ ${1:-} == --detached ]]; then
    setsid python3 -m http.server --bind 127.0.0.1 --directory "$GPUFLEET_SNAPSHOT_DIR" "$GPUFLEET_SNAPSHOT_PORT" \
      </dev/null >"$CACHE/snapshot-server.log" 2>&1 &
    echo $! >"$SNAPSHOT_SERVER_PIDFILE"
  else
    python3 -m http.server --bind 127.0.0.1 --directory "$GPUFLEET_SNAPSHOT_DIR" "$GPUFLEET_SNAPSHOT_PORT" \
      >"$CACHE/snapshot-server.log" 2>&1 &
    SNAPSHOT_SERVER_PID=$!
  fi
  local _try
  for _try in $(seq 50); do
    if snapshot_fingerprint_served >/dev/null; then
      [[ ${1:-} != --detached ]] || echo "started: the snapshot on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT (pid $(cat "$SNAPSHOT_SERVER_PIDFILE"))"
      return
    fi
    sleep 0.1
  done
  die "the snapshot server did not answer on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT (log: $CACHE/snapshot-server.log)"
}
# The fingerprint the server on the snapshot port serves (fails when none answers).
snapshot_fingerprint_served() {
  python3 -c 'import sys, urllib.request; print(urllib.request.urlopen(sys.argv[1], timeout=2).read().decode().strip())' \
    "http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/fingerprint" 2>/dev/null
}
# Stops the server serve_snapshot started (none if it found one running); --detached: the one left running.
stop_snapshot() {
  if [[ ${1:-} == --detached ]]; then
    [[ ! -f $SNAPSHOT_SERVER_PIDFILE ]] || kill "$(cat "$SNAPSHOT_SERVER_PIDFILE")" 2>/dev/null || true
    rm -f "$SNAPSHOT_SERVER_PIDFILE"
  else
    [[ -z "${SNAPSHOT_SERVER_PID:-}" ]] || kill "$SNAPSHOT_SERVER_PID" 2>/dev/null || true
  fi
}

stage() { printf '\n==> %s\n' "$*"; }
info() { printf '    %s\n' "$*"; }
die() { printf 'ERROR: %s\n' "$*" >&2; exit 1; }

# Seconds since the given epoch second, for stage timings.
since() { echo $(( $(date +%s) - $1 )); }

# Hash of the given files' contents (and names), for cache keys.
hash_files() { (for f in "$@"; do printf '%s\n' "$f"; cat "$f"; done) | sha256sum | cut -c1-12; }
