"""apt_source_components over the source files real systems have.

* Debian 12 as its installer leaves it: a one-line ``/etc/apt/sources.list`` with ``main non-free-firmware``
  (deb822 ``debian.sources`` is the installer's default only from Debian 13; Debian's release notes for
  bookworm, "non-free-firmware" section). The old role edited only ``debian.sources`` and failed here.
* Debian's container images: deb822 ``/etc/apt/sources.list.d/debian.sources``; the old regular expression
  ``\\bnon-free\\b`` matched inside ``non-free-firmware``, so ``main non-free-firmware`` never gained ``non-free``.
* Ubuntu 22.04: one-line ``sources.list`` with ``main restricted`` / ``universe`` / ``multiverse`` lines;
  Ubuntu 24.04: deb822 ``ubuntu.sources``.
"""
import re

import pytest

from ansible.errors import AnsibleFilterError
from ansible_collections.gpufleet.node.plugins.filter.apt_sources import (
    apt_source_components, apt_source_mirror, apt_source_uri_pattern)

DRIVER = ["main", "contrib", "non-free", "non-free-firmware"]

DEBIAN_INSTALLER = """#deb cdrom:[Debian GNU/Linux 12.5.0 _Bookworm_ - Official amd64 NETINST with firmware]/ bookworm contrib main non-free-firmware

deb http://mirror.example/debian/ bookworm main non-free-firmware
deb-src http://mirror.example/debian/ bookworm main non-free-firmware

deb http://security.example/debian-security bookworm-security main non-free-firmware
deb-src http://security.example/debian-security bookworm-security main non-free-firmware

# bookworm-updates, to get updates before a point release is made;
deb http://mirror.example/debian/ bookworm-updates main non-free-firmware
deb [signed-by=/usr/share/keyrings/docker.gpg] https://docker.example/linux/debian bookworm stable
"""

DEBIAN_CONTAINER = """Types: deb
URIs: http://mirror.example/debian
Suites: bookworm bookworm-updates
Components: main non-free-firmware
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg

Types: deb
URIs: http://mirror.example/debian-security
Suites: bookworm-security
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
"""


def test_one_line_sources_list_of_the_installer_gains_contrib_and_non_free():
    result = apt_source_components(DEBIAN_INSTALLER, "bookworm", DRIVER)
    assert result["entries"] == 3  # deb lines only; deb-src lines are edited by nobody
    lines = result["content"].split("\n")
    assert "deb http://mirror.example/debian/ bookworm main non-free-firmware contrib non-free" in lines
    assert "deb http://security.example/debian-security bookworm-security main non-free-firmware contrib non-free" in lines
    assert "deb-src http://mirror.example/debian/ bookworm main non-free-firmware" in lines
    # The cdrom comment and the third-party repository for the same release stay as they were.
    assert lines[0] == DEBIAN_INSTALLER.split("\n", maxsplit=1)[0]
    assert "deb [signed-by=/usr/share/keyrings/docker.gpg] https://docker.example/linux/debian bookworm stable" in lines


def test_non_free_firmware_is_not_non_free_in_deb822():
    result = apt_source_components(DEBIAN_CONTAINER, "bookworm", DRIVER)
    components = re.findall(r"^Components: (.*)$", result["content"], flags=re.MULTILINE)
    assert components == ["main non-free-firmware contrib non-free", "main contrib non-free non-free-firmware"]
    assert result["entries"] == 2


def test_nothing_missing_means_the_same_text():
    done = apt_source_components(DEBIAN_INSTALLER, "bookworm", DRIVER)["content"]
    assert apt_source_components(done, "bookworm", DRIVER)["content"] == done
    deb822 = apt_source_components(DEBIAN_CONTAINER, "bookworm", DRIVER)["content"]
    assert apt_source_components(deb822, "bookworm", DRIVER)["content"] == deb822


@pytest.mark.parametrize("text", [
    "deb http://m/debian bullseye main\n",
    "deb http://apt.example/pub/repos/apt bookworm-pgdg main\n",
    "Types: deb\nURIs: http://m/debian\nSuites: bookworm\nComponents: main\nEnabled: no\n",
    "Types: deb\nURIs: http://m/debian\nSuites: bookworm\nComponents: main\nEnabled: false\n",
])
def test_other_releases_third_parties_and_disabled_stanzas_are_left_alone(text):
    assert apt_source_components(text, "bookworm", DRIVER) == {"content": text, "entries": 0}


