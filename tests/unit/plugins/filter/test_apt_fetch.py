"""apt_fetch_failures (and module_utils.apt_fetch, its parser) over apt-get output as apt 2.4 (Ubuntu 22.04), 2.6
(Debian 12) and 3.0 (Debian 13) print it when a download fails.

The samples are written for these tests (a stand-in mirror on 127.0.0.1:19535, the packages the roles install);
their lines follow apt's own format, checked against apt's sources and against captures in public reports:

* apt-get's ``Failed to fetch %s  %s`` (two spaces before the reason; ``E:``, ``Error:`` from apt 3), and the
  http method's ``404  Not Found [IP: address port]``: e.g. delphix/appliance-build#146 and
  ansible-community/ansible-vault#199 (``E: Failed to fetch http://security.ubuntu.com/ubuntu/pool/...deb  404  Not
  Found [IP: ...]`` then ``E: Unable to fetch some archives, maybe run apt-get update or try with
  --fix-missing?``); AvengeMedia/DankMaterialShell#2855 shows apt 3's ``Error: Failed to fetch``.
* ``Err:N`` records carry the index's version with its epoch while the pool file name has none:
  cfengine/core#5841 (``Err:104 ... noble-updates/main amd64 git-man all 1:2.43.0-1ubuntu7.2`` for
  ``git-man_2.43.0-1ubuntu7.2_all.deb``). Flat repositories leave the architecture out of the record
  (debPackagesIndex::ArchiveInfo in apt-pkg/deb/debindexfile.cc; losuler/icecat#8:
  ``Err:1 https://.../Debian_11  icecat 78.15.0-1``).
* ``Hash Sum mismatch`` followed by ``Hashes of expected file:``, ``Hashes of received file:`` and ``Last
  modification reported:`` (pkgAcquire::Item::FailMessage in apt-pkg/acquire-item.cc; tailscale/tailscale#18353,
  saltstack/salt-bootstrap#1451, MisterTea/EternalTerminal#282 show the ``Err:1`` and the ``E:`` forms).
* ``File has unexpected size (A != B). Mirror sync in progress?`` (methods/basehttp.cc; BespokeSynth#1483,
  docker/docker-install#376) and ``Writing more data than expected (A > B)`` (jenkinsci/docker#543).
* URL-encoded file names: ``%2b`` for ``+`` in Debian's security versions (shardeum/bug-reporting#941:
  ``libgnutls30_3.7.9-2%2bdeb12u2_amd64.deb``).
"""
import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.apt_fetch import FilterModule, apt_fetch_failures
from ansible_collections.gpufleet.node.plugins.module_utils.apt_fetch import (
    fetch_kind, parse_deb_name, parse_fetch_failures)

MIRROR = "http://127.0.0.1:19535"
UTILS_URL = (MIRROR + "/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-server/"
             "nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb")
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64"
IP = " [IP: 127.0.0.1 19535]"
NO_ARCHIVES = "E: Unable to fetch some archives, maybe run apt-get update or try with --fix-missing?\n"

# Ubuntu 22.04 (apt 2.4), the driver upgrade of nvidia_driver (source distro, branch 580) while the mirror's
# jammy-updates index lists 580.196.07 and its pool does not serve nvidia-utils yet; libnvidia-compute downloads.
# stdout, then stderr (as the role reads them).
JAMMY_404_STDOUT = """Reading package lists...
Building dependency tree...
Reading state information...
The following held packages will be changed:
  libnvidia-compute-580-server nvidia-utils-580-server
The following packages will be upgraded:
  libnvidia-compute-580-server nvidia-utils-580-server
2 upgraded, 0 newly installed, 0 to remove and 14 not upgraded.
Need to get 48.6 MB of archives.
""" + (
    "Get:1 " + MIRROR + "/ubuntu jammy-updates/restricted amd64 libnvidia-compute-580-server amd64 "
    "580.196.07-0ubuntu0.22.04.1 [48.1 MB]\n"
    "Err:2 " + MIRROR + "/ubuntu jammy-updates/restricted amd64 nvidia-utils-580-server amd64 "
    "580.196.07-0ubuntu0.22.04.1\n"
    "  404  Not Found" + IP + "\n"
    "Fetched 48.1 MB in 1s (41.2 MB/s)\n")
JAMMY_404_STDERR = "E: Failed to fetch " + UTILS_URL + "  404  Not Found" + IP + "\n" + NO_ARCHIVES

