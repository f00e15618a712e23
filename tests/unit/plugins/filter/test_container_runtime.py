"""The NVIDIA runtime merged into Docker's daemon.json and containerd's config.toml: other settings kept, the same
text back when nothing differs, bad files refused; the TOML writer round-trips what tomllib reads. The entries
are nvidia-ctk's (NVIDIA/nvidia-container-toolkit v1.17.8, pkg/config/engine/docker/docker.go and
pkg/config/engine/containerd/config.go); the two containerd files are what Debian 12's containerd 1.6.20~ds1 ships
and what containerd 2.2.1 (Ubuntu 22.04's) prints first in ``containerd config dump``."""
import json
import tomllib

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.container_runtime import (
    FilterModule, container_runtime_containerd, container_runtime_docker, toml_dumps)

NVIDIA = {"path": "nvidia-container-runtime", "args": []}

# /etc/containerd/config.toml of Debian 12's containerd 1.6.20~ds1-1+deb12u3.
DEBIAN_CONTAINERD = """version = 2

[plugins]
  [plugins."io.containerd.grpc.v1.cri"]
    [plugins."io.containerd.grpc.v1.cri".cni]
      bin_dir = "/usr/lib/cni"
      conf_dir = "/etc/cni/net.d"
  [plugins."io.containerd.internal.v1.opt"]
    path = "/var/lib/containerd/opt"
"""


def test_filters_are_exported():
    assert sorted(FilterModule().filters()) == ["container_runtime_containerd", "container_runtime_docker"]


# --- Docker --------------------------------------------------------------------------------------------------------

def test_docker_keeps_every_other_key_in_place():
    text = json.dumps({"log-driver": "json-file", "log-opts": {"max-size": "10m"},
                       "runtimes": {"crun": {"path": "/usr/bin/crun"}}, "data-root": "/srv/docker"})
    merged = json.loads(container_runtime_docker(text))
    assert list(merged) == ["log-driver", "log-opts", "runtimes", "data-root"]
    assert merged["log-opts"] == {"max-size": "10m"}
    assert merged["runtimes"] == {"crun": {"path": "/usr/bin/crun"}, "nvidia": NVIDIA}
    assert "default-runtime" not in merged


@pytest.mark.parametrize("text", [None, "", "  \n"])
def test_docker_missing_or_empty_file_gets_only_the_runtime(text):
    assert container_runtime_docker(text) == json.dumps({"runtimes": {"nvidia": NVIDIA}}, indent=4) + "\n"


def test_docker_second_pass_returns_the_same_text_byte_for_byte():
    once = container_runtime_docker('{"log-driver": "journald"}')
    assert container_runtime_docker(once) is once
    # A file already right but formatted otherwise is left as it is.
    compact = '{"runtimes":{"nvidia":{"args":[],"path":"nvidia-container-runtime"}}}'
    assert container_runtime_docker(compact) is compact


def test_docker_replaces_a_stale_nvidia_entry():
    text = '{"runtimes": {"nvidia": {"path": "/opt/old/nvidia-container-runtime", "args": ["--debug"]}}}'
    assert json.loads(container_runtime_docker(text))["runtimes"]["nvidia"] == NVIDIA


def test_docker_default_runtime_set_and_given_back():
    made_default = container_runtime_docker('{"log-driver": "journald"}', default=True)
    assert json.loads(made_default)["default-runtime"] == "nvidia"
    assert "default-runtime" not in json.loads(container_runtime_docker(made_default, default=False))
    # Another default is the user's: kept.
    assert json.loads(container_runtime_docker('{"default-runtime": "crun"}'))["default-runtime"] == "crun"


@pytest.mark.parametrize("text, says", [
    ("[]", "JSON list, not an object"),
    ('"x"', "JSON str, not an object"),
    ("{log-driver: json-file}", "not valid JSON"),
    ('{"runtimes": ["nvidia"]}', '"runtimes" is not an object'),
])
def test_docker_refuses_what_is_not_an_object(text, says):
    with pytest.raises(AnsibleFilterError, match=says):
        container_runtime_docker(text)


