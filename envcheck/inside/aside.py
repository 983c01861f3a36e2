# mypy: ignore-errors
# ruff: noqa: UP004, UP031, PTH123
"""Checks run aside: a child of the smoke suite's main process, forked right after ``import torch``.

Runs *inside the target interpreter* (standard library only, Python 3.8) and never imports envcheck.
Some checks spend most of their time importing what torch imports lazily the first time they run
(``torch.export`` and TorchScript pull in SymPy, NetworkX and torch._dynamo: about 1.3 s of a 2 s check
list on 2 cores). On Linux the suite forks a child right after ``import torch`` that runs those checks
(``ASIDE``) while the parent runs the rest: one ``import torch``, both cores. The parent then collects the
child's results, runs the throughput check last (``LAST``: it must not share the CPU with the child), and
finishes as before.

What a process crash or hang means is kept:

- the child writes its own result file (``current``, ``results``) through ``result.emit``, after every
  step; the parent copies each new result into its own result file and names the child's ``current`` as
  its own while it waits, so a deadline that ends the parent (and the child with it: the runner ends the
  process tree) gives the timeout to the check the child was running;
- a child that dies inside a check gives that check ``crashed`` with its signal or exit code and the end of
  its stderr (a file of its own, capped); the parent runs the child's remaining checks itself, as a rerun
  after a crash would;
- no fork where it is not safe, as for the imports together (``together.cannot_fork``): every check then
  runs in the parent, in order.
"""

import os
import signal
import sys
import time

from .result import Growing
from .result import emit as _emit
from .together import cannot_fork, output_to

# Checks whose first run imports most of what it needs: run in the child.
ASIDE = ("jit_trace", "jit_script", "torch_export", "onnx_export")
# Throughput: measured in the parent after the child has ended, with the CPU to itself.
LAST = ("speed_matmul",)
# How often the parent reads the child's result file while it waits.
POLL_S = 0.02
# The most of the child's result file the parent reads (its results are summaries: a few KiB).
MAX_RESULT_BYTES = 8 << 20
STDERR_TAIL_CHARS = 2000


class Aside(object):
    """The forked child, as its parent sees it: ``names`` are the checks it runs, in order."""

    def __init__(self, pid, names, out, stderr):
        self.pid = pid
        self.names = names
        self.out = out
        self.stderr = stderr


def fork(out, config, torch, names, run):
    """In the suite's main process, right after ``import torch``: fork the child that runs ``names``
    (those of ``ASIDE`` still to run) with ``run(name)`` (it returns the check's result entry, or None when
    the check is not in the suite) and never returns there; return an ``Aside`` in the parent, or None
    when there is no child (nothing to run, not safe, or ``config["aside"]`` false)."""
    if not names or not out or config.get("aside") is False or cannot_fork(torch) is not None:
        return None
    paths = (out + ".aside", out + ".aside-stderr")
    sys.stdout.flush()
    sys.stderr.flush()
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # Python 3.12+ on fork with torch's threads
        pid = os.fork()
    if pid:
        return Aside(pid, list(names), paths[0], paths[1])
    try:
        output_to(paths[1])
        _child(paths[0], names, run, torch)
    except BaseException:  # noqa: B036 - the child must never go back into the suite's code
        import traceback

        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(1)


def _child(out, names, run, torch):
    # One intra-op thread: the parent's checks use the cores, and no OpenMP pool is needed here.
    torch.set_num_threads(1)
    result = {"stage": "start", "done": False, "current": None, "results": []}
    growing = Growing(("results",))
    _emit(out, result, growing)
    for name in names:
        result["current"] = name
        _emit(out, result, growing)
        entry = run(name)
        if entry is not None:
            result["results"].append(entry)
        result["current"] = None
        _emit(out, result, growing)
    result["stage"] = "done"
    result["done"] = True
    _emit(out, result, growing)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def collect(aside, result, emit):
    """In the parent, after its own checks: copy the child's results into ``result`` as they come (its
    ``current`` named as the parent's), wait for it to end, and give a check it died in ``crashed``. Returns
    the names the child did not run, for the parent to run itself."""
    copied = 0
    status = None
    while True:
        try:
            pid, status = os.waitpid(aside.pid, os.WNOHANG)
        except InterruptedError:
            continue
        except ChildProcessError:
            pid, status = aside.pid, None
        data = _read(aside.out)
        entries = [e for e in data.get("results") or () if isinstance(e, dict)]
        entries = [e for e in entries if e.get("name") in aside.names]
        current = data.get("current") if data.get("current") in aside.names else None
        if len(entries) > copied or current != result.get("current"):
            result["results"].extend(entries[copied:])
            copied = max(copied, len(entries))
            result["current"] = current
            result["stage"] = "check %s" % current if current else "aside"
            emit()
        if pid:
            break
        time.sleep(POLL_S)
    done = {e.get("name") for e in result["results"] if isinstance(e, dict)}
    current = data.get("current") if data.get("done") is not True else None
    if current in aside.names and current not in done:
        result["results"].append(_died(current, status, _tail(aside.stderr)))
        done.add(current)
    result["current"] = None
    emit()
    return [name for name in aside.names if name not in done]


def _died(name, status, tail):
    entry = {"name": name, "family": "runtime", "device": "cpu", "status": "crashed"}
    if status is not None and os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        try:
            entry["signal"] = signal.Signals(number).name
        except ValueError:
            entry["signal"] = "signal %d" % number
    elif status is not None and os.WIFEXITED(status):
        entry["exit_code"] = os.WEXITSTATUS(status)
    if tail:
        entry["stderr_tail"] = tail
    return entry


def _open_regular(path):
    """A file descriptor of ``path`` if it is a regular file (no link followed, no FIFO waited on)."""
    import stat

    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW)
    if not stat.S_ISREG(os.fstat(fd).st_mode):
        os.close(fd)
        raise OSError("not a regular file: %s" % path)
    return fd


def _read(path):
    import json

    try:
        fd = _open_regular(path)
    except OSError:
        return {}
    try:
        raw = os.read(fd, MAX_RESULT_BYTES + 1)
    except OSError:
        return {}
    finally:
        os.close(fd)
    if len(raw) > MAX_RESULT_BYTES:
        return {}
    try:
        data = json.loads(raw.decode("utf-8"))
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _tail(path):
    try:
        fd = _open_regular(path)
    except OSError:
        return None
    try:
        size = os.fstat(fd).st_size
        os.lseek(fd, max(0, size - 4 * STDERR_TAIL_CHARS), os.SEEK_SET)
        raw = os.read(fd, 4 * STDERR_TAIL_CHARS)
    except OSError:
        return None
    finally:
        os.close(fd)
    text = raw.decode("utf-8", "replace").strip()[-STDERR_TAIL_CHARS:]
    return text or None
