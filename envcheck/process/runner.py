"""Start stdlib-only code in a target interpreter, with a deadline, and turn *how it ended* into data.

The code is a module of ``envcheck.inside`` (the probe, the smoke suite), run from a temporary copy of that
package. It writes its JSON result to the file named by its first argument, atomically, as often as it
likes (the probe rewrites it after every step). Whatever the process then does — exit, raise, segfault,
abort, hang — ``TargetRun`` holds the last result written and a ``ProbeOutcome`` saying how it ended.
Only a target that cannot be started at all raises ``ProbeError``.

The target is untrusted (docs/guarantees.md): it may print without end, write a 2 GB result, or start a daemon
that keeps its stderr open. So stderr is read by a thread into a bounded tail, the result file is read up
to ``RESULT_MAX_BYTES``, the wait ends at a ``Deadline`` at which the target's whole session is killed,
and the pipe is never waited on past a short grace. Each cap that cut something is named in the
outcome's ``stderr_tail``.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

from envcheck.core.deadline import Deadline as Deadline  # noqa: PLC0414 - re-exported to the probes' callers
from envcheck.core.errors import ProbeError
from envcheck.inside.copying import PACKAGE as TARGET_PACKAGE
from envcheck.inside.copying import copy_package
from envcheck.process import sessions

if TYPE_CHECKING:
    # Imported lazily: starting a probe must not wait for the manifest models (docs/budgets.md).
    from envcheck.manifest.model import ProbeOutcome

# The probe's entry module in the copy of envcheck.inside that each target runs (envcheck/inside/probe.py).
PROBE_MODULE = f"{TARGET_PACKAGE}.probe"
STDERR_TAIL_CHARS = 4000
DEFAULT_TIMEOUT = 120.0
# Bytes of stderr held in memory: STDERR_TAIL_CHARS characters of UTF-8 at 4 bytes each at most.
_STDERR_KEEP_BYTES = 4 * STDERR_TAIL_CHARS
# A real result is well under 1 MiB (a CUDA venv's runtime probe: ~200 KiB); 16 MiB of hostile JSON
# still decodes in well under the 300 MB that hostile inputs may cost (docs/budgets.md).
RESULT_MAX_BYTES = 16 * 1024 * 1024
# The JSON values a result may hold (a snapshot's manifest of the torch CPU venv holds ~15 k).
RESULT_MAX_VALUES = 500_000
# How a line of ``stderr_tail`` that is envcheck's note on a cap (not the target's output) begins.
NOTE_PREFIX = "[envcheck: "
# How long the stderr reader may take to see EOF once the target's session is gone. Only a daemon that
# left the session (setsid) can hold the pipe longer; it is not waited for.
_PIPE_GRACE_S = 0.25

# `python -c _BOOT FOLDER MODULE OUT ARGS...`: runs MODULE with `-m` semantics from the temporary copy of
# envcheck.inside in FOLDER, the way pipdeptree runs its own code in a foreign interpreter. FOLDER goes on
# sys.path inside the target only: PYTHONPATH would be recorded as the target's environment and inherited
# by every child it starts; the probe takes FOLDER off again before it records sys.path. `-c` keeps
# envcheck's own folder off sys.path, and the empty working directory keeps the caller's folder from
# shadowing anything on the target's sys.path. The entry module sees `sys.argv[1:] == [OUT, *ARGS]`.
_BOOT = (
    "import sys, runpy; sys.path.insert(0, sys.argv[1]); m = sys.argv[2]; del sys.argv[1:3]; "
    "runpy.run_module(m, run_name='__main__', alter_sys=True)"
)


# As the user types it on this machine: a Windows venv keeps python.exe in Scripts.
_PYTHON_TIP = "Pass the path of a Python executable with --python (e.g. {}).".format(
    ".venv\\Scripts\\python.exe" if os.name == "nt" else ".venv/bin/python"
)


def resolve_python(python: str | None) -> str:
    """The absolute path of the interpreter ``python`` names, resolved as a shell would: a bare name
    through ``PATH``, a path with a separator against the current folder; ``None`` is this interpreter.

    Targets start in a temp folder, so a relative path must be made absolute first. Symlinks are kept
    (``absolute``, not ``resolve``): a venv's ``bin/python`` is a link whose *location* selects the venv
    (PEP 405).
    Raises ``ProbeError`` when it does not exist or is not an executable file.
    """
    if not python:
        return sys.executable
    separators = [os.sep] + ([os.altsep] if os.altsep else [])
    if any(sep in python for sep in separators):
        path = Path(python).absolute()
    else:
        found = shutil.which(python)
        if found is None:
            raise ProbeError(
                f"the target interpreter {python!r} is not a command on PATH",
                tip=_PYTHON_TIP,
            )
        path = Path(found).absolute()
    if not path.is_file():
        raise ProbeError(
            f"the target interpreter {path} does not exist",
            tip=_PYTHON_TIP,
        )
    if not os.access(path, os.X_OK):
        raise ProbeError(
            f"the target interpreter {path} is not executable",
            tip=_PYTHON_TIP,
        )
    return str(path)


class _StderrTail:
    """Reads a pipe to its end in a daemon thread, keeping only its last ``keep`` bytes and counting all
    of them: memory stays bounded whatever the target prints (300 MB of stderr used to cost 1.2 GB)."""

    def __init__(self, pipe: IO[bytes], keep: int) -> None:
        self._pipe = pipe
        self._keep = keep
        self._lock = threading.Lock()
        self._buffer = bytearray()
        self._total = 0
        self._stop = threading.Event()
        # A daemon thread: a process that escaped the target's session may hold the pipe open forever,
        # and must not keep envcheck from exiting.
        self._thread = threading.Thread(target=self._read, name="envcheck-target-stderr", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        fd = self._pipe.fileno()
        try:
            while not self._stop.is_set():
                try:
                    chunk = os.read(fd, 65536)
                except OSError:
                    break
                if not chunk:
                    break
                with self._lock:
                    self._total += len(chunk)
                    self._buffer += chunk
                    if len(self._buffer) > self._keep:
                        del self._buffer[: len(self._buffer) - self._keep]
        finally:
            # Closed here, by the only reader: closing it from another thread while this one is blocked
            # in read() could hand the descriptor number to an unrelated file.
            self._pipe.close()

    def finish(self, grace: float) -> None:
        """Wait at most ``grace`` seconds for EOF, then stop reading whenever the next chunk arrives."""
        self._thread.join(grace)
        self._stop.set()

    def tail(self) -> tuple[bytes, int]:
        """The bytes kept and the number of bytes read in all."""
        with self._lock:
            return bytes(self._buffer), self._total


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetRun:
    """The last result a target script wrote (``{}`` if none) and how its process ended."""

    data: dict[str, Any]
    outcome: ProbeOutcome


class RunningTarget:
    """A target script started in the background, in a session of its own registered with
    ``envcheck.process.sessions`` (an interrupt kills it); ``wait()`` collects it. Use ``start_target``."""

    def __init__(
        self,
        python: str,
        module: str,
        args: Sequence[str],
        *,
        deadline: Deadline,
        env: Mapping[str, str] | None,
    ) -> None:
        self._workdir = sessions.make_folder("envcheck-probe-")
        self._out = Path(self._workdir) / "result.json"
        self.deadline = deadline
        self._started = time.monotonic()
        popen_env = dict(os.environ if env is None else env)
        # The target's own output must not depend on the parent's buffering or locale.
        popen_env.setdefault("PYTHONIOENCODING", "utf-8")
        try:
            # A full disk fails the copy: the same one-line error as a target that cannot start.
            argv = [python, "-c", _BOOT, copy_package(self._workdir), module, str(self._out), *args]
            self._proc = sessions.launch(
                lambda: subprocess.Popen(
                    argv,
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                    cwd=self._workdir,
                    env=sessions.job_env(popen_env),
                    # Its own session: at the deadline or on an interrupt it is killed with every child
                    # it started (a Ctrl-C at the terminal never reaches it by itself).
                    start_new_session=os.name == "posix",
                ),
                deadline=deadline.at,
            )
        except OSError as e:
            self._remove_workdir()
            raise ProbeError(
                f"cannot start the target interpreter {python!r}: {e.strerror or e}",
                tip="Pass the path of a Python executable with --python.",
            ) from e
        except BaseException:
            self._remove_workdir()
            raise
        assert self._proc.stderr is not None
        self._stderr = _StderrTail(self._proc.stderr, _STDERR_KEEP_BYTES)

    def wait(self) -> TargetRun:
        """Wait for the target until the deadline, kill its session, and collect what it left.
        Returns at the deadline (plus a short grace), whatever the target or its children still do."""
        try:
            ended = self._wait_unreaped()
            # Its whole session goes: all of it at the deadline, and what it left behind (a child that
            # would hold stderr open) when it ended on its own.
            sessions.kill_session(self._proc)
            self._proc.wait()  # SIGKILL cannot be caught or ignored: this returns at once
            sessions.forget(self._proc)
            # Killed past its deadline while this process was held stopped: the job's watchdog did it,
            # at the deadline (``sessions.WATCHDOG_GRACE_S``). It timed out, as if killed here.
            # (POSIX only: Windows has no SIGKILL, and no watchdog.)
            killed = -getattr(signal, "SIGKILL", 0) or None
            if ended and killed is not None and self._proc.returncode == killed and self.deadline.expired():
                ended = False
            self._stderr.finish(_PIPE_GRACE_S)
            duration = round(time.monotonic() - self._started, 3)
            data, notes = self._read_result()
            return TargetRun(data=data, outcome=self._outcome(data, notes, not ended, duration))
        finally:
            self._remove_workdir()

    def kill(self) -> None:
        """Kill the target's session now and clean up, for a target that will not be waited for."""
        sessions.kill_session(self._proc)
        self.wait()

    def _remove_workdir(self) -> None:
        sessions.remove_folder(self._workdir)

    def _wait_unreaped(self) -> bool:
        """Wait until the target's process ends or the deadline passes; True if it ended.

        On POSIX the process is not reaped yet (``WNOWAIT``): until it is, its pid keeps naming its
        session, so the ``killpg`` that follows cannot reach an unrelated process that reused the pid.
        """
        if os.name != "posix":
            try:
                self._proc.wait(timeout=self.deadline.remaining())
            except subprocess.TimeoutExpired:
                return False
            return True
        ended = _wait_pidfd(self._proc.pid, self.deadline)
        if ended is not None:
            return ended
        delay = 0.0005
        while True:
            try:
                if os.waitid(os.P_PID, self._proc.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None:
                    return True
            except ChildProcessError:  # already reaped (an interrupt's kill_all raced us): it ended
                return True
            left = self.deadline.remaining()
            if left <= 0.0:
                return False
            # Popen.wait(timeout) polls the same way: there is no blocking wait with a timeout.
            delay = min(delay * 2, left, 0.05)
            time.sleep(delay)

    def _read_result(self) -> tuple[dict[str, Any], list[str]]:
        return read_result(self._out)

    def _stderr_tail(self, notes: list[str]) -> str | None:
        """The redacted end of stderr, after a line per cap that cut something (or ``None``)."""
        # Lazy: the snapshot starts its probes through this module; redaction loads once the target runs.
        from envcheck.core.redact import redact_text

        kept, total = self._stderr.tail()
        text = kept.decode("utf-8", "replace").strip()
        tail = text[-STDERR_TAIL_CHARS:]
        if total > len(kept) or len(text) > len(tail):
            notes = [*notes, f"stderr truncated: kept the last {len(tail)} characters of {total} bytes"]
        lines = [f"{NOTE_PREFIX}{note}]" for note in notes]
        if tail:
            lines.append(redact_text(tail))
        return "\n".join(lines) if lines else None

    def _outcome(
        self, data: dict[str, Any], notes: list[str], timed_out: bool, duration: float
    ) -> ProbeOutcome:
        # Lazy: the snapshot starts its probes through this module before the manifest model loads.
        from envcheck.manifest.model import ProbeOutcome

        code = self._proc.returncode
        tail = self._stderr_tail(notes)
        stage = data.get("stage") if isinstance(data.get("stage"), str) else None
        if timed_out:
            return ProbeOutcome(
                status="timeout",
                stage=stage,
                stderr_tail=tail,
                timeout_s=self.deadline.seconds,
                duration_s=duration,
            )
        if code == 0 and data.get("done"):
            return ProbeOutcome(status="ok", duration_s=duration)
        exception = data.get("exception") if isinstance(data.get("exception"), str) else None
        if code < 0:
            return ProbeOutcome(
                status="crashed",
                stage=stage,
                exit_code=code,
                signal=_signal_name(-code),
                stderr_tail=tail,
                duration_s=duration,
            )
        return ProbeOutcome(
            status="error" if exception else "crashed",
            stage=stage,
            exception=exception,
            exit_code=code,
            stderr_tail=tail,
            duration_s=duration,
        )


def read_result(path: Path) -> tuple[dict[str, Any], list[str]]:
    """A target's result file at ``path``: the object (``{}`` when absent or not a JSON object), redacted,
    and a note for each reason it was not read. Never reads more than ``RESULT_MAX_BYTES``."""
    # Lazy: the snapshot starts its probes through this module; redaction loads once the target runs.
    from envcheck.core.redact import redact_json

    # The folder is the target's: it may have replaced the file with a FIFO (open would block) or a
    # link to /dev/zero. O_NOFOLLOW refuses the link, O_NONBLOCK opens the FIFO at once, fstat tells.
    flags = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags | getattr(os, "O_BINARY", 0))
    except FileNotFoundError:
        return {}, []
    except OSError as e:
        return {}, [f"result file not read: {e.strerror or e}"]
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(f.fileno())
        if not stat.S_ISREG(info.st_mode):
            return {}, ["result file not read: not a regular file"]
        raw = f.read(RESULT_MAX_BYTES + 1) if info.st_size <= RESULT_MAX_BYTES else b""
    if info.st_size > RESULT_MAX_BYTES or len(raw) > RESULT_MAX_BYTES:
        size = max(info.st_size, len(raw))
        return {}, [f"result file not read: {size} bytes, over the cap of {RESULT_MAX_BYTES} bytes"]
    # Counted before parsing: 16 MiB of short JSON strings parse into ~2 M objects, and a snapshot reads two
    # results (a 16 MiB result of short strings from each probe took a snapshot to 499 MB).
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if values > RESULT_MAX_VALUES:
        return {}, [f"result file not read: up to {values} JSON values, over the cap of {RESULT_MAX_VALUES}"]
    try:
        data = json.loads(raw)
        if not isinstance(data, dict):
            return {}, ["result file not read: not a JSON object"]
        redacted = redact_json(data)
    except (ValueError, RecursionError):  # RecursionError: nesting deeper than the parser allows
        return {}, ["result file not read: not valid JSON"]
    return (redacted if isinstance(redacted, dict) else {}), []