def test_ubuntu_installer_layout_gains_no_duplicate():
    """Ubuntu 22.04's installer writes each component group on its own line per pocket; multiverse already
    there on another line of the same URI and suite is not added again (apt warns "configured multiple times")."""
    pockets = ("jammy", "jammy-updates")
    text = "".join("deb http://archive.example/ubuntu/ %s %s\n" % (pocket, group)
                   for pocket in pockets for group in ("main restricted", "universe", "multiverse"))
    result = apt_source_components(text, "jammy", ["main", "restricted", "multiverse"])
    assert result == {"content": text, "entries": 2}


def test_crlf_and_continued_components_in_deb822():
    text = ("Types: deb\r\nURIs: http://m/debian\r\nSuites: bookworm\r\nComponents: main\r\n non-free-firmware\r\n"
            "\r\nTypes: deb\r\nURIs: http://m/debian-security\r\nSuites: bookworm-security\r\nComponents: main\r\n")
    content = apt_source_components(text, "bookworm", DRIVER)["content"]
    assert re.findall(r"^Components: (.*)$", content, flags=re.MULTILINE) == [
        "main non-free-firmware contrib non-free", "main contrib non-free non-free-firmware"]


def test_ubuntu_one_line_and_deb822():
    jammy = ("deb http://archive.example/ubuntu jammy main restricted\n"
             "deb http://archive.example/ubuntu jammy-updates main restricted\n"
             "deb http://archive.example/ubuntu jammy universe\n")
    result = apt_source_components(jammy, "jammy", ["main", "restricted", "multiverse"])
    assert result["entries"] == 2
    assert result["content"].split("\n", maxsplit=1)[0] == "deb http://archive.example/ubuntu jammy main restricted multiverse"
    assert result["content"].split("\n")[2] == "deb http://archive.example/ubuntu jammy universe"
    noble = ("Types: deb\nURIs: http://archive.example/ubuntu\nSuites: noble noble-updates noble-backports\n"
             "Components: main restricted universe multiverse\n"
             "Signed-By: /usr/share/keyrings/ubuntu-archive-keyring.gpg\n")
    assert apt_source_components(noble, "noble", ["main", "restricted", "multiverse"]) == {"content": noble, "entries": 1}


@pytest.mark.parametrize("args", [(None, "bookworm", DRIVER), ("", "", DRIVER), ("", "bookworm", "main")])
def test_bad_arguments(args):
    with pytest.raises(AnsibleFilterError):
        apt_source_components(*args)


# --- apt_source_mirror: the archive's entries served from a mirror (gpufleet_os_mirror_url) -----------------------

MIRROR = "http://127.0.0.1:19535/debian"
KEYRING = "/etc/apt/keyrings/gpufleet-os-mirror.gpg"

UBUNTU_JAMMY = """deb http://archive.example/ubuntu jammy main restricted
deb http://archive.example/ubuntu jammy universe
deb http://archive.example/ubuntu/ jammy-updates main restricted
deb http://security.example/ubuntu jammy-security main restricted
deb http://security.example/ubuntu jammy-security universe
deb [signed-by=/usr/share/keyrings/docker.gpg] https://docker.example/linux/ubuntu jammy stable
"""


def test_mirror_rewrites_every_archive_entry_of_the_installer_and_keeps_the_rest():
    result = apt_source_mirror(DEBIAN_INSTALLER, "bookworm", MIRROR, KEYRING)
    lines = result["content"].split("\n")
    assert result["entries"] == 3
    assert "deb [signed-by=%s] %s bookworm main non-free-firmware" % (KEYRING, MIRROR) in lines
    assert "deb [signed-by=%s] %s bookworm-security main non-free-firmware" % (KEYRING, MIRROR) in lines
    assert "deb [signed-by=%s] %s bookworm-updates main non-free-firmware" % (KEYRING, MIRROR) in lines
    # Sources, the cdrom comment and the third-party repository keep what they had.
    assert "deb-src http://mirror.example/debian/ bookworm main non-free-firmware" in lines
    assert lines[0] == DEBIAN_INSTALLER.split("\n", maxsplit=1)[0]
    assert "deb [signed-by=/usr/share/keyrings/docker.gpg] https://docker.example/linux/debian bookworm stable" in lines


def test_mirror_takes_the_lines_of_other_components_at_the_archive_uris_too():
    result = apt_source_mirror(UBUNTU_JAMMY, "jammy", "http://127.0.0.1:19535/ubuntu")
    assert result["entries"] == 5
    assert result["content"].count("http://127.0.0.1:19535/ubuntu jammy") == 5
    assert "archive.example" not in result["content"] and "security.example" not in result["content"]
    # No keyring given: a mirror that keeps the archive's signatures; options stay as they were.
    assert "https://docker.example/linux/ubuntu jammy stable" in result["content"]
    assert "[signed-by=/usr/share/keyrings/docker.gpg]" in result["content"]


