"""File identities: sha256 hashed in background threads while the walk goes on, and remembered between runs.

The cache (``HashCache``) is one file, ``file-hashes.json``, in ``cache_dir()``: ``$ENVCHECK_CACHE_DIR``
(an absolute folder; any other value turns the cache off), else ``$XDG_CACHE_HOME/envcheck`` (when absolute),
else ``~/.cache/envcheck``. It maps a path to ``[stamp, digest]``; the stamp is the file's device, inode,
size, mtime and ctime, so a file that changed in any way is hashed again. A byte flip with its mtime put back
(``os.utime``) still changes the ctime, which no user can set, and a file replaced by a rename changes the
inode (on Windows before Python 3.12, ``st_ctime`` is the creation time: there only the mtime, size and
inode tell).

Two changes keep a stamp while the bytes change, and neither may leave a digest in the cache:

- *Racily clean* (git's rule): file times tick coarsely (the kernel's coarse clock, a jiffy of up to 10 ms;
  1 s on ext3 and HFS+, 2 s on FAT; another machine's clock on NFS), so a change in the same tick as the
  stamp keeps it. An entry holds the time it was hashed (``hashed_at``, taken after the read) and is
  trusted only while the file's mtime and ctime are more than ``RACY_NS`` (2 s, past every tick above)
  older than that; a file changed later than that is hashed again every time, and stored only once its
  times are that old.
- *A writer holding the file open* (Linux): a process that maps the file ``MAP_SHARED`` and writes to it
  stamps mtime and ctime at its first write fault only; later writes through the same mapping change the
  bytes and no stamp for as long as the page stays dirty (on tmpfs, for as long as the mapping lives).
  No wait is long enough for that, so a file that anyone has open for writing is neither served from nor
  stored in the cache. The kernel answers that question: a read lease (``F_SETLEASE``, taken and dropped
  at once) is refused with ``EAGAIN`` while the file is open for writing, a shared writable mapping
  included. Only the file's owner (or root) may take one: a file of another user that someone besides
  root could write is not cached; where leases are not available (macOS, Windows, a file system without
  them) only the stamp and the racy rule apply.

The cache is untrusted input: read only when it is a regular file owned by this user and writable by no one
else (never through a link, a FIFO or a device: ``O_NOFOLLOW`` and ``fstat`` of the opened descriptor), at
most ``MAX_CACHE_BYTES``, every entry checked; anything else is ignored and rebuilt. It is written atomically
(a temporary file in its folder, then a rename, which replaces a planted link rather than writing through
it), keeps at most ``MAX_CACHE_ENTRIES`` entries (the least recently used go first, and entries of files
gone since), and a folder that cannot be written leaves the run without a cache, never with an error.

``--verify-files`` never reads the cache (it re-hashes every file) and refreshes it.

Hashing ends at the command's deadline (``envcheck.core.deadline``): a file not hashed by then is reported as
not hashed (``Hasher.cut``, ``hash_files``), never waited for.
Measured: the interpreter's 23 MB libpython alone took ~70 ms of a 200 ms walk of the torch venv before the
cache; checking the 283 native files of the torch 2.13.0 CPU venv (561 MB) against RECORD adds 0.32 s to the
walk cold (0.30 x ``import torch``) and nothing measurable warm (``ci/bench.py``).
"""

# ruff: noqa: PTH105, PTH108, PTH116, PTH117
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import contextlib
import errno
import hashlib
import json
import os
import re
import signal
import stat
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path

from envcheck.core.deadline import Deadline, DeadlineExpired
from envcheck.core.files import NotOpened, open_regular
from envcheck.process import awake

try:
    import fcntl
except ImportError:  # Windows
    fcntl = None  # type: ignore[assignment]

