#!/usr/bin/env bash
# `make demo`: a local fleet of node containers, playbooks/site.yml against it, and a per-node summary.
#   tools/demo.sh          bring the fleet up (reusing running nodes), converge it, print the summary
#   tools/demo.sh down     remove the fleet's containers
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# name:profile of each node (the profile picks the emulated GPU hardware, see tests/emulator).
NODES=(gpufleet-demo-1 gpufleet-demo-2 gpufleet-demo-3)
DEMO="$CACHE/demo"
INVENTORY="$DEMO/inventory.yml"

down() {
  stage "Removing the demo fleet"
  docker rm -f "${NODES[@]}" >/dev/null 2>&1 || true
}

up() {
  stage "Bringing up the demo fleet: ${NODES[*]} (systemd containers of $IMAGE_TAG_STABLE)"
  local node
  for node in "${NODES[@]}"; do
    if [[ "$(docker inspect -f '{{.State.Running}}' "$node" 2>/dev/null)" == true ]]; then
      info "$node is already running"
      continue
    fi
    docker rm -f "$node" >/dev/null 2>&1 || true
    docker run -d --name "$node" --network host --cgroupns host -v /sys/fs/cgroup:/sys/fs/cgroup:ro \
      --tmpfs /run --tmpfs /run/lock --tmpfs /tmp --label gpufleet-demo=1 "$IMAGE_TAG_STABLE" >/dev/null
    info "$node started"
  done
  mkdir -p "$DEMO"
  {
    echo "gpu_nodes:"
    echo "  vars:"
    echo "    ansible_connection: community.docker.docker"
    echo "    ansible_python_interpreter: /usr/bin/python3"
    echo "  hosts:"
    for node in "${NODES[@]}"; do echo "    $node:"; done
  } >"$INVENTORY"
}

converge() {
  stage "Running playbooks/site.yml against the fleet"
  local start
  start=$(date +%s)
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_FORKS=10 ANSIBLE_PIPELINING=true \
    ansible-playbook -i "$INVENTORY" playbooks/site.yml | tee "$DEMO/site.log" | grep -E '^(PLAY|TASK|ok:|changed:|fatal:)|recap|: ok=' \
    | grep -E '^(PLAY \[|fatal|.*: ok=)' || true
  grep -q 'failed=[1-9]\|unreachable=[1-9]' "$DEMO/site.log" && die "site.yml failed; see $DEMO/site.log"
  info "site.yml finished in $(since "$start") s (full log: $DEMO/site.log)"
}

summary() {
  stage "Per-node summary"
  ANSIBLE_INJECT_FACT_VARS=false ansible-playbook -i "$INVENTORY" tools/demo-summary.yml \
    | sed -n 's/^ *"msg": "\(.*\)"$/\1/p; s/^    msg: //p'
}

case "${1:-all}" in
  down) down ;;
  up) up ;;
  all) up; converge; summary
       info "the fleet keeps running; 'tools/demo.sh down' (or make clean) removes it" ;;
  *) die "usage: tools/demo.sh [all|up|down]" ;;
esac
