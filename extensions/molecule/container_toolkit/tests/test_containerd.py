"""config.toml: the nvidia runtime under the CRI plugin of the file's version (2 on Debian's containerd 1.6, 3 on
Ubuntu's containerd 2.2, whose package ships no file), the user's settings kept; the real containerd loads it and
its config dump shows the runtime; containerd (running, no containers) was restarted for it."""
import re


def dump(host):
    result = host.run("containerd config dump")
    assert result.rc == 0, result.stderr
    return result.stdout


def test_config_dump_shows_the_nvidia_runtime(host, debian):
    text = dump(host)
    plugin = "io.containerd.grpc.v1.cri" if debian else "io.containerd.cri.v1.runtime"
    table = re.search(r"^\s*\[plugins\.[\"']%s[\"']\.containerd\.runtimes\.nvidia\]\n(.*?)\n\s*\[" % re.escape(plugin),
                      text, re.M | re.S)
    assert table, text
    assert re.search(r"runtime_type = [\"']io\.containerd\.runc\.v2[\"']", table.group(1))
    assert re.search(r"BinaryName = [\"']/usr/bin/nvidia-container-runtime[\"']", text)


def test_user_settings_kept(host, debian):
    text = dump(host)
    assert re.search(r"^oom_score = -999$", text, re.M)
    assert re.search(r"^\s*max_recv_message_size = 33554432$", text, re.M)
    config = host.file("/etc/containerd/config.toml").content_string
    assert config.startswith("version = %d\n" % (2 if debian else 3))
    if debian:  # the settings Debian's package ships
        assert 'bin_dir = "/usr/lib/cni"' in config


def test_containerd_restarted_and_running(host):
    assert host.service("containerd").is_running
    started = host.check_output("systemctl show containerd --property=ActiveEnterTimestampMonotonic --value")
    changed = host.check_output("stat -c %Y /etc/containerd/config.toml")
    assert int(started) > 0 and int(changed) > 0
    # Restarted after the file was written: the daemon started later than the file's last change.
    uptime_s = float(host.check_output("cut -d' ' -f1 /proc/uptime"))
    now = int(host.check_output("date +%s"))
    boot = now - uptime_s
    assert boot + int(started) / 1e6 >= int(changed) - 1
