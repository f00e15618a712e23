"""The preflight filters (plugins/filter/preflight.py): every error of every role's settings check, its exact sentence,
the order of several, and valid settings giving none. The settings start from each role's defaults
(roles/<role>/defaults/main.yml), so a default the checks would refuse fails here too."""
import pathlib

import pytest
import yaml

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter import preflight

ROOT = pathlib.Path(__file__).resolve().parents[4]


def defaults(role, *names):
    """The role's defaults for ``names`` (plain values: none of these is a template)."""
    values = yaml.safe_load((ROOT / "roles" / role / "defaults" / "main.yml").read_text(encoding="utf-8"))
    return dict((name, values[name]) for name in names)


def test_every_filter_is_registered():
    assert sorted(preflight.FilterModule().filters()) == sorted([
        "baseline_setting_errors", "nvidia_container_toolkit_setting_errors", "cuda_setting_errors", "gpu_monitoring_setting_errors",
        "gpu_power_setting_errors", "nccl_setting_errors", "nccl_config_errors", "pytorch_setting_errors",
        "nvidia_driver_setting_errors"])


@pytest.mark.parametrize("function", [preflight.cuda_setting_errors, preflight.pytorch_setting_errors])
def test_the_settings_must_be_a_dict_holding_every_name(function):
    with pytest.raises(AnsibleFilterError, match="expects a dict of the role's settings, got list"):
        function([])
    with pytest.raises(AnsibleFilterError, match="needs the settings"):
        function({})


# --- baseline ------------------------------------------------------------------------------------------------------

BASELINE = ("baseline_swappiness", "baseline_memlock_limit", "baseline_kernel_headers_metapackage",
            "baseline_masked_units", "baseline_upgrade_guard_patterns")


def baseline(**changes):
    settings = defaults("baseline", *BASELINE)
    settings.update(("baseline_" + name, value) for name, value in changes.items())
    return preflight.baseline_setting_errors(settings)


def test_baseline_defaults_are_valid():
    assert baseline() == []


@pytest.mark.parametrize("value, shown", [(250, "250"), ("ten", '"ten"'), (-1, "-1"), (None, "null")])
def test_baseline_swappiness_from_0_to_200(value, shown):
    assert baseline(swappiness=value) == [
        "baseline_swappiness must be an integer from 0 to 200 (kernels since 5.8); got %s." % shown]


@pytest.mark.parametrize("value", [0, 200, "60"])
def test_baseline_swappiness_in_range_is_accepted(value):
    assert baseline(swappiness=value) == []


@pytest.mark.parametrize("value, wrong", [("unlimited", False), (65536, False), ("65536", False), (0, True),
                                          (-5, True), ("lots", True)])
def test_baseline_memlock_limit(value, wrong):
    assert bool(baseline(memlock_limit=value)) == wrong


@pytest.mark.parametrize("value, wrong", [("auto", False), ("", False), ("linux-headers-oem-22.04d", False),
                                          ("Linux Headers", True), ("linux-headers-*", True)])
def test_baseline_headers_metapackage(value, wrong):
    assert bool(baseline(kernel_headers_metapackage=value)) == wrong


def test_baseline_masked_units_name_the_bad_ones():
    assert baseline(masked_units=["cups.service", "avahi", "x.mount"]) == [
        'baseline_masked_units must hold unit names such as avahi-daemon.service; not: ["avahi", "x.mount"].']


@pytest.mark.parametrize("pattern", ["", "  ", 'say "x"', "a;b", "{x}", "^libcudnn\\d"])
def test_baseline_guard_patterns_apt_conf_cannot_carry(pattern):
    errors = baseline(upgrade_guard_patterns=["^cudnn", pattern])
    assert len(errors) == 1 and errors[0].startswith("baseline_upgrade_guard_patterns must be non-empty patterns")


