"""The progress line: drawn on stderr when it is a terminal (a real pseudo-terminal here), never when it is
not, never with --quiet; erased before anything else is printed."""

from __future__ import annotations

import io
import os
import pty
import select
import subprocess
import sys
from pathlib import Path
from typing import TextIO

import pytest

from envcheck.commands.progress import progress

STEP = "walking the native tree"


def _read_all(master: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: every writer of the terminal has closed it
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode("utf-8", "replace")


END = "<end of test>"


def _until_end(master: int, terminal: TextIO) -> str:
    """What was written to ``terminal`` before now: a marker is written after it, and the terminal is read
    up to the marker (a pseudo-terminal delivers writes asynchronously, in pieces)."""
    terminal.write(END)
    terminal.flush()
    seen = b""
    while END.encode() not in seen:
        ready, _, _ = select.select([master], [], [], 30)
        assert ready, f"the terminal went quiet before the marker: {seen!r}"
        seen += os.read(master, 65536)
    return seen.decode("utf-8", "replace").split(END, 1)[0]


def test_a_terminal_gets_the_step_and_the_elapsed_time_then_a_clean_line() -> None:
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8") as terminal:
            with progress("snapshot", stream=terminal) as step:
                assert step is not None
                step(STEP)
                step("a check's name from the target \x1b]0;title\x07")
            written = _until_end(master, terminal)
    finally:
        os.close(master)
    assert f"\rsnapshot: {STEP}  " in written
    line = written.split(f"snapshot: {STEP}  ", 1)[1]
    assert line.split(" s", 1)[0].replace(".", "").isdigit()  # the elapsed seconds
    assert "\x1b]0;" not in written and "\\x1b]0;title\\x07" in written  # target text shown inertly
    assert written.endswith("\r\x1b[K")  # erased: what follows starts on a clean line


def test_no_line_when_stderr_is_not_a_terminal_or_quiet() -> None:
    buffer = io.StringIO()
    with progress("diff", stream=buffer) as step:
        assert step is None
    assert buffer.getvalue() == ""
    master, slave = pty.openpty()
    try:
        with os.fdopen(slave, "w", encoding="utf-8") as terminal:
            with progress("diff", quiet=True, stream=terminal) as step:
                assert step is None
            assert _until_end(master, terminal) == ""
    finally:
        os.close(master)


def _snapshot(tmp_path: Path, *flags: str, terminal: bool) -> str:
    """``envcheck snapshot --no-probe`` in a child whose stdout and stderr are one pseudo-terminal, or pipes:
    what the terminal showed, or stderr then stdout."""
    args = [
        sys.executable,
        "-m",
        "envcheck",
        "snapshot",
        "--no-probe",
        "-o",
        str(tmp_path / "m.json"),
        *flags,
    ]
    if not terminal:
        proc = subprocess.run(args, capture_output=True, text=True, timeout=300, check=False)
        assert proc.returncode == 0, proc.stderr
        return proc.stderr + proc.stdout
    master, slave = pty.openpty()
    try:
        child = subprocess.Popen(args, stdout=slave, stderr=slave, stdin=subprocess.DEVNULL)
        os.close(slave)
        written = _read_all(master)
        assert child.wait(timeout=300) == 0, written
    finally:
        os.close(master)
    return written


@pytest.mark.slow
def test_snapshot_shows_its_steps_on_a_terminal_only(tmp_path: Path) -> None:
    shown = _snapshot(tmp_path, terminal=True)
    assert "\rsnapshot: " in shown and STEP in shown and " s\x1b[K" in shown
    # The line was erased before the summary: no summary line starts after a progress text.
    summary = shown[shown.rindex("\r\x1b[K") + len("\r\x1b[K") :]
    assert "snapshot: " not in summary and "packages" in summary
    piped = _snapshot(tmp_path, terminal=False)
    assert "\r" not in piped and STEP not in piped and "\x1b[" not in piped
    quiet = _snapshot(tmp_path, "--quiet", terminal=True)
    assert STEP not in quiet and "\r\x1b[K" not in quiet and "packages" in quiet
