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
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import FrameType
from typing import Any

# 128 + SIGINT, what a shell reports for a command ended by Ctrl-C.
EXIT_INTERRUPTED = 130
# The longest the main thread sleeps in one wait call (``envcheck.process.awake``): a signal the kernel
# handed to another thread runs its handler in the main thread only once that thread wakes.
POLL_S = 0.05


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
        # Every pid ``launch`` started and ``forget`` has not yet seen: reaped by its own Popen, never by
        # the sweep of a job (``kill_all`` clears ``sessions``, not this).
        self.launched: set[int] = set()
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


def launch(
    start: Callable[[], subprocess.Popen[bytes]], *, deadline: float | None = None
) -> subprocess.Popen[bytes]:
    """Run ``start`` (which creates a process in a session of its own, its environment passed through
    ``job_env``) and register that session; ``forget`` it once reaped.

    The process belongs to the job in progress (``job``; one begins here when none is open and ends when
    its last process is forgotten). ``deadline``: when it must be over (``time.monotonic``), which the
    job's watchdog enforces even while this process is stopped. Raises ``Interrupted`` when an interrupt
    came first (then ``start`` is not called), and whatever ``start`` raises.
    """
    with uninterrupted(), _registry.lock:
        if _registry.closed:
            raise Interrupted
        _JOB.enter()
        try:
            _JOB.activate()
            proc = start()
        except BaseException:
            _JOB.leave()
            raise
        _registry.sessions[proc.pid] = proc
        _registry.launched.add(proc.pid)
        _JOB.started(proc.pid)
        if os.name == "nt":
            _registry.jobs[proc.pid] = _WindowsJob.around(proc)
        elif deadline is not None:
            _JOB.arm(proc.pid, deadline)
        return proc


def forget(proc: subprocess.Popen[bytes]) -> None:
    """``proc`` has been reaped and its session killed: it no longer needs ending. The last process of a
    job forgotten ends the job: whatever its processes left running is killed (``job``)."""
    with uninterrupted(), _registry.lock:
        _registry.sessions.pop(proc.pid, None)
        job = _registry.jobs.pop(proc.pid, None)
        if proc.pid in _registry.launched:
            _registry.launched.discard(proc.pid)
            _JOB.disarm(proc.pid)
            _JOB.leave()
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
                env=job_env(env),
                start_new_session=True,
            ),
            deadline=time.monotonic() + timeout,
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


def raise_if_interrupted() -> None:
    """In the main thread, raise ``Interrupted`` when a signal already ended the targets (or waits to):
    a target killed by that interrupt is the interrupt's, never a failure of its own to report."""
    if threading.current_thread() is not threading.main_thread():
        return
    if _registry.pending is not None and _registry.deferring == 0:
        _interrupt(_registry.pending)
    if _registry.handled:
        raise Interrupted("interrupted")


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


# --- The job: every process envcheck starts, and every process those start, ends with it. -----------------
#
# A job is one command (the console script holds one for its whole run) or, for a library caller
# (``envcheck.api``, the pytest plugin), the stretch of time its targets and tools run: ``launch`` opens
# one when none is open, and ``forget`` of its last process closes it. For its life (Linux):
#
# - every process it starts carries ``ENVCHECK_JOB=<marker>`` in its environment (``job_env``), a marker
#   new for each job, which every descendant inherits unless it clears its environment;
# - this process is the subreaper of its descendants (``prctl(PR_SET_CHILD_SUBREAPER)``), so a daemon
#   that leaves its target's session (double fork + ``setsid``) is re-parented here, not to init, and stays
#   in this process's tree;
# - a watchdog process (``_Watchdog``) holds each target's deadline outside this process: if this process
#   is stopped (a target's ``kill(getppid(), SIGSTOP)``) and a deadline passes by ``WATCHDOG_GRACE_S``,
#   it kills that target's session and every process carrying the marker, then sends SIGCONT here. If this
#   process dies without closing the job, the watchdog kills every process carrying the marker.
#
# At its end (``_Job.close``) the job's processes still alive are killed: every descendant of this process
# that carries the marker or descends from one that does (a daemon that cleared its environment but whose
# parent is the job's), and, where the whole process is envcheck's (``job(everything=True)``: the console
# script), every descendant at all; rounds of kill and look again until none is left, so a chain whose
# links start one another cannot outrun it. The ones re-parented here are reaped (only those: a caller's
# own child is never waited for), and the subreaper setting is put back as it was.

