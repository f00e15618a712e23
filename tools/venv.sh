#!/usr/bin/env bash
# Creates .venv with the pinned tool chain; does nothing when it is already current.
source "$(dirname "$0")/lib.sh"

key=$(hash_files "$ROOT/requirements/dev.txt" "$ROOT/requirements/constraints.txt")
stamp="$VENV/.gpufleet-requirements"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$key" ]]; then
  info "virtualenv .venv is current ($key)"
  exit 0
fi
stage "Creating the virtualenv .venv with the pinned tools (requirements/dev.txt, constraints.txt)"
python3 -m venv "$VENV"
pip_quiet install --quiet --upgrade pip
pip_quiet install --quiet -r "$ROOT/requirements/dev.txt" -c "$ROOT/requirements/constraints.txt"
echo "$key" >"$stamp"
info "$("$VENV/bin/ansible" --version | head -1)"
