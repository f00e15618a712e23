#!/usr/bin/env bash
# `make demo`: a local fleet of node containers, playbooks/site.yml against it, and a per-node summary.
#   tools/demo.sh          bring the fleet up (reusing running nodes), converge it, print the summary
#   tools/demo.sh down     remove the fleet's containers
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# Each node and the GPU hardware its nvidia-smi emulator replays (tests/emulator/profiles).
declare -A PROFILE=(
  [gpufleet-demo-hgx]=hgx-a100-8gpu
  [gpufleet-demo-pairs]=pairs-4gpu
  [gpufleet-demo-pcie]=pcie-4gpu
)
NODES=(gpufleet-demo-hgx gpufleet-demo-pairs gpufleet-demo-pcie)
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
    run_node "$node" --label gpufleet-demo=1
    info "$node started"
  done
  mkdir -p "$DEMO"
  local pairs=()
  for node in "${NODES[@]}"; do pairs+=("$node=${PROFILE[$node]}"); done
  emulated_inventory "$INVENTORY" "${pairs[@]}"
  stage "Installing the nvidia-smi emulator on each node (the fleet has no real GPUs)"
  ANSIBLE_INJECT_FACT_VARS=false ansible-playbook -i "$INVENTORY" tools/demo-emulate.yml >"$DEMO/emulate.log" \
    || { tail -20 "$DEMO/emulate.log"; die "emulator install failed"; }
  for node in "${NODES[@]}"; do info "$node: ${PROFILE[$node]}"; done
}

converge() {
  stage "Running playbooks/site.yml against the fleet"
  local start
  start=$(date +%s)
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_FORKS=10 ANSIBLE_PIPELINING=true \
    ansible-playbook -i "$INVENTORY" playbooks/site.yml | tee "$DEMO/site.log" \
    | grep --line-buffered -E '^(PLAY \[|fatal|.*: ok=)' || true
  grep -q 'failed=[1-9]\|unreachable=[1-9]' "$DEMO/site.log" && die "site.yml failed; see $DEMO/site.log"
  info "site.yml finished in $(since "$start") s (full log: $DEMO/site.log)"
}

summary() {
  stage "Per-node summary: baseline and driver"
  ANSIBLE_INJECT_FACT_VARS=false ansible-playbook -i "$INVENTORY" tools/demo-summary.yml \
    | sed -n 's/^ *"msg": "\(.*\)"$/\1/p; s/^    msg: //p'
  stage "Per-node summary: GPUs (playbooks/gpu_facts.yml)"
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_CALLBACK_RESULT_FORMAT=json ansible-playbook -i "$INVENTORY" \
    playbooks/gpu_facts.yml | sed -n 's/^        "\(.*\)",\{0,1\}$/\1/p'
}

case "${1:-all}" in
  down) down ;;
  up) up ;;
  all) up; converge; summary
       info "the fleet keeps running; 'tools/demo.sh down' (or make clean) removes it" ;;
  *) die "usage: tools/demo.sh [all|up|down]" ;;
esac
