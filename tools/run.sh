#!/usr/bin/env bash
# Runs one family of checks of `make test`; each says what it does and how long it took.
#   tools/run.sh yamllint | ansible-lint | docs | sanity | unit | build-check | molecule SCENARIO...
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

# The generated documentation is what its sources say: each role README's variables are its
# meta/argument_specs.yml (tools/role-docs.py, which also checks the READMEs' common shape), the changelog fragments
# and changelogs/changelog.yaml pass antsibull-changelog's lint, and CHANGELOG.md is what changelog.yaml renders to.
run_docs() {
  stage "generated docs (role READMEs from meta/argument_specs.yml, CHANGELOG.md from changelogs/)"
  python tools/role-docs.py --check
  antsibull-changelog lint
  antsibull-changelog lint-changelog-yaml changelogs/changelog.yaml
  local generated="$CACHE/docs/CHANGELOG.md"
  mkdir -p "$CACHE/docs"
  antsibull-changelog generate --output "$generated" --output-format md
  diff -u CHANGELOG.md "$generated" \
    || die "CHANGELOG.md is not what changelogs/changelog.yaml renders to: run antsibull-changelog generate (or release)"
  info "changelog: fragments valid, CHANGELOG.md up to date"
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
  stage "building the collection tarball, the execution environment's build context, and using gpufleet.node.baseline from an install of it"
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
  # The execution environment of AWX / Automation Platform: ansible-builder create on execution-environment.yml
  # with this tarball beside it, and its build context checked (no base image can be pulled here to build it).
  python3 tools/ee-check.py --tarball "$tarball" --work "$out/ee" || die "execution-environment.yml or its build context is wrong (above)"
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
# Lanes run side by side, two by default: two lanes took as long each as their scenarios one after another (apt,
# dpkg and systemd waiting), while three saturated the two CPUs (Ansible's per-task work) and made every scenario
# about twice as slow. The scenarios
# are dealt to the lanes longest first (by the durations measured in CI, below), each to the lane with less work
# so far. A lane serves the stand-in mirror on a port of its own (GPUFLEET_MIRROR_PORT, read by
# tests/mirror/serve.yml and the scenarios' inventories), so scenarios that serve it can run beside each other;
# node names differ per scenario, so the lanes share nothing else. Each scenario's output goes to
# $CACHE/molecule/<scenario>.log, printed whole when every lane has ended, followed by a digest of the failures
# (the failing tasks and tests of each failed scenario), so the end of the output says what broke.
# GPUFLEET_MOLECULE_LANES=N sets the number of lanes; 1 runs every scenario in the given order, output on stdout.
#
# Seconds each job took in two lanes on this kind of machine (2026-12-07: make test, and the scenarios it had not
# reached run again the same way after fixes; the code cache in the node images); a
# scenario not listed counts as 200. Only the dealing depends on them.
declare -A SCENARIO_SECONDS=(
  [fleet]=1020 [slurm_drain]=999 [nvidia_driver_changes]=622 [container_toolkit]=355 [stack_ubuntu]=273
  [newest-core]=260 [infra-repo]=234 [ubuntu_releases]=222 [self_converge]=205 [cuda_nccl]=200
  [nvidia_driver_blackwell]=189 [nvidia_driver_ubuntu]=178 [pytorch]=176 [nvidia_driver_cuda_repo]=163
  [gpu_monitoring]=126 [nvidia_driver_debian]=115 [baseline]=100 [gpu_power]=82 [gpu_facts]=61
)
# Lane jobs besides the Molecule scenarios, each run by the script of its name in tools/: infra-repo, the infra
# repository of docs/infra-repo.md with its own Molecule scenario; newest-core, the newest ansible-core release.
TOOL_JOBS=" infra-repo newest-core "
MIRROR_PORT_BASE=18535   # lane N serves the mirror on MIRROR_PORT_BASE + N - 1

# typed_molecule ARGS...: Molecule as a user types it after `make bench-env` with .venv activated: the
# environment holds only the venv on PATH, HOME, the locale and the ports this lane serves on. What the scenarios
# need besides comes from extensions/molecule/config.yml and its create and destroy steps, so every scenario run
# here also checks that `molecule test -s SCENARIO` works as typed.
typed_molecule() {
  env -i HOME="$HOME" VIRTUAL_ENV="$VENV" PATH="$VENV/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin" \
    LANG=C.UTF-8 GPUFLEET_MIRROR_PORT="$GPUFLEET_MIRROR_PORT" GPUFLEET_SNAPSHOT_PORT="$GPUFLEET_SNAPSHOT_PORT" \
    MOLECULE_NO_LOG=false molecule "$@"
}

# lane_job NAME: a Molecule scenario of this collection, or one of TOOL_JOBS.
lane_job() {
  if [[ $TOOL_JOBS == *" $1 "* ]]; then "$ROOT/tools/$1.sh"; else typed_molecule test -s "$1"; fi
}

# run_lane LANE SCENARIO...: one after another, stopping at the first failure. With LOGDIR set, each scenario's
# output goes to LOGDIR/<scenario>.log instead of stdout.
run_lane() {
  local lane=$1 scenario start; shift
  for scenario in "$@"; do
    if [[ $TOOL_JOBS == *" $scenario "* ]]; then stage "tools/$scenario.sh ($lane)"; else stage "molecule test -s $scenario ($lane)"; fi
    start=$(date +%s)
    if [[ -n ${LOGDIR:-} ]]; then
      lane_job "$scenario" >"$LOGDIR/$scenario.log" 2>&1 || { info "scenario $scenario FAILED after $(since "$start") s ($lane)"; return 1; }
      touch "$LOGDIR/$scenario.passed"
    else
      lane_job "$scenario" || { info "scenario $scenario FAILED after $(since "$start") s ($lane)"; return 1; }
    fi
    info "scenario $scenario passed in $(since "$start") s ($lane)"
  done
}

# failure_digest LOG: the lines that say what failed in a Molecule log (failed tasks with their messages, failed
# assertions and tests, Molecule's errors).
failure_digest() {
  grep -E -A12 '^(fatal|failed): |FAILED!|^E  |^FAILED |^ERROR ' "$1" | grep -v '^--$' | cut -c1-400 | head -120 || true
}

LANE_PIDS=()
stop_lanes() {
  local pid
  for pid in "${LANE_PIDS[@]}"; do kill -- -"$pid" 2>/dev/null || true; done
}

run_molecule() {
  local total_start scenario lane best lanes=() lane_seconds=() rcs=() logdir="$CACHE/molecule" failed=() count
  count=${GPUFLEET_MOLECULE_LANES:-2}
  [[ ! -e molecule ]] || die "a molecule/ directory at the collection root makes Molecule ignore extensions/molecule"
  [[ ! -e .config/molecule/config.yml ]] || die ".config/molecule/config.yml would take the place of extensions/molecule/config.yml"
  [[ $count =~ ^[1-9]$ ]] || die "GPUFLEET_MOLECULE_LANES must be 1 to 9; got '$count'"
  for scenario in "$@"; do
    [[ -f "extensions/molecule/$scenario/molecule.yml" || $TOOL_JOBS == *" $scenario "* ]] \
      || die "no Molecule scenario '$scenario' under extensions/molecule (nor one of:$TOOL_JOBS)"
  done
  total_start=$(date +%s)
  rm -rf "$logdir" && mkdir -p "$logdir"
  # The real distribution packages come from the frozen snapshot (tools/snapshot.sh), served from here for every
  # lane; its manifest is kept with the logs.
  serve_snapshot
  cp "$GPUFLEET_SNAPSHOT_DIR/manifest.tsv" "$GPUFLEET_SNAPSHOT_DIR/fallbacks.txt" "$logdir/"
  info "distribution packages: the snapshot on 127.0.0.1:$GPUFLEET_SNAPSHOT_PORT (key $GPUFLEET_SNAPSHOT_FINGERPRINT;" \
    "$(($(wc -l <"$logdir/manifest.tsv") - 1)) packages, manifest $logdir/manifest.tsv)"
  (( count <= $# )) || count=$#
  if (( count <= 1 )); then
    trap stop_snapshot EXIT
    GPUFLEET_MIRROR_PORT=$MIRROR_PORT_BASE run_lane "one lane" "$@"
    info "all scenarios passed in $(since "$total_start") s"
    return
  fi
  for ((lane = 0; lane < count; lane++)); do lanes[lane]=""; lane_seconds[lane]=0; done
  while read -r _ scenario; do
    best=0
    for ((lane = 1; lane < count; lane++)); do (( lane_seconds[lane] < lane_seconds[best] )) && best=$lane; done
    lanes[best]+=" $scenario"
    (( lane_seconds[best] += ${SCENARIO_SECONDS[$scenario]:-200} ))
  done < <(for scenario in "$@"; do echo "${SCENARIO_SECONDS[$scenario]:-200} $scenario"; done | sort -k1,1nr -k2)
  for ((lane = 0; lane < count; lane++)); do
    info "lane $((lane + 1)) (mirror port $((MIRROR_PORT_BASE + lane)), about ${lane_seconds[lane]} s):${lanes[lane]}"
    # In a session of its own, so that this script, ended early (Ctrl-C, a CI timeout), takes the lane with it.
    # shellcheck disable=SC2086 # the lane is a list of scenario names
    GPUFLEET_MIRROR_PORT=$((MIRROR_PORT_BASE + lane)) LOGDIR=$logdir setsid "$ROOT/tools/run.sh" molecule-lane "lane $((lane + 1))" ${lanes[lane]} &
    LANE_PIDS+=($!)
  done
  trap 'stop_lanes; stop_snapshot' EXIT
  for ((lane = 0; lane < count; lane++)); do
    rcs[lane]=0
    wait "${LANE_PIDS[lane]}" || rcs[lane]=$?
  done
  trap - EXIT
  stop_snapshot
  for scenario in "$@"; do
    [[ -f "$logdir/$scenario.log" ]] || continue
    stage "output of $scenario"
    cat "$logdir/$scenario.log"
    [[ -f "$logdir/$scenario.passed" ]] || failed+=("$scenario")
  done
  if [[ " ${rcs[*]} " =~ [^0\ ] ]]; then
    for scenario in "${failed[@]}"; do
      stage "what failed in $scenario ($logdir/$scenario.log)"
      failure_digest "$logdir/$scenario.log"
    done
    die "Molecule failed: ${failed[*]:-a lane} (lane exit codes ${rcs[*]}); the digest above says what, the output above it how"
  fi
  info "all scenarios passed in $(since "$total_start") s ($count lanes)"
}

check=${1:?usage: tools/run.sh CHECK [ARGS]}
shift
start=$(date +%s)
case "$check" in
  yamllint) run_yamllint ;;
  ansible-lint) run_ansible_lint ;;
  docs) run_docs ;;
  sanity) run_sanity ;;
  unit) run_unit ;;
  build-check) run_build_check ;;
  molecule) run_molecule "$@" ;;
  molecule-lane) run_lane "$@" ;;  # one lane of run_molecule
  *) die "unknown check: $check" ;;
esac
info "$check done in $(since "$start") s"
