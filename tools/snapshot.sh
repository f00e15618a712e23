#!/usr/bin/env bash
# Freezes the real distribution packages the tests install into a local signed snapshot: tools/snapshot.sh
# [--update-lock] [OS...] (OS as in tools/node-image.sh; no argument: every release of tests/snapshot/packages.json).
#
# The files are those of the lock, tests/snapshot/lock.json (tests/snapshot/lock.py): each by its pool path and
# checked against its SHA256, so the snapshot is the same whatever the archive's index lists today. The lock holds
# each group of packages.json with a digest of its packages and the files it needs: only a group that is new or
# changed there (or whose locked file the pool no longer serves) is resolved from the live index as below, and that
# is said; the other groups' files stay exactly as locked, and a group packages.json no longer names drops its
# files. --update-lock writes that merged result into the lock (commit it); to take a group anew, delete its entry
# under "groups" in the lock first.
#
# Per release, in a container of its node image (whose sources are the archive as an installed server has them:
# tools/node-image.sh reads the mirror from this machine's or debootstrap's configuration), tests/snapshot/resolve.py
# resolves each group of tests/snapshot/packages.json and downloads the real .deb files once, taking the newest
# version the archive really serves where its index lists one its pool does not (a mirror caught mid-sync). That
# download is cached per release in $CACHE/snapshot-work/<os>, keyed by the resolver and the release's package
# list: it is done again only when they change. tests/snapshot/assemble.py then lays the files out as the
# archive does (dists/<suite>/<component>, pool/), with the archive's own index entries, signed with a throwaway
# key, in $GPUFLEET_SNAPSHOT_DIR (debian/ and ubuntu/); manifest.tsv says which version came from which pocket.
# Tests point the roles at it with their mirror variables (gpufleet_os_mirror_url and its key), as an
# air-gapped site points them at its own mirror; serve_snapshot (tools/lib.sh) serves it on 127.0.0.1.
source "$(dirname "$0")/lib.sh"

SPEC="$ROOT/tests/snapshot/packages.json"
LOCK="$ROOT/tests/snapshot/lock.json"
WORK_ROOT="$CACHE/snapshot-work"
update_lock=false
if [[ ${1:-} == --update-lock ]]; then update_lock=true; shift; fi
mapfile -t releases < <(python3 -c 'import json, sys; print("\n".join(json.load(open(sys.argv[1]))["releases"]))' "$SPEC")
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${releases[@]}")
for os in "${targets[@]}"; do
  [[ " ${releases[*]} " == *" $os "* ]] || die "tests/snapshot/packages.json has no release '$os' (it has ${releases[*]})"
done

# Downloads one release's packages unless its cached download is current.
resolve() {
  local os=$1 work="$WORK_ROOT/$1" key start locked="" previous
  [[ ! -f $LOCK ]] || locked=$(python3 -c 'import json, sys
entry = json.load(open(sys.argv[1]))["releases"].get(sys.argv[2])
print(json.dumps(entry, sort_keys=True) if entry else "")' "$LOCK" "$os")
  key=$( (cat "$ROOT/tests/snapshot/resolve.py" "$ROOT/tests/snapshot/lock.py"
          python3 -c 'import json, sys; print(json.dumps(json.load(open(sys.argv[1]))["releases"][sys.argv[2]], sort_keys=True))' "$SPEC" "$os"
          echo "$locked") \
        | sha256sum | cut -c1-12)
  if [[ -f "$work/.key" && "$(cat "$work/.key")" == "$key" ]]; then
    info "$os: the downloaded packages are current ($(find "$work/debs" -name '*.deb' | wc -l) files)"
    return
  fi
  "$ROOT/tools/node-image.sh" "$os" >/dev/null
  if [[ -n $locked ]]; then
    stage "Downloading $os's real packages, once: the files of tests/snapshot/lock.json; groups it does not hold as they are in packages.json from the live index"
  else
    stage "Downloading $os's real packages from its archive, once: resolved from its live index (tests/snapshot/packages.json)"
  fi
  start=$(date +%s)
  # The earlier download is kept aside: a locked file found there with its size and SHA256 is not fetched again.
  previous="$work.previous"
  rm -rf "$previous"
  if [[ -d $work ]]; then mv "$work" "$previous"; else mkdir -p "$previous"; fi
  mkdir -p "$work"
  python3 -c 'import json, sys; json.dump(json.load(open(sys.argv[1]))["releases"][sys.argv[2]], open(sys.argv[3], "w"))' \
    "$SPEC" "$os" "$work/release.json"
  [[ -z $locked ]] || echo "$locked" >"$work/lock.json"
  docker run --rm --network host --entrypoint python3 -v "$ROOT/tests/snapshot:/snapshot:ro" -v "$work:/work" \
    -v "$previous:/previous:ro" "$IMAGE_REPO:$os" /snapshot/resolve.py /work/release.json /work \
    ${locked:+/work/lock.json /previous} \
    || die "downloading $os's packages failed (output above)"
  rm -rf "$previous"
  echo "$key" >"$work/.key"
  info "$os: $(find "$work/debs" -name '*.deb' | wc -l) files, $(du -sm "$work/debs" | cut -f1) MB in $(since "$start") s"
}

for os in "${targets[@]}"; do resolve "$os"; done

# Assembles every downloaded release into the served snapshot, unless it already holds exactly these downloads.
mapfile -t works < <(for os in "${releases[@]}"; do [[ -f "$WORK_ROOT/$os/.key" ]] && echo "$WORK_ROOT/$os"; done)
key=$( (cat "$ROOT/tests/snapshot/assemble.py" "$ROOT/tests/snapshot/repack.py"; for work in "${works[@]}"; do echo "$work"; cat "$work/.key"; done) \
      | sha256sum | cut -c1-12)
if [[ -f "$GPUFLEET_SNAPSHOT_DIR/.key" && "$(cat "$GPUFLEET_SNAPSHOT_DIR/.key")" == "$key" ]]; then
  info "the snapshot is current ($GPUFLEET_SNAPSHOT_DIR)"
else
  stage "Assembling the signed snapshot of the real packages ($GPUFLEET_SNAPSHOT_DIR)"
  python3 "$ROOT/tests/snapshot/assemble.py" "$GPUFLEET_SNAPSHOT_DIR" "${works[@]}" | sed 's/^/    /'
  echo "$key" >"$GPUFLEET_SNAPSHOT_DIR/.key"
fi
if $update_lock; then
  stage "Writing the lock of ${targets[*]} ($LOCK): commit it"
  python3 "$ROOT/tests/snapshot/assemble.py" --write-lock "$LOCK" "${targets[@]/#/$WORK_ROOT/}" | sed 's/^/    /'
fi
stage "Snapshot manifest ($GPUFLEET_SNAPSHOT_DIR/manifest.tsv: package, version, pocket, sha256)"
column -t -s $'\t' "$GPUFLEET_SNAPSHOT_DIR/manifest.tsv" | sed 's/^/    /'
if [[ -s "$GPUFLEET_SNAPSHOT_DIR/fallbacks.txt" ]]; then
  stage "Listed but not served when the snapshot's files were chosen (the newest served version was taken instead)"
  sed 's/^/    /' "$GPUFLEET_SNAPSHOT_DIR/fallbacks.txt"
fi