# Hashing a file that RECORD does not cover is bounded: a multi-GB library must not stall a snapshot.
MAX_HASH_BYTES = 512 * 1024 * 1024
# A file checked against its RECORD is hashed whole once its size is RECORD's (a CUDA library is ~1 GB), up
# to a wheel member's bound; a walk reads at most MAX_RECORD_HASH_TOTAL of them (a CUDA environment is
# ~5 GB): past it, or past the bound, a file keeps RECORD's word (``unhashed``), as forged RECORDs listing
# sparse many-GB files must not stall a gate.
MAX_RECORD_HASH_BYTES = 4 * 1024**3
MAX_RECORD_HASH_TOTAL = 32 * 1024**3
MAX_CACHE_ENTRIES = 20_000
MAX_CACHE_BYTES = 8 * 1024 * 1024
# Git's "racily clean" margin: an entry is trusted only while the file's mtime and ctime are older than
# its hashing time by more than this (the module's docstring says why 2 s).
RACY_NS = 2_000_000_000
CACHE_NAME = "file-hashes.json"
_FORMAT = "envcheck-file-hashes/2"
_DIGEST = re.compile(r"sha256:[0-9a-f]{64}")
_STAMP = re.compile(r"\d+:\d+:\d+:-?\d+:-?\d+")
_F_SETLEASE = getattr(fcntl, "F_SETLEASE", None)
# A lease broken while it is held (a writer opening the file in the microseconds between taking and
# dropping it) signals its holder, SIGIO by default, which would end this process: SIGURG is ignored
# unless handled.
_F_SETSIG = getattr(fcntl, "F_SETSIG", None)
_LEASE_SIGNAL = int(getattr(signal, "SIGURG", 0))
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_READ = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | _NOFOLLOW


def file_sha256(
    path: str,
    *,
    inside: Sequence[str] | None = None,
    limit: int = MAX_HASH_BYTES,
    deadline: Deadline | None = None,
) -> str | None:
    """``sha256:<hex>`` of a regular file; None when it is unreadable, over ``limit`` bytes, or not a
    regular file. A target may report ``/dev/zero`` or a FIFO as loaded (``collect.snapshot._identities``
    hashes what it reports): those are never read, since reading either never ends (``safe.open_regular``
    decides on the opened descriptor). With ``inside`` (a scanned tree's real paths), a file whose real
    path leaves them is not read either. Raises ``DeadlineExpired`` once ``deadline`` passes, before the
    file is opened or between two MiB of it."""
    if deadline is not None:
        deadline.check(f"hashing {path}")
    try:
        fd = open_regular(path, inside=inside)
    except (OSError, NotOpened):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > limit:
                return None
            digest = hashlib.sha256()
            # Bounded even if the file grows while it is read (a log being appended to).
            left = limit
            while left > 0 and (chunk := f.read(min(1 << 20, left))):
                digest.update(chunk)
                left -= len(chunk)
                if deadline is not None:
                    deadline.check(f"hashing {path}")
            return "sha256:" + digest.hexdigest()
    except OSError:
        return None


def hash_files(
    paths: Sequence[str], deadline: Deadline | None = None, *, workers: int = 4
) -> tuple[dict[str, str | None], list[str]]:
    """``file_sha256`` of each path, ``workers`` at a time, until ``deadline``: the digests (None for a file
    that cannot be hashed, see ``file_sha256``) and the paths not hashed because the deadline passed (each
    worker stops within a MiB of it; none is left running)."""
    digests: dict[str, str | None] = {}
    cut: list[str] = []

    def one(path: str) -> None:
        try:
            digests[path] = file_sha256(path, deadline=deadline)
        except DeadlineExpired:
            cut.append(path)

    with awake.Pool(workers) as pool:  # hashlib releases the GIL
        for future in [pool.submit(one, p) for p in dict.fromkeys(paths)]:
            awake.result(future)
    stopped = set(cut)
    return digests, [p for p in dict.fromkeys(paths) if p in stopped]


def cache_dir() -> Path | None:
    """Where the hash cache lives, or None when it is turned off (``ENVCHECK_CACHE_DIR`` set to anything
    but an absolute folder, or no home folder to put it in)."""
    explicit = os.environ.get("ENVCHECK_CACHE_DIR")
    if explicit:
        return Path(explicit) if os.path.isabs(explicit) else None
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    if xdg and os.path.isabs(xdg):
        return Path(xdg) / "envcheck"
    try:
        return Path.home() / ".cache" / "envcheck"
    except (RuntimeError, KeyError, OSError):
        return None


