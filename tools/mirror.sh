#!/usr/bin/env bash
# Builds the local signed apt mirror of stand-in NVIDIA packages (tests/mirror) into the cache, once per
# change of its inputs (every file of tests/mirror): one repository per distribution path NVIDIA publishes
# (cuda/<distribution>/x86_64), the container toolkit's flat repository (libnvidia-container/stable/deb/amd64)
# and the nccl-tests tag tarball at GitHub's path (NVIDIA/nccl-tests/archive/refs/tags/). Scenarios bind it
# read-only at /srv/gpufleet-mirror and serve it on 127.0.0.1 or read it through file: URLs.
source "$(dirname "$0")/lib.sh"

mapfile -t inputs < <(find "$ROOT/tests/mirror" -type f -not -path '*/__pycache__/*' -not -name serve.yml | sort)
key=$(hash_files "${inputs[@]}")
if [[ -f "$GPUFLEET_MIRROR_DIR/.key" && "$(cat "$GPUFLEET_MIRROR_DIR/.key")" == "$key" ]]; then
  info "stand-in apt mirror is current ($GPUFLEET_MIRROR_DIR)"
  exit 0
fi
if ! command -v apt-ftparchive >/dev/null 2>&1 || ! command -v gpg >/dev/null 2>&1; then "$ROOT/tools/host-deps.sh"; fi
stage "Building the signed stand-in apt mirror (NVIDIA package names and versions)"
python3 "$ROOT/tests/mirror/build_mirror.py" "$GPUFLEET_MIRROR_DIR" | sed 's/^/    /'
echo "$key" >"$GPUFLEET_MIRROR_DIR/.key"
