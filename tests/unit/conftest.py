"""Ansible's collection loader, installed before any test imports the collection: the role tests render tasks that
call gpufleet.node's filters by their full name (gpufleet.node.cuda_setting_errors), which Ansible's templar finds
only through it. It reads the collection from the path the tests import it from (tools/lib.sh: GPUFLEET_SELF_PATH,
by default .cache/self, where tools/collections.sh links this checkout in as ansible_collections/gpufleet/node)."""
import os
import pathlib

from ansible.utils.collection_loader._collection_finder import _AnsibleCollectionFinder

ROOT = pathlib.Path(__file__).resolve().parents[2]

# At import, before the conftest files below this one import the collection's modules.
_AnsibleCollectionFinder(paths=[os.environ.get("GPUFLEET_SELF_PATH") or str(ROOT / ".cache" / "self")])._install()
