"""Every live target session and envcheck temp folder of this process, so that an interrupt ends them all.

Targets run in their own session (``start_new_session``): a Ctrl-C at the terminal reaches envcheck's
process group, never theirs, so without this registry an interrupted ``verify`` left its suite running,
orphaned. ``install_interrupt_handlers`` makes SIGINT and SIGTERM kill every registered session and remove
every registered folder *before* the main thread unwinds: the worker threads waiting on those targets then
return at once, and ``Interrupted`` reaches ``envcheck.cli.main``, which prints ``interrupted`` and exits
130. After that no new target can start (``launch`` raises ``Interrupted``), so a suite's rerun loop cannot
start a fresh process behind the interrupt's back.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from types import FrameType

# 128 + SIGINT, what a shell reports for a command ended by Ctrl-C.
EXIT_INTERRUPTED = 130


class Interrupted(BaseException):
    """SIGINT or SIGTERM arrived; every target session is already killed.

    A ``BaseException`` like ``KeyboardInterrupt``, but not one: click turns a ``KeyboardInterrupt`` into
    ``Aborted!`` and exit 1, and ``except Exception`` handlers must not swallow it either.
    """


class _Registry:
    """The sessions and folders alive now. ``closed`` once interrupted: nothing new may start."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.sessions: dict[int, subprocess.Popen[bytes]] = {}
        self.folders: set[str] = set()
        self.closed = False
        # > 0 while the main thread is in a step an interrupt must not split (between fork and
        # registration, or holding the lock, which the handler, running in the main thread, takes too).
        self.deferring = 0
        self.pending: int | None = None
        self.handled = False


_registry = _Registry()


@contextlib.contextmanager
def uninterrupted() -> Iterator[None]:
    """In the main thread, hold a signal that arrives inside the block until its end: for steps an
    interrupt must not split, like creating a temp folder and registering it. Nests."""
    in_main = threading.current_thread() is threading.main_thread()
    if in_main:
        _registry.deferring += 1
    try:
        yield
    finally:
        if in_main:
            _registry.deferring -= 1
            if _registry.deferring == 0 and _registry.pending is not None:
                _interrupt(_registry.pending)


def launch(start: Callable[[], subprocess.Popen[bytes]]) -> subprocess.Popen[bytes]:
    """Run ``start`` (which creates a process in a session of its own) and register that session.

    Raises ``Interrupted`` when an interrupt came first (then ``start`` is not called), and whatever
    ``start`` raises.
    """
    with uninterrupted(), _registry.lock:
        if _registry.closed:
            raise Interrupted
        proc = start()
        _registry.sessions[proc.pid] = proc
        return proc