def test_baseline_errors_come_in_the_order_of_the_checks():
    errors = baseline(swappiness=300, memlock_limit=0, masked_units=["x"], upgrade_guard_patterns=[""])
    assert [error.split(" ", 1)[0] for error in errors] == [
        "baseline_swappiness", "baseline_memlock_limit", "baseline_masked_units", "baseline_upgrade_guard_patterns"]


# --- nvidia_container_toolkit --------------------------------------------------------------------------------------

TOOLKIT = ("nvidia_container_toolkit_version", "nvidia_container_toolkit_repo_url",
           "nvidia_container_toolkit_repo_key_url", "nvidia_container_toolkit_repo_key_fingerprint",
           "nvidia_container_toolkit_engines", "nvidia_container_toolkit_docker_config",
           "nvidia_container_toolkit_containerd_config", "nvidia_container_toolkit_cdi_spec")


def toolkit(**changes):
    settings = defaults("nvidia_container_toolkit", *TOOLKIT)
    settings.update(("nvidia_container_toolkit_" + name, value) for name, value in changes.items())
    return preflight.nvidia_container_toolkit_setting_errors(settings)


def test_toolkit_defaults_are_valid():
    assert toolkit() == []


@pytest.mark.parametrize("version", ["1.17.8-1", "1.18.0~rc.1-1", "10.0.0-12"])
def test_toolkit_versions_apt_knows(version):
    assert toolkit(version=version) == []


@pytest.mark.parametrize("version, shown", [
    ("1.17.8", '"1.17.8"'), ("1.17-1", '"1.17-1"'), ("v1.17.8-1", '"v1.17.8-1"'), ("1.17.8-1\n", '"1.17.8-1\\n"'),
    (None, "null"), (1.17, "1.17")])
def test_toolkit_version_must_be_an_apt_version(version, shown):
    assert toolkit(version=version) == [
        'nvidia_container_toolkit_version must be an apt version of the toolkit such as "1.17.8-1"; got %s.' % shown]


@pytest.mark.parametrize("name", ["repo_url", "repo_key_url"])
@pytest.mark.parametrize("url", ["ftp://mirror/x", "nvidia.github.io/libnvidia-container", ""])
def test_toolkit_urls_must_be_http_or_file(name, url):
    assert toolkit(**{name: url}) == [
        'nvidia_container_toolkit_%s must be an http(s) or file URL; got "%s".' % (name, url)]


def test_toolkit_file_urls_are_accepted():
    assert toolkit(repo_url="file:///srv/mirror/deb", repo_key_url="file:/srv/key.pub") == []


def test_toolkit_fingerprint_with_spaces_is_accepted_a_short_one_is_not():
    assert toolkit(repo_key_fingerprint="C95B 321B 61E8 8C18 09C4  F759 DDCA E044 F796 ECB0") == []
    assert toolkit(repo_key_fingerprint="F796ECB0") == [
        'nvidia_container_toolkit_repo_key_fingerprint must be a full 40-hex-digit fingerprint; got "F796ECB0".']


def test_toolkit_engines_unknown_once_each_in_order():
    assert toolkit(engines=["docker", "podman", "cri-o", "podman"]) == [
        "nvidia_container_toolkit_engines may name docker and containerd only; not known: podman, cri-o."]
    assert toolkit(engines=[]) == []


@pytest.mark.parametrize("name", ["docker_config", "containerd_config", "cdi_spec"])
def test_toolkit_paths_must_be_absolute_without_spaces(name):
    path = "etc/x.json" if name != "cdi_spec" else "/etc/my cdi/nvidia.yaml"
    assert toolkit(**{name: path}) == [
        'nvidia_container_toolkit_%s must be an absolute path without spaces; got "%s".' % (name, path)]


def test_toolkit_cdi_spec_must_be_yaml_or_json():
    assert toolkit(cdi_spec="/etc/cdi/nvidia.yml") == [
        'nvidia_container_toolkit_cdi_spec must end in .yaml or .json (the names CDI runtimes read); '
        'got "/etc/cdi/nvidia.yml".']
    assert toolkit(cdi_spec="/var/run/cdi/nvidia.json") == []