# The environment variable that marks a job's processes.
JOB_VARIABLE = "ENVCHECK_JOB"
# How long past a target's deadline the watchdog waits for this process to act before acting itself.
WATCHDOG_GRACE_S = 1.0
# How long the end of a job may take to kill and reap what its processes left (they die in microseconds;
# a process in uninterruptible sleep may take longer, and is not waited for past this).
_SWEEP_S = 2.0
# prctl(2), Linux >= 3.4.
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37


def job_env(env: Mapping[str, str] | None) -> dict[str, str]:
    """``env`` (None: this process's environment) with the marker of the job in progress, for the
    process ``launch`` starts: call it inside ``launch``'s ``start``."""
    out = dict(os.environ if env is None else env)
    if _JOB.marker is not None:
        out[JOB_VARIABLE] = _JOB.marker
    return out


@contextlib.contextmanager
def job(*, everything: bool = False) -> Iterator[None]:
    """Hold one job open for the block (nests): the processes started inside it belong to it, and end
    with it at the latest. ``everything``: this process is envcheck's alone (the console script), so
    every descendant left at the end is the job's, marked or not. Never raises on its own."""
    with uninterrupted(), _registry.lock:
        _JOB.enter(everything=everything)
    try:
        yield
    finally:
        with uninterrupted(), _registry.lock:
            _JOB.leave()


class _Job:
    """The job in progress, process-wide (there is one subreaper setting per process); counted, so that
    the targets of concurrent calls and a command's own ``job`` share one. Used under the registry's lock."""

    def __init__(self) -> None:
        self.depth = 0
        self.marker: str | None = None
        self.everything = False
        self._subreaper_before: int | None = None
        self._watchdog: _Watchdog | None = None
        self._sessions: set[int] = set()  # the job's targets' pids: each its own session's id

    def enter(self, *, everything: bool = False) -> None:
        self.everything = self.everything or everything
        self.depth += 1

    def activate(self) -> None:
        """Before the job's first process starts: its marker, and this process the subreaper. (Not in
        ``enter``: ``envcheck --version`` starts nothing, and pays for nothing.)"""
        if self.marker is None:
            import uuid

            self.marker = uuid.uuid4().hex
            self._subreaper_before = _set_subreaper(1)

    def leave(self) -> None:
        self.depth -= 1
        if self.depth == 0:
            self.close()

    def started(self, pid: int) -> None:
        """``pid`` started in a session of its own (``launch``): what is left in that session is the job's."""
        if os.name == "posix":
            self._sessions.add(pid)

    def arm(self, pid: int, deadline: float) -> None:
        """Have the watchdog hold ``deadline`` for the target ``pid`` (its session's id). POSIX."""
        if os.name != "posix" or not math.isfinite(deadline):
            return  # Windows: each target's Job object holds its descendants; no SIGSTOP to outlast
        if self._watchdog is None and self.marker is not None:
            self._watchdog = _Watchdog.start(self.marker)
        if self._watchdog is not None:
            self._watchdog.send(f"A {pid} {deadline!r}\n")

    def disarm(self, pid: int) -> None:
        if self._watchdog is not None:
            self._watchdog.send(f"D {pid}\n")

    def close(self) -> None:
        """End the job: kill what its processes left, reap the adopted, stop the watchdog, restore the
        subreaper setting. Never raises."""
        marker, everything = self.marker, self.everything
        self.marker, self.everything = None, False
        own: set[int] = set()
        if self._watchdog is not None:
            own.add(self._watchdog.stop())
            self._watchdog = None
        with contextlib.suppress(Exception):
            if marker is not None and sys.platform.startswith("linux"):
                # The watchdog is reaped by its own thread, the targets by their Popen.
                sweep(marker, everything=everything, sessions=self._sessions, spare=_registry.launched | own)
        self._sessions = set()
        if self._subreaper_before is not None:
            _set_subreaper(self._subreaper_before)
            self._subreaper_before = None


