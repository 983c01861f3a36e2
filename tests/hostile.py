"""Running envcheck against hostile inputs without letting them take the test machine down.

Every hostile case (bombs, FIFOs, daemons, endless output) runs envcheck in a child process under a hard
wall-clock timeout and an address-space limit (``RLIMIT_AS``), and reports how it ended and its peak
resident memory. The bound is a resource guard, not a timed assertion: a case fails when envcheck hangs
past ``timeout + grace`` or needs more than ``max_rss_mb``, never because it was slower than some figure.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

# docs/budgets.md: hostile inputs end within the timeout + 5 s, under 300 MB.
GRACE_S = 5.0
MAX_RSS_MB = 300
# Virtual address space allowed to the child: generous next to the RSS bound (thread stacks and malloc
# arenas reserve address space they never touch), small enough that a real bomb dies instead of the host.
ADDRESS_SPACE_MB = 2048


@dataclass(frozen=True)
class Bounded:
    """How a bounded run ended."""

    returncode: int
    stdout: str
    stderr: str
    seconds: float
    max_rss_mb: float
    timed_out: bool
    # The sampled peak of the whole process tree's PSS (0.0 when not sampled: ``run_bounded(tree=False)``).
    tree_mb: float = 0.0


def _limit(address_space_mb: int) -> None:
    limit = address_space_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


# The bounded command runs as the grandchild of the test process, under a small launcher that reports its
# exit status and peak RSS. Linux folds the parent's memory at fork into a child's ru_maxrss (the forked
# copy of the address space counts until exec), so a direct child of a pytest process that has grown to
# 300 MB would "peak" at 300 MB before running a line; the launcher is a fresh, small interpreter.
#
# ru_maxrss is the peak of the largest single process. The launcher also samples the whole tree under it
# every TREE_SAMPLE_S (envcheck, its pip runs, its fleet workers, its targets): the sum of their PSS
# (proportional set size, so pages a fork shares count once), from /proc. A sample can miss a spike shorter
# than its interval; the per-process peak cannot.
TREE_SAMPLE_S = 0.1
_LAUNCHER = """
import json, os, sys, time
pid = os.fork()
if pid == 0:
    try:
        os.execvp(sys.argv[3], sys.argv[3:])
    finally:
        os._exit(127)

def children():
    kids = {}
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                with open("/proc/" + name + "/stat", "rb") as f:
                    data = f.read()
            except OSError:
                continue
            kids.setdefault(int(data[data.rindex(b")") + 2 :].split()[1]), []).append(int(name))
    return kids

def pss_kb(p):
    try:
        with open("/proc/%d/smaps_rollup" % p, "rb") as f:
            for line in f:
                if line.startswith(b"Pss:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return 0

peak = 0
interval = float(sys.argv[2])
while True:
    done, status, usage = os.wait4(pid, os.WNOHANG)
    if done:
        break
    if interval > 0:
        kids, tree, stack = children(), [], [pid]
        while stack:
            p = stack.pop()
            tree.append(p)
            stack.extend(kids.get(p, ()))
        peak = max(peak, sum(pss_kb(p) for p in tree))
    time.sleep(interval or 0.02)
with open(sys.argv[1], "w") as f:
    json.dump({"exit": os.waitstatus_to_exitcode(status), "maxrss_kb": usage.ru_maxrss, "tree_kb": peak}, f)
"""


def run_bounded(
    argv: Sequence[str],
    *,
    timeout: float,
    env: Mapping[str, str] | None = None,
    cwd: str | os.PathLike[str] | None = None,
    address_space_mb: int = ADDRESS_SPACE_MB,
    stdin: int | None = subprocess.DEVNULL,
    tree: bool = True,
) -> Bounded:
    """Run ``argv`` in its own session under ``RLIMIT_AS``; kill the session at ``timeout + GRACE_S``.

    Output is read through temporary files, so a child that prints without end fills a file, not this
    process's memory (only the last 64 KiB of each stream is returned). ``tree``: sample the whole process
    tree's memory (``Bounded.tree_mb``, Linux).
    """
    full_env = dict(os.environ if env is None else env)
    full_env.setdefault("MALLOC_ARENA_MAX", "2")
    interval = TREE_SAMPLE_S if tree and Path("/proc/self").is_dir() else 0.0
    started = time.monotonic()
    with (
        tempfile.TemporaryFile() as out,
        tempfile.TemporaryFile() as err,
        tempfile.TemporaryDirectory(prefix="bounded-") as tmp,
    ):
        report = Path(tmp) / "report.json"
        proc = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(report), str(interval), *argv],
            stdin=stdin,
            stdout=out,
            stderr=err,
            env=full_env,
            cwd=cwd,
            start_new_session=True,
            # setrlimit must run in the child before exec; Popen has no other hook for it.
            preexec_fn=lambda: _limit(address_space_mb),  # noqa: PLW1509
        )
        timed_out = False
        try:
            proc.wait(timeout=timeout + GRACE_S)
        except subprocess.TimeoutExpired:
            timed_out = True
        # Anything the command left running in its session goes too (and all of it, at the bound).
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        seconds = time.monotonic() - started
        try:
            reported = json.loads(report.read_text())
        except (OSError, ValueError):  # killed at the bound before the launcher could report
            reported = {"exit": proc.returncode, "maxrss_kb": 0, "tree_kb": 0}
        return Bounded(
            returncode=int(reported["exit"]),
            stdout=_tail(out),
            stderr=_tail(err),
            seconds=seconds,
            max_rss_mb=int(reported["maxrss_kb"]) / 1024,
            timed_out=timed_out,
            tree_mb=int(reported.get("tree_kb", 0)) / 1024,
        )


def envcheck_argv(*args: str) -> list[str]:
    """The envcheck CLI as a child process of the test interpreter."""
    return [sys.executable, "-m", "envcheck", *args]


def assert_bounded(result: Bounded, *, timeout: float, tree: bool = False) -> None:
    """The hostile-input guarantee: ended on its own, within the timeout + grace, under the memory bound,
    and never with a traceback. ``tree``: the bound holds for the whole process tree too (the sum of its
    sampled PSS: envcheck with its pip runs and workers; leave it off where a target imports a real torch,
    whose memory is the application's, not envcheck's)."""
    assert not result.timed_out, f"still running after {timeout} + {GRACE_S} s"
    assert result.max_rss_mb < MAX_RSS_MB, f"peak RSS {result.max_rss_mb:.0f} MB"
    if tree:
        assert result.tree_mb < MAX_RSS_MB, f"peak of the process tree {result.tree_mb:.0f} MB (PSS)"
    assert "Traceback" not in result.stderr, result.stderr


def _tail(f: IO[bytes], limit: int = 64 * 1024) -> str:
    size = f.seek(0, os.SEEK_END)
    f.seek(max(0, size - limit))
    return f.read().decode("utf-8", "replace")


def make_fifo(path: Path) -> Path:
    """A FIFO in a temp folder (tests run as root; never under the real /dev)."""
    os.mkfifo(path)
    return path


def make_char_device(path: Path, major: int, minor: int) -> Path:
    """A character device node in a temp folder: (1, 5) is zero, (1, 3) null, (1, 7) full, (1, 9) urandom."""
    import stat

    os.mknod(path, 0o666 | stat.S_IFCHR, os.makedev(major, minor))
    return path
