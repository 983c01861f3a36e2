"""The application's imports: ``python -c BOOT FOLDER envcheck_target.app_imports OUT CONFIG_JSON``.

Runs *inside the target interpreter* (standard library only, Python 3.8) and never imports envcheck.
Three modes (``config["mode"]``):

- ``plan``: the top-level modules of every installed distribution that ships native code, read from its
  ``RECORD`` (``found``: ``[module, distribution, version]`` sorted by module). Imports nothing.
- ``one``: imports ``config["module"]`` alone, the only import of its process: how it ended is its own.
- ``all``: imports ``config["modules"]`` one after the other in one process, noting after each import
  the shared libraries it added to the process (``loaded``: ``[module, [paths]]``), then the thread pools
  (threadpoolctl's view, when the target has it).

``current`` names the import in progress, written before it starts, so a crash or a hang is the import's.
``config["path"]`` (the caller's current folder) is appended to ``sys.path``: an application's entry
module is found where ``python -c 'import app'`` run there finds it, after every installed package.
"""

import faulthandler
import importlib
import json
import os
import re
import sys
import time
import traceback

from .result import emit as _emit
from .result import finish as _finish

OUT = None
MAX_ERROR_CHARS = 2000
_result = {"stage": "start", "done": False, "current": None}
# A module file name: ``name.cpython-311-x86_64-linux-gnu.so``, ``name.abi3.so``, ``name.pyd``.
_EXTENSION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.[^./]*)?\.(?:so|pyd|dylib)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def emit():
    _emit(OUT, _result)


def _top_level(location, path):
    # type: (str, str) -> str | None
    """The importable top-level module a native file of a distribution belongs to, or None (a ``.libs``
    folder of vendored libraries, a file outside the site folder, a name that is not an identifier)."""
    parts = path.split("/")
    if len(parts) == 1:
        found = _EXTENSION.match(parts[0])
        return found.group(1) if found else None
    head = parts[0]
    if not _IDENTIFIER.match(head):
        return None
    folder = os.path.join(location, head)
    if os.path.isfile(os.path.join(folder, "__init__.py")) or any(
        _EXTENSION.match(name) and name.startswith("__init__.") for name in _listdir(folder)
    ):
        return head
    return None


def _listdir(folder):
    try:
        return os.listdir(folder)
    except OSError:
        return []


def plan():
    """``[module, distribution, version]`` for each top-level module that holds a distribution's native
    files, sorted by module; a module two distributions claim is the first one's (``sys.path`` order)."""
    from .distributions import distributions

    dists, error = distributions()
    found = {}
    for dist in dists:
        if dist.get("shadowed"):
            continue
        location = dist.get("location") or ""
        for native in dist.get("native_files") or []:
            module = _top_level(location, native.get("path") or "")
            if module is not None and module not in found:
                found[module] = [module, dist.get("name"), dist.get("version")]
    _result["found"] = [found[m] for m in sorted(found)]
    if error:
        _result["error"] = error


def _import(module):
    """Import ``module``; None when it worked, else ``{"error", "traceback"}``. Anything it raises is its
    outcome, SystemExit included (an import that calls sys.exit is a broken import)."""
    try:
        importlib.import_module(module)
    except BaseException as e:  # noqa: B036 - the import's outcome, whatever it is
        if isinstance(e, KeyboardInterrupt):
            raise
        return {
            "error": ("%s: %s" % (type(e).__name__, e))[:MAX_ERROR_CHARS],
            "traceback": traceback.format_exc()[-MAX_ERROR_CHARS:],
        }
    return None


def one(module):
    _result["current"] = module
    _result["stage"] = "import " + module
    emit()
    started = time.monotonic()
    failed = _import(module)
    _result["duration_s"] = round(time.monotonic() - started, 4)
    if failed is not None:
        _result.update(failed)
    _result["current"] = None


def all_of(modules):
    from .loaded_libraries import loaded_libraries

    before = set(loaded_libraries())
    _result["loaded"] = []
    _result["failed"] = []
    for module in modules:
        _result["current"] = module
        _result["stage"] = "import " + module
        emit()
        failed = _import(module)
        if failed is not None:
            _result["failed"].append([module, failed["error"]])
        now = loaded_libraries()
        _result["loaded"].append([module, [p for p in now if p not in before]])
        before.update(now)
    _result["current"] = None
    _result["stage"] = "thread pools"
    emit()
    from .thread_pools import thread_pools

    _result["threadpools"] = thread_pools()


def main(argv):
    global OUT
    OUT = argv[1]
    # A segfault or abort in native code then leaves the Python stack in the stderr tail the runner keeps.
    faulthandler.enable()
    config = json.loads(argv[2])
    from .probe import forget_own_folder

    forget_own_folder()
    if config.get("path"):
        sys.path.append(config["path"])
    mode = config.get("mode")
    _result["mode"] = mode
    if mode == "plan":
        plan()
    elif mode == "one":
        one(config["module"])
    elif mode == "all":
        all_of(list(config.get("modules") or ()))
    _finish(OUT, _result)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