# Debian 12 (apt 2.6): the mirror serves a nvidia-smi .deb that is not the one its index describes.
SMI_URL = MIRROR + "/debian/pool/non-free/n/nvidia-graphics-drivers/nvidia-smi_535.261.03-1~deb12u1_amd64.deb"
HASHES = """Hashes of expected file:
 - SHA256:5a0c0f0cf52fb09a2b4c5b49c6d6c1cbdbbd0f3ad1d65e4f6c6d4a0b1e2a3c4d
 - MD5Sum:0b1d0a97c29f4a1d4fd2d0b6fbd3c1a2 [weak]
 - Filesize:261344 [weak]
Hashes of received file:
 - SHA256:9f1e0d4c3b2a19087f6e5d4c3b2a1908f7e6d5c4b3a2190807f6e5d4c3b2a190
 - MD5Sum:7c6b5a4f3e2d1c0b9a8f7e6d5c4b3a29 [weak]
 - Filesize:261344 [weak]
Last modification reported: Tue, 01 Dec 2026 21:40:12 +0000
"""


def indented(text, prefix):
    """apt indents the lines after a reason: two spaces after an Err record, three after an E: line."""
    return "".join(prefix + line + "\n" for line in text.splitlines())


BOOKWORM_HASH = """Reading package lists...
Building dependency tree...
Reading state information...
The following packages will be upgraded:
  nvidia-smi
1 upgraded, 0 newly installed, 0 to remove and 3 not upgraded.
Need to get 261 kB of archives.
Get:1 http://127.0.0.1:19535/debian bookworm/non-free amd64 nvidia-smi amd64 535.261.03-1~deb12u1 [261 kB]
Err:1 http://127.0.0.1:19535/debian bookworm/non-free amd64 nvidia-smi amd64 535.261.03-1~deb12u1
  Hash Sum mismatch
""" + indented(HASHES, "  ") + """Fetched 261 kB in 0s (5806 kB/s)
E: Failed to fetch """ + SMI_URL + """  Hash Sum mismatch
""" + indented(HASHES, "   ") + NO_ARCHIVES

# NVIDIA's flat repository (suite "/"): no suite, component or architecture in the Err record, and a file the
# mirror is still replacing.
SIZE = "File has unexpected size (2594 != 2552). Mirror sync in progress? [IP: 127.0.0.1 443]"
EXPECTED = """Hashes of expected file:
 - SHA256:7d3c1e8f0a9b2c4d6e8f0a1b3c5d7e9f1a2b4c6d8e0f1a3b5c7d9e1f2a4b6c8d
 - Filesize:2552 [weak]
"""
FLAT_SIZE = ("Need to get 2594 B of archives.\n"
             "Get:1 " + NVIDIA + "  cuda-drivers-535 535.183.01-1 [2552 B]\n"
             "Err:1 " + NVIDIA + "  cuda-drivers-535 535.183.01-1\n"
             "  " + SIZE + "\n" + indented(EXPECTED, "  ")
             + "E: Failed to fetch " + NVIDIA + "/cuda-drivers-535_535.183.01-1_amd64.deb  " + SIZE + "\n"
             + indented(EXPECTED, "   ") + NO_ARCHIVES)

# An epoch: the index's version has one (1:2.34.1-...), the pool file name does not.
JAMMY_EPOCH = ("Err:3 " + MIRROR + "/ubuntu jammy-updates/main amd64 git amd64 1:2.34.1-1ubuntu1.15\n"
               "  404  Not Found" + IP + "\n"
               "E: Failed to fetch " + MIRROR + "/ubuntu/pool/main/g/git/git_2.34.1-1ubuntu1.15_amd64.deb  "
               "404  Not Found" + IP + "\n")

# Transient failures of one download: a refused connection, a 503 and a timeout.
REFUSED = "Could not connect to 127.0.0.1:19535 (127.0.0.1). - connect (111: Connection refused)"
CURL = MIRROR + "/ubuntu/pool/main/c/curl/"
TRANSIENT = ("Err:1 " + MIRROR + "/ubuntu jammy-updates/main amd64 curl amd64 7.81.0-1ubuntu1.20\n"
             "  " + REFUSED + "\n"
             "Err:2 " + MIRROR + "/ubuntu jammy-updates/main amd64 libcurl4 amd64 7.81.0-1ubuntu1.20\n"
             "  503  Service Unavailable" + IP + "\n"
             "E: Failed to fetch " + CURL + "curl_7.81.0-1ubuntu1.20_amd64.deb  " + REFUSED + "\n"
             "E: Failed to fetch " + CURL + "libcurl4_7.81.0-1ubuntu1.20_amd64.deb  503  Service Unavailable"
             + IP + "\n"
             "E: Failed to fetch " + MIRROR + "/ubuntu/pool/main/d/dkms/dkms_2.8.7-2ubuntu2.2_all.deb  "
             "Connection timed out" + IP + "\n" + NO_ARCHIVES)


