"""Opening untrusted files: only regular files, never a device, FIFO or socket, and (in a scan) never a file
a link leads to outside the scanned tree. Every reader of an input envcheck does not control (a manifest, a
policy, a checks file, a binary, a RECORD) opens it here and reads it with a cap.

Why each step:

- ``open(2)`` of a FIFO blocks until a writer appears, and reading ``/dev/zero`` or ``/dev/urandom`` never
  ends: a link named ``libfoo.so`` to either hangs a scan. ``O_NONBLOCK`` makes the open of a FIFO return at
  once, and ``fstat`` of the *opened* descriptor decides: anything but a regular file is closed unread.
- The decision is made on the descriptor, not on the name, so a file swapped for a link or a device between
  the check and the open cannot trick it (CWE-367). ``O_NOFOLLOW`` refuses a final component that became a
  link after it was resolved.
- A link inside a scanned wheel or folder may point at ``/etc/shadow``: its target is resolved
  (``realpath``) and must stay inside the tree, else the file is refused with the reason and never read, so
  neither its bytes nor its hash reach a report.

Cost on the hot path (the snapshot's walk): one ``open`` and one ``fstat`` per file, which the readers did
already; ``lstat`` + ``realpath`` only for a tree with a containment root (``envcheck scan``).
"""

# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import errno
import os
import stat
from collections.abc import Sequence

_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_BINARY", 0)
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class NotOpened(Exception):
    """The file is not opened: ``reason`` says why (a device, a FIFO, a link leaving the tree, a loop)."""

    def __init__(self, reason: str, *, kind: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words (``a FIFO``, ``a character device``, ...)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISLNK(mode):
        return "a symbolic link"
    return "not a regular file"


def is_inside(path: str, roots: Sequence[str]) -> bool:
    """Whether the absolute ``path`` is one of ``roots`` or below one (all normalised the same way)."""
    return any(path == root or path.startswith(root.rstrip(os.sep) + os.sep) for root in roots)


def open_regular(path: str, *, inside: Sequence[str] | None = None) -> int:
    """A read-only descriptor on ``path`` once ``fstat`` of it says it is a regular file.

    With ``inside`` (real paths of the scanned trees), ``path``'s links are resolved first and must stay
    inside one of them; the resolved path is then opened with ``O_NOFOLLOW``.

    Raises ``NotOpened`` for a directory, a FIFO, a device, a socket (closed unread), a link leaving the
    tree or a link loop; ``OSError`` when it cannot be opened (absent, permissions).
    """
    flags = _FLAGS
    if inside is not None:
        try:
            path = os.path.realpath(path, strict=True)
        except OSError as e:
            if e.errno == errno.ELOOP:
                raise NotOpened("a symbolic link loop: not opened", kind="link-loop") from e
            raise
        if not is_inside(path, inside):
            raise NotOpened(f"leads to {path}, outside the scanned tree: not opened", kind="link-outside")
        flags |= _NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as e:
        if e.errno == errno.ELOOP and inside is None:
            raise NotOpened("a symbolic link loop: not opened", kind="link-loop") from e
        if e.errno == errno.ELOOP:  # O_NOFOLLOW: the resolved file was replaced by a link since
            raise NotOpened(
                "became a symbolic link while being opened: not opened", kind="link-outside"
            ) from e
        raise
    try:
        mode = os.fstat(fd).st_mode
    except OSError:
        os.close(fd)
        raise
    if not stat.S_ISREG(mode):
        os.close(fd)
        if stat.S_ISDIR(mode):
            raise NotOpened("is a directory, not a regular file", kind="directory")
        raise NotOpened(f"is {file_kind(mode)}, not a regular file: not opened", kind="not-regular")
    return fd


def read_capped(path: str, cap: int) -> bytes:
    """At most ``cap + 1`` bytes of the regular file ``path``: a caller seeing more than ``cap`` knows the
    file is over its limit without having read it whole. Raises ``NotOpened`` (not a regular file) and
    ``OSError`` (cannot be opened or read)."""
    fd = open_regular(path)
    try:
        chunks: list[bytes] = []
        size = 0
        while size <= cap:
            chunk = os.read(fd, cap + 1 - size)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks)


class Unreadable(Exception):
    """An input file envcheck will not read (``read_input``): ``problem`` says why, in the one wording every
    reader of an input shows (``cannot read: No such file or directory``, ``cannot read: it is a FIFO, not
    a regular file: not opened``, ``larger than 1048576 bytes``); ``str()`` is ``<path>: <problem>``.
    ``kind`` is ``NotOpened``'s (``directory``, ``not-regular``, ``link-loop``), ``os-error`` or
    ``too-large``."""

    def __init__(self, path: str, problem: str, *, kind: str) -> None:
        super().__init__(f"{path}: {problem}")
        self.path = path
        self.problem = problem
        self.kind = kind


# A torch CUDA environment's manifest is a few MB; 32 MiB leaves room and stops a hostile file early. Here,
# not in envcheck.manifest.io, so that what reads a manifest's few fields as JSON need not import the model.
MAX_MANIFEST_BYTES = 32 * 1024 * 1024


def read_input(path: str, cap: int) -> bytes:
    """The bytes of an input file given on the command line (a manifest, a policy, a checks file, a
    requirements lock): a regular file of at most ``cap`` bytes, never read past ``cap + 1``. Raises
    ``Unreadable``; the caller wraps it in its own error (``ManifestError``, ``UsageError``)."""
    try:
        raw = read_capped(path, cap)
    except NotOpened as e:
        raise Unreadable(path, f"cannot read: it {e.reason}", kind=e.kind) from e
    except OSError as e:
        raise Unreadable(path, f"cannot read: {e.strerror or e}", kind="os-error") from e
    if len(raw) > cap:
        raise Unreadable(path, f"larger than {cap} bytes", kind="too-large")
    return raw


def is_windows_path(path: str) -> bool:
    r"""Whether ``path`` is written the Windows way (``C:\...``, ``\\server\share``, or any backslash),
    wherever it was recorded: a manifest from a Windows machine is read on Linux too."""
    return "\\" in path or (len(path) >= 2 and path[1] == ":" and path[0].isalpha())


def same_path(a: str, b: str) -> bool:
    """Whether two recorded paths name the same file as their own platform compares them: Windows paths in
    any case and with either separator (``C:/Env/python.exe`` is ``c:\\env\\PYTHON.EXE``), others exactly."""
    if a == b:
        return True
    if is_windows_path(a) and is_windows_path(b):
        import ntpath

        return ntpath.normcase(ntpath.normpath(a)) == ntpath.normcase(ntpath.normpath(b))
    return False
