"""The application's imports: ``python -c BOOT FOLDER envcheck_target.app_imports OUT CONFIG_JSON``.

Runs *inside the target interpreter* (standard library only, Python 3.8) and never imports envcheck.
Three modes (``config["mode"]``):

- ``plan``: the top-level modules of every installed distribution that ships native code, read from its
  ``RECORD`` (``found``: ``[module, distribution, version, risk]`` sorted by module). Imports nothing.
  ``risk`` says what the cap takes first (``envcheck.verify.imports.plan_order``): ``"torch"`` for a
  module whose native files link torch (``libtorch*`` or ``libc10*`` in an ELF file's ``DT_NEEDED``,
  read from the file's dynamic section) or whose distribution is torch or requires it, ``"numpy"`` for
  one whose distribution is NumPy or requires it (an extension built on NumPy's C API needs NumPy at run
  time and says so in ``Requires-Dist``), else None.
- ``one``: imports ``config["module"]`` alone, the only import of its process: how it ended is its own.
- ``all``: imports ``config["modules"]`` one after the other in one process, noting after each import
  the shared libraries it added to the process (``loaded``: ``[module, [paths]]``), then the thread pools
  (threadpoolctl's view, when the target has it).

``current`` names the import in progress, written before it starts, so a crash or a hang is the import's.
``config["path"]`` (the caller's current folder) is appended to ``sys.path``: an application's entry
module is found where ``python -c 'import app'`` run there finds it, after every installed package.

**A real exit.** ``one`` and ``all`` write their result with ``stage: "exit"`` and leave through the
interpreter's normal exit (``sys.exit``), never ``os._exit``: non-daemon threads are joined, atexit hooks
and destructors run, as when the application ends. The exit has a deadline of its own, ``exit_s``: at most
``config["exit_s"]`` seconds, and never past ``config["deadline_s"]`` (the process's deadline, counted
from the start of ``main``). On POSIX an interval timer then kills the process with ``SIGALRM`` (its
default action, set again just before the exit), after ``faulthandler`` has dumped every thread's Python
stack to stderr; elsewhere ``faulthandler`` dumps them and ends the process with exit code 1. The caller
reads a death after ``stage: "exit"`` as the exit's: a signal is a crash at exit, ``SIGALRM`` a hang.
"""

import faulthandler
import importlib
import json
import os
import re
import signal
import stat
import struct
import sys
import time
import traceback

from .names import canonical_name
from .result import emit as _emit
from .result import finish as _finish

OUT = None
MAX_ERROR_CHARS = 2000
_result = {"stage": "start", "done": False, "current": None}
# A module file name: ``name.cpython-311-x86_64-linux-gnu.so``, ``name.abi3.so``, ``name.pyd``.
_EXTENSION = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)(?:\.[^./]*)?\.(?:so|pyd|dylib)$")
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
# The libraries that make a native file a torch extension: it links torch's own (libtorch_cpu.so,
# libtorch_python.so, libc10.so, libc10_cuda.so...).
_TORCH_LIBRARY = re.compile(r"^lib(?:torch|c10)(?:[_.]|$)")
# The project a Requires-Dist line names, and an ``extra`` marker (an optional requirement: not counted).
_REQUIREMENT_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_EXTRA_MARKER = re.compile(r"\bextra\s*==")
# Bounds of the plan's reads of native files: per module, in all, and of one file's dynamic section.
MAX_FILES_PER_MODULE = 64
MAX_FILES_READ = 4096
_MAX_HEADERS_BYTES = 64 << 10
_MAX_NEEDED = 256
# What the exit may take at most when the caller gives no ``exit_s``.
DEFAULT_EXIT_S = 5.0
_started = time.monotonic()


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