def test_toolkit_errors_come_in_the_order_of_the_checks():
    errors = toolkit(version="1", engines=["podman"], cdi_spec="cdi.txt")
    assert [error.split(" ", 1)[0] for error in errors] == [
        "nvidia_container_toolkit_version", "nvidia_container_toolkit_engines", "nvidia_container_toolkit_cdi_spec",
        "nvidia_container_toolkit_cdi_spec"]


# --- cuda ----------------------------------------------------------------------------------------------------------

def cuda(**settings):
    values = defaults("cuda", "cuda_version", "cuda_additional_versions")
    values.update(settings)
    return preflight.cuda_setting_errors(values)


def test_cuda_defaults_are_valid():
    assert cuda() == []
    assert cuda(cuda_version="12.4", cuda_additional_versions=["12.1", "11.8"]) == []


@pytest.mark.parametrize("version, shown", [("12", '"12"'), ("12.1.1", '"12.1.1"'), ("", '""'), (None, "null")])
def test_cuda_version_must_be_major_minor(version, shown):
    assert cuda(cuda_version=version) == [
        'cuda_version takes a major.minor release such as "12.1" (quoted, so YAML keeps it a string); got %s.'
        % shown]


def test_cuda_additional_versions_name_the_bad_ones():
    assert cuda(cuda_additional_versions=["12.2", "12", "latest"]) == [
        'cuda_additional_versions take major.minor releases such as "12.2"; not: ["12", "latest"].']


# --- gpu_monitoring ------------------------------------------------------------------------------------------------

MONITORING = ("gpu_monitoring_listen_address", "gpu_monitoring_node_exporter_extra_args",
              "gpu_monitoring_textfile_directory", "gpu_monitoring_interval_s", "gpu_monitoring_timeout_s")
LISTEN_ERROR = ('gpu_monitoring_listen_address must be host:port as node exporter takes it (":9100", '
                '"127.0.0.1:9100", "[::1]:9100"), with a port from 1 to 65535; got %s.')
ARGS_ERROR = ('gpu_monitoring_node_exporter_extra_args must be flags "--name" or "--name=value" without spaces, quotes '
              "or backslashes, and not the role's own --web.listen-address or --collector.textfile.directory (use "
              "gpu_monitoring_listen_address and gpu_monitoring_textfile_directory); not valid: %s.")


def monitoring(**changes):
    settings = defaults("gpu_monitoring", *MONITORING)
    settings.update(("gpu_monitoring_" + name, value) for name, value in changes.items())
    return preflight.gpu_monitoring_setting_errors(settings)


def test_monitoring_defaults_are_valid():
    assert monitoring() == []


@pytest.mark.parametrize("address", [":9100", "127.0.0.1:9100", "[::1]:9100", "node-1.example:1", "0.0.0.0:65535"])
def test_monitoring_listen_addresses_node_exporter_takes(address):
    assert monitoring(listen_address=address) == []


@pytest.mark.parametrize("address, shown", [
    ("9100", '"9100"'), (":0", '":0"'), (":65536", '":65536"'), ("::1:9100", '"::1:9100"'), ("host:", '"host:"'),
    (9100, "9100")])
def test_monitoring_listen_address_must_be_host_and_port(address, shown):
    assert monitoring(listen_address=address) == [LISTEN_ERROR % shown]


def test_monitoring_extra_args_flags_pass():
    assert monitoring(node_exporter_extra_args=["--collector.systemd", "--web.max-requests=40",
                                                "--collector.filesystem.mount-points-exclude=^/(dev|proc)"]) == []


