#!/usr/bin/env bash
# The path of docs/infra-repo.md, taken as a user takes it: builds the collection tarball, lays out a throwaway
# copy of docs/infra-repo/ (what the guide shows is what runs), and in it runs the guide's commands in an
# environment holding only the venv: installs the tarball from requirements.yml, lists site.yml's tasks against
# the production inventory, and runs the repository's own Molecule scenario (site.yml converged on a node
# container, run again with nothing changed, then its verify). The CI mirrors the guide's CI job names are the
# bench's: the stand-in of NVIDIA's repository (served here on GPUFLEET_MIRROR_PORT) and the snapshot of Debian's
# archive. Community.docker, which Molecule's docker driver needs, comes from the bench's collections, as it
# would from the `ansible` package on a user's machine.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

repo="$CACHE/infra-repo"
port=${GPUFLEET_MIRROR_PORT:-18535}
stage "An infra repo that installs the built collection and tests its own settings (docs/infra-repo.md): $repo"
rm -rf "$repo" && cp -a docs/infra-repo "$repo"
ansible-galaxy collection build --output-path "$repo/vendor" . >/dev/null
mv "$repo"/vendor/gpufleet-node-*.tar.gz "$repo/vendor/gpufleet-node.tar.gz"
"$ROOT/tools/node-image.sh" debian12 >/dev/null

serve_snapshot
python3 -m http.server --bind 127.0.0.1 --directory "$GPUFLEET_MIRROR_DIR" "$port" >"$CACHE/infra-repo-mirror.log" 2>&1 &
mirror_pid=$!
trap 'kill "$mirror_pid" 2>/dev/null; stop_snapshot' EXIT

# The user's shell: the venv activated, the CI job's variables, and where community.docker is installed.
as_user() {
  (cd "$repo" && env -i HOME="$HOME" VIRTUAL_ENV="$VENV" PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
     LANG=C.UTF-8 ANSIBLE_COLLECTIONS_PATH="$repo/collections:$GPUFLEET_DEPS_PATH" \
     CI_NODE_IMAGE="$IMAGE_REPO:debian12" \
     CI_NVIDIA_REPO_URL="http://127.0.0.1:$port/cuda" \
     CI_NVIDIA_REPO_KEY_URL="http://127.0.0.1:$port/cuda/debian12/x86_64/gpufleet-test.pub" \
     CI_NVIDIA_REPO_KEY_FINGERPRINT="$(cat "$GPUFLEET_MIRROR_DIR/fingerprint")" \
     CI_OS_MIRROR_URL="http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT" \
     CI_OS_MIRROR_KEY_URL="http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/gpufleet-snapshot.pub" \
     CI_OS_MIRROR_KEY_FINGERPRINT="$GPUFLEET_SNAPSHOT_FINGERPRINT" \
     "$@")
}
# The guide's commands, in its order (docs/infra-repo.md).
while read -r command; do
  info "\$ $command"
  # shellcheck disable=SC2086 # each command is split into words as the shell the guide shows would split it
  as_user $command
done < <(sed -n '/^<!-- commands tested by tools\/infra-repo.sh -->$/,/^```$/p' docs/infra-repo.md | grep -v -e '^<!--' -e '^```' -e '^#' -e '^$')
