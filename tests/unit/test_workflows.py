"""The GitHub Actions workflow runs what `make test` runs: every Molecule scenario, each lint and test target."""
import pathlib
import re

import yaml

ROOT = pathlib.Path(__file__).resolve().parents[2]
WORKFLOW = yaml.safe_load((ROOT / ".github" / "workflows" / "ci.yml").read_text())


def test_every_lane_job_has_a_job():
    # make test's lanes run every Molecule scenario and the jobs of tools/ named in run.sh's TOOL_JOBS
    tool_jobs = set(re.search(r'^TOOL_JOBS="([^"]+)"', (ROOT / "tools" / "run.sh").read_text(), re.MULTILINE).group(1).split())
    assert tool_jobs >= {"infra-repo", "newest-core"}
    scenarios = {path.parent.name for path in (ROOT / "extensions" / "molecule").glob("*/molecule.yml")}
    jobs = WORKFLOW["jobs"]
    called = set(jobs["molecule"]["strategy"]["matrix"]["scenario"])
    called |= {entry["target"] for entry in jobs["sanity-units"]["strategy"]["matrix"]["include"]}
    assert scenarios | tool_jobs <= called, "no workflow job runs %s" % sorted(scenarios | tool_jobs - called)
    assert set(jobs["molecule"]["strategy"]["matrix"]["scenario"]) <= scenarios | tool_jobs


def test_jobs_call_the_checks_of_make_test():
    # tools/test.sh: the first `make -s` line prepares the machine, the others are the checks.
    lines = re.findall(r"^make -s (.+)$", (ROOT / "tools" / "test.sh").read_text(), re.MULTILINE)
    checks = {target for line in lines[1:] for target in line.split() if not target.startswith("-")}
    assert {"lint", "sanity", "unit", "molecule"} <= checks
    called = {target for job in WORKFLOW["jobs"].values() for step in job["steps"]
              for target in re.findall(r"\bmake ([a-z -]+)", step.get("run", "")) for target in target.split()}
    called |= {target for job in WORKFLOW["jobs"].values()
               for entry in job.get("strategy", {}).get("matrix", {}).get("include", []) for target in entry.get("target", "").split()}
    assert checks <= called, "make test runs checks no workflow job calls: %s" % sorted(checks - called)
