"""Every live target session and envcheck temp folder of this process, so that an interrupt ends them all.

Targets run in their own session (``start_new_session``): a Ctrl-C at the terminal reaches envcheck's
process group, never theirs, so without this registry an interrupted ``verify`` left its suite running,
orphaned. ``install_interrupt_handlers`` makes SIGINT and SIGTERM kill every registered session and remove
every registered folder *before* the main thread unwinds: the worker threads waiting on those targets then
return at once, and ``Interrupted`` reaches ``envcheck.cli.main``, which prints ``interrupted`` and exits
130. After that no new target can start (``launch`` raises ``Interrupted``), so a suite's rerun loop cannot
start a fresh process behind the interrupt's back.

On Windows there are no sessions: each target is put in a Job object of its own as it starts
(``_WindowsJob``), and "its session" is that job. Every process the target starts joins the job, and
killing the job (``TerminateJobObject``) kills them all; the job is made with
``JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE``, so if envcheck itself dies its targets die with it. Ctrl-C
(``SIGINT``) and Ctrl-Break (``SIGBREAK``) are the interrupts there.
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
from typing import Any

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
        # Windows: the Job object each registered target runs in (None where it could not be made).
        self.jobs: dict[int, _WindowsJob | None] = {}
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
        if os.name == "nt":
            _registry.jobs[proc.pid] = _WindowsJob.around(proc)
        return proc


def forget(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` has been reaped and its session killed: it no longer needs ending."""
    with uninterrupted(), _registry.lock:
        _registry.sessions.pop(proc.pid, None)
        job = _registry.jobs.pop(proc.pid, None)
    if job is not None:
        job.close()


def kill_session(proc: subprocess.Popen[bytes]) -> None:
    """SIGKILL every process of ``proc``'s session; on Windows, terminate every process of its Job object
    and wait (at most ``_JOB_END_S``) until they are gone, so that their folders can be removed. Never
    raises."""
    with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
        if os.name == "posix":
            # The target is its session's leader, so its pid is the process group id of the session.
            os.killpg(proc.pid, signal.SIGKILL)
            return
        job = _registry.jobs.get(proc.pid)
        if job is not None:
            job.terminate()
        proc.kill()  # also where no job could be made: the target itself, at least


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
    # Lazy: every command loads this module, --version too (interrupt handlers); redaction loads on use.
    from envcheck.core.redact import redact_text

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
    _rmtree(folder)


def _rmtree(folder: str) -> None:
    """``shutil.rmtree`` that never raises. On Windows a file is not deleted while a process still has it
    open, nor a folder that is a process's working directory: a process of a job just terminated may
    take a moment to close them, so the removal is retried for at most ``_JOB_END_S``."""
    shutil.rmtree(folder, ignore_errors=True)
    if os.name != "nt":
        return
    import time

    ends = time.monotonic() + _JOB_END_S
    while os.path.lexists(folder) and time.monotonic() < ends:
        time.sleep(0.05)
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
        _rmtree(folder)


def install_interrupt_handlers() -> None:
    """SIGINT and SIGTERM end every target and raise ``Interrupted`` in the main thread. For the console
    script only: a library caller keeps its own handlers."""
    signal.signal(signal.SIGINT, _on_signal)
    signal.signal(signal.SIGTERM, _on_signal)
    if hasattr(signal, "SIGBREAK"):  # Windows: Ctrl-Break, and what a console's close sends
        signal.signal(signal.SIGBREAK, _on_signal)


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


# How long the processes of a terminated job, and the files they held, may take to go (Windows).
_JOB_END_S = 2.0
# winnt.h
_JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE = 0x2000
_JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION = 1
_JOB_OBJECT_EXTENDED_LIMIT_INFORMATION = 9
# The exit code of a process ended by its job's termination: 1, as ``Popen.kill`` (TerminateProcess) uses.
_KILLED_EXIT_CODE = 1


