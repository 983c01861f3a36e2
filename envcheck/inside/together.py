# mypy: ignore-errors
# ruff: noqa: UP004, UP031, PTH118, PTH123
"""The application's imports together, in a child of the smoke suite's main process.

Runs *inside the target interpreter* (standard library only, Python 3.8) and never imports envcheck. The
suite's ``main`` process has imported torch for its checks; the imports together need torch too, so on
Linux the suite forks a child right after ``import torch``, before any check runs, and the child imports
the others while the parent runs the checks: one ``import torch`` for the suite and the imports together,
on both cores. ``config["together"]`` holds the files it speaks through (``request``, ``out``, ``end``,
``stderr``):

- the host writes ``request`` (``{"modules": [...], "path", "import_s", "exit_s", "deadline_s"}``; no
  modules: nothing to import) once it knows what to import; the child waits for it;
- the child writes ``out`` as ``app_imports`` mode ``all`` writes its result (torch's libraries are the
  ones ``import torch`` added to the process before the fork), its own stderr goes to ``stderr``, and it
  leaves through the interpreter's normal exit under the exit's deadline, as ``app_imports`` does; the
  imports themselves have ``import_s`` seconds (an interval timer then kills the child with ``SIGALRM``,
  after ``faulthandler`` dumped its stacks);
- the parent, after its checks, waits for the child and writes ``end`` (``{"forked": true, "exit_code",
  "signal"}``), or ``{"forked": false, "why"}`` when it did not fork: the host then imports them together
  in a process of its own.

No fork (``forked: false``) where it is not safe: not Linux, a Python thread besides the main one (a fork
copies only the calling thread; the native ones ``import torch`` starts are torch's, as when a DataLoader
forks its workers), or a CUDA device the runtime probe found (a forked child cannot use CUDA again).
"""

import faulthandler
import json
import os
import signal
import sys
import time

from .result import emit as _emit

# How often the child looks for the host's request.
POLL_S = 0.01
# The largest file the child may write (its stderr file above all: an import that prints without end
# fails its write past it instead of filling the disk; alone, in a process of its own, it then meets the
# runner's bounded pipe).
MAX_FILE_BYTES = 64 << 20


def _cannot_fork(torch):
    """Why the suite must not fork here, or None."""
    if not sys.platform.startswith("linux") or not hasattr(os, "fork"):
        return "not Linux"
    import threading

    # Native threads `import torch` starts (one on torch 2.13, asleep on a futex) are torch's, as when a
    # DataLoader forks its workers (the default on Linux); a Python thread is someone else's.
    if threading.active_count() != 1:
        return "%d Python threads in the process" % threading.active_count()
    try:
        if torch.cuda.is_initialized() or torch.cuda.device_count() > 0:
            return "a CUDA device is initialised"
    except Exception as e:
        return "CUDA could not be asked: %s" % type(e).__name__
    return None


def fork(config, before, torch):
    """In the suite's main process, right after ``import torch``: fork the child that imports the others
    (it never returns there); return its pid in the parent, or None when there is none (``end`` says why).
    ``before``: the libraries mapped before ``import torch``."""
    paths = config.get("together")
    if not paths:
        return None
    why = _cannot_fork(torch)
    if why is not None:
        _emit(paths["end"], {"forked": False, "why": why})
        return None
    sys.stdout.flush()
    sys.stderr.flush()
    import gc
    import warnings

    # Every object the parent holds is frozen for the child: its collections, the last ones of its
    # normal exit included, never walk them, so they never copy the pages they share with the parent.
    # The child's exit then costs half the CPU (0.35 s less with torch 2.13), and is the same exit:
    # atexit hooks, threads and destructors run; only cycles among the parent's objects stay uncollected.
    gc.freeze()
    with warnings.catch_warnings():
        # Python 3.12+ warns of fork() with threads (torch's own, above); -W error would make it raise.
        warnings.simplefilter("ignore", DeprecationWarning)
        try:
            pid = os.fork()
        except BaseException:
            gc.unfreeze()
            raise
    if pid:
        gc.unfreeze()  # the parent's collections as before
        return pid
    # The application's imports run with the collector on, as in the application (the suite's process
    # has it off); what the parent made stays frozen.
    gc.enable()
    code = 1
    try:
        _output_to(paths["stderr"])
        code = _child(paths, before)
    except BaseException:  # noqa: B036 - the child must never go back into the suite's code
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(1)
    sys.exit(code)


