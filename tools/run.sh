#!/usr/bin/env bash
# Runs one family of checks of `make test`; each says what it does and how long it took.
#   tools/run.sh yamllint | ansible-lint | sanity | unit | build-check | molecule SCENARIO...
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

# Files of the collection as git sees them (tracked, and new files that are not ignored).
collection_files() { git ls-files --cached --others --exclude-standard | while read -r f; do [[ -e "$f" ]] && echo "$f"; done; }

run_yamllint() {
  stage "yamllint (strict)"
  yamllint --strict .
}

run_ansible_lint() {
  stage "ansible-lint (profile production, offline)"
  ansible-lint --offline --profile production
}

run_sanity() {
  stage "ansible-test sanity (local, offline, Python 3.11, no ignore files)"
  [[ ! -e tests/sanity ]] || die "tests/sanity exists: this project keeps no ignore files"
  local coll="$CACHE/sanity/ansible_collections/gpufleet/node"
  rm -rf "$coll" && mkdir -p "$coll"
  collection_files | tar -cf - -T - | tar -xf - -C "$coll"
  # The copy lies inside this checkout's ignored cache: its own git repository keeps ansible-test from
  # asking the outer one (which ignores it) for the file list.
  git -C "$coll" init -q
  # ansible-test bootstraps pip in its virtualenvs with a downloaded script; give it the offline stand-in.
  local home="$CACHE/ansible-test-home"
  mkdir -p "$home/.ansible/test/cache"
  cp tools/ansible-test/get_pip_standin.py "$home/.ansible/test/cache/get_pip_24_2.py"
  (cd "$coll" && HOME="$home" ANSIBLE_COLLECTIONS_PATH="$GPUFLEET_DEPS_PATH" \
     ansible-test sanity --venv --python 3.11 --color no 2>&1 \
     | grep -v -e "is ignored: it is neither a file nor a directory" -e "^WARNING: Skipping sanity test .* on unsupported Python")
}

run_unit() {
  stage "unit tests (parsers over real captures, module, role interfaces, property-based)"
  PYTHONPATH="$GPUFLEET_SELF_PATH${PYTHONPATH:+:$PYTHONPATH}" pytest -q -p no:cacheprovider tests/unit
}

run_build_check() {
  stage "building the collection tarball and using gpufleet.node.baseline from an install of it"
  local out="$CACHE/build"
  rm -rf "$out" && mkdir -p "$out"
  ansible-galaxy collection build --output-path "$out" . >/dev/null
  local tarball
  tarball=$(ls "$out"/gpufleet-node-*.tar.gz)
  info "built $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB, $(tar -tzf "$tarball" | wc -l) entries)"
  local leaked
  leaked=$(tar -tzf "$tarball" \
    | grep -E '^(tests|extensions/molecule|molecule|tools|\.ci|\.github|\.config|\.hypothesis|\.pytest_cache|\.cache|\.venv)(/|$)' || true)
  [[ -z "$leaked" ]] || die "the tarball contains test, CI or cache files: $(head -5 <<<"$leaked" | tr '\n' ' ')"
  ANSIBLE_COLLECTIONS_PATH="$out/installed" \
    ansible-galaxy collection install --offline --no-deps -p "$out/installed" "$tarball" >/dev/null
  "$ROOT/tools/dockerd.sh" >/dev/null
  "$ROOT/tools/node-image.sh" >/dev/null
  local node=gpufleet-build-check
  rm_node "$node"
  "$ROOT/tools/mirror.sh" >/dev/null
  run_node "$node"
  trap 'rm_node '"$node" RETURN
  mkdir -p "$out/play"
  cat >"$out/play/use-installed.yml" <<'YAML'
- name: Use the installed collection by its FQCN
  hosts: all
  roles:
    - role: gpufleet.node.baseline
YAML
  (cd "$out/play" && ANSIBLE_COLLECTIONS_PATH="$out/installed:$GPUFLEET_DEPS_PATH" ANSIBLE_INJECT_FACT_VARS=false \
     ansible-playbook -i "$node," -c community.docker.docker --check use-installed.yml >"$out/play.log" 2>&1) \
     || { tail -30 "$out/play.log"; die "the installed collection did not run"; }
  if ! grep -q "gpufleet.node.baseline : Persist vm.swappiness" "$out/play.log" \
     || ! grep -q "included: gpufleet.node._apt " "$out/play.log"; then
    die "the play did not run gpufleet.node.baseline (and its helper _apt) from the installed collection"
  fi
  info "gpufleet.node.baseline ran from $out/installed (check mode): $(grep -E '^\S+ +: ok=' "$out/play.log" | tr -s ' ')"
}

