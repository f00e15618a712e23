"""Exit 0 when this Python environment has every requirement of the file argv[1] at a version it allows, 1 when one
is missing or at another version (each printed), 2 when the file cannot be read. gpufleet.node.self_converge runs
it with the virtualenv's Python, so a node that has its ansible-core runs no pip and asks no index."""
import sys
from importlib import metadata

from pip._vendor.packaging.requirements import InvalidRequirement, Requirement


def unmet(lines):
    """The requirements of ``lines`` this environment does not meet, as text."""
    missing = []
    for line in lines:
        text = line.split("#", 1)[0].strip()
        if not text:
            continue
        try:
            requirement = Requirement(text)
        except InvalidRequirement as exc:
            missing.append("%s (not a requirement: %s)" % (text, exc))
            continue
        try:
            version = metadata.version(requirement.name)
        except metadata.PackageNotFoundError:
            missing.append("%s (not installed)" % text)
            continue
        if not requirement.specifier.contains(version, prereleases=True):
            missing.append("%s (installed: %s)" % (text, version))
    return missing


def main(argv):
    try:
        with open(argv[1], encoding="utf-8") as stream:
            lines = stream.read().splitlines()
    except (IndexError, OSError) as exc:
        print("cannot read the requirements: %s" % exc)
        return 2
    missing = unmet(lines)
    print("\n".join(missing) or "every requirement is met")
    return 1 if missing else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
