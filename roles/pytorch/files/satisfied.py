# Exit 0 when this environment satisfies every requirement in the file (argv[1]), 1 when one is missing or at
# another version (printed), 2 on an unreadable file. Run by gpufleet.node.pytorch with the venv's Python, so a
# converged node costs no pip run and contacts no index.
import importlib.metadata
import sys

from pip._vendor.packaging.requirements import Requirement

try:
    with open(sys.argv[1]) as stream:
        lines = [line.split("#")[0].strip() for line in stream]
except OSError as exc:
    print(exc)
    sys.exit(2)
unmet = []
for line in filter(None, lines):
    requirement = Requirement(line)
    try:
        version = importlib.metadata.version(requirement.name)
    except importlib.metadata.PackageNotFoundError:
        unmet.append("%s (not installed)" % line)
        continue
    if not requirement.specifier.contains(version, prereleases=True):
        unmet.append("%s (installed %s)" % (line, version))
print("\n".join(unmet) or "all requirements satisfied")
sys.exit(1 if unmet else 0)
