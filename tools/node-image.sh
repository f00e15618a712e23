#!/usr/bin/env bash
# Builds the bench's node image offline: debootstrap Debian 12 from the archive this machine uses, import it,
# then apply tools/node-image/Dockerfile. Rebuilt only when an input changes (the cache key is their hash).
source "$(dirname "$0")/lib.sh"

sources_file=/etc/apt/sources.list.d/debian.sources
[[ -r "$sources_file" ]] || die "$sources_file not found: the bench reads the Debian archive to use from it"
mirror=$(awk '/^URIs:/ {print $2; exit}' "$sources_file")
[[ -n "$mirror" ]] || die "no URIs: line in $sources_file"

include=python3,python3-apt,python3-debian,systemd,systemd-sysv,dbus,sudo,ca-certificates,iproute2,gnupg
key=$(printf '%s\n%s\n' "$include" "$mirror" | cat - "$ROOT/tools/node-image/Dockerfile" "$0" "$sources_file" \
  | sha256sum | cut -c1-12)
image="$IMAGE_REPO:bookworm-$key"

if docker image inspect "$image" >/dev/null 2>&1; then
  docker tag "$image" "$IMAGE_TAG_STABLE"
  info "node image $image is current (tagged $IMAGE_TAG_STABLE)"
  exit 0
fi

command -v debootstrap >/dev/null 2>&1 || "$ROOT/tools/host-deps.sh"
mkdir -p "$IMAGE_CACHE"
rootfs_tar="$IMAGE_CACHE/rootfs-$key.tar"
if [[ ! -s "$rootfs_tar" ]]; then
  stage "Bootstrapping Debian 12 (bookworm, minbase) from $mirror (about a minute)"
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
  debootstrap --variant=minbase --include="$include" bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 \
    || { tail -20 "$work/debootstrap.log" >&2; die "debootstrap failed"; }
  tar -C "$work/rootfs" -cf "$rootfs_tar.partial" .
  mv "$rootfs_tar.partial" "$rootfs_tar"
fi

stage "Importing the root filesystem and building $image"
docker import "$rootfs_tar" "$IMAGE_REPO:base-$key" >/dev/null
ctx=$(mktemp -d)
cp "$ROOT/tools/node-image/Dockerfile" "$ctx/"
cp "$sources_file" "$ctx/debian.sources"
docker build --quiet --network host --build-arg "BASE=$IMAGE_REPO:base-$key" -t "$image" "$ctx" >/dev/null
rm -rf "$ctx"
docker tag "$image" "$IMAGE_TAG_STABLE"
info "built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}')), tagged $IMAGE_TAG_STABLE"
