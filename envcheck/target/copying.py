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
    shutil.copytree(
        _HERE, os.path.join(folder, PACKAGE), ignore=shutil.ignore_patterns("__pycache__", "*.pyc")
    )
    return folder
