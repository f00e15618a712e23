#!/usr/bin/env bash
# `make bench`: runs the benchmarks and writes docs/benchmarks.md with the machine they ran on.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

out="$ROOT/docs/benchmarks.md"
body=$(mktemp)
trap 'rm -f "$body"' EXIT
stage "Benchmark: gpu_facts (parsers; module against its nvidia-smi calls, emulated 8-GPU node)"
status=0
PYTHONPATH="$GPUFLEET_SELF_PATH" python3 tools/bench/gpu_facts_bench.py --delay-ms 300 --runs 7 >"$body" || status=$?
stage "Benchmark: site.yml on one node, first converge and the no-op second run"
echo >>"$body"
tools/bench/site_bench.sh >>"$body" || status=$?
stage "Benchmark: fact gathering and the fleet report across 10, 100 and 500 simulated hosts"
echo >>"$body"
python3 tools/bench/fleet_bench.py --sizes 10 100 500 --forks 25 --runs 3 >>"$body" || status=$?
{
  echo "# Benchmarks"
  echo
  echo "Written by \`make bench\` on $(date -u +%Y-%m-%d) (UTC). Not part of \`make test\`: figures, not pass/fail."
  echo
  echo "Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/ {print $2}') GiB,"
  echo "$(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), Python $(python3 -c 'import platform; print(platform.python_version())')."
  echo
  echo "How to read: each figure is the median of several runs with the spread (min-max) in brackets; ratios"
  echo "are taken within one run. The emulator models a real node's NVML start-up as a plain delay, which"
  echo "overlaps perfectly when calls run concurrently; a real driver serialises part of that work, so on"
  echo "hardware the ratio to the slowest call is expected to be somewhat higher."
  echo
  cat "$body"
} >"$out"
cat "$body"
info "written to docs/benchmarks.md"
[[ $status -eq 0 ]] || die "a benchmark missed its target (see above)"