def forget(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` has been reaped and its session killed: it no longer needs ending."""
    with uninterrupted(), _registry.lock:
        _registry.sessions.pop(proc.pid, None)


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of ``proc``'s session (the process itself on Windows). Never raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            # The target is its session's leader, so its pid is the process group id of the session.
            os.killpg(proc.pid, signal.SIGKILL)
        else:
            proc.kill()


# What a tool's log keeps: its last lines say why it failed.
MAX_LOG_BYTES = 256 * 1024


def run_logged(
    argv: list[str], log_path: Path, *, timeout: float, env: dict[str, str], cwd: Path | None = None
) -> int | None:
    """Run ``argv`` in a session of its own (registered, so an interrupt ends it), stdin closed, stdout and
    stderr into ``log_path``; at ``timeout`` its whole session is killed. Returns the exit code, or None
    when it ran out of time. Raises ``OSError`` when it cannot start, ``Interrupted`` after an interrupt."""
    with log_path.open("wb") as log:
        proc = launch(
            lambda: subprocess.Popen(
                argv,
                cwd=cwd,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        )
        try:
            return proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            kill_session(proc)
            proc.wait()
            return None
        finally:
            kill_session(proc)  # whatever the tool left running in its session ends with it
            forget(proc)


def log_tail(path: Path) -> str:
    """The last ``MAX_LOG_BYTES`` of a tool's log, redacted: what may be shown of it."""
    from envcheck.redact import redact_text

    with path.open("rb") as f:
        f.seek(0, os.SEEK_END)
        f.seek(max(0, f.tell() - MAX_LOG_BYTES))
        return redact_text(f.read().decode("utf-8", errors="replace"))


@contextlib.contextmanager
def temporary_folder(prefix: str) -> Iterator[Path]:
    """A fresh temp folder (``tempfile.mkdtemp``) that is removed on exit *and* by an interrupt.

    For every ``envcheck-*`` folder a command creates (``envcheck-verify-*``, ``envcheck-scan-*``, ...):
    the interrupt handler removes it even while the code using it is still blocked.
    """
    folder = make_folder(prefix)
    try:
        yield Path(folder)
    finally:
        remove_folder(folder)


def make_folder(prefix: str, parent: str | None = None) -> str:
    """A fresh temp folder (``tempfile.mkdtemp``), registered for removal by an interrupt in the same step:
    created and registered under the registry's lock, so an interrupt in another thread either sees it
    (and removes it) or comes first (then no folder is made, and this raises ``Interrupted``). A worker
    thread that made its folder just after an interrupt's clean-up would otherwise leave it behind when
    the process exits. ``remove_folder`` when done with it."""
    with uninterrupted(), _registry.lock:
        if _registry.closed:
            raise Interrupted
        folder = tempfile.mkdtemp(prefix=prefix, dir=parent)
        _registry.folders.add(folder)
    return folder


def register_folder(folder: str) -> None:
    """Have an interrupt remove ``folder`` (made by the caller); ``remove_folder`` when done with it. After
    an interrupt the folder is removed at once and this raises ``Interrupted``."""
    with uninterrupted(), _registry.lock:
        if not _registry.closed:
            _registry.folders.add(folder)
            return
    shutil.rmtree(folder, ignore_errors=True)
    raise Interrupted


def remove_folder(folder: str) -> None:
    """Remove ``folder`` (if still there) and forget it. Never raises."""
    with uninterrupted(), _registry.lock:
        _registry.folders.discard(folder)
    shutil.rmtree(folder, ignore_errors=True)


def kill_all() -> None:
    """Kill every registered session, remove every registered folder, and refuse new targets from now on.

    Safe to call more than once and from the signal handler. Never raises.
    """
    with uninterrupted(), _registry.lock:
        _registry.closed = True
        procs = list(_registry.sessions.values())
        folders = list(_registry.folders)
        _registry.sessions.clear()
        _registry.folders.clear()
    for proc in procs:
        kill_session(proc)
    for folder in folders:
        shutil.rmtree(folder, ignore_errors=True)


def install_interrupt_handlers() -> None:
    """SIGINT and SIGTERM end every target and raise ``Interrupted`` in the main thread. For the console
    script only: a library caller keeps its own handlers."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)


def _on_signal(signum: int, frame: FrameType | None) -> None:
    if _registry.deferring:
        _registry.pending = signum
        return
    _interrupt(signum)


def _interrupt(signum: int) -> None:
    _registry.pending = None
    kill_all()
    if _registry.handled:
        # A second signal while unwinding from the first: whatever still blocks the unwinding, the
        # targets are gone; leave now.
        os.write(2, b"interrupted\n")
        os._exit(EXIT_INTERRUPTED)
    _registry.handled = True
    raise Interrupted(signal.Signals(signum).name)


# prctl(2) PR_SET_CHILD_SUBREAPER, Linux >= 3.4.
_PR_SET_CHILD_SUBREAPER = 36


def adopt_orphans() -> None:
    """Make this process the subreaper of its descendants (Linux; elsewhere nothing happens).

    A daemon that a target starts (double fork + ``setsid``) leaves the target's session, so killing the
    session cannot reach it; as a subreaper, envcheck becomes its parent instead of init, and
    ``kill_orphans`` can end it. For the console script only: it changes how this process's descendants
    are re-parented. Never raises.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)


def kill_orphans() -> None:
    """SIGKILL every live child of this process that is not a registered target: after
    ``adopt_orphans``, the daemons that targets left behind. Linux only (``/proc``). Never raises."""
    if not sys.platform.startswith("linux"):
        return
    with _registry.lock:
        registered = set(_registry.sessions)
    # A killed daemon's own children are re-parented here in turn: a few rounds, not a loop without end.
    for _ in range(8):
        orphans = _live_children(os.getpid()) - registered
        if not orphans:
            return
        for pid in orphans:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)


def _live_children(parent: int) -> set[int]:
    children = set()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            # "pid (comm) state ppid ...": comm may hold spaces and parentheses, so split after the last ")".
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(parent) and fields[0] not in ("Z", "X"):
            children.add(int(entry.name))
    return children
