#!/usr/bin/env bash
# Builds the bench's node images offline: tools/node-image.sh [OS...], OS one of debian12 ubuntu2004 ubuntu2204
# ubuntu2404 (no argument: all four). Each is debootstrapped (minbase) from its distribution's archive, imported,
# and finished by tools/node-image/Dockerfile; it is tagged gpufleet-node:<os> (debian12 also
# gpufleet-node:bookworm, its earlier name). Two caches, each keyed by the hash of its inputs: the root file system
# (a tarball in $IMAGE_CACHE: the debootstrap version and arguments) and the image (that key, the Dockerfile, the
# sources); only what changed is redone, and older entries of the same OS are pruned. The images are built side by
# side (debootstrap mostly waits on the archive), each into a log of its own, printed in order once all have ended.
#   Debian: the archive this machine uses (/etc/apt/sources.list.d/debian.sources), with its sources file.
#   Ubuntu: the mirror debootstrap's own script names, and Ubuntu's archive keyring from that archive's
#   ubuntu-keyring package, reduced to the archive signing keys pinned below and checked against them, so that
#   debootstrap really checks the Release signature. Sources as a server has them: main restricted universe
#   multiverse for the suite, -updates and -security (one-line sources.list on 20.04 and 22.04, deb822
#   ubuntu.sources with Signed-By on 24.04; the installer splits the one-line form into a line per component group).
source "$(dirname "$0")/lib.sh"

# Ubuntu Archive Automatic Signing Key (2012) and (2018): the keys that sign the archive's Release files. The
# package's keyring also holds the CD image signing key (2012), which signs no archive; it is left out.
UBUNTU_ARCHIVE_FINGERPRINTS=(790BC7277767219C42C86F933B4FE6ACC0B21F32 F6ECB3762474EDA9D21B7022871920D1991BC93C)
declare -A SUITE=([debian12]=bookworm [ubuntu2004]=focal [ubuntu2204]=jammy [ubuntu2404]=noble)
# python3-apt for the apt module, python3-debian for deb822_repository (both in main on every release here).
include=python3,python3-apt,python3-debian,systemd,systemd-sysv,dbus,sudo,ca-certificates,iproute2,gnupg
# Every Ubuntu suite since 7.10 uses debootstrap's gutsy script; naming it works for suites newer than this
# debootstrap (noble on Debian 12's 1.0.128).
UBUNTU_SCRIPT=/usr/share/debootstrap/scripts/gutsy

ubuntu_mirror() {
  # The script names one mirror for amd64 and i386 (the others are ports and old-releases).
  awk '/default_mirror/ && !/old-releases|ports/ {print $2; exit}' "$UBUNTU_SCRIPT"
}

# The primary keys' fingerprints in a keyring, sorted, one a line.
primary_fingerprints() {
  gpg --batch --show-keys --with-colons "$1" 2>/dev/null \
    | awk -F: '/^pub:/ {p = 1; next} /^fpr:/ && p {print $10} {p = 0}' | sort
}

keyring_is_pinned() {
  [[ -s "$1" ]] && [[ "$(primary_fingerprints "$1")" == "$(printf '%s\n' "${UBUNTU_ARCHIVE_FINGERPRINTS[@]}" | sort)" ]]
}

