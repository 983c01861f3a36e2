# ruff: noqa: PTH105, PTH108, PTH112, PTH116, PTH119, PTH120
# os-level calls on purpose: the destination is classified by one stat of its resolved path, and files are
# written through file descriptors (fchmod, fchown, fsync) that pathlib does not expose.
"""Writing a report or a manifest to where the user asked, without destroying anything on the way.

``-o PATH`` is untrusted in the way a shell redirection is: it may name a regular file (replaced
atomically, so an interrupted write leaves the old file whole), a symlink (written through to its target,
as ``>`` does; the link stays a link), a device or a FIFO (``/dev/null``, ``/dev/stdout``, a pipe: written
directly, never replaced by a regular file), a folder or a missing folder (refused before any long work
starts). Every failure is an ``OutputError`` with one line that names the path; a full disk or a full
stdout never leaves a traceback, and never a half-written file in place of the old one.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
import sys
import tempfile
from dataclasses import dataclass
from typing import Literal

from envcheck.core.errors import EnvcheckError

STDOUT = "-"


class OutputError(EnvcheckError):
    """An output cannot be written: a missing folder, a folder given as a file, a FIFO with no reader,
    a full disk or stream."""


@dataclass(frozen=True, kw_only=True, slots=True)
class Destination:
    """Where one output goes. ``kind``: ``stdout``; ``file``: a regular file, existing or new, replaced
    atomically (``path`` is the real path, links followed); ``stream``: a device or FIFO, written in place."""

    shown: str
    kind: Literal["stdout", "file", "stream"]
    path: str = ""


def destination(output: str | os.PathLike[str] | None) -> Destination:
    """Check ``output`` now, before the work whose result it will receive. Raises ``OutputError``."""
    if output is None or os.fspath(output) == STDOUT:
        return Destination(shown="stdout", kind="stdout")
    shown = os.fspath(output)
    if not shown:
        raise OutputError("the output path is empty", tip="Give a file name, or - for stdout.")
    # A link is followed to what it names, as a shell's `>` does; a dangling link creates its target.
    # os.stat follows /dev/stdout -> /proc/self/fd/1 -> a pipe whose "real path" (pipe:[…]) has no file.
    real = os.path.realpath(shown)
    try:
        st = os.stat(shown)
    except FileNotFoundError:
        folder = os.path.dirname(real) or "."
        if not os.path.isdir(folder):
            raise OutputError(
                f"cannot write {shown}: the folder {folder} does not exist",
                tip="Create the folder first, or give another path.",
            ) from None
        if not os.access(folder, os.W_OK):
            raise OutputError(f"cannot write {shown}: the folder {folder} is not writable") from None
        return Destination(shown=shown, kind="file", path=real)
    except OSError as e:
        raise OutputError(f"cannot write {shown}: {e.strerror or e}") from e
    if stat.S_ISREG(st.st_mode):
        if not os.access(real, os.W_OK):
            raise OutputError(f"cannot write {shown}: permission denied")
        return Destination(shown=shown, kind="file", path=real)
    if stat.S_ISDIR(st.st_mode):
        raise OutputError(f"cannot write {shown}: it is a folder", tip="Give a file name inside it.")
    if stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode) or stat.S_ISFIFO(st.st_mode):
        # /dev/stdout and /proc/self/fd/N resolve to names that do not exist (pipe:[…]); open the name given.
        return Destination(shown=shown, kind="stream", path=shown)
    raise OutputError(f"cannot write {shown}: it is not a file, a device or a FIFO")


def write(dest: Destination, text: str) -> None:
    """Write ``text`` to ``dest``. Raises ``OutputError``; a regular file keeps its old content on failure."""
    data = text.encode("utf-8", "backslashreplace")
    try:
        if dest.kind == "stdout":
            _write_stdout(data)
        elif dest.kind == "stream":
            _write_stream(dest.path, data)
        else:
            _replace_file(dest.path, data)
    except BrokenPipeError:
        # The reader left (`envcheck rules | head`): what it did not read it did not want. Later writes go
        # nowhere, and the exit code still says what was found.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except OSError as e:
        if getattr(e, "winerror", None) in _HELD_OPEN_WINERRORS:
            raise OutputError(
                f"cannot write {dest.shown}: {e.strerror or e}: another program has it open (Windows cannot "
                "replace a file that is open), or it is read-only; it was left as it was",
                tip="Close the program that holds it (an editor, a viewer), or give another path.",
            ) from e
        raise OutputError(f"cannot write {dest.shown}: {_reason(e)}") from e


# Windows: ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION; how MoveFileEx refuses to replace a file that another
# process holds open without FILE_SHARE_DELETE (as every plain open() does), or a read-only one.
_HELD_OPEN_WINERRORS = (5, 32)
# How long a replace refused that way is retried: a virus scanner or an indexer holds a new file briefly.
_HELD_OPEN_RETRY_S = 1.0


def _reason(e: OSError) -> str:
    if e.errno == errno.ENXIO:
        return "it is a FIFO with no reader"
    return e.strerror or str(e)


def _write_stdout(data: bytes) -> None:
    sys.stdout.flush()
    stream = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
    if stream is None:  # a test harness's text-only stdout
        sys.stdout.write(data.decode("utf-8"))
        sys.stdout.flush()
        return
    stream.write(data)
    stream.flush()


def _write_stream(path: str, data: bytes) -> None:
    # O_NONBLOCK: opening a FIFO that nobody reads fails at once (ENXIO) instead of waiting forever; the
    # writes themselves block as usual once a reader is there. No O_CREAT: the node exists, we never make one.
    fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    try:
        os.set_blocking(fd, True)
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
    finally:
        os.close(fd)


def _replace_file(path: str, data: bytes) -> None:
    """Temp file in the same folder + rename: ``path`` holds either all of its old content or all of the
    new. The new file keeps the old one's mode (and owner, where we may set it)."""
    try:
        old: os.stat_result | None = os.stat(path)
    except FileNotFoundError:
        old = None
    folder = os.path.dirname(path) or "."
    fd, tmp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=folder)
    try:
        with os.fdopen(fd, "wb") as f:
            if hasattr(os, "fchmod"):  # POSIX only; Windows files carry no such mode
                if old is not None:
                    os.fchmod(f.fileno(), stat.S_IMODE(old.st_mode))
                    if os.geteuid() == 0:
                        os.fchown(f.fileno(), old.st_uid, old.st_gid)
                else:
                    # mkstemp creates 0600; a new manifest is meant to be shared: the umask-derived mode.
                    umask = os.umask(0)
                    os.umask(umask)
                    os.fchmod(f.fileno(), 0o666 & ~umask)
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        _rename(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _rename(tmp: str, path: str) -> None:
    """``os.replace``; on Windows, retried for ``_HELD_OPEN_RETRY_S`` while another process holds ``path``
    open (then the last error is raised, and the caller removes ``tmp``)."""
    if os.name != "nt":
        os.replace(tmp, path)
        return
    import time

    ends = time.monotonic() + _HELD_OPEN_RETRY_S
    while True:
        try:
            os.replace(tmp, path)
            return
        except OSError as e:
            if getattr(e, "winerror", None) not in _HELD_OPEN_WINERRORS or time.monotonic() >= ends:
                raise
            time.sleep(0.05)
