#!/usr/bin/env bash
# Benchmark of playbooks/site.yml on one emulated 8-GPU node (make bench): the first converge split by role,
# then the no-op second run (wall time, tasks, changed, time per role), and Ansible's own floor measured in the
# same run: a playbook of as many trivial tasks (run and skipped) against the same node, connection and
# settings. Prints a Markdown section on stdout; fails when the second run changed something or took 30 s or more.
source "$(dirname "$0")/../lib.sh"
cd "$ROOT" || exit 1

node=gpufleet-bench-1
work="$CACHE/bench-site"
mkdir -p "$work"
rm_node "$node"
run_node "$node"
serve_snapshot
trap 'rm_node '"$node"'; stop_snapshot' EXIT
emulated_inventory "$work/inventory.yml" "$node=hgx-a100-8gpu"
export ANSIBLE_INJECT_FACT_VARS=false ANSIBLE_PIPELINING=true
ansible-playbook -i "$work/inventory.yml" tools/demo-emulate.yml >"$work/emulate.log"

timed() {  # timed LOG PLAYBOOK: runs the playbook with per-role timings; prints wall milliseconds
  local log=$1 playbook=$2 start
  start=$(date +%s%N)
  ANSIBLE_CALLBACKS_ENABLED=ansible.posix.profile_roles ansible-playbook -i "$work/inventory.yml" "$playbook" >"$work/$log.log"
  echo $(( ($(date +%s%N) - start) / 1000000 ))
}
seconds() { printf '%d.%d' $(( $1 / 1000 )) $(( $1 % 1000 / 100 )); }
recap() { grep -E "^$node +:" "$work/$1.log" | tr -s ' '; }
count() { recap "$1" | grep -oE "$2=[0-9]+" | cut -d= -f2; }
tasks() { grep -cE '^TASK \[' "$work/$1.log"; }
roles() { sed -n '/^=\{10,\}/,$p' "$work/$1.log" | grep -E '^[a-z_.]+ -+ [0-9.]+s$' | sed -E 's/ -+ / | /; s/^/| /; s/$/ |/'; }

first=$(timed first playbooks/site.yml)
second=$(timed second playbooks/site.yml)

# Ansible's floor: the second run's number of tasks that ran (ok) and were skipped, as trivial tasks (a remote
# `true`, and a task whose condition is false), after the same fact gathering.
ran=$(count second ok)
skipped=$(count second skipped)
{
  echo "# Written by tools/bench/site_bench.sh: $ran trivial tasks that run and $skipped that are skipped."
  echo "- name: Ansible's floor for the no-op run"
  echo "  hosts: gpu_nodes"
  echo "  gather_facts: true"
  echo "  tasks:"
  for ((i = 0; i < ran; i++)); do
    printf '    - name: Trivial task %d\n      ansible.builtin.command: "true"\n      changed_when: false\n' "$i"
  done
  for ((i = 0; i < skipped; i++)); do
    printf '    - name: Skipped task %d\n      ansible.builtin.command: "true"\n      when: false\n' "$i"
  done
} >"$work/floor.yml"
floor=$(timed floor "$work/floor.yml")
ratio=$(python3 -c "print('%.2f' % ($second / $floor))")

cat <<MD
## site.yml on one node (emulated 8-GPU NVSwitch node; every role: driver, CUDA and NCCL from the stand-in mirror, torch from the wheelhouse)

One run each (a converge changes the node, so it cannot be repeated on the same node); local containers
(connection community.docker.docker_api), pipelining on.

| run | wall, s | task headers | recap |
|---|---:|---:|---|
| first converge | $(seconds "$first") | $(tasks first) | $(recap first) |
| second run (no-op) | $(seconds "$second") | $(tasks second) | $(recap second) |
| Ansible's floor: $ran trivial tasks run, $skipped skipped | $(seconds "$floor") | $(tasks floor) | $(recap floor) |

No-op run / Ansible's floor, same node, same run: **$ratio**.

First converge by role (ansible.posix.profile_roles; packages are installed through the internal _apt role, so
apt's downloads and installs are counted there):

| role | time |
|---|---:|
$(roles first)

No-op run by role:

| role | time |
|---|---:|
$(roles second)
MD
echo
echo "No-op run: $(seconds "$second") s (target < 30 s); Ansible's floor for its tasks: $(seconds "$floor") s."
grep -qE "^$node +: .*changed=0 " "$work/second.log" || { echo "the second run changed something" >&2; exit 1; }
[[ $second -lt 30000 ]] || { echo "the no-op run took $(seconds "$second") s, over the 30 s target" >&2; exit 1; }
