#!/usr/bin/env bash
# `make bench`: runs the benchmarks and writes docs/benchmarks.md with the machine they ran on.
#   tools/bench.sh [gpu_facts] [site] [fleet]   (default: all three; a subset replaces only its sections)
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

out="$ROOT/docs/benchmarks.md"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
sections=("$@")
(( ${#sections[@]} )) || sections=(gpu_facts site fleet)
status=0
for section in "${sections[@]}"; do
  case "$section" in
    gpu_facts)
      stage "Benchmark: gpu_facts (parsers; module against its nvidia-smi calls, emulated 8-GPU node)"
      PYTHONPATH="$GPUFLEET_SELF_PATH" python3 tools/bench/gpu_facts_bench.py --delay-ms 300 --runs 7 >"$work/$section.md" || status=$? ;;
    site)
      stage "Benchmark: site.yml on one node, first converge and the no-op second run"
      tools/bench/site_bench.sh >"$work/$section.md" || status=$? ;;
    fleet)
      stage "Benchmark: fact gathering and the fleet report of 100 and 500 simulated hosts; the report of 500 and 5,000 from the fact cache"
      python3 tools/bench/fleet_bench.py >"$work/$section.md" || status=$? ;;
    *) die "unknown benchmark '$section': gpu_facts, site or fleet" ;;
  esac
done
machine="Machine: $(nproc) cores ($(sed -n 's/^model name\s*: //p' /proc/cpuinfo | head -1)), $(free -g | awk '/^Mem:/ {print $2}') GiB,
$(. /etc/os-release && echo "$PRETTY_NAME"), kernel $(uname -r), Python $(python3 -c 'import platform; print(platform.python_version())')."
if (( ${#sections[@]} == 3 )) || [[ ! -f "$out" ]]; then
  {
    echo "# Benchmarks"
    echo
    echo "Written by \`make bench\` on $(date -u +%Y-%m-%d) (UTC). Not part of \`make test\`: figures, not pass/fail."
    echo
    echo "$machine"
    echo
    echo "How to read: each figure is the median of several runs with the spread (min-max) in brackets; ratios"
    echo "are taken within one run. The emulator models a real node's NVML start-up as a plain delay, which"
    echo "overlaps perfectly when calls run concurrently; a real driver serialises part of that work, so on"
    echo "hardware the ratio to the slowest call is expected to be somewhat higher."
    for section in "${sections[@]}"; do
      echo
      cat "$work/$section.md"
    done
  } >"$out"
else
  # Only the sections run are replaced (each from its "## " heading to the next), each noting when it ran.
  for section in "${sections[@]}"; do
    printf "\nThis section: \`tools/bench.sh %s\` on %s (UTC).\n%s\n" "$section" "$(date -u +%Y-%m-%d)" "$machine" >>"$work/$section.md"
  done
  python3 tools/bench/replace_sections.py "$out" "${sections[@]/#/$work/}" --suffix .md
fi
for section in "${sections[@]}"; do cat "$work/$section.md"; done
info "written to docs/benchmarks.md (${sections[*]})"
[[ $status -eq 0 ]] || die "a benchmark missed its target (see above)"