def _output_to(path):
    """In a forked child: its stdout and stderr go to the file ``path`` (a new file: no link followed),
    and no file it writes grows past ``MAX_FILE_BYTES``."""
    _bound_files()
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _bound_files():
    import resource

    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    cap = MAX_FILE_BYTES if hard == resource.RLIM_INFINITY else min(MAX_FILE_BYTES, hard)
    if soft == resource.RLIM_INFINITY or soft > cap:
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past the cap fails (EFBIG), no signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (cap, hard))


def _child(paths, before):
    from . import app_imports
    from .loaded_libraries import loaded_libraries
    from .probe import forget_own_folder

    now = loaded_libraries()
    seen = set(before)
    torch_libraries = [p for p in now if p not in seen]
    request = None
    while request is None:
        try:
            with open(paths["request"], encoding="utf-8") as f:
                request = json.load(f)
        except (OSError, ValueError):
            time.sleep(POLL_S)
    modules = [m for m in request.get("modules") or () if isinstance(m, str)]
    if not modules:
        os._exit(0)  # nothing imported here: nothing of the target's to run at exit
    app_imports._started = time.monotonic()
    app_imports.OUT = paths["out"]
    app_imports._result["mode"] = "all"
    forget_own_folder()
    if request.get("path"):
        sys.path.append(request["path"])
    import_s = float(request.get("import_s") or 30.0)
    timer = getattr(signal, "setitimer", None)
    faulthandler.dump_traceback_later(max(import_s - min(0.5, import_s / 4), 0.01), exit=False)
    signal.signal(signal.SIGALRM, signal.SIG_DFL)
    timer(signal.ITIMER_REAL, import_s)
    app_imports.all_of(modules, before=now, already=_owners(modules, torch_libraries))
    timer(signal.ITIMER_REAL, 0)
    faulthandler.cancel_dump_traceback_later()
    app_imports.leave(request)
    return 0


def _owners(modules, libraries):
    """The libraries mapped since before ``import torch``, each given to the import that brought it: a
    module of ``modules`` the process had imported by then (NumPy, which torch imports) owns those under
    its package folder or its wheel's ``<module>.libs`` folder; torch owns the rest."""
    owned = {}
    rest = list(libraries)
    for module in modules:
        found = sys.modules.get(module)
        where = getattr(found, "__file__", None) if module != "torch" and found is not None else None
        if not isinstance(where, str):
            continue
        base = os.path.dirname(where) if os.path.basename(where).startswith("__init__.") else where
        prefixes = (base + os.sep, os.path.join(os.path.dirname(base), module + ".libs") + os.sep)
        mine = [p for p in rest if p == base or p.startswith(prefixes)]
        if mine:
            owned[module] = mine
            rest = [p for p in rest if p not in mine]
    owned["torch"] = rest
    return owned


def wait(pid, config):
    """In the parent, after its checks: wait for the child and write ``end``."""
    paths = config["together"]
    while True:
        try:
            _, status = os.waitpid(pid, 0)
            break
        except InterruptedError:
            continue
        except ChildProcessError:
            status = None
            break
    end = {"forked": True, "exit_code": None, "signal": None}
    if status is not None and os.WIFSIGNALED(status):
        end["signal"] = os.WTERMSIG(status)
    elif status is not None and os.WIFEXITED(status):
        end["exit_code"] = os.WEXITSTATUS(status)
    _emit(paths["end"], end)