def test_monitoring_extra_args_name_each_bad_one_once_in_order():
    args = ["--collector.systemd", "-v", 7, "--web.listen-address=:9200", "--x=a b", "--collector.textfile.directory",
            '--y="q"']
    assert monitoring(node_exporter_extra_args=args) == [
        ARGS_ERROR % '["-v", "7", "--web.listen-address=:9200", "--x=a b", "--collector.textfile.directory", '
                     '"--y=\\"q\\""]']


@pytest.mark.parametrize("directory", ["var/lib/textfile", "/var/lib/node exporter", '/var/lib/"x"', ""])
def test_monitoring_textfile_directory_must_be_absolute_without_spaces_or_quotes(directory):
    assert monitoring(textfile_directory=directory) == [
        "gpu_monitoring_textfile_directory must be an absolute path without spaces or quotes; got %s."
        % preflight._json(directory)]


def test_monitoring_interval_at_least_5_seconds():
    assert monitoring(interval_s=4, timeout_s=2) == ["gpu_monitoring_interval_s must be at least 5 seconds; got 4."]
    assert monitoring(interval_s=5, timeout_s=4) == []


@pytest.mark.parametrize("timeout", [0, 30, 31])
def test_monitoring_timeout_at_least_1_and_below_the_interval(timeout):
    assert monitoring(interval_s=30, timeout_s=timeout) == [
        "gpu_monitoring_timeout_s must be at least 1 and less than gpu_monitoring_interval_s (30); got %d." % timeout]


def test_monitoring_numbers_are_read_as_the_int_filter_reads_them():
    """"10" and 10.9 are 10; text that is not a number is 0."""
    assert monitoring(interval_s="10", timeout_s=9.9) == []
    assert monitoring(interval_s="often", timeout_s=1) == [
        'gpu_monitoring_interval_s must be at least 5 seconds; got "often".',
        "gpu_monitoring_timeout_s must be at least 1 and less than gpu_monitoring_interval_s (often); got 1."]


# --- gpu_power -----------------------------------------------------------------------------------------------------

def power(limits=None, clocks=None):
    return preflight.gpu_power_setting_errors({"gpu_power_limits_w": {} if limits is None else limits,
                                               "gpu_power_locked_clocks_mhz": {} if clocks is None else clocks})


def test_power_defaults_are_valid():
    assert preflight.gpu_power_setting_errors(
        defaults("gpu_power", "gpu_power_limits_w", "gpu_power_locked_clocks_mhz")) == []
    assert power({"NVIDIA H100 80GB HBM3": 500, "NVIDIA A100-SXM4-80GB": 312.5},
                 {"NVIDIA H100 80GB HBM3": [1410, 1980], "NVIDIA A100-SXM4-80GB": [1410, 1410]}) == []


def test_power_limits_must_be_positive_numbers_named_in_the_maps_order():
    limits = {"A": "500W", "B": 400, "C": True, "D": 0, "E": -5, "F": None}
    assert power(limits) == [
        "gpu_power_limits_w values must be positive numbers of watts; not valid for: A, C, D, E, F."]


@pytest.mark.parametrize("clocks", [[1410], [1410, 1980, 2000], "1410,1980", [1410.0, 1980], [True, 1980], [0, 1980],
                                    [-1, 5], {"min": 1410, "max": 1980}, None])
def test_power_clocks_must_be_two_whole_mhz_above_0(clocks):
    assert power(clocks={"NVIDIA H100 80GB HBM3": clocks}) == [
        "gpu_power_locked_clocks_mhz values must be [min, max] in whole MHz above 0; not valid for: "
        "NVIDIA H100 80GB HBM3."]


def test_power_min_above_max_for_valid_pairs_only():
    assert power(clocks={"A": [1980, 1410], "B": [5], "C": [1410, 1980]}) == [
        "gpu_power_locked_clocks_mhz values must be [min, max] in whole MHz above 0; not valid for: B.",
        "gpu_power_locked_clocks_mhz: min above max for: A."]


