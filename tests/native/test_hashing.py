"""File identities: background sha256 with a cache that never serves a changed file."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from envcheck.native import hashing
from envcheck.native.hashing import CACHE_NAME, Hasher, cache_dir


def test_cache_serves_unchanged_files_and_rehashes_changed_ones(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(hashing, "RACY_NS", 0)  # files written just now may be cached
    lib = tmp_path / "libx.so"
    lib.write_bytes(b"first")
    first = Hasher(use_cache=True)
    assert first.result(str(lib)) == "sha256:" + hashlib.sha256(b"first").hexdigest()
    first.close()
    folder = cache_dir()
    assert folder is not None and (folder / CACHE_NAME).is_file()
    lib.write_bytes(b"second!")  # new size, mtime and ctime: the cached digest must not be served
    second = Hasher(use_cache=True)
    assert second.result(str(lib)) == "sha256:" + hashlib.sha256(b"second!").hexdigest()
    second.close()
    (folder / CACHE_NAME).write_text("not json")  # a broken cache is ignored
    third = Hasher(use_cache=False)
    assert third.result(str(lib)) == "sha256:" + hashlib.sha256(b"second!").hexdigest()
    assert third.result(str(tmp_path / "absent.so")) is None
    third.close()