def _wait_pidfd(pid: int, deadline: Deadline) -> bool | None:
    """Block until ``pid`` ends (True) or ``deadline`` passes (False), without reaping it: a pidfd becomes
    readable when its process exits (Linux 5.3+). None where there is no pidfd, to poll instead. Polling
    would notice the end up to its interval late, on every probe of every snapshot."""
    if not hasattr(os, "pidfd_open"):
        return None
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:  # already reaped (an interrupt's kill_all raced us): it ended
        return True
    except OSError:  # an older kernel, or a sandbox that forbids it
        return None
    try:
        import select

        while True:
            left = deadline.remaining()
            if left <= 0.0:
                return False
            try:
                # In slices: in the main thread, a signal another thread took is handled between two.
                if select.select([fd], [], [], min(left, sessions.POLL_S))[0]:
                    return True
            except InterruptedError:  # PEP 475 retries, but a signal handler may have raised: loop
                continue
    finally:
        os.close(fd)


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def start_target(
    python: str | None = None,
    *,
    module: str = PROBE_MODULE,
    args: Sequence[str] = (),
    timeout: float | None = None,
    deadline: Deadline | None = None,
    env: Mapping[str, str] | None = None,
) -> RunningTarget:
    """Start ``module`` (an entry module of envcheck.inside) in ``python`` (default: this interpreter; see
    ``resolve_python``) without waiting.

    It is killed ``timeout`` seconds from now or at ``deadline``, whichever comes first (neither given:
    ``DEFAULT_TIMEOUT``). Raises
    ``ProbeError`` if the interpreter does not exist or cannot be started, and
    ``sessions.Interrupted`` once the command has been interrupted.
    """
    if deadline is None:
        ends = Deadline.after(DEFAULT_TIMEOUT if timeout is None else timeout)
    else:
        ends = deadline if timeout is None else deadline.earliest(Deadline.after(timeout))
    return RunningTarget(resolve_python(python), module, args, deadline=ends, env=env)


def run_target(
    python: str | None = None,
    *,
    module: str = PROBE_MODULE,
    args: Sequence[str] = (),
    timeout: float | None = None,
    deadline: Deadline | None = None,
    env: Mapping[str, str] | None = None,
) -> TargetRun:
    """Run ``module`` in ``python`` and wait for it (see ``start_target``). Raises ``ProbeError`` only if it
    cannot start."""
    return start_target(python, module=module, args=args, timeout=timeout, deadline=deadline, env=env).wait()