def test_power_maps_must_be_maps():
    assert power(limits=[500], clocks="1410") == [
        "gpu_power_limits_w must map GPU models to settings; got [500].",
        'gpu_power_locked_clocks_mhz must map GPU models to settings; got "1410".']


# --- nccl ----------------------------------------------------------------------------------------------------------

NCCL = ("nccl_cuda_version", "nccl_version", "nccl_tests_efficiency", "nccl_tests_min_fraction", "nccl_tests_checksum")
DEBUG = ["NCCL_DEBUG", "NCCL_DEBUG_SUBSYS", "NCCL_DEBUG_FILE"]


def nccl(**settings):
    values = defaults("nccl", *NCCL[1:])
    values["nccl_cuda_version"] = "12.1"   # the default is a template ({{ cuda_version | default('12.1') }})
    values.update(settings)
    return preflight.nccl_setting_errors(values)


def test_nccl_defaults_are_valid():
    assert nccl() == []
    assert nccl(nccl_version="2.18.3-1+cuda12.1", nccl_tests_checksum="sha256:" + "ab" * 32,
                nccl_tests_efficiency=1, nccl_tests_min_fraction="0.5") == []


def test_nccl_cuda_version_must_be_major_minor():
    assert nccl(nccl_cuda_version="12") == ['nccl_cuda_version must be a CUDA release such as "12.1"; got "12".']


@pytest.mark.parametrize("version", ["2.18.3-1+cuda12.2", "2.18.3-1+cuda12.1.1", "2.18.3+cuda12.1", "2.18.3-1",
                                     "2.18.3-1+cuda1211"])
def test_nccl_version_must_be_built_for_the_cuda_release(version):
    assert nccl(nccl_version=version) == [
        'nccl_version must be empty or a package version built for CUDA 12.1, such as "2.18.3-1+cuda12.1"; got "%s".'
        % version]


@pytest.mark.parametrize("name", ["nccl_tests_efficiency", "nccl_tests_min_fraction"])
@pytest.mark.parametrize("value, shown", [(0, "0"), (1.5, "1.5"), (-0.1, "-0.1"), ("most", '"most"')])
def test_nccl_fractions_must_be_in_0_1(name, value, shown):
    assert nccl(**{name: value}) == ["%s must be in (0, 1]; got %s." % (name, shown)]


@pytest.mark.parametrize("checksum", ["md5:abc", "sha256:", "sha256:xyz", "abcdef"])
def test_nccl_checksum_must_be_sha256_or_sha512(checksum):
    assert nccl(nccl_tests_checksum=checksum) == [
        'nccl_tests_checksum must be empty or sha256:<hex> / sha512:<hex>; got "%s".' % checksum]


def nccl_config(config, allow_debug=False):
    return preflight.nccl_config_errors({"nccl_config": config, "nccl_config_allow_debug": allow_debug}, DEBUG)


def test_nccl_config_defaults_are_valid():
    assert preflight.nccl_config_errors(defaults("nccl", "nccl_config", "nccl_config_allow_debug"), DEBUG) == []
    assert nccl_config({"NCCL_IB_HCA": "mlx5", "NCCL_NET_GDR_LEVEL": 2, "NCCL_IB_DISABLE": False}) == []


def test_nccl_config_names_must_be_nccl_capitals():
    assert nccl_config({"nccl_socket_ifname": "eth0", "NCCL_IB_HCA": "mlx5", "NCCL-X": 1}) == [
        "nccl_config names must be NCCL_* (capitals, digits, underscores); not valid: nccl_socket_ifname, NCCL-X."]


def test_nccl_config_values_must_be_one_line_scalars():
    config = {"NCCL_A": "two\nlines", "NCCL_B": "  ", "NCCL_C": ["x"], "NCCL_D": None, "NCCL_E": "ok", "NCCL_F": "\r"}
    assert nccl_config(config) == [
        "nccl_config values must be one-line strings, numbers or booleans; not valid for: NCCL_A, NCCL_B, NCCL_C, "
        "NCCL_D, NCCL_F."]