def stamp(path: str) -> str | None:
    """The cache key of ``path``'s current state (device, inode, size, mtime, ctime), or None when the file
    cannot be cached now: it cannot be stated or is not a regular file, it changed less than ``RACY_NS``
    ago (racily clean, see the module's docstring), or someone may have it open for writing
    (``_may_be_written``)."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    if not stat.S_ISREG(st.st_mode) or _racy(st.st_mtime_ns, st.st_ctime_ns, time.time_ns()):
        return None
    if _may_be_written(path, st):
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


def _racy(mtime_ns: int, ctime_ns: int, hashed_at_ns: int) -> bool:
    """Git's racily clean rule: a file stamped within ``RACY_NS`` of (or after) the moment it was hashed may
    have changed again within the same tick of its clock, keeping the stamp."""
    return max(mtime_ns, ctime_ns) >= hashed_at_ns - RACY_NS


def _stamp_times(key: str) -> tuple[int, int]:
    """The mtime and ctime of a stamp (``_STAMP``)."""
    _, _, _, mtime, ctime = key.split(":")
    return int(mtime), int(ctime)


def _may_be_written(path: str, st: os.stat_result) -> bool:
    """Whether a process may have ``path`` (stated as ``st``) open for writing now, a shared writable
    mapping included. Asked of the kernel with a read lease, taken and dropped at once: refused
    (``EAGAIN``) while the file is open for writing. Only the file's owner or root may take one: for a
    file of another user, true unless only root may write it (root can defeat any stat-based check). False
    where there are no leases (not Linux, a file system without them): there only the stamps tell."""
    if _F_SETLEASE is None or fcntl is None:
        return False
    flags = (
        os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOCTTY", 0)
    )
    try:
        fd = os.open(path, flags)
    except (OSError, ValueError):
        return True
    try:
        opened = os.fstat(fd)
        if (opened.st_dev, opened.st_ino) != (st.st_dev, st.st_ino) or not stat.S_ISREG(opened.st_mode):
            return True  # replaced between the stat and the open
        if _F_SETSIG is not None and _LEASE_SIGNAL:
            fcntl.fcntl(fd, _F_SETSIG, _LEASE_SIGNAL)
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_RDLCK)
        fcntl.fcntl(fd, _F_SETLEASE, fcntl.F_UNLCK)
        return False
    except OSError as e:
        if e.errno in (errno.EAGAIN, errno.EWOULDBLOCK, errno.EBUSY):
            return True  # open for writing: the lease is refused
        if e.errno == errno.EACCES:  # not this user's file, and no CAP_LEASE
            return opened.st_uid != 0 or bool(opened.st_mode & (stat.S_IWGRP | stat.S_IWOTH))
        return False  # no leases here (EINVAL, ENOLCK, ENOSYS...): the stamps alone tell
    finally:
        os.close(fd)


def _private(st: os.stat_result) -> bool:
    """A cache file this user owns and no one else may write (POSIX); anything goes where there are no
    owners to compare (Windows)."""
    geteuid = getattr(os, "geteuid", None)
    if geteuid is None:
        return True
    return st.st_uid == geteuid() and not st.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _entry(path: str, value: object) -> tuple[str, str, int] | None:
    """A cache entry as read (``[stamp, digest, hashed_at]``) or as put, if well formed; else None. An entry
    without its hashing time cannot be judged racy or not."""
    if isinstance(value, tuple):
        return value  # put by this run
    if (
        isinstance(value, list)
        and len(value) == 3
        and isinstance(value[0], str)
        and isinstance(value[1], str)
        and type(value[2]) is int
        and _STAMP.fullmatch(value[0])
        and _DIGEST.fullmatch(value[1])
        and os.path.isabs(path)
        and "\0" not in path
    ):
        return (value[0], value[1], value[2])
    return None


class HashCache:
    """The digests of earlier runs (see the module's docstring); ``folder`` None: no cache."""

    def __init__(self, folder: Path | None) -> None:
        self.folder = folder
        # As read: each entry is checked when it is used (``_entry``), not all at load. The cache holds every
        # environment's files (16,000 entries after a day of tests here: 45 ms to check them all), a run uses
        # its own environment's.
        self._entries: dict[str, object] = self._load() if folder is not None else {}
        self._used: set[str] = set()
        self._dirty = False

    def get(self, path: str, key: str | None) -> str | None:
        """The digest stored for ``path`` in the state ``key``; None unless the entry is for that state and
        was not racily clean when hashed (the file's times older than its ``hashed_at`` by ``RACY_NS``)."""
        entry = _entry(path, self._entries.get(path))
        if key is None or entry is None or entry[0] != key or _racy(*_stamp_times(key), entry[2]):
            return None
        self._used.add(path)
        return entry[1]

    def put(self, path: str, key: str, digest: str, hashed_at_ns: int) -> None:
        """Remember ``digest`` for ``path`` in the state ``key``, read until ``hashed_at_ns``; a racily
        clean one is not kept (it would never be served)."""
        if _racy(*_stamp_times(key), hashed_at_ns):
            return
        self._used.add(path)
        old = _entry(path, self._entries.get(path))
        if old is None or old[:2] != (key, digest):
            self._entries[path] = (key, digest, hashed_at_ns)
            self._dirty = True

    def _load(self) -> dict[str, object]:
        assert self.folder is not None
        try:
            fd = os.open(self.folder / CACHE_NAME, _READ)
        except (OSError, ValueError):
            return {}
        try:
            st = os.fstat(fd)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_CACHE_BYTES or not _private(st):
                return {}
            raw = os.read(fd, MAX_CACHE_BYTES + 1)
        except OSError:
            return {}
        finally:
            os.close(fd)
        if len(raw) > MAX_CACHE_BYTES:
            return {}
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError):
            return {}
        if not isinstance(data, dict) or data.get("format") != _FORMAT:
            return {}
        entries = data.get("entries")
        return entries if isinstance(entries, dict) else {}

    def save(self) -> None:
        """Write the cache back when this run learnt something. Never raises."""
        if not self._dirty or self.folder is None:
            return
        # Least recently used first, so the cap drops them; entries of files gone since are dropped.
        entries = ((p, _entry(p, e)) for p, e in self._entries.items())
        valid = [(p, e) for p, e in entries if e is not None]
        old = [(p, e) for p, e in valid if p not in self._used and os.path.lexists(p)]
        new = [(p, e) for p, e in valid if p in self._used]
        kept = (old + new)[-MAX_CACHE_ENTRIES:]
        while True:
            text = json.dumps({"format": _FORMAT, "entries": {p: list(e) for p, e in kept}})
            if len(text) <= MAX_CACHE_BYTES or not kept:
                break
            kept = kept[len(kept) // 4 + 1 :]  # over the cap (very long paths): the oldest quarter goes
        tmp: str | None = None
        try:
            self.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
            fd, tmp = tempfile.mkstemp(prefix=".file-hashes.", suffix=".tmp", dir=self.folder)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(text)
            os.replace(tmp, self.folder / CACHE_NAME)
            tmp = None
        except (OSError, ValueError):
            return
        finally:
            if tmp is not None:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


class Hasher:
    """Background sha256 of files through the cache. ``use_cache`` false: no cache at all; ``refresh``:
    every file is read again (``--verify-files``) and the cache learns the results."""

    def __init__(
        self,
        *,
        use_cache: bool = True,
        refresh: bool = False,
        inside: Sequence[str] | None = None,
        deadline: Deadline | None = None,
    ) -> None:
        self._inside = inside
        self._deadline = deadline
        # Files whose hashing the deadline stopped: their result is None, as for an unreadable file.
        self.cut: set[str] = set()
        self._refresh = refresh
        self._pool = awake.Pool(4)  # hashlib releases the GIL
        self._futures: dict[str, Future[str | None]] = {}
        self._stamps: dict[str, str | None] = {}
        self._hits: set[str] = set()
        self._cache = HashCache(cache_dir() if use_cache else None)

    def submit(self, path: str, *, limit: int = MAX_HASH_BYTES) -> None:
        if path in self._futures:
            return
        key = stamp(path) if self._cache.folder is not None else None
        self._stamps[path] = key
        cached = None if self._refresh else self._cache.get(path, key)
        if cached is not None:
            done: Future[str | None] = Future()
            done.set_result(cached)
            self._futures[path] = done
            self._hits.add(path)
            return
        self._futures[path] = self._pool.submit(self.read, path, limit)

    def read(self, path: str, limit: int) -> str | None:
        """Hash ``path`` for real (a cache miss); None once the deadline has passed (``cut``)."""
        try:
            return file_sha256(path, inside=self._inside, limit=limit, deadline=self._deadline)
        except DeadlineExpired:
            self.cut.add(path)
            return None

    def result(self, path: str) -> str | None:
        self.submit(path)
        digest = awake.result(self._futures[path])
        key = self._stamps.get(path)
        if path in self._hits:
            return digest
        # Stored only when the file is as it was before it was read, and no one has it open for writing
        # (``stamp``): a change while hashing is not kept; nor is a racily clean file (``HashCache.put``).
        hashed_at = time.time_ns()
        if key is not None and digest is not None and stamp(path) == key:
            self._cache.put(path, key, digest, hashed_at)
        return digest

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        self._cache.save()
