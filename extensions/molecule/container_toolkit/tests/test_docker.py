"""daemon.json: the nvidia runtime merged in, the planted keys kept, the earlier file kept as a backup; the real
dockerd accepts it where it can check (--validate, Docker 23.0 and later: Ubuntu 22.04's docker.io 29; Debian 12's
20.10 has no --validate, and the role writes the file unvalidated there)."""
import json

DAEMON_JSON = "/etc/docker/daemon.json"


def test_runtime_merged_and_planted_keys_kept(host):
    config = json.loads(host.file(DAEMON_JSON).content_string)
    assert config["runtimes"] == {"nvidia": {"path": "nvidia-container-runtime", "args": []}}
    assert config["log-driver"] == "json-file"
    assert config["log-opts"] == {"max-size": "10m", "max-file": "3"}
    assert "default-runtime" not in config


def test_earlier_file_kept_as_backup(host):
    backups = host.check_output("ls /etc/docker/ | grep '^daemon.json\\..*~$' || true").split()
    assert len(backups) == 1
    assert json.loads(host.file("/etc/docker/" + backups[0]).content_string) == {
        "log-driver": "json-file", "log-opts": {"max-size": "10m", "max-file": "3"}}


def test_real_dockerd_validates_it_where_it_can(host, debian):
    version = host.check_output("dockerd --version")
    if debian:
        assert version.startswith("Docker version 20.10.")
        assert host.run("dockerd --validate --config-file %s" % DAEMON_JSON).rc != 0  # the flag does not exist
    else:
        result = host.run("dockerd --validate --config-file %s" % DAEMON_JSON)
        assert result.rc == 0, result.stderr
        assert "configuration OK" in result.stdout + result.stderr


def test_docker_was_not_started(host):
    # dockerd cannot run in a test node; the role does not start a stopped engine to configure it.
    assert not host.service("docker").is_running
