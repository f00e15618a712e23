"""A compiled-code cache for modules imported from zip files, installed in the bench's node image only.

Every Ansible task that runs a module on a node sends an AnsiballZ payload: a zip of the module and the
module_utils it imports, unpacked to a fresh temporary directory and imported from there with zipimport.
zipimport holds no bytecode for sources (the zip has none and it writes none), so each task compiles
ansible.module_utils.basic and the rest again: about a third of a module task's CPU time on a node.

This file caches the compiled code objects by the SHA-256 of their source (and the interpreter's cache tag), in
CACHE_DIR, and gives a code object read from the cache the file name of the zip member it stands for, so that
tracebacks and __file__ are exactly as without the cache. A source that changes gets a new entry; any error
reading or writing the cache falls back to compiling, as zipimport does. Nothing else changes: the modules run
the same code. It is loaded at interpreter start by gpufleet-zipcache.pth beside it (site-packages).

It exists to make the test bench's many Molecule runs cheaper on a 2-core machine, and is not part of the
collection: the roles never install it on a managed node.
"""

import hashlib
import marshal
import os
import sys
import zipimport

CACHE_DIR = os.environ.get("GPUFLEET_PYCODE_CACHE", "/var/cache/gpufleet-pycode")


def _with_filename(code, filename):
    """The code object and every code object nested in it, with co_filename set to filename."""
    consts = tuple(_with_filename(c, filename) if isinstance(c, type(code)) else c for c in code.co_consts)
    return code.replace(co_filename=filename, co_consts=consts)


def _cache_path(source):
    digest = hashlib.sha256(source if isinstance(source, bytes) else source.encode("utf-8", "surrogateescape"))
    return os.path.join(CACHE_DIR, "%s.%s" % (digest.hexdigest(), sys.implementation.cache_tag))


def _install():
    compile_source = getattr(zipimport, "_compile_source", None)
    if compile_source is None or getattr(compile_source, "gpufleet_cached", False):
        return

    def cached_compile_source(pathname, source):
        path = _cache_path(source)
        try:
            with open(path, "rb") as cached:
                return _with_filename(marshal.loads(cached.read()), pathname)
        except (OSError, EOFError, ValueError, TypeError):
            pass
        code = compile_source(pathname, source)
        try:
            os.makedirs(CACHE_DIR, mode=0o755, exist_ok=True)
            partial = "%s.%d.tmp" % (path, os.getpid())
            with open(partial, "wb") as out:
                out.write(marshal.dumps(code))
            os.replace(partial, path)
        except OSError:
            pass
        return code

    cached_compile_source.gpufleet_cached = True
    zipimport._compile_source = cached_compile_source


_install()
