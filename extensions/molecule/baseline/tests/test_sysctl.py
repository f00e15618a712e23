"""vm.swappiness is persisted in sysctl.d (the live value is the container host's and is left alone)."""


def test_swappiness_persisted(host):
    conf = host.file("/etc/sysctl.d/60-gpufleet-baseline.conf")
    assert conf.is_file
    assert conf.user == "root"
    lines = [line.replace(" ", "") for line in conf.content_string.splitlines()]
    assert "vm.swappiness=10" in lines