def test_nccl_debug_settings_need_consent():
    config = {"NCCL_DEBUG_FILE": "/tmp/nccl.%h", "NCCL_IB_HCA": "mlx5", "NCCL_DEBUG": "INFO"}
    assert nccl_config(config) == [
        "Debug settings (NCCL_DEBUG_FILE, NCCL_DEBUG) slow every job and flood its logs: set them per job, or "
        "nccl_config_allow_debug: true."]
    assert nccl_config(config, allow_debug=True) == []


def test_nccl_config_must_be_a_map():
    assert nccl_config(["NCCL_DEBUG=INFO"]) == ['nccl_config must map NCCL_* names to values; got ["NCCL_DEBUG=INFO"].']


# --- pytorch -------------------------------------------------------------------------------------------------------

PYTORCH = ("pytorch_version", "pytorch_torchvision_version", "pytorch_cuda_version", "pytorch_extra_packages",
           "pytorch_venv", "pytorch_check_cpu_procs")


def pytorch(**changes):
    settings = defaults("pytorch", *PYTORCH)
    settings.update(("pytorch_" + name, value) for name, value in changes.items())
    return preflight.pytorch_setting_errors(settings)


def test_pytorch_defaults_are_valid():
    assert pytorch() == []
    assert pytorch(torchvision_version="", cuda_version="",
                   extra_packages=["numpy==1.26.4", "transformers[torch] == 4.46.3", "x===1", "y~=2.0"]) == []


@pytest.mark.parametrize("version", ["2.5", "2.5.1+cu121", "latest"])
def test_pytorch_version_must_be_a_release(version):
    assert pytorch(version=version) == ['pytorch_version must be a release such as "2.5.1"; got "%s".' % version]


def test_pytorch_torchvision_version_empty_or_a_release():
    assert pytorch(torchvision_version="0.20") == [
        'pytorch_torchvision_version must be empty or a release such as "0.20.1"; got "0.20".']


def test_pytorch_cuda_version_release_or_empty():
    assert pytorch(cuda_version="cu121") == [
        'pytorch_cuda_version must be a CUDA release such as "12.1", or "" for a CPU build; got "cu121".']


def test_pytorch_extra_packages_must_be_pinned():
    assert pytorch(extra_packages=["numpy==1.26.4", "transformers", "scipy>=1.11", "-e ."]) == [
        'pytorch_extra_packages must each be pinned with == (the same environment on every node); '
        'not: ["transformers", "scipy>=1.11", "-e ."].']


def test_pytorch_venv_must_be_absolute():
    assert pytorch(venv="opt/venv") == ['pytorch_venv must be an absolute path; got "opt/venv".']


@pytest.mark.parametrize("procs, shown", [(0, "0"), ("none", '"none"')])
def test_pytorch_check_cpu_procs_at_least_1(procs, shown):
    assert pytorch(check_cpu_procs=procs) == ["pytorch_check_cpu_procs must be at least 1; got %s." % shown]


def test_pytorch_every_error_in_order():
    errors = pytorch(version="2", torchvision_version="0", cuda_version="12", extra_packages=["x"], venv="v",
                     check_cpu_procs=0)
    assert [error.split(" ", 1)[0] for error in errors] == list(PYTORCH)


# --- nvidia_driver -------------------------------------------------------------------------------------------------

DRIVER = ("nvidia_driver_branch", "nvidia_driver_version", "nvidia_driver_source", "nvidia_driver_flavour",
          "nvidia_driver_mig", "nvidia_driver_mig_consent", "nvidia_driver_kernel_modules")
