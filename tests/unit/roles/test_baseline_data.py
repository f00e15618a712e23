"""gpufleet.node.baseline's platform data rendered as the role renders it: the kernel headers it installs (the
running kernel's and the headers metapackage of its flavour, for the next kernel) over real kernel release strings,
and the units that would reset the CPU governor (Ubuntu's ondemand.service)."""
import pytest

from .platform import facts_for, render, task_fires, task_message

DEBIAN_12 = facts_for("Debian", "12")


def baseline(facts, expression, **settings):
    return render("baseline", facts, "{{ %s }}" % expression, **settings)


@pytest.mark.parametrize("platform, architecture, kernel, metapackage", [
    # Debian: the flavour in the release, else the architecture
    (("Debian", "12"), "x86_64", "6.1.0-28-amd64", "linux-headers-amd64"),
    (("Debian", "12"), "aarch64", "6.1.0-28-arm64", "linux-headers-arm64"),
    (("Debian", "12"), "x86_64", "6.1.0-28-cloud-amd64", "linux-headers-cloud-amd64"),
    (("Debian", "12"), "x86_64", "6.1.0-28-rt-amd64", "linux-headers-rt-amd64"),
    (("Debian", "12"), "x86_64", "6.10.11+bpo-amd64", "linux-headers-amd64"),
    (("Debian", "12"), "x86_64", "6.12.41+deb13-amd64", "linux-headers-amd64"),
    (("Debian", "12"), "aarch64", "6.6.0", "linux-headers-arm64"),
    # Ubuntu: the release's GA kernel, an HWE kernel, other flavours
    (("Ubuntu", "22.04"), "x86_64", "5.15.0-91-generic", "linux-headers-generic"),
    (("Ubuntu", "22.04"), "x86_64", "6.8.0-40-generic", "linux-headers-generic-hwe-22.04"),
    (("Ubuntu", "22.04"), "x86_64", "6.5.0-45-generic", "linux-headers-generic-hwe-22.04"),
    (("Ubuntu", "22.04"), "aarch64", "6.8.0-40-generic-64k", "linux-headers-generic-64k-hwe-22.04"),
    (("Ubuntu", "22.04"), "x86_64", "5.15.0-91-lowlatency", "linux-headers-lowlatency"),
    (("Ubuntu", "22.04"), "x86_64", "6.8.0-40-lowlatency", "linux-headers-lowlatency-hwe-22.04"),
    (("Ubuntu", "22.04"), "x86_64", "6.8.0-1015-aws", "linux-headers-aws"),
    (("Ubuntu", "22.04"), "x86_64", "5.15.0-1073-azure", "linux-headers-azure"),
    (("Ubuntu", "22.04"), "x86_64", "5.15.0-1042-nvidia", "linux-headers-nvidia"),
    (("Ubuntu", "20.04"), "x86_64", "5.4.0-200-generic", "linux-headers-generic"),
    (("Ubuntu", "20.04"), "x86_64", "5.15.0-126-generic", "linux-headers-generic-hwe-20.04"),
    (("Ubuntu", "20.04"), "x86_64", "5.4.0-1131-aws", "linux-headers-aws"),
    (("Ubuntu", "24.04"), "x86_64", "6.8.0-51-generic", "linux-headers-generic"),
    (("Ubuntu", "24.04"), "x86_64", "6.11.0-19-generic", "linux-headers-generic-hwe-24.04"),
    (("Ubuntu", "24.04"), "x86_64", "6.8.0-1021-gcp", "linux-headers-gcp"),
])
def test_headers_for_the_running_and_the_next_kernel(platform, architecture, kernel, metapackage):
    facts = facts_for(*platform, architecture=architecture, kernel=kernel)
    assert baseline(facts, "__baseline_headers_packages") == ["linux-headers-" + kernel, metapackage]


def test_a_named_metapackage_or_none():
    facts = facts_for("Ubuntu", "22.04", kernel="6.5.0-1020-oem")
    assert baseline(facts, "__baseline_headers_packages", baseline_kernel_headers_metapackage="linux-headers-oem-22.04d") \
        == ["linux-headers-6.5.0-1020-oem", "linux-headers-oem-22.04d"]
    assert baseline(facts, "__baseline_headers_packages", baseline_kernel_headers_metapackage="") \
        == ["linux-headers-6.5.0-1020-oem"]
    assert baseline(facts, "__baseline_headers_packages", baseline_kernel_headers=False) == []


def test_no_headers_in_a_container():
    facts = facts_for("Debian", "12", virtualization_role="guest", virtualization_type="docker")
    assert baseline(facts, "__baseline_headers_packages") == []


PLAN = {"missing": [], "packages": {}}


@pytest.mark.parametrize("missing, running, metapackage", [
    ([], False, False),
    (["linux-headers-6.8.0-40-generic"], True, False),
    (["linux-headers-generic-hwe-22.04"], False, True),
])
def test_preflight_refuses_what_apt_lacks(missing, running, metapackage):
    facts = facts_for("Ubuntu", "22.04", kernel="6.8.0-40-generic")
    plan = {"__baseline_headers_plan": dict(PLAN, missing=missing)}
    assert task_fires("baseline", "headers-Debian.yml", "Check that a package provides the running kernel's headers",
                      facts, **plan) == running
    name = "Check that apt offers the headers metapackage of the running kernel's flavour"
    assert task_fires("baseline", "headers-Debian.yml", name, facts, **plan) == metapackage
    if metapackage:
        message = task_message("baseline", "headers-Debian.yml", name, facts, **plan)
        assert "apt offers no linux-headers-generic-hwe-22.04" in message
        assert "6.8.0-40-generic (flavour generic)" in message and "baseline_kernel_headers_metapackage" in message


@pytest.mark.parametrize("platform, rivals", [(("Debian", "12"), []), (("Ubuntu", "20.04"), ["ondemand.service"]),
                                              (("Ubuntu", "22.04"), ["ondemand.service"]),
                                              (("Ubuntu", "24.04"), ["ondemand.service"])])
def test_units_that_reset_the_governor(platform, rivals):
    assert baseline(facts_for(*platform), "__baseline_governor_rivals") == rivals


@pytest.mark.parametrize("governor, cpufreq, masked", [("performance", True, True), (None, True, False),
                                                       ("performance", False, True)])
def test_ondemand_is_masked_when_the_role_sets_a_governor(governor, cpufreq, masked):
    """Whenever the role manages the governor (a node without cpufreq now, as a container, too)."""
    facts = facts_for("Ubuntu", "20.04")
    assert task_fires("baseline", "cpufreq.yml", "Find which of the units that would reset the governor are installed",
                      facts, baseline_cpu_governor=governor, __baseline_cpufreq={"stat": {"exists": cpufreq}}) == masked