def needed_libraries(path):
    # type: (str) -> list
    """The ``DT_NEEDED`` names of the ELF file at ``path``, read from its dynamic segment: a few small
    reads, whatever the file's size. ``[]`` when it is not a regular ELF file or cannot be read (a PE or
    Mach-O file, a FIFO, a damaged header): never raises."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0))
    except (OSError, ValueError):
        return []
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return []
        with os.fdopen(fd, "rb") as f:
            fd = -1
            return _read_needed(f)
    except (OSError, ValueError, struct.error):
        return []
    finally:
        if fd >= 0:
            os.close(fd)


def _read_needed(f):
    head = f.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return []
    wide = head[4] == 2
    end = "<" if head[5] == 1 else ">"
    if wide:
        (phoff,) = struct.unpack_from(end + "Q", head, 32)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 54)
        header, entry, dyn_format = end + "IIQQQQQ", 16, end + "qQ"
    else:
        (phoff,) = struct.unpack_from(end + "I", head, 28)
        phentsize, phnum = struct.unpack_from(end + "HH", head, 42)
        header, entry, dyn_format = end + "IIIIII", 8, end + "iI"
    if phentsize < struct.calcsize(header) or phentsize * phnum > _MAX_HEADERS_BYTES:
        return []
    f.seek(phoff)
    table = f.read(phentsize * phnum)
    loads = []
    dynamic = None
    for i in range(len(table) // phentsize):
        row = struct.unpack_from(header, table, i * phentsize)
        if wide:
            kind, offset, vaddr, filesz = row[0], row[2], row[3], row[5]
        else:
            kind, offset, vaddr, filesz = row[0], row[1], row[2], row[4]
        if kind == 1:  # PT_LOAD
            loads.append((vaddr, offset, filesz))
        elif kind == 2:  # PT_DYNAMIC
            dynamic = (offset, filesz)
    if dynamic is None:
        return []
    f.seek(dynamic[0])
    data = f.read(min(dynamic[1], _MAX_HEADERS_BYTES))
    needed = []
    strtab = None
    for at in range(0, len(data) - entry + 1, entry):
        tag, value = struct.unpack_from(dyn_format, data, at)
        if tag == 0:  # DT_NULL
            break
        if tag == 1 and len(needed) < _MAX_NEEDED:  # DT_NEEDED
            needed.append(value)
        elif tag == 5:  # DT_STRTAB: an address, mapped to the file by the segment that holds it
            strtab = value
    base = None
    for vaddr, offset, filesz in loads:
        if strtab is not None and vaddr <= strtab < vaddr + filesz:
            base = offset + strtab - vaddr
    if base is None:
        return []
    names = []
    for at in needed:
        f.seek(base + at)
        names.append(f.read(256).split(b"\0", 1)[0].decode("utf-8", "replace"))
    return names


def _requires(dist, project):
    # type: (dict, str) -> bool
    """Whether ``dist`` is ``project`` or requires it (a requirement only under an extra does not count)."""
    if canonical_name(dist.get("name") or "") == project:
        return True
    for line in dist.get("requires") or []:
        name = _REQUIREMENT_NAME.match(line or "")
        if name and canonical_name(name.group(1)) == project:
            marker = line.partition(";")[2]
            if not _EXTRA_MARKER.search(marker):
                return True
    return False


def _links_torch(location, paths, budget):
    # type: (str, list, list) -> bool
    """Whether one of the native files ``paths`` (relative to ``location``) links torch's libraries.
    ``budget``: ``[files the plan may still read]``, spent here."""
    for path in paths[:MAX_FILES_PER_MODULE]:
        if budget[0] <= 0:
            return False
        budget[0] -= 1
        for name in needed_libraries(os.path.join(location, path)):
            if _TORCH_LIBRARY.match(name):
                return True
    return False


def plan():
    """``[module, distribution, version, risk]`` for each top-level module that holds a distribution's
    native files, sorted by module; a module two distributions claim is the first one's (``sys.path``
    order). ``risk``: see the module's docstring."""
    from .distributions import distributions

    dists, error = distributions()
    found = {}
    files = {}
    owner = {}
    for dist in dists:
        if dist.get("shadowed"):
            continue
        location = dist.get("location") or ""
        for native in dist.get("native_files") or []:
            path = native.get("path") or ""
            module = _top_level(location, path)
            if module is None:
                continue
            if module not in found:
                found[module] = [module, dist.get("name"), dist.get("version"), None]
                owner[module] = dist
            if owner[module] is dist:
                files.setdefault(module, []).append(path)
    budget = [MAX_FILES_READ]
    for module in sorted(found):
        dist = owner[module]
        if _requires(dist, "torch") or _links_torch(dist.get("location") or "", files[module], budget):
            found[module][3] = "torch"
        elif _requires(dist, "numpy"):
            found[module][3] = "numpy"
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


def all_of(modules, before=None, already=None):
    """Import ``modules`` in order, noting the libraries each one added. ``before``: the libraries mapped
    before the first (default: now); ``already``: module -> the libraries it added before this was called
    (a module the process imported earlier: the smoke suite's torch), taken as that import's."""
    from .loaded_libraries import loaded_libraries

    before = set(loaded_libraries() if before is None else before)
    already = already or {}
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
        added = [p for p in now if p not in before]
        if module in already:
            added = list(already[module]) + [p for p in added if p not in already[module]]
        _result["loaded"].append([module, added])
        before.update(now)
    _result["current"] = None
    _result["stage"] = "thread pools"
    emit()
    from .thread_pools import thread_pools

    _result["threadpools"] = thread_pools()


def exit_seconds(config):
    # type: (dict) -> float
    """The exit's deadline: ``config["exit_s"]`` (default ``DEFAULT_EXIT_S``), and never past what is left
    of ``config["deadline_s"]``, counted from the start of this module."""
    exit_s = float(config.get("exit_s") or DEFAULT_EXIT_S)
    deadline_s = config.get("deadline_s")
    if deadline_s is not None:
        exit_s = min(exit_s, float(deadline_s) - (time.monotonic() - _started))
    return round(max(exit_s, 0.05), 3)


def leave(config):
    """Write the result (``stage: "exit"``), arm the exit's deadline, and return: the caller then leaves
    through the interpreter's normal exit (see the module's docstring)."""
    exit_s = exit_seconds(config)
    _result["stage"] = "exit"
    _result["done"] = True
    _result["exit_s"] = exit_s
    emit()
    sys.stdout.flush()
    sys.stderr.flush()
    timer = getattr(signal, "setitimer", None)
    if timer is not None and hasattr(signal, "SIGALRM"):
        # The stacks first, for the report: which thread, hook or destructor the exit waits on.
        faulthandler.dump_traceback_later(max(exit_s - min(0.5, exit_s / 4), 0.01), exit=False)
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        timer(signal.ITIMER_REAL, exit_s)
    else:
        faulthandler.dump_traceback_later(exit_s, exit=True)


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
        _finish(OUT, _result)  # imported nothing: nothing of the target's runs at its exit
    elif mode == "one":
        one(config["module"])
    elif mode == "all":
        all_of(list(config.get("modules") or ()))
    leave(config)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