def test_ubuntu_404_of_the_driver_as_the_role_reads_it():
    failures = parse_fetch_failures(JAMMY_404_STDOUT + JAMMY_404_STDERR)
    assert failures == [{
        "url": UTILS_URL,
        "file": "nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb",
        "package": "nvidia-utils-580-server",
        "version": "580.196.07-0ubuntu0.22.04.1",
        "architecture": "amd64",
        "kind": "not_served",
        "status": 404,
        "reason": "404  Not Found",
    }]


def test_a_registered_result_is_read_from_stdout_and_stderr_and_the_plan_says_what_apt_meant_to_do():
    result = {"rc": 100, "stdout": JAMMY_404_STDOUT, "stderr": JAMMY_404_STDERR, "changed": False}
    plan = {"nvidia-utils-580-server": {"wanted": "580.196.07-0ubuntu0.22.04.1", "action": "upgrade",
                                        "installed": "580.178.04-0ubuntu0.22.04.1", "held": True}}
    [failure] = apt_fetch_failures(result, plan)
    assert failure["kind"] == "not_served"
    assert (failure["action"], failure["installed"]) == ("upgrade", "580.178.04-0ubuntu0.22.04.1")
    # Only stderr: the E: line alone says it all.
    [alone] = apt_fetch_failures({"stdout": "", "stderr": JAMMY_404_STDERR})
    assert (alone["package"], alone["version"], alone["status"]) == (
        "nvidia-utils-580-server", "580.196.07-0ubuntu0.22.04.1", 404)


def test_a_dependency_apt_added_has_no_plan_entry():
    [failure] = apt_fetch_failures(JAMMY_404_STDERR, {"nvidia-headless-580-server": {"action": "upgrade"}})
    assert failure["action"] is None and failure["installed"] is None


def test_debian_hash_sum_mismatch_with_the_hashes_that_follow():
    [failure] = parse_fetch_failures(BOOKWORM_HASH)
    assert failure["kind"] == "hash_mismatch"
    assert failure["reason"] == "Hash Sum mismatch"
    assert failure["status"] is None
    assert (failure["package"], failure["version"], failure["architecture"]) == (
        "nvidia-smi", "535.261.03-1~deb12u1", "amd64")
    assert failure["url"].endswith("/pool/non-free/n/nvidia-graphics-drivers/nvidia-smi_535.261.03-1~deb12u1_amd64.deb")


def test_a_file_of_another_size_on_a_flat_repository_is_a_hash_mismatch():
    [failure] = parse_fetch_failures(FLAT_SIZE)
    assert failure["kind"] == "hash_mismatch"
    assert failure["reason"] == "File has unexpected size (2594 != 2552). Mirror sync in progress?"
    assert (failure["package"], failure["version"], failure["architecture"]) == (
        "cuda-drivers-535", "535.183.01-1", "amd64")


def test_the_epoch_comes_from_the_err_record_since_pool_names_leave_it_out():
    [failure] = parse_fetch_failures(JAMMY_EPOCH)
    assert failure["file"] == "git_2.34.1-1ubuntu1.15_amd64.deb"
    assert failure["version"] == "1:2.34.1-1ubuntu1.15"


def test_an_url_encoded_epoch_and_plus_are_decoded():
    text = ("E: Failed to fetch http://mirror.internal/ubuntu/pool/main/d/docker.io/"
            "docker.io_1%3a24.0.7-0ubuntu2%2b22.04.1_amd64.deb  404  Not Found [IP: 10.0.0.5 80]\n")
    [failure] = parse_fetch_failures(text)
    assert failure["url"].endswith("docker.io_1%3a24.0.7-0ubuntu2%2b22.04.1_amd64.deb")  # as apt printed it
    assert failure["file"] == "docker.io_1:24.0.7-0ubuntu2+22.04.1_amd64.deb"
    assert (failure["package"], failure["version"]) == ("docker.io", "1:24.0.7-0ubuntu2+22.04.1")