# Prints the path of Ubuntu's archive keyring (cached): the keyring of the archive's ubuntu-keyring package (fetched
# with wget, which debootstrap depends on), reduced to the pinned archive keys; dies unless they are exactly those.
ubuntu_keyring() {
  local mirror=$1 keyring="$IMAGE_CACHE/ubuntu-archive-keyring.gpg" work filename
  if keyring_is_pinned "$keyring"; then echo "$keyring"; return; fi
  work=$(mktemp -d)
  filename=$(wget -q --tries=3 -O- "$mirror/dists/jammy/main/binary-amd64/Packages.gz" | zcat \
    | awk '/^Package: / {p = ($2 == "ubuntu-keyring")} p && /^Filename:/ && !f {print $2; f = 1}')   # reads to the end: no SIGPIPE
  [[ -n "$filename" ]] || { rm -rf "$work"; die "ubuntu-keyring not found in $mirror's jammy main index"; }
  wget -q --tries=3 -O "$work/keyring.deb" "$mirror/$filename"
  dpkg-deb -x "$work/keyring.deb" "$work/x"
  mkdir -m 700 "$work/gnupg"
  GNUPGHOME="$work/gnupg" gpg --batch --quiet --import "$work/x/usr/share/keyrings/ubuntu-archive-keyring.gpg" 2>/dev/null
  GNUPGHOME="$work/gnupg" gpg --batch --export "${UBUNTU_ARCHIVE_FINGERPRINTS[@]}" >"$work/archive.gpg"
  if ! keyring_is_pinned "$work/archive.gpg"; then
    printf 'ERROR: %s has the primary keys\n%s\n' "$filename" \
      "$(primary_fingerprints "$work/x/usr/share/keyrings/ubuntu-archive-keyring.gpg")" >&2
    rm -rf "$work"
    die "Ubuntu's archive keyring is not the pinned keys ${UBUNTU_ARCHIVE_FINGERPRINTS[*]}"
  fi
  mkdir -p "$IMAGE_CACHE"
  mv "$work/archive.gpg" "$keyring"
  rm -rf "$work"
  echo "$keyring"
}

# Writes the sources files for OS into DIR: sources.list, debian.sources, ubuntu.sources (empty if not used).
write_sources() {
  local os=$1 mirror=$2 dir=$3 suite=${SUITE[$1]}
  : >"$dir/sources.list"; : >"$dir/debian.sources"; : >"$dir/ubuntu.sources"
  case $os in
    debian12) cp /etc/apt/sources.list.d/debian.sources "$dir/debian.sources" ;;
    ubuntu2404)
      printf '%s\n' "Types: deb" "URIs: $mirror" "Suites: $suite $suite-updates $suite-security" \
        "Components: main restricted universe multiverse" \
        "Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg" >"$dir/ubuntu.sources" ;;
    *)
      local pocket
      for pocket in "$suite" "$suite-updates" "$suite-security"; do
        printf 'deb %s %s main restricted universe multiverse\n' "$mirror" "$pocket"
      done >"$dir/sources.list" ;;
  esac
}

