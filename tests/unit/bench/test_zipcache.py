"""The node image's compiled-code cache (tools/node-image/gpufleet_zipcache.py): a module imported from a zip
runs the same with the cache as without it, its code objects name the zip member they come from, and a changed
source is compiled again. Each case runs a fresh interpreter, as each Ansible task does on a node."""

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

ZIPCACHE = Path(__file__).parents[3] / "tools" / "node-image" / "gpufleet_zipcache.py"

PROBE = """
import json, sys, traceback
sys.path.insert(0, sys.argv[1])
import payload
try:
    payload.fail()
except RuntimeError:
    frames = traceback.extract_tb(sys.exc_info()[2])
print(json.dumps({"answer": payload.answer(), "file": payload.__file__, "inner": payload.Inner.where.__code__.co_filename,
                  "trace": [frame.filename for frame in frames]}))
"""


def run_probe(zip_path, cache_dir, with_cache=True):
    env = dict(os.environ, GPUFLEET_PYCODE_CACHE=str(cache_dir), PYTHONDONTWRITEBYTECODE="1")
    code = "exec(%r)" % PROBE
    if with_cache:  # imported as gpufleet-zipcache.pth does at interpreter start
        code = "import sys; sys.path.insert(0, %r); import gpufleet_zipcache; %s" % (str(ZIPCACHE.parent), code)
    result = subprocess.run([sys.executable, "-S", "-c", code, str(zip_path)], env=env, capture_output=True,
                            text=True, check=True)
    return json.loads(result.stdout)


def write_payload(path, answer):
    source = (
        "def answer():\n    return %d\n\n"
        "def fail():\n    raise RuntimeError('from the payload')\n\n"
        "class Inner:\n    def where(self):\n        return 1\n" % answer
    )
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("payload.py", source)


def test_cached_code_runs_the_same_and_names_its_zip_member(tmp_path):
    cache = tmp_path / "cache"
    first_zip = tmp_path / "task1" / "ansible_payload.zip"
    second_zip = tmp_path / "task2" / "ansible_payload.zip"
    for path in (first_zip, second_zip):
        path.parent.mkdir()
        write_payload(path, 42)

    uncached = run_probe(first_zip, tmp_path / "unused", with_cache=False)
    first = run_probe(first_zip, cache)
    entries = sorted(cache.iterdir())
    assert len(entries) == 1 and entries[0].name.endswith("." + sys.implementation.cache_tag)
    second = run_probe(second_zip, cache)

    assert sorted(cache.iterdir()) == entries  # read from the cache, not compiled and written again
    member = str(second_zip / "payload.py")
    assert (second["answer"], second["file"], second["inner"], second["trace"][-1]) == (42, member, member, member)
    assert first["answer"] == uncached["answer"] == 42
    assert first["file"] == str(first_zip / "payload.py")


def test_a_changed_source_is_compiled_again(tmp_path):
    cache = tmp_path / "cache"
    payload = tmp_path / "ansible_payload.zip"
    write_payload(payload, 1)
    assert run_probe(payload, cache)["answer"] == 1
    write_payload(payload, 2)
    assert run_probe(payload, cache)["answer"] == 2
    assert len(list(cache.iterdir())) == 2


def test_a_cache_that_cannot_be_written_or_read_falls_back_to_compiling(tmp_path):
    blocked = tmp_path / "not-a-directory"
    blocked.write_text("")
    payload = tmp_path / "ansible_payload.zip"
    write_payload(payload, 7)
    assert run_probe(payload, blocked / "cache")["answer"] == 7

    cache = tmp_path / "cache"
    assert run_probe(payload, cache)["answer"] == 7
    for entry in cache.iterdir():
        entry.write_bytes(b"not marshal data")
    assert run_probe(payload, cache)["answer"] == 7
