"""One progress line on stderr for the commands that take seconds: ``snapshot``, a live ``diff`` or
``doctor``, ``verify`` and ``gate``.

The line shows the current step and the time elapsed since the command started, redrawn in place (``\\r``)
and refreshed while a step runs long (``import torch`` takes seconds). It is drawn only when stderr is a
terminal, and never with ``--quiet``: CI logs and captured stderr stay free of it. The line is erased
before the command prints anything else, so the report and diagnostics never share a line with it.
"""

from __future__ import annotations

import shutil
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TextIO

from envcheck.core.escape import one_line

Step = Callable[[str], None]

# How often the elapsed time is redrawn while a step runs.
REFRESH_S = 0.5
# ANSI "erase to the end of the line": a shorter line leaves nothing of the previous one behind.
_ERASE = "\x1b[K"


class ProgressLine:
    """The live line of one command. ``step(text)`` names the current step (thread-safe: the snapshot and
    the smoke suite report from their own threads); ``close()`` stops the refresh and erases the line."""

    def __init__(self, command: str, stream: TextIO) -> None:
        self._command = command
        self._stream = stream
        self._started = time.monotonic()
        self._step = "starting"
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick, name="envcheck-progress", daemon=True)

    def start(self) -> ProgressLine:
        self._draw()
        self._ticker.start()
        return self

    def step(self, text: str) -> None:
        with self._lock:
            self._step = one_line(text)  # a check's name comes from the target: shown inertly
        self._draw()

    def close(self) -> None:
        self._stop.set()
        if self._ticker.is_alive():
            # Bounded: the ticker ends within a tick, unless a full stderr blocks its write (it is a daemon).
            self._ticker.join(1.0)
        with self._lock:
            self._write("\r" + _ERASE)

    def _tick(self) -> None:
        while not self._stop.wait(REFRESH_S):
            self._draw()

    def _draw(self) -> None:
        with self._lock:
            if self._stop.is_set():
                return
            elapsed = time.monotonic() - self._started
            text = f"{self._command}: {self._step}  {elapsed:.1f} s"
            # A line wider than the terminal wraps, and \r then redraws only its last row.
            width = max(shutil.get_terminal_size((80, 24)).columns - 1, 20)
            if len(text) > width:
                text = text[: width - 1] + "…"
            self._write("\r" + text + _ERASE)

    def _write(self, text: str) -> None:
        try:
            self._stream.write(text)
            self._stream.flush()
        except (OSError, ValueError):  # a closed or vanished terminal: progress is not worth an error
            pass


@contextmanager
def progress(command: str, *, quiet: bool = False, stream: TextIO | None = None) -> Iterator[Step | None]:
    """A step reporter for ``command`` while the block runs: a callable when stderr (``stream``) is a
    terminal and ``quiet`` is off, else ``None`` (callers pass it on as their optional ``progress``)."""
    out = stream if stream is not None else sys.stderr
    if quiet or not _is_terminal(out):
        yield None
        return
    line = ProgressLine(command, out).start()
    try:
        yield line.step
    finally:
        line.close()


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False