_JOB = _Job()


def _set_subreaper(value: int) -> int | None:
    """Set this process's subreaper flag to ``value``; the value it had (None where there is no such
    setting: not Linux, or prctl refused). Never raises."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        libc = ctypes.CDLL(None, use_errno=True)
        before = ctypes.c_int(0)
        if libc.prctl(_PR_GET_CHILD_SUBREAPER, ctypes.byref(before), 0, 0, 0) != 0:
            return None
        if before.value != value and libc.prctl(_PR_SET_CHILD_SUBREAPER, value, 0, 0, 0) != 0:
            return None
        return int(before.value)
    except (OSError, AttributeError):
        return None


def _process_table() -> dict[int, tuple[int, str, int]]:
    """Every process: pid to (parent pid, state letter, session id). Linux ``/proc``."""
    table = {}
    # os.listdir and open, not pathlib: a sweep reads every process's stat, several times a job.
    for name in os.listdir("/proc"):  # noqa: PTH208
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:  # noqa: PTH123
                data = f.read()
            # "pid (comm) state ppid pgrp session ...": comm may hold spaces and parentheses.
            fields = data[data.rindex(b")") + 2 :].split()
            table[int(name)] = (int(fields[1]), fields[0].decode("ascii", "replace"), int(fields[3]))
        except (OSError, ValueError, IndexError):
            continue
    return table


def _marked(pid: int, needle: bytes) -> bool:
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:  # noqa: PTH123
            return needle in b"\0" + f.read()
    except OSError:  # gone, or not ours to read (another user's): not the job's
        return False


def sweep(
    marker: str, *, everything: bool = False, sessions: set[int] | None = None, spare: set[int] | None = None
) -> set[int]:
    """SIGKILL the job ``marker``'s processes below this one until none is left, and reap those that end
    as this process's children; the pids killed. A process is the job's when it carries the marker, is in
    one of ``sessions`` (the job's targets' sessions) or descends from one that is; for the console
    script (``everything``) anything below this process is. ``spare``: never reaped here (their own
    ``Popen`` reaps them). Linux. Gives up after ``_SWEEP_S``."""
    me = os.getpid()
    spare = spare or set()
    sids = set(sessions or ())
    needle = f"\0{JOB_VARIABLE}={marker}\0".encode()
    killed: set[int] = set()
    adopted: set[int] = set()
    ends = time.monotonic() + _SWEEP_S
    while True:
        table = _process_table()
        children: dict[int, list[int]] = {}
        for pid, (ppid, _state, _sid) in table.items():
            children.setdefault(ppid, []).append(pid)
        victims: set[int] = set()
        # Walk this process's tree (the subreaper's: every process the job started and its orphans).
        stack = [(pid, everything) for pid in children.get(me, ())]
        while stack:
            pid, theirs = stack.pop()
            ppid, state, sid = table[pid]
            theirs = theirs or sid in sids or _marked(pid, needle)
            if theirs and state not in ("Z", "X"):
                victims.add(pid)
                sids.add(sid)
            stack.extend((child, theirs) for child in children.get(pid, ()))
        for pid in victims:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        killed |= victims
        # What ends as this process's child (re-parented here) is reaped: only the job's, killed here or
        # in one of its sessions (killed with it), never a pid of the caller's own.
        adopted |= {
            pid
            for pid, (ppid, _state, sid) in table.items()
            if ppid == me and (pid in killed or sid in sids) and pid not in spare
        }
        dying = {pid for pid in killed if pid in table and table[pid][1] not in ("Z", "X")}
        _reap(adopted)
        if (not victims and not adopted and not dying) or time.monotonic() >= ends:
            return killed
        time.sleep(0.002)


def _reap(pids: set[int]) -> None:
    """Reap those of ``pids`` that have ended (each is this process's child, and no ``Popen``'s); drop
    them from ``pids``."""
    for pid in list(pids):
        try:
            if os.waitpid(pid, os.WNOHANG)[0] == 0:
                continue
        except ChildProcessError:
            pass
        pids.discard(pid)


# The watchdog: ``python -I -S -c _WATCHDOG PARENT MARKER GRACE``, reading "A PGID DEADLINE", "D PGID" and
# "B" (goodbye) lines on stdin. Stdlib only, a few KiB of memory.
_WATCHDOG = r"""
import os, select, signal, sys, time
parent, grace = int(sys.argv[1]), float(sys.argv[3])
needle = b"\0ENVCHECK_JOB=" + sys.argv[2].encode() + b"\0"
me = os.getpid()

