"""Copying this package where a target interpreter can run it (envcheck's side; standard library only).

The copy is a top-level package named ``PACKAGE`` in a folder of the caller's (the runner's temporary
folder), so the target imports neither envcheck nor anything beside it, and the copy goes with the folder.
"""

import os
import shutil

PACKAGE = "envcheck_target"
_HERE = os.path.dirname(os.path.abspath(__file__))


def copy_package(into):
    # type: (str) -> str
    """Copy this package to ``into/lib/PACKAGE`` (without bytecode caches) and return ``into/lib``: the
    folder the boot line puts on the target's ``sys.path``. Raises ``OSError`` if the copy fails."""
    folder = os.path.join(into, "lib")
    # Contents only (copyfile, not copy2): the copy is made before every target starts, on the
    # snapshot's critical path, and the files' modes and times mean nothing to the import system.
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(_HERE, os.path.join(folder, PACKAGE), ignore=ignore, copy_function=shutil.copyfile)
    return folder