@pytest.mark.parametrize("name", ["", "nv idia", "a.b", 3])
def test_refuses_bad_runtime_names(name):
    with pytest.raises(AnsibleFilterError, match="runtime name"):
        container_runtime_docker("{}", runtime=name)
    with pytest.raises(AnsibleFilterError, match="runtime name"):
        container_runtime_containerd("", runtime=name)


# --- containerd ----------------------------------------------------------------------------------------------------

def runtimes_of(data, plugin):
    return data["plugins"][plugin]["containerd"]["runtimes"]


def test_containerd_debian_file_keeps_its_settings():
    merged = tomllib.loads(container_runtime_containerd(DEBIAN_CONTAINERD))
    before = tomllib.loads(DEBIAN_CONTAINERD)
    assert merged["plugins"]["io.containerd.grpc.v1.cri"]["cni"] == before["plugins"]["io.containerd.grpc.v1.cri"]["cni"]
    assert merged["plugins"]["io.containerd.internal.v1.opt"] == {"path": "/var/lib/containerd/opt"}
    assert runtimes_of(merged, "io.containerd.grpc.v1.cri")["nvidia"] == {
        "runtime_type": "io.containerd.runc.v2", "options": {"BinaryName": "/usr/bin/nvidia-container-runtime"}}
    assert merged["version"] == 2


