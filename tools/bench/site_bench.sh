#!/usr/bin/env bash
# Benchmark of playbooks/site.yml on one emulated 8-GPU node (make bench): the first converge split by role,
# then the no-op second run (wall time, tasks, changed). Prints a Markdown section on stdout.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1

node=gpufleet-bench-1
work="$CACHE/bench-site"
mkdir -p "$work"
rm_node "$node"
run_node "$node"
trap 'rm_node '"$node" EXIT
emulated_inventory "$work/inventory.yml" "$node=hgx-a100-8gpu"
export ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_PIPELINING=true
ansible-playbook -i "$work/inventory.yml" tools/demo-emulate.yml >"$work/emulate.log"

run() {  # run NAME: site.yml with per-role timings; prints wall seconds
  local start
  start=$(date +%s%N)
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles ansible-playbook -i "$work/inventory.yml" \
    playbooks/site.yml >"$work/$1.log"
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}
first=$(run first)
second=$(run second)
recap() { grep -E "^$node +:" "$work/$1.log" | tr -s ' '; }
tasks() { grep -cE '^TASK \[' "$work/$1.log"; }
roles() { sed -n '/^=\{10,\}/,$p' "$work/$1.log" | grep -E '^[a-z_.]+ -+ [0-9.]+s$' | sed -E 's/ -+ / | /; s/^/| /; s/$/ |/'; }

cat <<MD
## site.yml on one node (emulated 8-GPU NVSwitch node; every role: driver, CUDA and NCCL from the stand-in mirror, torch from the wheelhouse)

One run each (a converge changes the node, so it cannot be repeated on the same node); local containers,
pipelining on.

| run | wall, s | tasks run | recap |
|---|---:|---:|---|
| first converge | $((first / 1000)).$(( first % 1000 / 100 )) | $(tasks first) | $(recap first) |
| second run (no-op) | $((second / 1000)).$(( second % 1000 / 100 )) | $(tasks second) | $(recap second) |

First converge by role (ansible.posix.profile_roles; every role installs its packages through the apt_source
helper, so apt's downloads and installs are counted there):

| role | time |
|---|---:|
$(roles first)
MD
echo
echo "No-op run: $((second / 1000)).$(( second % 1000 / 100 )) s (target < 30 s)."
grep -qE "^$node +: .*changed=0 " "$work/second.log" || { echo "the second run changed something" >&2; exit 1; }
[[ $second -lt 30000 ]] || { echo "the no-op run took $((second / 1000)) s, over the 30 s target" >&2; exit 1; }