# Removes cached root file systems and images of OS other than the current ones.
prune() {
  local os=$1 rootfs_key=$2 key=$3 f tag
  for f in "$IMAGE_CACHE"/rootfs-"$os"-*.tar; do
    [[ ! -e "$f" || "$f" == "$IMAGE_CACHE/rootfs-$os-$rootfs_key.tar" ]] || rm -f "$f"
  done
  # debian12 also drops what the single-image bench of before left (bookworm-<key>, base-<key>, rootfs-<key>.tar).
  for f in "$IMAGE_CACHE"/rootfs-*.tar; do
    [[ $os != debian12 || ! ${f##*/} =~ ^rootfs-[0-9a-f]{12}\.tar$ ]] || rm -f "$f"
  done
  for tag in $(docker image ls --format '{{.Tag}}' "$IMAGE_REPO"); do
    [[ $tag =~ ^(base-)?$os-[0-9a-f]{12}$ && $tag != "$os-$key" && $tag != "base-$os-$rootfs_key" ]] \
      || [[ $os == debian12 && $tag =~ ^(bookworm|base)-[0-9a-f]{12}$ ]] || continue
    docker image rm "$IMAGE_REPO:$tag" >/dev/null 2>&1 || true   # kept while a container still uses it
  done
}

# build OS RESULTS: builds (or finds cached) gpufleet-node:OS and writes its summary line to RESULTS/OS.result.
build() {
  local os=$1 results=$2 suite=${SUITE[$1]} start mirror keyring ctx rootfs_key key image base rootfs_tar work result
  local -a args
  start=$(date +%s)
  if [[ $os == debian12 ]]; then
    [[ -r /etc/apt/sources.list.d/debian.sources ]] \
      || die "/etc/apt/sources.list.d/debian.sources not found: the bench reads the Debian archive to use from it"
    mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources)
    [[ -n "$mirror" ]] || die "no URIs: line in /etc/apt/sources.list.d/debian.sources"
    args=(--variant=minbase --include="$include" "$suite" ROOTFS "$mirror")
  else
    mirror=$(ubuntu_mirror)
    [[ -n "$mirror" ]] || die "no default_mirror in $UBUNTU_SCRIPT"
    keyring=$(ubuntu_keyring "$mirror")
    args=(--variant=minbase --include="$include" --keyring="$keyring" "$suite" ROOTFS "$mirror" "$UBUNTU_SCRIPT")
  fi
  ctx=$(mktemp -d)
  write_sources "$os" "$mirror" "$ctx"
  cp "$ROOT"/tools/node-image/{Dockerfile,gpufleet_zipcache.py,gpufleet-zipcache.pth} "$ctx/"
  rootfs_key=$( (dpkg-query -W -f '${Version}\n' debootstrap; printf '%s\n' "${args[@]}") | sha256sum | cut -c1-12)
  key=$( (echo "$rootfs_key"; cd "$ctx" && cat Dockerfile gpufleet_zipcache.py gpufleet-zipcache.pth sources.list debian.sources ubuntu.sources) | sha256sum | cut -c1-12)
  image="$IMAGE_REPO:$os-$key" base="$IMAGE_REPO:base-$os-$rootfs_key" rootfs_tar="$IMAGE_CACHE/rootfs-$os-$rootfs_key.tar"

  if docker image inspect "$image" >/dev/null 2>&1; then
    result="cached"
  else
    if ! docker image inspect "$base" >/dev/null 2>&1; then
      if [[ ! -s "$rootfs_tar" ]]; then
        stage "Bootstrapping $os ($suite, minbase) from $mirror (a minute or two)"
        mkdir -p "$IMAGE_CACHE"
        work=$(mktemp -d)
        debootstrap "${args[@]/#ROOTFS/$work/rootfs}" >"$work/debootstrap.log" 2>&1 \
          || { tail -20 "$work/debootstrap.log" >&2; rm -rf "$work"; die "debootstrap of $os failed"; }
        grep -h "Valid Release signature" "$work/debootstrap.log" | sed 's/^I: /    /' || true
        tar -C "$work/rootfs" -cf "$rootfs_tar.partial" .
        rm -rf "$work"
        mv "$rootfs_tar.partial" "$rootfs_tar"
        info "bootstrapped in $(since "$start") s"
      fi
      stage "Importing $os's root file system"
      docker import "$rootfs_tar" "$base" >/dev/null
    fi
    stage "Building $image"
    docker build --network host --build-arg "BASE=$base" -t "$image" "$ctx" >"$ctx/build.log" 2>&1 \
      || { tail -20 "$ctx/build.log" >&2; rm -rf "$ctx"; die "docker build of $image failed"; }
    result="built in $(since "$start") s"
  fi
  rm -rf "$ctx"
  docker tag "$image" "$IMAGE_REPO:$os"
  [[ $os != debian12 ]] || docker tag "$image" "$IMAGE_REPO:bookworm"
  prune "$os" "$rootfs_key" "$key"
  result+=", $(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1 / 1e6}')"
  printf '%-26s %-40s %s\n' "$IMAGE_REPO:$os" "$image" "$result" >"$results/$os.result"
}

command -v debootstrap >/dev/null 2>&1 || "$ROOT/tools/host-deps.sh"
targets=("$@")
[[ ${#targets[@]} -gt 0 ]] || targets=("${NODE_OS_CHOICES[@]}")
for os in "${targets[@]}"; do
  [[ -n "${SUITE[$os]:-}" ]] || die "unknown node OS '$os'; choose from ${NODE_OS_CHOICES[*]}"
done
# The Ubuntu keyring once, before the builds that share it.
[[ " ${targets[*]} " != *" ubuntu"* ]] || ubuntu_keyring "$(ubuntu_mirror)" >/dev/null
results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT
declare -A pid
for os in "${targets[@]}"; do
  build "$os" "$results" >"$results/$os.log" 2>&1 &
  pid[$os]=$!
done
failed=()
for os in "${targets[@]}"; do wait "${pid[$os]}" || failed+=("$os"); done
for os in "${targets[@]}"; do cat "$results/$os.log"; done
(( ${#failed[@]} == 0 )) || die "building the node image of ${failed[*]} failed: its output is above"
stage "Node images"
for os in "${targets[@]}"; do info "$(cat "$results/$os.result")"; done
