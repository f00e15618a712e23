#!/usr/bin/env bash
# Builds the offline wheelhouse the pytorch scenarios install from: the CPU build of torch for Python 3.11 and
# its dependencies, downloaded once per change of the spec (pip's configured wheel directory and index).
source "$(dirname "$0")/lib.sh"

spec="torch==2.13.0+cpu"
key=$(printf '%s\n' "$spec" | sha256sum | cut -c1-12)
if [[ -f "$GPUFLEET_WHEELHOUSE/.key" && "$(cat "$GPUFLEET_WHEELHOUSE/.key")" == "$key" ]]; then
  info "wheelhouse is current ($GPUFLEET_WHEELHOUSE)"
  exit 0
fi
stage "Building the wheelhouse ($spec and its dependencies, Python 3.11)"
rm -rf "$GPUFLEET_WHEELHOUSE"
mkdir -p "$GPUFLEET_WHEELHOUSE"
"$VENV/bin/pip" download --quiet --only-binary=:all: --python-version 3.11 --dest "$GPUFLEET_WHEELHOUSE" "$spec"
echo "$key" >"$GPUFLEET_WHEELHOUSE/.key"
info "$(find "$GPUFLEET_WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$GPUFLEET_WHEELHOUSE" | cut -f1)"
