"""The distribution's node exporter: package, arguments, service, the collector's timer and the record."""
import json


def test_the_distributions_package_without_recommends(host):
    package = host.package("prometheus-node-exporter")
    assert package.is_installed
    release = host.system_info.distribution, host.system_info.release
    # Debian 12 ships 1.5.0, Ubuntu 22.04 1.3.1
    assert package.version.startswith({("debian", "12"): "1.5.", ("ubuntu", "22.04"): "1.3."}[release])
    assert not host.package("prometheus-node-exporter-collectors").is_installed


def test_it_listens_where_configured_from_the_start(host, listen, textfile_directory):
    service = host.service("prometheus-node-exporter")
    assert service.is_running and service.is_enabled
    assert 'ARGS="--web.listen-address=%s --collector.textfile.directory=%s"' % (listen, textfile_directory) \
        in host.file("/etc/default/prometheus-node-exporter").content_string
    pid = host.check_output("systemctl show --property MainPID --value prometheus-node-exporter")
    cmdline = host.file("/proc/%s/cmdline" % pid).content_string.split("\0")
    assert "--web.listen-address=%s" % listen in cmdline
    assert "--collector.textfile.directory=%s" % textfile_directory in cmdline
    # Never on the package's default port on a shared network: the arguments were there before its first start.
    restarts = host.check_output("systemctl show --property NRestarts --value prometheus-node-exporter")
    assert restarts == "0"
    assert "9100" not in host.run("journalctl -u prometheus-node-exporter --no-pager -o cat | grep -i 'listening'").stdout


def test_the_collector_runs_on_its_timer(host, textfile_directory):
    timer = host.service("gpufleet-gpu-metrics.timer")
    assert timer.is_enabled and timer.is_running
    assert host.file("/etc/systemd/system/gpufleet-gpu-metrics.service").contains("Type=oneshot")
    result = host.run("systemctl show --property Result --value gpufleet-gpu-metrics.service")
    assert result.stdout.strip() == "success"
    directory = host.file(textfile_directory)
    assert directory.is_directory and directory.user == "root" and directory.group == "root" and directory.mode == 0o755
    prom = host.file(textfile_directory + "/gpufleet-gpu.prom")
    assert prom.is_file and prom.mode == 0o644
    # Written through a temporary file and a rename: nothing else left in the directory.
    assert host.check_output("ls -A %s", textfile_directory) == "gpufleet-gpu.prom"


def test_the_collectors_code_is_the_collections(host):
    base = "/usr/local/lib/gpufleet/ansible_collections/gpufleet/node/plugins"
    for name in ("gpu_inventory", "gpu_metrics", "health", "nvidia_smi", "nvml", "nvml_bindings", "nvml_child",
                 "nvml_constants", "nvml_convert", "process"):
        assert host.file("%s/module_utils/%s.py" % (base, name)).is_file, name
    assert not host.file(base + "/filter").exists     # removed: the health gates are module_utils/health.py
    assert not host.exists("ansible") and host.run("python3 -c 'import ansible'").rc != 0


def test_the_record(host, listen, textfile_directory):
    record = json.loads(host.file("/etc/gpufleet/monitoring.json").content_string)
    interval = host.ansible.get_variables().get("gpu_monitoring_interval_s", 30)
    assert record == {"node_exporter": {"listen_address": listen, "metrics_path": "/metrics"},
                      "textfile": textfile_directory + "/gpufleet-gpu.prom",
                      "interval_s": interval, "metric_prefix": "DCGM_FI_"}
