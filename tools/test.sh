#!/usr/bin/env bash
# `make test`: every check, in the order of the Makefile's test stages, with the bench (the node images, the
# stand-in mirror, the wheelhouse, the fake NVML library) built in the background while the static checks and unit tests run: a cold
# bench is minutes of debootstrap, dpkg and downloads, mostly waiting, so it overlaps with them. The bench's
# output is printed whole once it is ready.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1
start=$(date +%s)
make -s host-deps venv collections dockerd

bench_log="$CACHE/bench-env.log"
mkdir -p "$CACHE"
stage "Building the bench in the background (node images, stand-in mirror, snapshot of the real packages, wheelhouse, fake NVML library): $bench_log"
# Its parts side by side (the node images, themselves built side by side, then the snapshot that starts a node of
# each), each part's output kept together.
setsid make -s -j4 --output-sync=target image mirror snapshot wheelhouse fake-nvml >"$bench_log" 2>&1 &
bench_pid=$!
trap 'kill -- -$bench_pid 2>/dev/null || true' EXIT

# The static checks side by side (each is one process; the bench mostly waits on the archives), each one's output
# kept together.
make -s -j3 --output-sync=target lint sanity unit

bench_start=$(date +%s)
if ! wait "$bench_pid"; then
  trap - EXIT
  cat "$bench_log"
  die "building the bench failed: its output is above"
fi
trap - EXIT
stage "The bench's output (waited $(since "$bench_start") s for it after the unit tests)"
cat "$bench_log"

make -s build-check molecule
echo
echo "make test: all checks passed in $(since "$start") s"