def state(pid):
    try:
        with open("/proc/%d/stat" % pid, "rb") as f:
            data = f.read()
        return data[data.rindex(b")") + 2 :].split()[0].decode()
    except (OSError, ValueError, IndexError):
        return "X"

def sweep():
    ends = time.monotonic() + 2.0
    while time.monotonic() < ends:
        found = []
        for name in os.listdir("/proc"):
            if name.isdigit() and int(name) not in (me, parent):
                try:
                    with open("/proc/%s/environ" % name, "rb") as f:
                        if needle in b"\0" + f.read() and state(int(name)) not in "ZX":
                            found.append(int(name))
                except OSError:
                    pass
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        time.sleep(0.005)

armed, pending = {}, b""
while True:
    wait = max(0.0, min(armed.values()) + grace - time.monotonic()) if armed else None
    if select.select([0], [], [], wait)[0]:
        data = os.read(0, 65536)
        if not data:  # envcheck ended without closing its job (killed, crashed): end it here
            sweep()
            break
        pending += data
        *lines, pending = pending.split(b"\n")
        for line in lines:
            word = line.split()
            if word[:1] == [b"B"]:
                sys.exit(0)
            if word[:1] == [b"A"] and len(word) == 3:
                armed[int(word[1])] = float(word[2])
            elif word[:1] == [b"D"] and len(word) == 2:
                armed.pop(int(word[1]), None)
    now = time.monotonic()
    for pgid in [p for p, at in armed.items() if now >= at + grace]:
        del armed[pgid]
        try:
            os.killpg(pgid, signal.SIGKILL)
        except OSError:
            pass
        if state(parent) in "Tt":  # envcheck is held stopped: by a process of its job, so all of them go
            sweep()
        try:
            os.kill(parent, signal.SIGCONT)
        except OSError:
            pass
"""


class _Watchdog:
    """A small process outside this one that holds the job's deadlines (POSIX; see ``_Job``). Started on
    the job's first target with a deadline; its stdin is the only channel, written without blocking."""

    def __init__(self, proc: subprocess.Popen[bytes]) -> None:
        self._proc = proc

    @classmethod
    def start(cls, marker: str) -> _Watchdog | None:
        """None where it cannot start (the deadline is then kept only while this process runs)."""
        env = {k: v for k, v in os.environ.items() if k != JOB_VARIABLE}
        try:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    "-I",
                    "-S",
                    "-c",
                    _WATCHDOG,
                    str(os.getpid()),
                    marker,
                    str(WATCHDOG_GRACE_S),
                ],
                stdin=subprocess.PIPE,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                env=env,
                cwd="/",
                close_fds=True,
                # Its own session: a Ctrl-C at the terminal, or a killpg of envcheck's group, leaves it be.
                start_new_session=True,
            )
        except OSError:
            return None
        assert proc.stdin is not None
        os.set_blocking(proc.stdin.fileno(), False)
        return cls(proc)

    def send(self, line: str) -> None:
        """Never blocks, never raises: a watchdog that stopped reading is of no use anyway."""
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError, ValueError):
            os.write(self._proc.stdin.fileno(), line.encode())

    def stop(self) -> int:
        """Say goodbye (it exits without touching anything) and close its stdin; a daemon thread reaps it
        when it has gone (a caller's process keeps no zombie of it). Its pid."""
        self.send("B\n")
        assert self._proc.stdin is not None
        with contextlib.suppress(OSError):
            self._proc.stdin.close()
        threading.Thread(target=self._proc.wait, name="envcheck-watchdog-reaper", daemon=True).start()
        return self._proc.pid


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
