"""A real ``envcheck diff`` in a real pseudo-terminal of 80 (and 120) columns: the report is laid out to the
terminal's width (no line wider, no word split, so the terminal never wraps a line again), and the progress
line of a live diff is drawn on the terminal, then erased before the report."""

from __future__ import annotations

import os
import re
import select
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.report.options import MAX_WIDTH
from envcheck.report.text import cells

pty = pytest.importorskip("pty", reason="no pseudo-terminals on this platform (the pty module is POSIX-only)")
fcntl = pytest.importorskip("fcntl", reason="no fcntl: cannot size a pseudo-terminal")
termios = pytest.importorskip("termios", reason="no termios: cannot size a pseudo-terminal")

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
DEV, CUDA = str(MANIFESTS / "dev-cpu.json"), str(MANIFESTS / "cuda.json")
# Words a narrow layout adds where a wide one had room: "cuda/conv2d and 6 more" for a list in full, "… 3
# more root causes not shown (3 info), with 0 consequences" for what did not fit its screen.
LAYOUT_WORDS = {
    "and",
    "more",
    "not",
    "shown",
    "root",
    "cause",
    "causes",
    "with",
    "consequence",
    "consequences",
}
SGR = re.compile(r"\x1b\[[0-9;]*m")
# A hang must not hang the suite: past this the command is killed and the test fails (never a timing
# assertion: a slow machine only waits longer).
DEADLINE_S = 300


def in_terminal(args: list[str], columns: int, rows: int = 24) -> tuple[int, str, str]:
    """``envcheck ARGS`` with stdout and stderr each on a pseudo-terminal of ``columns`` x ``rows`` (stdin on
    the first; COLUMNS, LINES and NO_COLOR unset, so the width is the terminal's): its exit code and what it
    wrote to each."""
    pairs = [pty.openpty() for _ in range(2)]
    for _, slave in pairs:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", rows, columns, 0, 0))
    env = {
        k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES", "NO_COLOR", "ENVCHECK_FORMAT")
    }
    env["TERM"] = "xterm-256color"
    (out_master, out_slave), (err_master, err_slave) = pairs
    try:
        proc = subprocess.Popen(
            [sys.executable, "-m", "envcheck", *args],
            stdin=out_slave,
            stdout=out_slave,
            stderr=err_slave,
            env=env,
            start_new_session=True,
        )
    finally:
        os.close(out_slave)
        os.close(err_slave)
    written: dict[int, list[bytes]] = {out_master: [], err_master: []}
    open_ = [out_master, err_master]
    deadline = time.monotonic() + DEADLINE_S
    try:
        while open_:
            left = deadline - time.monotonic()
            if left <= 0:
                proc.kill()
                pytest.fail(f"envcheck {' '.join(args)} still ran after {DEADLINE_S} s")
            ready, _, _ = select.select(open_, [], [], left)
            for fd in ready:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: every writer of the terminal has closed it
                    chunk = b""
                if chunk:
                    written[fd].append(chunk)
                else:
                    open_.remove(fd)
        code = proc.wait(timeout=DEADLINE_S)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        os.close(out_master)
        os.close(err_master)
    out, err = (b"".join(written[fd]).decode("utf-8", "replace") for fd in (out_master, err_master))
    return code, out, err


def _lines(written: str) -> list[str]:
    """What the terminal shows, line by line: colours taken out, the terminal's CR LF made one break."""
    return SGR.sub("", written).replace("\r\n", "\n").split("\n")


def _words(text: str) -> set[str]:
    return {word.strip(",;:()") for word in text.split()}


@pytest.mark.slow
@pytest.mark.parametrize("columns", [80, 120])
def test_a_diff_in_a_real_terminal_is_laid_out_to_its_width(columns: int) -> None:
    code, written, err = in_terminal(["diff", DEV, CUDA], columns)
    assert code == 1, written + err
    assert "\x1b[" in written  # a terminal: coloured
    lines = _lines(written)
    assert lines[0] == "envcheck diff: dev-cpu → cuda"
    assert all(cells(line) <= columns for line in lines), [line for line in lines if cells(line) > columns]
    assert max(map(cells, lines)) > columns - 20  # the terminal's width is used, not a narrower one
    # No word split: every word is one of the same report's laid out without a width to keep to (a one-line
    # entry cut short ends in "…" after the start of a word; a shortened list says "and N more").
    runner = CliRunner()
    wide = [
        runner.invoke(app, ["diff", DEV, CUDA, *extra], env={"COLUMNS": str(MAX_WIDTH)}).stdout
        for extra in ([], ["--verbose"])
    ]
    words = set().union(*map(_words, wide)) | LAYOUT_WORDS
    for word in _words("\n".join(lines)) - words:
        assert word.isdigit() or (word.endswith("…") and any(w.startswith(word[:-1]) for w in words)), word
    # The last lines say what is wrong and what to do.
    closing = "\n".join(lines[-24:])
    assert "FAIL: 2 errors" in closing and "ENV-TORCH-VARIANT  torch (error)" in closing
    assert "remedy    On the target:" in closing


@pytest.mark.slow
def test_a_live_diff_draws_its_progress_line_on_the_terminal_then_the_report(tmp_path: Path) -> None:
    # A bare venv: its snapshot is quick, and the report (what it lacks of dev-cpu) is long enough to wrap.
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(tmp_path / "venv")], check=True)
    python = tmp_path / "venv" / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    code, written, err = in_terminal(["diff", DEV, "--python", str(python)], 80)
    assert code in (1, 2), written + err
    assert "\rdiff: " in err  # the progress line, drawn in place on the terminal of stderr
    assert err.startswith("\rdiff: starting") and "\r\x1b[K" in err  # and erased before anything else
    lines = _lines(written)
    assert lines[0].startswith("envcheck diff: dev-cpu → this machine")
    assert all(cells(line) <= 80 for line in lines), [line for line in lines if cells(line) > 80]
    # Without a terminal there is no progress line, and the report keeps the stable width of 100.
    piped = subprocess.run(
        [sys.executable, "-m", "envcheck", "diff", DEV, CUDA],
        capture_output=True,
        text=True,
        env={k: v for k, v in os.environ.items() if k != "COLUMNS"},
        timeout=DEADLINE_S,
        check=False,
    )
    assert "\r" not in piped.stderr and "\x1b" not in piped.stdout
    assert 80 < max(map(cells, piped.stdout.splitlines())) <= 100
