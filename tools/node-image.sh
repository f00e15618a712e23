#!/usr/bin/env bash
# Builds the bench's node images offline: tools/node-image.sh [debian12 ubuntu2004 ubuntu2204 ubuntu2404] (no
# argument: all). Each is debootstrapped from the distribution's archive, imported, and finished by
# tools/node-image/Dockerfile; it is tagged gpufleet-node:<os> (debian12 also gpufleet-node:bookworm) and rebuilt
# only when an input changes (the cache key is their hash).
#   Debian: the archive this machine uses (/etc/apt/sources.list.d/debian.sources).
#   Ubuntu: the mirror debootstrap's own script names for the suite, and Ubuntu's archive keyring from that
#   archive's ubuntu-keyring package, used only when its keys' fingerprints are the pinned ones below; sources
#   as a server has them: main restricted universe multiverse with -updates and -security (one-line
#   sources.list on 20.04 and 22.04, deb822 ubuntu.sources on 24.04, as Ubuntu's installer writes them).
source "$(dirname "$0")/lib.sh"

# Ubuntu Archive Automatic Signing Keys (2012, 2018); the keyring's third key (Ubuntu CD Image, 2012) signs
# no archive Release file.
UBUNTU_ARCHIVE_FINGERPRINTS=(790BC7277767219C42C86F933B4FE6ACC0B21F32 F6ECB3762474EDA9D21B7022871920D1991BC93C)
declare -A SUITE=([debian12]=bookworm [ubuntu2004]=focal [ubuntu2204]=jammy [ubuntu2404]=noble)
include=python3,python3-apt,python3-debian,systemd,systemd-sysv,dbus,sudo,ca-certificates,iproute2,gnupg

ubuntu_mirror() {
  # debootstrap's scripts/gutsy (used for every Ubuntu suite since) names one mirror for amd64 and i386.
  awk '/default_mirror/ && !/old-releases|ports/ {print $2; exit}' /usr/share/debootstrap/scripts/gutsy
}

ubuntu_keyring() {
  local mirror=$1 keyring="$IMAGE_CACHE/ubuntu-archive-keyring.gpg" work filename fingerprints
  if [[ ! -s "$keyring" ]]; then
    work=$(mktemp -d)
    filename=$(curl -fsS "$mirror/dists/jammy/main/binary-amd64/Packages.gz" | zcat \
      | awk '/^Package: ubuntu-keyring$/ {p=1} p && /^Filename:/ {print $2; exit}')
    [[ -n "$filename" ]] || die "ubuntu-keyring not found in the archive's index"
    curl -fsS -o "$work/keyring.deb" "$mirror/$filename"
    dpkg-deb -x "$work/keyring.deb" "$work/x"
    cp "$work/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" "$keyring.partial"
    rm -rf "$work"
    mv "$keyring.partial" "$keyring"
  fi
  fingerprints=$(gpg --batch --show-keys --with-colons "$keyring" 2>/dev/null | awk -F: '/^fpr:/ {print $10}')
  for fpr in "${UBUNTU_ARCHIVE_FINGERPRINTS[@]}"; do
    grep -qx "$fpr" <<<"$fingerprints" || { rm -f "$keyring"; die "Ubuntu's keyring lacks the archive key $fpr"; }
  done
  echo "$keyring"
}

ubuntu_sources() {
  local os=$1 mirror=$2 suite=${SUITE[$1]} dir=$3
  if [[ $os == ubuntu2404 ]]; then
    printf 'Types: deb\nURIs: %s\nSuites: %s %s-updates %s-security\nComponents: main restricted universe multiverse\nSigned-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n' \
      "$mirror" "$suite" "$suite" "$suite" >"$dir/ubuntu.sources"
    : >"$dir/sources.list"
  else
    printf 'deb %s %s main restricted universe multiverse\n' \
      "$mirror" "$suite" "$mirror" "$suite-updates" "$mirror" "$suite-security" >"$dir/sources.list"
  fi
}

build() {
  local os=$1 suite=${SUITE[$1]} mirror keyring="" sources_file key image rootfs_tar work ctx
  ctx=$(mktemp -d)
  if [[ $os == debian12 ]]; then
    sources_file=/etc/apt/sources.list.d/debian.sources
    [[ -r "$sources_file" ]] || die "$sources_file not found: the bench reads the Debian archive to use from it"
    mirror=$(awk '/^URIs:/ {print $2; exit}' "$sources_file")
    cp "$sources_file" "$ctx/debian.sources"
    : >"$ctx/sources.list"
  else
    mirror=$(ubuntu_mirror)
    keyring=$(ubuntu_keyring "$mirror")
    ubuntu_sources "$os" "$mirror" "$ctx"
  fi
  [[ -n "$mirror" ]] || die "no archive mirror found for $os"
  touch "$ctx/debian.sources" "$ctx/ubuntu.sources"
  cp "$ROOT/tools/node-image/Dockerfile" "$ctx/"
  key=$(printf '%s\n%s\n%s\n' "$os" "$include" "$mirror" | cat - "$ctx/Dockerfile" "$0" "$ctx/sources.list" \
    "$ctx/debian.sources" "$ctx/ubuntu.sources" | sha256sum | cut -c1-12)
  image="$IMAGE_REPO:$os-$key"
  if docker image inspect "$image" >/dev/null 2>&1; then
    docker tag "$image" "$IMAGE_REPO:$os"
    [[ $os != debian12 ]] || docker tag "$image" "$IMAGE_REPO:bookworm"
    info "node image $image is current (tagged $IMAGE_REPO:$os)"
    rm -rf "$ctx"
    return
  fi
  mkdir -p "$IMAGE_CACHE"
  rootfs_tar="$IMAGE_CACHE/rootfs-$os-$key.tar"
  if [[ ! -s "$rootfs_tar" ]]; then
    local start; start=$(date +%s)
    stage "Bootstrapping $os ($suite, minbase) from $mirror (about a minute)"
    work=$(mktemp -d)
    # noble is newer than this debootstrap: Ubuntu suites all use the gutsy script.
    debootstrap --variant=minbase --include="$include" ${keyring:+--keyring="$keyring"} "$suite" "$work/rootfs" \
      "$mirror" $([[ $os == debian12 ]] || echo /usr/share/debootstrap/scripts/gutsy) >"$work/debootstrap.log" 2>&1 \
      || { tail -20 "$work/debootstrap.log" >&2; rm -rf "$work"; die "debootstrap of $os failed"; }
    tar -C "$work/rootfs" -cf "$rootfs_tar.partial" .
    rm -rf "$work"
    mv "$rootfs_tar.partial" "$rootfs_tar"
    info "bootstrapped in $(since "$start") s"
  fi
  stage "Importing the root filesystem and building $image"
  docker import "$rootfs_tar" "$IMAGE_REPO:base-$os-$key" >/dev/null
  docker build --quiet --network host --build-arg "BASE=$IMAGE_REPO:base-$os-$key" -t "$image" "$ctx" >/dev/null
  rm -rf "$ctx"
  docker tag "$image" "$IMAGE_REPO:$os"
  [[ $os != debian12 ]] || docker tag "$image" "$IMAGE_REPO:bookworm"
  info "built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}')), tagged $IMAGE_REPO:$os"
}

command -v debootstrap >/dev/null 2>&1 || "$ROOT/tools/host-deps.sh"
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=(debian12 ubuntu2004 ubuntu2204 ubuntu2404)
for os in "${targets[@]}"; do
  [[ -n "${SUITE[$os]:-}" ]] || die "unknown node OS $os; choose ${!SUITE[*]}"
  build "$os"
done