def test_mirror_sets_uris_and_signed_by_in_deb822_and_is_idempotent():
    result = apt_source_mirror(DEBIAN_CONTAINER, "bookworm", MIRROR, KEYRING)
    assert result["entries"] == 2
    assert re.findall(r"^URIs: (.*)$", result["content"], flags=re.MULTILINE) == [MIRROR, MIRROR]
    assert re.findall(r"^Signed-By: (.*)$", result["content"], flags=re.MULTILINE) == [KEYRING, KEYRING]
    again = apt_source_mirror(result["content"], "bookworm", MIRROR, KEYRING)
    assert again == result
    one_line = apt_source_mirror(DEBIAN_INSTALLER, "bookworm", MIRROR, KEYRING)["content"]
    assert apt_source_mirror(one_line, "bookworm", MIRROR, KEYRING)["content"] == one_line


def test_mirror_adds_signed_by_where_a_stanza_has_none():
    text = "Types: deb\nURIs: http://m/ubuntu\nSuites: noble noble-updates\nComponents: main universe\n"
    content = apt_source_mirror(text, "noble", "http://127.0.0.1:1/ubuntu", KEYRING)["content"]
    assert content == ("Types: deb\nURIs: http://127.0.0.1:1/ubuntu\nSuites: noble noble-updates\n"
                       "Components: main universe\nSigned-By: %s\n" % KEYRING)


@pytest.mark.parametrize("text", [
    "deb http://m/debian bullseye main\n",
    "deb http://apt.example/pub/repos/apt bookworm-pgdg main\n",
    "deb http://m/ubuntu bookworm universe\n",   # no line of that URI carries main: not the archive
])
def test_mirror_leaves_other_releases_and_third_parties_alone(text):
    assert apt_source_mirror(text, "bookworm", MIRROR) == {"content": text, "entries": 0}


@pytest.mark.parametrize("uri, signed_by", [("", ""), ("mirror.example/debian", ""), (MIRROR, "keyring.gpg"), (None, "")])
def test_mirror_refuses_what_is_not_a_url_or_a_keyring_path(uri, signed_by):
    with pytest.raises(AnsibleFilterError):
        apt_source_mirror(DEBIAN_CONTAINER, "bookworm", uri, signed_by)


# NVIDIA's install guide for the container toolkit writes this list file (nvidia-container-toolkit.list); apt
# expands $(ARCH), so it is the repository the role adds as <url>/stable/deb/amd64/ (sources.list(5)).
NVIDIA_TOOLKIT_LIST = ("deb [signed-by=/usr/share/keyrings/nvidia-container-toolkit-keyring.gpg] "
                       "https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH) /\n")
TOOLKIT = "https://nvidia.github.io/libnvidia-container/stable/deb/amd64/"


@pytest.mark.parametrize("text, found", [
    (NVIDIA_TOOLKIT_LIST, True),
    ("# the guide's line, kept by hand\n" + NVIDIA_TOOLKIT_LIST, True),
    ("deb [signed-by=/etc/apt/keyrings/x.gpg] https://nvidia.github.io/libnvidia-container/stable/deb/amd64 /\n", True),
    ("Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64/\nSuites: /\n", True),
    ("Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/amd64", True),
    # another architecture's path, another repository under the same prefix, another host
    ("deb https://nvidia.github.io/libnvidia-container/stable/deb/arm64 /\n", False),
    ("deb https://nvidia.github.io/libnvidia-container/stable/deb/amd64-extra /\n", False),
    ("deb https://nvidia.github.io/libnvidia-container/experimental/deb/$(ARCH) /\n", False),
    ("deb https://example.org/nvidia.github.io/libnvidia-container/stable/deb/amd64 /\n", False),
])
def test_apt_source_uri_pattern_finds_the_repository_however_written(text, found):
    assert (re.search(apt_source_uri_pattern(TOOLKIT), text) is not None) is found


def test_apt_source_uri_pattern_without_an_architecture_segment():
    cuda = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2204/x86_64/"
    pattern = apt_source_uri_pattern(cuda)
    assert re.search(pattern, "deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] %s /\n" % cuda)
    assert not re.search(pattern, "deb %s /\n" % cuda.replace("ubuntu2204", "ubuntu2404"))
    with pytest.raises(AnsibleFilterError, match="needs a repository URL"):
        apt_source_uri_pattern("nvidia.github.io/libnvidia-container")
