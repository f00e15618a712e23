#!/usr/bin/env bash
# The newest ansible-core release (requirements/newest.txt) on the collection: ansible-test sanity, the unit tests
# of the collection's code (tests/unit/plugins, roles) and a converge of site.yml's GPU facts and
# baseline run twice (the second must change nothing), all inside a node of the Ubuntu 24.04 image, whose Python
# 3.12 ansible-core 2.20 and later need on the controller (this machine's is 3.11), as ansible-test's own --docker
# mode would. The floor runs on this machine (make sanity unit, and every Molecule scenario).
#
# The image has no ensurepip (Ubuntu ships it in python3-venv): the virtualenv is made without pip and pip is
# installed from its wheel, which ansible-test's pip bootstrap also uses (tools/ansible-test/get_pip_standin.py).
# pip reaches PyPI as this machine does: the machine's CA bundle is bound into the node. shellcheck is not in the
# image: that sanity test runs at the floor only.
source "$(dirname "$0")/lib.sh"
cd "$ROOT" || exit 1

node=gpufleet-newest-core
work="$CACHE/newest-core"
pip_version=26.3
core=$(sed -n 's/^ansible-core==//p' requirements/newest.txt)
stage "ansible-core $core (the newest) inside a node of gpufleet-node:ubuntu2404: sanity, unit tests, a converge"
rm -rf "$work" && mkdir -p "$work/collection/ansible_collections/gpufleet/node" "$work/home/.ansible/test/cache"
git ls-files --cached --others --exclude-standard | while read -r f; do [[ -e "$f" ]] && echo "$f"; done \
  | tar -cf - -T - | tar -xf - -C "$work/collection/ansible_collections/gpufleet/node"
pip_quiet download --quiet --no-deps --only-binary=:all: -d "$work/home/.ansible/test/cache" "pip==$pip_version"
cp tools/ansible-test/get_pip_standin.py "$work/home/.ansible/test/cache/"
printf '[global]\ncert = /etc/gpufleet-host-ca.crt\n' >"$work/pip.conf"
"$ROOT/tools/dockerd.sh" >/dev/null
"$ROOT/tools/node-image.sh" ubuntu2404 >/dev/null
"$ROOT/tools/fake-nvml.sh" >/dev/null

rm_node "$node"
run_node --os ubuntu2404 --tmp-exec "$node" -v "$work:/srv/newest" -v /etc/ssl/certs/ca-certificates.crt:/etc/gpufleet-host-ca.crt:ro \
  -v "$work/pip.conf:/etc/pip.conf:ro" -v "$GPUFLEET_FAKE_NVML:/srv/fake-nvml/libnvidia-ml.so.1:ro"
serve_snapshot
trap 'rm_node "$node"; stop_snapshot' EXIT

# in_node SCRIPT: runs a bash script in the node, in the collection's directory, with the newest tool set first on
# PATH and HOME where ansible-test keeps its cache (the node's /tmp allows programs: the tests and ansible-test run
# some from there).
in_node() {
  docker exec -w /srv/newest/collection/ansible_collections/gpufleet/node -e HOME=/srv/newest/home \
    -e PATH=/opt/core/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin -e LANG=C.UTF-8 \
    -e ANSIBLE_COLLECTIONS_PATH=/srv/newest/collection -e ANSIBLE_INJECT_FACT_VARS=false \
    -e GPUFLEET_SELF_PATH=/srv/newest/collection \
    -e GPUFLEET_UNIT_FAKE_NVML=/srv/fake-nvml/libnvidia-ml.so.1 "$node" bash -euo pipefail -c "$1"
}

step=$(date +%s)
in_node "python3 -m venv --without-pip /opt/core
  /opt/core/bin/python /srv/newest/home/.ansible/test/cache/pip-$pip_version-py3-none-any.whl/pip install --quiet pip==$pip_version
  pip install --quiet -r requirements/newest.txt
  # ansible-test bootstraps pip in its virtualenvs with the get-pip script of the pip release it names
  wanted=\$(python -c 'import ansible_test, pathlib, re; print(re.search(r\"pip=.([0-9.]+).\", (pathlib.Path(ansible_test.__file__).parent / \"_internal/python_requirements.py\").read_text()).group(1))')
  cp \$HOME/.ansible/test/cache/get_pip_standin.py \$HOME/.ansible/test/cache/get_pip_\${wanted//./_}.py
  python --version; ansible --version | head -1; echo \"ansible-test bootstraps pip \$wanted\""
info "tool set installed in $(since "$step") s"

step=$(date +%s)
in_node "PYTHONPATH=/srv/newest/collection pytest -q -p no:cacheprovider tests/unit/plugins tests/unit/roles"
info "unit tests passed on ansible-core $core in $(since "$step") s"

step=$(date +%s)
in_node "ansible-test sanity --venv --python 3.12 --color no --skip-test shellcheck 2>&1 \
  | { grep -v -e 'is ignored: it is neither a file nor a directory' -e '^WARNING: Skipping sanity test .* on unsupported Python' || true; }"
info "ansible-test sanity passed on ansible-core $core in $(since "$step") s"

step=$(date +%s)
cat >"$work/inventory.yml" <<YAML
gpu_nodes:
  hosts:
    $node:
      ansible_connection: local
      ansible_python_interpreter: /usr/bin/python3
  vars:
    gpufleet_os_mirror_url: http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/ubuntu
    gpufleet_os_mirror_key_url: http://127.0.0.1:$GPUFLEET_SNAPSHOT_PORT/gpufleet-snapshot.pub
    gpufleet_os_mirror_key_fingerprint: $GPUFLEET_SNAPSHOT_FINGERPRINT
YAML
for run in converge idempotence; do
  in_node "ansible-playbook -i /srv/newest/inventory.yml gpufleet.node.site --tags baseline >/srv/newest/$run.log 2>&1" \
    || { tail -40 "$work/$run.log"; die "site.yml (--tags baseline) failed on ansible-core $core ($run)"; }
  recap=$(grep -E "^$node +: ok=" "$work/$run.log" | tr -s ' ')
  info "$run: $recap"
done
[[ $recap == *" changed=0 "* ]] || { grep -B3 '^changed:' "$work/idempotence.log" | head -40; die "the second run changed the node"; }
info "site.yml (GPU facts, baseline) converged and was idempotent on ansible-core $core in $(since "$step") s"
