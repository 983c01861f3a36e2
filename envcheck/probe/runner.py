"""Start stdlib-only scripts in a target interpreter, with a timeout, and turn *how they ended* into data.

A target script writes its JSON result to the file named by its first argument, atomically, as often as it
likes (``target.py`` rewrites it after every step). Whatever the process then does — exit, raise, segfault,
abort, hang — ``TargetRun`` holds the last result written and a ``ProbeOutcome`` saying how it ended.
Only a target that cannot be started at all raises ``ProbeError``.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from envcheck.errors import ProbeError
from envcheck.target.copying import PACKAGE as TARGET_PACKAGE
from envcheck.target.copying import copy_package

if TYPE_CHECKING:
    # Imported lazily: starting a probe must not wait for the manifest models (DESIGN §6).
    from envcheck.manifest.model import ProbeOutcome

# The probe's entry module in the copy of envcheck.target that each target runs (envcheck/target/probe.py).
PROBE_MODULE = f"{TARGET_PACKAGE}.probe"
STDERR_TAIL_CHARS = 4000

# `python -c _BOOT FOLDER MODULE OUT ARGS...`: runs MODULE with `-m` semantics from the temporary copy of
# envcheck.target in FOLDER, the way pipdeptree runs its own code in a foreign interpreter. FOLDER goes on
# sys.path inside the target only: PYTHONPATH would be recorded as the target's environment and inherited
# by every child it starts; the probe takes FOLDER off again before it records sys.path. `-c` keeps
# envcheck's own folder off sys.path, and the empty working directory keeps the caller's folder from
# shadowing anything on the target's sys.path. The entry module sees `sys.argv[1:] == [OUT, *ARGS]`.
_BOOT = (
    "import sys, runpy; sys.path.insert(0, sys.argv[1]); m = sys.argv[2]; del sys.argv[1:3]; "
    "runpy.run_module(m, run_name='__main__', alter_sys=True)"
)


@dataclass(frozen=True, kw_only=True, slots=True)
class TargetRun:
    """The last result a target script wrote (``{}`` if none) and how its process ended."""

    data: dict[str, Any]
    outcome: ProbeOutcome


class RunningTarget:
    """A target script started in the background; ``wait()`` collects it. Use ``start_target``."""

    def __init__(
        self,
        python: str,
        module: str,
        args: Sequence[str],
        *,
        timeout: float,
        env: Mapping[str, str] | None,
    ) -> None:
        self._workdir = tempfile.TemporaryDirectory(prefix="envcheck-probe-")
        self._out = Path(self._workdir.name) / "result.json"
        self.timeout = timeout
        self._started = time.monotonic()
        argv = [python, "-c", _BOOT, copy_package(self._workdir.name), module, str(self._out), *args]
        popen_env = dict(os.environ if env is None else env)
        # The target's own output must not depend on the parent's buffering or locale.
        popen_env.setdefault("PYTHONIOENCODING", "utf-8")
        try:
            self._proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.PIPE,
                cwd=self._workdir.name,
                env=popen_env,
                # Its own process group: a hang is killed with every child it started.
                start_new_session=os.name == "posix",
            )
        except OSError as e:
            self._workdir.cleanup()
            raise ProbeError(
                f"cannot start the target interpreter {python!r}: {e.strerror or e}",
                tip="Pass the path of a Python executable with --python.",
            ) from e

    def wait(self) -> TargetRun:
        try:
            timed_out = False
            try:
                _, err = self._proc.communicate(timeout=self.timeout)
            except subprocess.TimeoutExpired:
                timed_out = True
                self._kill()
                _, err = self._proc.communicate()
            duration = round(time.monotonic() - self._started, 3)
            data = self._read_result()
            return TargetRun(data=data, outcome=self._outcome(data, err, timed_out, duration))
        finally:
            self._workdir.cleanup()

    def _kill(self) -> None:
        with contextlib.suppress(ProcessLookupError, PermissionError, OSError):
            if os.name == "posix":
                os.killpg(self._proc.pid, signal.SIGKILL)
            else:
                self._proc.kill()

    def _read_result(self) -> dict[str, Any]:
        try:
            data = json.loads(self._out.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        return data if isinstance(data, dict) else {}

    def _outcome(self, data: dict[str, Any], err: bytes, timed_out: bool, duration: float) -> ProbeOutcome:
        from envcheck.manifest.model import ProbeOutcome

        code = self._proc.returncode
        tail = _tail(err)
        stage = data.get("stage") if isinstance(data.get("stage"), str) else None
        if timed_out:
            return ProbeOutcome(
                status="timeout",
                stage=stage,
                stderr_tail=tail,
                timeout_s=self.timeout,
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


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return f"signal {number}"


def _tail(err: bytes) -> str | None:
    from envcheck.redact import redact_text

    text = err.decode("utf-8", "replace").strip()
    return redact_text(text[-STDERR_TAIL_CHARS:]) if text else None


def start_target(
    python: str | None = None,
    *,
    module: str = PROBE_MODULE,
    args: Sequence[str] = (),
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> RunningTarget:
    """Start ``module`` (an entry module of envcheck.target) in ``python`` (default: this interpreter)
    without waiting for it."""
    return RunningTarget(python or sys.executable, module, args, timeout=timeout, env=env)


def run_target(
    python: str | None = None,
    *,
    module: str = PROBE_MODULE,
    args: Sequence[str] = (),
    timeout: float = 120.0,
    env: Mapping[str, str] | None = None,
) -> TargetRun:
    """Run ``module`` in ``python`` and wait for it. Raises ``ProbeError`` only if it cannot start."""
    return start_target(python, module=module, args=args, timeout=timeout, env=env).wait()
