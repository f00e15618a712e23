#!/usr/bin/env bash
# Makes sure a Docker engine answers: starts dockerd with no
# bridge network (containers use the host network; no private-range address is ever created).
source "$(dirname "$0")/lib.sh"

if docker info >/dev/null 2>&1; then
  info "Docker engine is running ($(docker info --format '{{.ServerVersion}}'))"
  exit 0
fi
command -v dockerd >/dev/null 2>&1 || "$ROOT/tools/host-deps.sh"
stage "Starting dockerd (host networking only: --bridge=none, no iptables)"
mkdir -p "$CACHE"
nohup setsid dockerd --bridge=none --iptables=false --ip-masq=false --ip-forward=false \
  >"$CACHE/dockerd.log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { info "dockerd is ready (log: $CACHE/dockerd.log)"; exit 0; }
  sleep 0.5
done
tail -20 "$CACHE/dockerd.log" >&2
die "dockerd did not become ready in 30 s"
