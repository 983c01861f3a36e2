"""File identities for files no RECORD vouches for: sha256, hashed in background threads while the walk
goes on, and remembered between runs.

The cache (``$ENVCHECK_CACHE_DIR`` or ``$XDG_CACHE_HOME/envcheck`` or ``~/.cache/envcheck``,
``file-hashes.json``) keys a digest by path, device, inode, size, mtime and ctime, so a file that changed
in any way is hashed again. ``--verify-files`` never reads the cache: it re-hashes. A cache that cannot be
read or written is ignored. Measured: the interpreter's 23 MB libpython alone took ~70 ms of a 200 ms
walk of the torch venv before the cache.
"""

# ruff: noqa: PTH116, PTH110
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

from envcheck.files import NotOpened, open_regular

# Hashing a file that RECORD does not cover is bounded: a multi-GB library must not stall a snapshot.
MAX_HASH_BYTES = 512 * 1024 * 1024
MAX_CACHE_ENTRIES = 20_000


def file_sha256(path: str, *, inside: Sequence[str] | None = None) -> str | None:
    """``sha256:<hex>`` of a regular file; None when it is unreadable, over ``MAX_HASH_BYTES``, or not a
    regular file. A target may report ``/dev/zero`` or a FIFO as loaded (``collect.snapshot._identities``
    hashes what it reports): those are never read, since reading either never ends (``safe.open_regular``
    decides on the opened descriptor). With ``inside`` (a scanned tree's real paths), a file whose real
    path leaves them is not read either."""
    try:
        fd = open_regular(path, inside=inside)
    except (OSError, NotOpened):
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            if os.fstat(f.fileno()).st_size > MAX_HASH_BYTES:
                return None
            digest = hashlib.sha256()
            # Bounded even if the file grows while it is read (a log being appended to).
            left = MAX_HASH_BYTES
            while left > 0 and (chunk := f.read(min(1 << 20, left))):
                digest.update(chunk)
                left -= len(chunk)
            return "sha256:" + digest.hexdigest()
    except OSError:
        return None


def cache_dir() -> Path:
    explicit = os.environ.get("ENVCHECK_CACHE_DIR")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "envcheck"


def _stamp(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_dev}:{st.st_ino}:{st.st_size}:{st.st_mtime_ns}:{st.st_ctime_ns}"


class Hasher:
    """Background sha256 of files; ``use_cache`` false forces real reads (``--verify-files``)."""

    def __init__(self, *, use_cache: bool, inside: Sequence[str] | None = None) -> None:
        self.use_cache = use_cache
        self._inside = inside
        self._pool = ThreadPoolExecutor(max_workers=4)  # hashlib releases the GIL
        self._futures: dict[str, Future[str | None]] = {}
        self._stamps: dict[str, str | None] = {}
        self._cache: dict[str, list[str]] = self._load() if use_cache else {}
        self._dirty = False

    def submit(self, path: str) -> None:
        if path in self._futures:
            return
        stamp = _stamp(path) if self.use_cache else None
        self._stamps[path] = stamp
        cached = self._cache.get(path)
        if stamp is not None and cached is not None and cached[0] == stamp:
            done: Future[str | None] = Future()
            done.set_result(cached[1])
            self._futures[path] = done
            return
        self._futures[path] = self._pool.submit(file_sha256, path, inside=self._inside)

    def result(self, path: str) -> str | None:
        self.submit(path)
        digest = self._futures[path].result()
        stamp = self._stamps.get(path)
        fresh = [stamp, digest]
        if self.use_cache and stamp is not None and digest is not None and self._cache.get(path) != fresh:
            self._cache[path] = fresh  # type: ignore[assignment]
            self._dirty = True
        return digest

    def close(self) -> None:
        self._pool.shutdown(wait=True)
        if self._dirty:
            self._save()

    def _file(self) -> Path:
        return cache_dir() / "file-hashes.json"

    def _load(self) -> dict[str, list[str]]:
        try:
            data = json.loads(self._file().read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return {}
        if not isinstance(data, dict):
            return {}
        return {
            k: v
            for k, v in data.items()
            if isinstance(k, str)
            and isinstance(v, list)
            and len(v) == 2
            and all(isinstance(x, str) for x in v)
        }

    def _save(self) -> None:
        # Entries of files gone since (temporary folders, uninstalled packages) are dropped when saving.
        items = [(k, v) for k, v in self._cache.items() if k in self._futures or os.path.exists(k)]
        items = items[-MAX_CACHE_ENTRIES:]
        target = self._file()
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(prefix=".file-hashes.", dir=target.parent)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(dict(items), f)
            Path(tmp).replace(target)
        except OSError:
            return
