"""Copying this package where a target interpreter can run it (envcheck's side; standard library only).

The copy is a top-level package named ``PACKAGE`` in a folder of the caller's (the runner's temporary
folder), so the target imports neither envcheck nor anything beside it, and the copy goes with the folder.
"""

import os
import shutil
import stat
import sys

PACKAGE = "envcheck_target"
_HERE = os.path.dirname(os.path.abspath(__file__))


def copy_package(into):
    # type: (str) -> str
    """Copy this package to ``into/lib/PACKAGE`` and return ``into/lib``: the folder the boot line puts on
    the target's ``sys.path``. Raises ``OSError`` if the copy fails.

    The byte-code this interpreter compiled of the package goes with it (``__pycache__/*.TAG.pyc``, TAG
    this interpreter's cache tag, nothing else), and the sources keep their modification times: a target
    of the same Python then loads it instead of compiling every module again (some 20 ms of every probe),
    and a target of another Python ignores it, its tag being another. Whether a ``.pyc`` still matches its
    source is the target's import system's own check (the source's time and size, or its hash), as for
    any installed package."""
    folder = os.path.join(into, "lib")
    shutil.copytree(_HERE, os.path.join(folder, PACKAGE), ignore=_not_copied, copy_function=_copy_with_time)
    return folder


def _copy_with_time(source, destination):
    # type: (str, str) -> None
    """The contents and the modification time; not the mode (a read-only file would make the folder's
    removal fail on Windows)."""
    shutil.copyfile(source, destination)
    status = os.stat(source)
    os.utime(destination, ns=(status.st_atime_ns, status.st_mtime_ns))


def _not_copied(folder, names):
    # type: (str, list) -> list
    if os.path.basename(folder) != "__pycache__":
        return [n for n in names if n.endswith((".pyc", ".pyo"))]
    tag = sys.implementation.cache_tag
    own = (".%s.pyc" % tag) if tag else None
    # module.TAG.pyc only: not an optimised build's (module.TAG.opt-1.pyc), nor pytest's rewrites; and only
    # a regular file (a link would be followed by the copy: to a FIFO, a device, anything).
    return [n for n in names if own is None or not n.endswith(own) or not _regular(os.path.join(folder, n))]


def _regular(path):
    # type: (str) -> bool
    try:
        return stat.S_ISREG(os.lstat(path).st_mode)
    except OSError:
        return False