SOURCES = {
    "cuda_repo": {"branches": ["535", "550", "580"],
                  "flavours": {"server": ["cuda-drivers-{branch}"], "open": ["nvidia-open-{branch}"]}},
    "distro": {"branches": ["535", "580"],
               "flavours": {"server": ["nvidia-headless-{branch}-server"],
                            "signed": ["linux-modules-nvidia-{branch}-server-{kernel}"]}},
}
PLATFORM = "Ubuntu 22.04"


def driver(**changes):
    settings = defaults("nvidia_driver", *DRIVER)
    settings.update(nvidia_driver_source="cuda_repo", nvidia_driver_branch="580")
    settings.update(("nvidia_driver_" + name, value) for name, value in changes.items())
    return preflight.nvidia_driver_setting_errors(settings, SOURCES, PLATFORM)


def test_driver_defaults_are_valid():
    assert driver() == []
    assert driver(version="580.95.05", source="distro", flavour="signed", mig={0: True, "1": False},
                  mig_consent=True) == []


@pytest.mark.parametrize("branch, shown", [("58", '"58"'), ("r580", '"r580"'), ("5800", '"5800"')])
def test_driver_branch_must_be_three_digits(branch, shown):
    assert driver(branch=branch) == ['nvidia_driver_branch must be three digits such as "535"; got %s.' % shown]


def test_driver_branch_given_as_a_number_is_read_as_its_text():
    assert driver(branch=580) == []


@pytest.mark.parametrize("version", ["535.183.01", "580", "580.95.05.1", "580.x"])
def test_driver_version_must_be_on_the_branch(version):
    assert driver(version=version) == [
        'nvidia_driver_version must be empty or a version on branch 580 such as 580.183.01; got "%s".' % version]


def test_driver_source_must_be_offered_here():
    assert driver(source="runfile") == [
        "nvidia_driver_source runfile is not available on Ubuntu 22.04; choose cuda_repo or distro."]


def test_driver_branch_must_be_offered_by_the_source():
    assert driver(source="distro", flavour="server", branch="550") == [
        "Branch 550 is not offered by source distro on Ubuntu 22.04 (NVIDIA's support matrix and the archive's "
        "packages); choose 535, 580."]


def test_driver_flavour_must_be_one_of_the_sources():
    assert driver(source="distro", flavour="open") == [
        "nvidia_driver_flavour open is not available from source distro on Ubuntu 22.04; choose server, signed."]


@pytest.mark.parametrize("mig, shown", [
    ({"gpu0": True}, '{"gpu0": true}'), ({0: "yes"}, '{"0": "yes"}'), ([0, 1], "[0, 1]")])
def test_driver_mig_maps_indexes_to_booleans(mig, shown):
    assert driver(mig=mig, mig_consent=True) == [
        "nvidia_driver_mig maps GPU indexes to true or false; got %s." % shown]


def test_driver_mig_needs_consent():
    assert driver(mig={0: True}) == [
        "nvidia_driver_mig needs nvidia_driver_mig_consent: true, since changing MIG mode resets the GPU."]
    assert driver(mig={}, mig_consent=False) == []


def test_driver_open_flavour_with_proprietary_modules_is_a_contradiction():
    assert driver(flavour="open", kernel_modules="proprietary") == [
        "nvidia_driver_flavour open installs the open kernel modules, nvidia_driver_kernel_modules says proprietary; "
        "choose flavour server for the proprietary modules."]


def test_driver_no_source_offered_at_all():
    errors = preflight.nvidia_driver_setting_errors(
        dict(defaults("nvidia_driver", *DRIVER), nvidia_driver_source="cuda_repo"), {}, "Rocky 9.4")
    assert errors == ["nvidia_driver_source cuda_repo is not available on Rocky 9.4; no source of the driver is known "
                      "there."]


def test_driver_sources_must_be_a_dict():
    with pytest.raises(AnsibleFilterError, match="expects the platform's sources as a dict"):
        preflight.nvidia_driver_setting_errors(defaults("nvidia_driver", *DRIVER), [], PLATFORM)