def test_the_plan_gives_the_epoch_when_there_is_no_err_record():
    text = "E: Failed to fetch " + MIRROR + "/ubuntu/pool/main/g/git/git_2.34.1-1ubuntu1.15_amd64.deb  404  Not Found\n"
    plan = {"git": {"wanted": "1:2.34.1-1ubuntu1.15", "action": "install", "installed": None}}
    [failure] = apt_fetch_failures(text, plan)
    assert failure["version"] == "1:2.34.1-1ubuntu1.15"
    # A plan that wants another version does not change what the mirror was asked for.
    [other] = apt_fetch_failures(text, {"git": {"wanted": "1:2.39.2-1", "action": "install"}})
    assert other["version"] == "2.34.1-1ubuntu1.15"


def test_transient_failures_keep_their_reason_and_status():
    failures = parse_fetch_failures(TRANSIENT)
    assert [(f["package"], f["kind"], f["status"]) for f in failures] == [
        ("curl", "transient", None), ("libcurl4", "transient", 503), ("dkms", "transient", None)]
    assert failures[0]["reason"] == "Could not connect to 127.0.0.1:19535 (127.0.0.1). - connect (111: Connection refused)"
    assert failures[1]["reason"] == "503  Service Unavailable"
    assert failures[2]["architecture"] == "all"


def test_mixed_output_gives_one_entry_per_file_in_apt_order():
    text = TRANSIENT.replace("E: Unable to fetch some archives", "E: Failed to fetch " + UTILS_URL
                             + "  404  Not Found [IP: 127.0.0.1 19535]\nE: Unable to fetch some archives") + BOOKWORM_HASH
    failures = parse_fetch_failures(text)
    assert [(f["package"], f["kind"]) for f in failures] == [
        ("curl", "transient"), ("libcurl4", "transient"), ("dkms", "transient"),
        ("nvidia-utils-580-server", "not_served"), ("nvidia-smi", "hash_mismatch")]


def test_what_the_parser_cannot_understand_is_transient_with_none_fields():
    text = ("E: Failed to fetch http://127.0.0.1:19535/ubuntu/pool/main/x/odd/odd-file.bin  Undetermined Error "
            "[IP: 127.0.0.1 19535]\n"
            "E: Failed to fetch http://127.0.0.1:19535/ubuntu/pool/main/c/curl/curl_7.81.0-1ubuntu1.20_amd64.deb\n")
    odd, bare = parse_fetch_failures(text)
    assert odd == {"url": "http://127.0.0.1:19535/ubuntu/pool/main/x/odd/odd-file.bin", "file": None, "package": None,
                   "version": None, "architecture": None, "kind": "transient", "status": None,
                   "reason": "Undetermined Error"}
    assert (bare["package"], bare["kind"], bare["status"], bare["reason"]) == ("curl", "transient", None, None)


def test_the_file_method_and_apt_3():
    text = ("Error: Failed to fetch file:/srv/mirror/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-server/"
            "libnvidia-compute-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb  File not found - /srv/mirror/ubuntu/"
            "pool/restricted/n/nvidia-graphics-drivers-580-server/libnvidia-compute-580-server_580.196.07-0ubuntu0."
            "22.04.1_amd64.deb (2: No such file or directory)\n")
    [failure] = parse_fetch_failures(text)
    assert (failure["package"], failure["kind"], failure["status"]) == ("libnvidia-compute-580-server", "not_served", None)
    assert failure["reason"].startswith("File not found - /srv/mirror/")


def test_an_err_record_without_its_failed_line_still_counts():
    """Output cut off before apt's summary: the record names the repository, not the file."""
    [failure] = parse_fetch_failures(JAMMY_404_STDOUT)
    assert failure["url"] is None and failure["file"] is None
    assert (failure["package"], failure["version"], failure["architecture"], failure["kind"]) == (
        "nvidia-utils-580-server", "580.196.07-0ubuntu0.22.04.1", "amd64", "not_served")
    [flat] = parse_fetch_failures(FLAT_SIZE.split("E: ", maxsplit=1)[0])
    assert (flat["package"], flat["architecture"], flat["kind"]) == ("cuda-drivers-535", None, "hash_mismatch")


def test_a_flat_repository_in_a_subdirectory_names_its_suite_and_no_architecture():
    """``deb URI ubuntu2204/x86_64/``: the suite ends in a slash and apt prints it before the package."""
    text = ("Err:1 http://127.0.0.1:19535/nvidia ubuntu2204/x86_64/ cuda-drivers-535 535.183.01-1\n"
            "  404  Not Found [IP: 127.0.0.1 19535]\n")
    [failure] = parse_fetch_failures(text)
    assert (failure["package"], failure["architecture"], failure["version"]) == ("cuda-drivers-535", None, "535.183.01-1")


