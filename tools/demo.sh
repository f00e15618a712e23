#!/usr/bin/env bash
# `make demo`: a local fleet of node containers, playbooks/site.yml against it, a per-node summary, then
# playbooks/validate.yml (with the DDP smoke test across the nodes) and the fleet report (playbooks/report.yml).
#   tools/demo.sh          build the node image of NODE_OS if needed, bring the fleet up (reusing running nodes),
#                          converge it, print the summary, validate, report
#   tools/demo.sh summary  print the per-node summary of the running fleet again
#   tools/demo.sh down     remove the fleet's containers
# The rest of the bench the demo needs (venv, collections, dockerd, mirror, wheelhouse, fake-nvml) is the list of
# prerequisites of the Makefile's demo rule; the demo builds only the node image it runs, here.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
# The demo fleet runs Ubuntu 22.04, the OS of the how-to articles this collection replaces.
export NODE_OS=${NODE_OS:-ubuntu2204}

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
  rm_node "${NODES[@]}"
}

up() {
  # Only the image the fleet runs (cached: rebuilt when its inputs change), not every OS of the bench, and the
  # snapshot of that OS's real packages, served from here while the demo runs (tools/snapshot.sh).
  "$ROOT/tools/node-image.sh" "$NODE_OS"
  "$ROOT/tools/snapshot.sh" "$NODE_OS" | grep -v '^    \(debian\|ubuntu\) ' || true
  serve_snapshot
  trap stop_snapshot EXIT
  info "distribution packages: the snapshot on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT (manifest $GPUFLEET_SNAPSHOT_DIR/manifest.tsv)"
  stage "Bringing up the demo fleet: ${NODES[*]} (systemd containers of $IMAGE_REPO:$NODE_OS)"
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
  [[ -s "$INVENTORY" ]] || die "no demo fleet: run tools/demo.sh (or make demo) first"
  stage "Per-node summary (by inventory name): baseline, driver, gpu-node-check, GPU metrics"
  # The lines of the summary's one printed msg, a JSON list: one item a line, its quotes unescaped.
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_CALLBACK_RESULT_FORMAT=json ansible-playbook -i "$INVENTORY" \
    tools/demo-summary.yml >"$DEMO/summary.log" \
    || { tail -20 "$DEMO/summary.log"; die "summary failed; see $DEMO/summary.log"; }
  sed -n 's/^        "\(.*\)",\{0,1\}$/\1/p' "$DEMO/summary.log" | sed 's/\\"/"/g; s/\\\\/\\/g'
  stage "Per-node summary: GPUs (playbooks/gpu_facts.yml)"
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_CALLBACK_RESULT_FORMAT=json ansible-playbook -i "$INVENTORY" \
    playbooks/gpu_facts.yml | sed -n 's/^        "\(.*\)",\{0,1\}$/\1/p'
}

validate() {
  stage "Validating the fleet (playbooks/validate.yml: versions, health gates of docs/health-gates.md, DDP)"
  ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_CALLBACK_RESULT_FORMAT=json ansible-playbook -i "$INVENTORY" \
    playbooks/validate.yml -e gpufleet_ddp_rdzv_host=127.0.0.1 -e gpufleet_ddp_local_addr=127.0.0.1 -e gpufleet_ddp_port=29481 >"$DEMO/validate.log" \
    || { tail -40 "$DEMO/validate.log"; die "validation failed; see $DEMO/validate.log"; }
  sed -n '/Show the failing nodes/,/^$/s/^ *"\(.*\)",\{0,1\}$/\1/p' "$DEMO/validate.log" | grep -v '^msg' | sed 's/^/    /'
  grep -o '"[^"]*ranks on [0-9]* node(s)[^"]*"' "$DEMO/validate.log" | head -1 | sed 's/^/    DDP smoke test: /'
  stage "Writing the fleet report (playbooks/report.yml)"
  ANSIBLE_INJECT_FACT_VARS=false ansible-playbook -i "$INVENTORY" playbooks/report.yml \
    -e gpufleet_report_dir="$ROOT/gpufleet-report" >"$DEMO/report.log" \
    || { tail -20 "$DEMO/report.log"; die "report failed; see $DEMO/report.log"; }
  info "Open $ROOT/gpufleet-report/fleet-report.html in a browser (data: fleet-report.json)"
}

case "${1:-all}" in
  down) down ;;
  up) up ;;
  summary) summary ;;
  all) up; converge; summary; validate
       info "the fleet keeps running; 'tools/demo.sh down' (or make clean) removes it" ;;
  *) die "usage: tools/demo.sh [all|up|summary|down]" ;;
esac
