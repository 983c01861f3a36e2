"""Ctrl-C and SIGTERM during ``snapshot``, ``verify`` and ``gate``: every target session is killed, every
temp folder removed, ``interrupted`` printed, exit 130, and the previous manifest left as it was.

The fake torch (``venvs.HOSTILE_TORCH``, fault ``interrupt``) starts a child, then the first target to
import it sends the signal to envcheck, its parent, and every target hangs: the signal lands while targets
run (and while worker threads wait on them), exactly once.
"""

from __future__ import annotations

import os
import shutil
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded
from venvs import HOSTILE_TORCH, fault_torch, process_alive, processes_mentioning

# Far beyond the run: only the interrupt can end it this early.
TIMEOUT = 120.0
BOUND = 30.0
EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"


@pytest.fixture(scope="module")
def hostile_python(venv_factory: Callable[[str], Path]) -> Path:
    return fault_torch(venv_factory, "interrupting-torch", HOSTILE_TORCH)


@pytest.mark.slow
@pytest.mark.parametrize("at", ["process", "thread"], ids=["to-the-process", "to-a-worker-thread"])
@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
@pytest.mark.parametrize("command", ["snapshot", "verify", "gate"])
def test_an_interrupt_ends_every_target_and_leaves_the_manifest(
    hostile_python: Path, tmp_path: Path, command: str, signum: signal.Signals, at: str
) -> None:
    """``at``: the kernel hands a process's signal to any thread that does not block it; Python handles it
    in the main thread only, once that thread wakes (``envcheck.process.awake``). The worker-thread cases
    send it to a thread other than the main one, as the kernel sometimes does."""
    tmpdir = tmp_path / "tmp"
    log = tmp_path / "log"
    tmpdir.mkdir()
    log.mkdir()
    manifest = tmp_path / "envcheck.lock.json"
    shutil.copyfile(EXAMPLE, manifest)
    before = manifest.read_bytes()
    common = ["--python", str(hostile_python), "--timeout", str(TIMEOUT)]
    args = {
        # --force: the manifest there is another environment's, refused before any work without it; an
        # interrupted snapshot must leave it as it was all the same.
        "snapshot": ["snapshot", "-o", str(manifest), "--force", *common],
        "verify": ["verify", "--against", str(manifest), *common],
        "gate": ["gate", str(manifest), *common],
    }[command]
    env = {
        **os.environ,
        "TMPDIR": str(tmpdir),
        "ENVCHECK_TEST_FAULT": "interrupt",
        "ENVCHECK_TEST_LOG": str(log),
        "ENVCHECK_TEST_SIGNAL": str(int(signum)),
        **({"ENVCHECK_TEST_SIGNAL_THREAD": "1"} if at == "thread" else {}),
    }

    result = run_bounded(envcheck_argv(*args), timeout=BOUND, env=env, cwd=tmp_path)

    assert_bounded(result, timeout=BOUND)
    # The signal came from a running target, to the thread asked for.
    assert (log / "signalled").read_text().startswith(at), result.stderr
    assert result.returncode == 130, result.stderr
    assert result.stderr.splitlines()[-1] == "interrupted"
    assert manifest.read_bytes() == before
    # Every target and every child it started is gone, even those in sessions of their own.
    pids = [int(p) for p in (log / "pids").read_text().split()]
    assert pids
    assert [pid for pid in pids if process_alive(pid)] == []
    assert processes_mentioning(str(tmpdir)) == {}
    assert list(tmpdir.iterdir()) == []


# In a fresh interpreter: the registry's "closed" state is process-wide and would refuse every later test's
# targets. A worker thread that makes its temp folder after an interrupt's clean-up is refused (nothing is
# made), and one that registers a folder made just before the clean-up sees it removed: the snapshot's
# probe thread left an envcheck-probe-* folder behind once (SIGTERM while the thread started its target).
_AFTER_THE_INTERRUPT = r"""
import os, sys, tempfile, threading
from envcheck.process import sessions

parent = sys.argv[1]
made = tempfile.mkdtemp(dir=parent)
sessions.kill_all()  # what the interrupt handler does
outcome = {}

def worker():
    try:
        sessions.make_folder("envcheck-probe-", parent)
        outcome["make"] = "made"
    except sessions.Interrupted:
        outcome["make"] = "refused"
    try:
        sessions.register_folder(made)
        outcome["register"] = "kept"
    except sessions.Interrupted:
        outcome["register"] = "removed"

thread = threading.Thread(target=worker)
thread.start()
thread.join()
print(outcome["make"], outcome["register"], sorted(os.listdir(parent)))
"""


def test_a_temp_folder_after_the_interrupt_is_refused_or_removed(tmp_path: Path) -> None:
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _AFTER_THE_INTERRUPT, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["refused", "removed", "[]"]


def test_an_interrupt_inside_a_class_definition_is_an_interrupt() -> None:
    # CI failed once so: the signal landed while the manifest model's dataclasses were being defined (it
    # loads while the target starts); Python 3.11 turns what __set_name__ raises into a RuntimeError, and
    # the command said "internal error" with exit 2 instead of "interrupted" and 130.
    from envcheck.commands._common import handles_errors
    from envcheck.process import sessions

    class Lands:
        def __set_name__(self, owner: type, name: str) -> None:
            raise sessions.Interrupted

    @handles_errors
    def command() -> None:
        class Model:  # defining it is the point
            field = Lands()

    with pytest.raises(sessions.Interrupted):
        command()


def test_an_error_raised_while_a_generator_closes_is_still_that_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # The control: GeneratorExit, like SystemExit, is a BaseException that is no interrupt. An error whose
    # context holds one is printed as that error, exit 2.
    import typer

    from envcheck.commands._common import handles_errors
    from envcheck.core.errors import UsageError

    def steps() -> object:
        try:
            yield 1
        finally:
            raise UsageError("the clean-up failed")

    @handles_errors
    def command() -> None:
        generator = steps()
        next(generator)  # type: ignore[call-overload]
        generator.close()  # type: ignore[attr-defined]

    with pytest.raises(typer.Exit) as ended:
        command()
    assert ended.value.exit_code == 2
    assert capsys.readouterr().err.startswith("error: the clean-up failed")
