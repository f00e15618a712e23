#!/usr/bin/env bash
# Builds the fake libnvidia-ml.so.1 of the emulated GPUs (tests/emulator/fake_nvml) with this host's gcc into
# $CACHE/fake-nvml/, once per change of its source. The test nodes get it from there (tests/emulator/install.yml).
# It must load on every node OS, Ubuntu 20.04's glibc 2.31 included: the build refuses a library that needs a
# newer GLIBC symbol version.
source "$(dirname "$0")/lib.sh"

src="$ROOT/tests/emulator/fake_nvml/fake_nvml.c"
out="$CACHE/fake-nvml"
key=$(hash_files "$src" "$ROOT/tools/fake-nvml.sh")
if [[ -f "$out/.key" && "$(cat "$out/.key")" == "$key" && -f "$out/libnvidia-ml.so.1" ]]; then
  info "fake libnvidia-ml.so.1 is current ($out)"
  exit 0
fi
if ! command -v gcc >/dev/null 2>&1 || ! command -v objdump >/dev/null 2>&1; then "$ROOT/tools/host-deps.sh"; fi
stage "Building the fake libnvidia-ml.so.1 (tests/emulator/fake_nvml)"
rm -rf "$out"
mkdir -p "$out"
gcc -shared -fPIC -O2 -Wall -Werror -fvisibility=hidden -Wl,-soname,libnvidia-ml.so.1 \
  -o "$out/libnvidia-ml.so.1.new" "$src"
newest=$(objdump -T "$out/libnvidia-ml.so.1.new" | grep -o 'GLIBC_[0-9.]*' | sed 's/GLIBC_//' | sort -uV | tail -n 1)
if [[ "$(printf '%s\n2.31\n' "$newest" | sort -V | tail -n 1)" != "2.31" ]]; then
  die "the fake libnvidia-ml.so.1 needs GLIBC_$newest, newer than Ubuntu 20.04's 2.31"
fi
mv "$out/libnvidia-ml.so.1.new" "$out/libnvidia-ml.so.1"
echo "$key" >"$out/.key"
info "$out/libnvidia-ml.so.1 ($(objdump -T "$out/libnvidia-ml.so.1" | grep -c ' nvml') NVML symbols, newest GLIBC_$newest)"