@pytest.mark.parametrize("version, plugin", [(2, "io.containerd.grpc.v1.cri"), (3, "io.containerd.cri.v1.runtime")])
def test_containerd_missing_file_gets_the_engine_version(version, plugin):
    merged = tomllib.loads(container_runtime_containerd(None, version=version))
    assert merged["version"] == version
    assert runtimes_of(merged, plugin)["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"


def test_containerd_version_1_file_uses_the_cri_plugin():
    text = '[plugins.cri]\nsandbox_image = "k8s.gcr.io/pause:3.2"\n'
    merged = tomllib.loads(container_runtime_containerd(text))
    assert "version" not in merged
    assert merged["plugins"]["cri"]["sandbox_image"] == "k8s.gcr.io/pause:3.2"
    assert runtimes_of(merged, "cri")["nvidia"]["runtime_type"] == "io.containerd.runc.v2"


def test_containerd_new_entry_starts_from_runc_options():
    text = """version = 2
[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
  runtime_type = "io.containerd.runc.v2"
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
    SystemdCgroup = true
"""
    merged = tomllib.loads(container_runtime_containerd(text))
    runtimes = runtimes_of(merged, "io.containerd.grpc.v1.cri")
    assert runtimes["nvidia"]["options"] == {"SystemdCgroup": True, "BinaryName": "/usr/bin/nvidia-container-runtime"}
    assert runtimes["runc"]["options"] == {"SystemdCgroup": True}


def test_containerd_second_pass_returns_the_same_text():
    once = container_runtime_containerd(DEBIAN_CONTAINERD)
    assert once != DEBIAN_CONTAINERD
    assert container_runtime_containerd(once) is once


def test_containerd_default_runtime_set_and_given_back_to_runc():
    made_default = container_runtime_containerd(DEBIAN_CONTAINERD, default=True)
    cri = tomllib.loads(made_default)["plugins"]["io.containerd.grpc.v1.cri"]["containerd"]
    assert cri["default_runtime_name"] == "nvidia"
    back = tomllib.loads(container_runtime_containerd(made_default))["plugins"]["io.containerd.grpc.v1.cri"]
    assert back["containerd"]["default_runtime_name"] == "runc"


@pytest.mark.parametrize("text, says", [
    ("version = 2\n[plugins\n", "not valid TOML"),
    ("version = 7\n", "version = 7"),
    ('version = 2\nplugins = "none"\n', "plugins is not a table"),
    ('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\ncontainerd = 1\n', "io.containerd.grpc.v1.cri.containerd is not"),
])
def test_containerd_refuses_bad_files(text, says):
    with pytest.raises(AnsibleFilterError, match=says.replace(".", r"\.")):
        container_runtime_containerd(text)


def test_containerd_keeps_arrays_of_tables_inline_tables_and_odd_keys():
    text = """version = 2
oom_score = -999
imports = ["/etc/containerd/conf.d/*.toml"]
[grpc]
  address = "/run/containerd/containerd.sock"
  max_recv_message_size = 16777216
[plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
  endpoint = ["https://mirror.example.invalid"]
[[proxy_plugins_list]]
  name = "a"
  [proxy_plugins_list.sub]
    x = 1.5
[[proxy_plugins_list]]
  name = "b"
[timeouts]
  "io.containerd.timeout.shim.cleanup" = "5s"
  inline = {a = 1, "b c" = "tab\\tquote\\""}
"""
    merged = tomllib.loads(container_runtime_containerd(text))
    before = tomllib.loads(text)
    assert list(runtimes_of(merged, "io.containerd.grpc.v1.cri")) == ["nvidia"]
    merged["plugins"]["io.containerd.grpc.v1.cri"].pop("containerd")
    assert merged == before


@pytest.mark.parametrize("data", [
    {},
    {"a": {}},
    {"version": 2, "a": {"b": {"c": {}}}, "z": [1, 2], "s": "x\ny\u0001", "f": 0.5, "t": True},
    {"arr": [{"n": 1, "sub": {"k": "v"}}, {"n": 2}], "after": {"k": [{"inline": 1}, 2]}},
    {"k e y": {"dotted.key": {"x": -1}}},
])
def test_toml_writer_round_trips(data):
    assert tomllib.loads(toml_dumps(data)) == data


# --- arrays of tables: every item keeps its own [[...]] header, whatever it holds ----------------------------------

@pytest.mark.parametrize("data", [
    # An item with only sub-tables: its [[a]] header was dropped once, and {"c": 1} landed in the item itself.
    {"a": [{"b": {"c": 1}}]},
    {"a": [{"b": {"c": 1}}, {"b": {"c": 2}}]},
    {"a": [{"b": {"c": 1}, "d": {"e": "f"}}]},
    # Scalars and sub-tables.
    {"a": [{"n": 1, "b": {"c": 1}}, {"b": {"c": 2}}, {"n": 3}]},
    # Nested: arrays of tables in arrays of tables, and tables of tables in items.
    {"a": [{"b": [{"c": {"d": 1}}, {"e": 2}]}, {"b": [{"f": {"g": {"h": True}}}]}]},
    {"t": {"a": [{"b": {"c": 1}}], "k": "v"}, "z": [{"y": [{"x": {"w": 1}}]}]},
    # Empty items, and an item with only an array of tables.
    {"a": [{}, {}, {"b": [{}]}]},
])
def test_toml_writer_round_trips_arrays_of_tables(data):
    assert tomllib.loads(toml_dumps(data)) == data


def _random_table(rng, depth):
    keys = ["a", "b", "k e y", "dotted.key", "", "x-1", "\u00e9"]
    table = {}
    for key in rng.sample(keys, rng.randint(0, 4)):
        kind = rng.choice(["int", "str", "float", "bool", "list", "table", "tables"] if depth < 4 else
                          ["int", "str", "float", "bool", "list"])
        if kind == "int":
            table[key] = rng.randint(-10 ** 12, 10 ** 12)
        elif kind == "str":
            table[key] = "".join(rng.choice("ab \"\\\n\t\u0001\u00e9'") for dummy in range(rng.randint(0, 6)))
        elif kind == "float":
            table[key] = rng.uniform(-1e6, 1e6)
        elif kind == "bool":
            table[key] = rng.random() < 0.5
        elif kind == "list":
            table[key] = [rng.randint(0, 9) for dummy in range(rng.randint(0, 3))]
        elif kind == "table":
            table[key] = _random_table(rng, depth + 1)
        else:
            table[key] = [_random_table(rng, depth + 1) for dummy in range(rng.randint(1, 3))]
    return table


def test_toml_writer_round_trips_random_shapes():
    import random
    rng = random.Random(20261203)
    for dummy in range(500):
        data = _random_table(rng, 0)
        text = toml_dumps(data)
        assert tomllib.loads(text) == data, text
