#!/usr/bin/env bash
# Puts the collections the bench needs on ANSIBLE_COLLECTIONS_PATH, offline from Galaxy's point of view:
# they come out of the `ansible` package on PyPI. Also links this checkout in as gpufleet.node.
source "$(dirname "$0")/lib.sh"

ansible_pkg_version=12.3.0   # the `ansible` release whose bundled collections the bench uses
mapfile -t wanted < <(sed -e 's/#.*//' -e 's/[[:space:]]//g' -e '/^$/d' "$ROOT/requirements/collections.txt")
dest="$GPUFLEET_DEPS_PATH"
key="$ansible_pkg_version $(hash_files "$ROOT/requirements/collections.txt")"
stamp="$dest/.gpufleet-collections"

mkdir -p "$GPUFLEET_SELF_PATH/ansible_collections/gpufleet"
ln -sfn "$ROOT" "$GPUFLEET_SELF_PATH/ansible_collections/gpufleet/node"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
  info "collections are current: ${wanted[*]}"
  exit 0
fi
stage "Installing collections ${wanted[*]} from the ansible $ansible_pkg_version package on PyPI"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
pip_quiet download --quiet --no-deps --only-binary=:all: -d "$work" "ansible==$ansible_pkg_version"
wheel=$(ls "$work"/ansible-*.whl)
dirs=()
for fqcn in "${wanted[@]}"; do
  ns=${fqcn%%.*}; name=${fqcn#*.}
  python3 - "$wheel" "$work/src" "ansible_collections/$ns/$name/" <<'PY'
import sys, zipfile
wheel, out, prefix = sys.argv[1:]
with zipfile.ZipFile(wheel) as zf:
    members = [m for m in zf.namelist() if m.startswith(prefix)]
    if not members:
        sys.exit("collection %s is not in %s" % (prefix, wheel))
    zf.extractall(out, members)
PY
  dirs+=("$work/src/ansible_collections/$ns/$name")
done
ansible-galaxy collection install --offline --force -p "$dest" "${dirs[@]}" >/dev/null
echo "$key" >"$stamp"
ansible-galaxy collection list -p "$dest" 2>/dev/null | grep -E "$(IFS='|'; echo "${wanted[*]}")" | sed 's/^/    /'