# Molecule 26 in collection mode: run from the collection root (galaxy.yml), it takes the scenarios from
# extensions/molecule/<scenario>/ and the shared base config from extensions/molecule/config.yml.
#
# Two lanes run side by side (most of a scenario's time is apt, dpkg and systemd waiting, not CPU): the scenarios
# that serve the stand-in mirror on 127.0.0.1:18535 (they include tests/mirror/serve.yml, and the port is one
# for the whole host network) one after another in the first lane, every other scenario in the second. Node
# names differ per scenario, so the lanes share nothing else. The second lane's scenarios write their output to
# $CACHE/molecule/<scenario>.log, printed whole when the lane ends; its progress lines appear as it goes.
# GPUFLEET_MOLECULE_LANES=1 runs every scenario in one lane, in the given order.
serves_mirror() { grep -rqs --include='*.yml' 'tests/mirror/serve.yml' "extensions/molecule/$1"; }

# run_lane LANE SCENARIO...: one after another, stopping at the first failure. With LOGDIR set, each scenario's
# output goes to LOGDIR/<scenario>.log instead of stdout.
run_lane() {
  local lane=$1 scenario start; shift
  for scenario in "$@"; do
    stage "molecule test -s $scenario ($lane)"
    start=$(date +%s)
    if [[ -n ${LOGDIR:-} ]]; then
      molecule test -s "$scenario" >"$LOGDIR/$scenario.log" 2>&1 || { info "scenario $scenario FAILED after $(since "$start") s ($lane)"; return 1; }
    else
      molecule test -s "$scenario" || { info "scenario $scenario FAILED after $(since "$start") s ($lane)"; return 1; }
    fi
    info "scenario $scenario passed in $(since "$start") s ($lane)"
  done
}

run_molecule() {
  local total_start scenario mirror_lane=() other_lane=() logdir="$CACHE/molecule" other_pid rc_mirror=0 rc_other=0
  [[ ! -e molecule ]] || die "a molecule/ directory at the collection root makes Molecule ignore extensions/molecule"
  [[ ! -e .config/molecule/config.yml ]] || die ".config/molecule/config.yml would take the place of extensions/molecule/config.yml"
  for scenario in "$@"; do
    [[ -f "extensions/molecule/$scenario/molecule.yml" ]] || die "no Molecule scenario '$scenario' under extensions/molecule"
    if serves_mirror "$scenario"; then mirror_lane+=("$scenario"); else other_lane+=("$scenario"); fi
  done
  total_start=$(date +%s)
  if [[ ${GPUFLEET_MOLECULE_LANES:-2} == 1 || ${#mirror_lane[@]} == 0 || ${#other_lane[@]} == 0 ]]; then
    run_lane "one lane" "$@"
    info "all scenarios passed in $(since "$total_start") s"
    return
  fi
  info "lane 1 (serves the mirror): ${mirror_lane[*]}"
  info "lane 2 (beside it, output to $logdir/<scenario>.log): ${other_lane[*]}"
  rm -rf "$logdir" && mkdir -p "$logdir"
  # In a session of its own, so that this script, ended early (Ctrl-C, a CI timeout), takes the lane with it.
  LOGDIR=$logdir setsid "$ROOT/tools/run.sh" molecule-lane "lane 2" "${other_lane[@]}" &
  other_pid=$!
  trap 'kill -- -$other_pid 2>/dev/null || true' EXIT
  run_lane "lane 1" "${mirror_lane[@]}" || rc_mirror=$?
  wait "$other_pid" || rc_other=$?
  trap - EXIT
  for scenario in "${other_lane[@]}"; do
    [[ -f "$logdir/$scenario.log" ]] || continue
    stage "output of molecule test -s $scenario (lane 2)"
    cat "$logdir/$scenario.log"
  done
  (( rc_mirror == 0 )) || die "lane 1 failed (${mirror_lane[*]}): see its output above"
  (( rc_other == 0 )) || die "lane 2 failed (${other_lane[*]}): see its output above"
  info "all scenarios passed in $(since "$total_start") s (two lanes)"
}

check=${1:?usage: tools/run.sh CHECK [ARGS]}
shift
start=$(date +%s)
case "$check" in
  yamllint) run_yamllint ;;
  ansible-lint) run_ansible_lint ;;
  sanity) run_sanity ;;
  unit) run_unit ;;
  build-check) run_build_check ;;
  molecule) run_molecule "$@" ;;
  molecule-lane) run_lane "$@" ;;  # one lane of run_molecule
  *) die "unknown check: $check" ;;
esac
info "$check done in $(since "$start") s"