class _WindowsJob:
    """A Job object holding one target and every process it starts (Windows; ctypes on kernel32).

    The target is assigned right after ``CreateProcess`` returns, under the registry's lock; a child it
    started before that (within the first instructions of a CPython that has not finished starting) would
    escape the job, which no Python target can do. Processes cannot break away: the job does not allow it.
    """

    def __init__(self, handle: int) -> None:
        self._handle = handle

    @classmethod
    def around(cls, proc: subprocess.Popen[bytes]) -> _WindowsJob | None:
        """A new job with ``proc`` in it, or None where Windows refuses one (then only ``proc`` itself
        can be killed). Never raises."""
        try:
            return cls._make(proc)
        except (OSError, AttributeError, ValueError, TypeError):
            return None

    @classmethod
    def _make(cls, proc: subprocess.Popen[bytes]) -> _WindowsJob | None:
        import ctypes

        kernel32 = _kernel32()
        handle = kernel32.CreateJobObjectW(None, None)
        if not handle:
            return None
        job = cls(handle)
        info = _job_structures()["extended"]()
        info.BasicLimitInformation.LimitFlags = _JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE
        process = int(proc._handle)  # type: ignore[attr-defined]  # Popen's own process handle
        if not kernel32.SetInformationJobObject(
            handle, _JOB_OBJECT_EXTENDED_LIMIT_INFORMATION, ctypes.byref(info), ctypes.sizeof(info)
        ) or not kernel32.AssignProcessToJobObject(handle, process):
            job.close()
            return None
        return job

    def terminate(self) -> None:
        """End every process of the job and wait until none is left (at most ``_JOB_END_S``)."""
        import time

        if not self._handle:
            return
        _kernel32().TerminateJobObject(self._handle, _KILLED_EXIT_CODE)
        ends = time.monotonic() + _JOB_END_S
        while self.active() and time.monotonic() < ends:
            time.sleep(0.01)

    def active(self) -> int:
        """How many processes of the job are still running (0 when it cannot be asked)."""
        import ctypes

        counters = _job_structures()["accounting"]()
        ok = _kernel32().QueryInformationJobObject(
            self._handle,
            _JOB_OBJECT_BASIC_ACCOUNTING_INFORMATION,
            ctypes.byref(counters),
            ctypes.sizeof(counters),
            None,
        )
        return int(counters.ActiveProcesses) if ok else 0

    def close(self) -> None:
        """Close the job's handle: with ``KILL_ON_JOB_CLOSE``, whatever still runs in it ends."""
        handle, self._handle = self._handle, 0
        if handle:
            _kernel32().CloseHandle(handle)


_KERNEL32: Any = None
_STRUCTURES: dict[str, Any] = {}


def _kernel32() -> Any:
    """kernel32's job functions, with their prototypes (a HANDLE is 64 bits: never an ``int`` result)."""
    global _KERNEL32  # noqa: PLW0603 - made once, on first use, on Windows only
    if _KERNEL32 is None:
        import ctypes
        from ctypes import wintypes

        lib = getattr(ctypes, "WinDLL")("kernel32", use_last_error=True)  # noqa: B009 - Windows only
        handle, dword, pointer = wintypes.HANDLE, wintypes.DWORD, ctypes.c_void_p
        for name, restype, argtypes in (
            ("CreateJobObjectW", handle, [pointer, wintypes.LPCWSTR]),
            ("SetInformationJobObject", wintypes.BOOL, [handle, ctypes.c_int, pointer, dword]),
            ("AssignProcessToJobObject", wintypes.BOOL, [handle, handle]),
            ("TerminateJobObject", wintypes.BOOL, [handle, wintypes.UINT]),
            ("QueryInformationJobObject", wintypes.BOOL, [handle, ctypes.c_int, pointer, dword, pointer]),
            ("CloseHandle", wintypes.BOOL, [handle]),
        ):
            function = getattr(lib, name)
            function.restype, function.argtypes = restype, argtypes
        _KERNEL32 = lib
    return _KERNEL32


def _job_structures() -> dict[str, Any]:
    """JOBOBJECT_EXTENDED_LIMIT_INFORMATION and JOBOBJECT_BASIC_ACCOUNTING_INFORMATION (winnt.h)."""
    if not _STRUCTURES:
        import ctypes

        size_t, large = ctypes.c_size_t, ctypes.c_int64
        dword = ctypes.c_uint32

        class Basic(ctypes.Structure):
            _fields_ = [
                ("PerProcessUserTimeLimit", large),
                ("PerJobUserTimeLimit", large),
                ("LimitFlags", dword),
                ("MinimumWorkingSetSize", size_t),
                ("MaximumWorkingSetSize", size_t),
                ("ActiveProcessLimit", dword),
                ("Affinity", size_t),
                ("PriorityClass", dword),
                ("SchedulingClass", dword),
            ]

        class Extended(ctypes.Structure):
            _fields_ = [
                ("BasicLimitInformation", Basic),
                ("IoInfo", ctypes.c_uint64 * 6),
                ("ProcessMemoryLimit", size_t),
                ("JobMemoryLimit", size_t),
                ("PeakProcessMemoryUsed", size_t),
                ("PeakJobMemoryUsed", size_t),
            ]

        class Accounting(ctypes.Structure):
            _fields_ = [
                ("TotalUserTime", large),
                ("TotalKernelTime", large),
                ("ThisPeriodTotalUserTime", large),
                ("ThisPeriodTotalKernelTime", large),
                ("TotalPageFaultCount", dword),
                ("TotalProcesses", dword),
                ("ActiveProcesses", dword),
                ("TotalTerminatedProcesses", dword),
            ]

        _STRUCTURES.update(extended=Extended, accounting=Accounting)
    return _STRUCTURES
