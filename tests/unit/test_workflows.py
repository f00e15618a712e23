"""The GitHub Actions workflow runs what `make test` runs: every Molecule scenario, each lint and test target."""
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())


def test_every_molecule_scenario_has_a_job():
    # and infra-repo, docs/infra-repo.md's repository with its own scenario, which make test runs in the lanes
    scenarios = {path.parent.name for path in (ROOT / "extensions" / "molecule").glob("*/molecule.yml")} | {"infra-repo"}
    assert set(WORKFLOW["jobs"]["molecule"]["strategy"]["matrix"]["scenario"]) == scenarios


def test_jobs_call_the_checks_of_make_test():
    # tools/test.sh: the first `make -s` line prepares the machine, the others are the checks.
    lines = re.findall(r"^make -s (.+)$", (ROOT / "tools" / "test.sh").read_text(), re.MULTILINE)
    checks = {target for line in lines[1:] for target in line.split()}
    assert {"lint", "sanity", "unit", "molecule"} <= checks
    called = {target for job in WORKFLOW["jobs"].values() for step in job["steps"]
              for target in re.findall(r"\bmake ([a-z -]+)", step.get("run", "")) for target in target.split()}
    called |= {target for job in WORKFLOW["jobs"].values()
               for entry in job.get("strategy", {}).get("matrix", {}).get("include", []) for target in entry.get("target", "").split()}
    assert checks <= called, "make test runs checks no workflow job calls: %s" % sorted(checks - called)
