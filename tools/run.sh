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
run_molecule() {
  local total_start scenario start
  [[ ! -e molecule ]] || die "a molecule/ directory at the collection root makes Molecule ignore extensions/molecule"
  [[ ! -e .config/molecule/config.yml ]] || die ".config/molecule/config.yml would take the place of extensions/molecule/config.yml"
  total_start=$(date +%s)
  for scenario in "$@"; do
    stage "molecule test -s $scenario"
    start=$(date +%s)
    molecule test -s "$scenario"
    info "scenario $scenario passed in $(since "$start") s"
  done
  info "all scenarios passed in $(since "$total_start") s"
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
  *) die "unknown check: $check" ;;
esac
info "$check done in $(since "$start") s"
