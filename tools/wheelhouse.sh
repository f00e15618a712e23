#!/usr/bin/env bash
# Builds the offline wheelhouse the nodes install from, for Python 3.11: the CPU build of torch and its
# dependencies (the pytorch scenarios), and ansible-core at the collection's pinned version with its dependencies
# (gpufleet.node.self_converge's virtualenv; cryptography at requirements/constraints.txt's pin, as on the
# controller). Downloaded once per change of the specs, into a fresh directory first and then put in place file by
# file, so that nodes which have the wheelhouse bound while it changes never see it empty.
source "$(dirname "$0")/lib.sh"

specs=("torch==2.13.0+cpu" "ansible-core==2.19.14" "cryptography==50.0.2")
key=$(printf '%s\n' "${specs[@]}" | sha256sum | cut -c1-12)
if [[ -f "$GPUFLEET_WHEELHOUSE/.key" && "$(cat "$GPUFLEET_WHEELHOUSE/.key")" == "$key" ]]; then
  info "wheelhouse is current ($GPUFLEET_WHEELHOUSE)"
  exit 0
fi
stage "Building the wheelhouse (${specs[*]} and their dependencies, Python 3.11)"
fresh="$GPUFLEET_WHEELHOUSE.new"
rm -rf "$fresh"
mkdir -p "$fresh" "$GPUFLEET_WHEELHOUSE"
"$VENV/bin/pip" download --quiet --only-binary=:all: --python-version 3.11 --dest "$fresh" "${specs[@]}"
cp -p "$fresh"/*.whl "$GPUFLEET_WHEELHOUSE/"
for wheel in "$GPUFLEET_WHEELHOUSE"/*.whl; do
  [[ -e "$fresh/${wheel##*/}" ]] || rm -f "$wheel"
done
rm -rf "$fresh"
echo "$key" >"$GPUFLEET_WHEELHOUSE/.key"
info "$(find "$GPUFLEET_WHEELHOUSE" -name '*.whl' | wc -l) wheels, $(du -sh "$GPUFLEET_WHEELHOUSE" | cut -f1)"
