"""Offline stand-in for the get-pip bootstrap script that ansible-test downloads.

ansible-test runs this file as ``__main__`` inside a new virtual environment, with the pip arguments it
would give get-pip (for example ``pip==24.2 --no-setuptools --no-wheel``). The download host is not
reachable from the bench, so pip is bootstrapped from the standard library's ensurepip instead and then
asked for the same packages, keeping the caller's environment (its index and CA settings).
"""
import os
import subprocess
import sys

GET_PIP_ONLY_OPTIONS = ("--no-setuptools", "--no-wheel")


def main():
    """Bootstrap pip with ensurepip, then install the requested packages."""
    args = [arg for arg in sys.argv[1:] if arg not in GET_PIP_ONLY_OPTIONS]
    env = dict(os.environ)
    env.pop("GET_PIP", None)
    subprocess.check_call([sys.executable, "-m", "ensurepip", "--default-pip"], env=env, stdout=subprocess.DEVNULL)
    if args:
        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet"] + args, env=env)


if __name__ == "__main__":
    main()
