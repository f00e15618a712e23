"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test runs this file as ``__main__`` inside a new virtual environment, with the pip arguments it
would give get-pip (for example ``pip==24.2 --no-setuptools --no-wheel``). The download host is not
reachable from the bench, so pip is bootstrapped from the standard library's ensurepip instead and then
asked for the same packages, keeping the caller's environment (its index and CA settings). Where the Python has
no ensurepip (Ubuntu's, without python3-venv: tools/newest-core.sh), the pip wheel laid beside this file installs
the packages (a wheel of pip runs as pip).
"""
import glob
import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")


def main():
    """Bootstrap pip with ensurepip, then install the requested packages."""
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    env = dict(os.environ)
    env.pop("GET_PIP", None)
    wheels = sorted(glob.glob(os.path.join(os.path.dirname(os.path.abspath(__file__)), "pip-*.whl")))
    if has_ensurepip() or not wheels:
        subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], env=env, stdout=subprocess.DEVNULL)
        pip = [sys.executable, "-m", "pip"]
    else:
        pip = [sys.executable, os.path.join(wheels[-1], "pip")]
        args = args or ["pip"]
    if args:
        subprocess.check_call(pip + ["install", "--quiet"] + args, env=env)


def has_ensurepip():
    """Whether this Python has the standard library's ensurepip (Debian and Ubuntu ship it in python3-venv)."""
    try:
        import ensurepip  # pylint: disable=import-outside-toplevel,unused-import
    except ImportError:
        return False
    return True


if __name__ == "__main__":
    main()