def test_a_rebuilt_upload_with_a_plus_in_its_version():
    """A mirror mid-sync that lists a newer upload (+midsync1, URL-encoded in the file name) its pool lacks."""
    text = ("Err:4 http://127.0.0.1:19535/midsync/ubuntu jammy-updates/restricted amd64 nvidia-utils-580-server amd64 "
            "580.178.04-0ubuntu0.22.04.1+midsync1\n  404  Not Found [IP: 127.0.0.1 19535]\n"
            "E: Failed to fetch http://127.0.0.1:19535/midsync/ubuntu/pool/restricted/n/nvidia-graphics-drivers-580-"
            "server/nvidia-utils-580-server_580.178.04-0ubuntu0.22.04.1%2bmidsync1_amd64.deb  404  Not Found "
            "[IP: 127.0.0.1 19535]\n")
    [failure] = parse_fetch_failures(text)
    assert failure["version"] == "580.178.04-0ubuntu0.22.04.1+midsync1"
    assert failure["file"] == "nvidia-utils-580-server_580.178.04-0ubuntu0.22.04.1+midsync1_amd64.deb"
    assert failure["kind"] == "not_served"


def test_index_files_and_other_errors_are_no_failed_package():
    update = """Err:5 http://127.0.0.1:19535/ubuntu jammy-updates InRelease
  Could not connect to 127.0.0.1:19535 (127.0.0.1). - connect (111: Connection refused)
Err:6 http://127.0.0.1:19535/ubuntu jammy-updates/main amd64 Packages
  404  Not Found [IP: 127.0.0.1 19535]
"""
    assert parse_fetch_failures(update) == []
    lock = ("E: Could not get lock /var/cache/apt/archives/lock. It is held by process 4242 (unattended-upgr)\n"
            "E: Unable to lock directory /var/cache/apt/archives/\n")
    assert parse_fetch_failures(lock) == []
    assert apt_fetch_failures({"rc": 100, "stdout": "", "stderr": lock}) == []
    assert parse_fetch_failures(None) == []


def test_the_same_file_twice_is_one_failure():
    assert len(parse_fetch_failures(JAMMY_404_STDERR + JAMMY_404_STDERR)) == 1


@pytest.mark.parametrize("reason, kind", [
    ("404  Not Found [IP: 127.0.0.1 19535]", "not_served"),
    ("410  Gone", "not_served"),
    ("File not found - /srv/mirror/pool/x.deb (2: No such file or directory)", "not_served"),
    ("Hash Sum mismatch", "hash_mismatch"),
    ("File has unexpected size (2594 != 2552). Mirror sync in progress? [IP: 127.0.0.1 443]", "hash_mismatch"),
    ("Writing more data than expected (22450 > 18656) [IP: 127.0.0.1 80]", "hash_mismatch"),
    ("Size mismatch", "hash_mismatch"),
    ("503  Service Unavailable [IP: 127.0.0.1 19535]", "transient"),
    ("500  Internal Server Error [IP: 127.0.0.1 19535]", "transient"),
    ("Temporary failure resolving 'archive.ubuntu.com'", "transient"),
    ("Connection failed [IP: 127.0.0.1 19535]", "transient"),
    ("403  Forbidden [IP: 127.0.0.1 19535]", "transient"),
    ("", "transient"),
    (None, "transient"),
])
def test_kinds(reason, kind):
    assert fetch_kind(reason) == kind


@pytest.mark.parametrize("name, parsed", [
    ("nvidia-utils-580-server_580.196.07-0ubuntu0.22.04.1_amd64.deb",
     ("nvidia-utils-580-server", "580.196.07-0ubuntu0.22.04.1", "amd64")),
    ("libnccl2_2.21.5-1%2bcuda12.4_arm64.deb", ("libnccl2", "2.21.5-1+cuda12.4", "arm64")),
    ("git-man_1%3A2.43.0-1ubuntu7.2_all.deb", ("git-man", "1:2.43.0-1ubuntu7.2", "all")),
    ("Packages.gz", None),
    ("nvidia-utils-580-server_580.196.07_amd64.tar.gz", None),
    ("x_1.0_amd64.deb", None),  # a package name has two characters at least
    (None, None),
])
def test_deb_names(name, parsed):
    assert parse_deb_name(name) == parsed


def test_wrong_input_is_an_error():
    with pytest.raises(AnsibleFilterError):
        apt_fetch_failures(["E: Failed to fetch"])
    with pytest.raises(AnsibleFilterError):
        apt_fetch_failures(JAMMY_404_STDERR, ["nvidia-utils-580-server"])


def test_the_filter_is_registered():
    assert FilterModule().filters() == {"apt_fetch_failures": apt_fetch_failures}
