"""The wheel cache is bounded: the least recently used wheels go first, never one the run uses."""

from __future__ import annotations

import os
from pathlib import Path

from envcheck.predict.fetch import WheelCache


def _entry(root: Path, n: int, size: int, mtime: float) -> Path:
    folder = root / (f"{n:x}" * 64)[:64]
    folder.mkdir(parents=True)
    wheel = folder / f"pkg{n}-1.0-py3-none-win_amd64.whl"
    wheel.write_bytes(b"\0" * size)
    WheelCache(root).record(wheel)  # as the cache does for every file it writes
    os.utime(folder, (mtime, mtime))
    return folder


def test_the_least_recently_used_wheels_go_first_and_the_runs_own_stay(tmp_path: Path) -> None:
    oldest = _entry(tmp_path, 1, 4000, 1_000)
    kept = _entry(tmp_path, 2, 4000, 2_000)  # older than the next, but the current run uses it
    middle = _entry(tmp_path, 3, 4000, 3_000)
    newest = _entry(tmp_path, 4, 4000, 4_000)
    (tmp_path / "trees").mkdir()
    removed = WheelCache(tmp_path, max_bytes=9000).prune(keep={kept})
    assert removed == [oldest, middle]
    assert kept.is_dir() and newest.is_dir()
    assert not oldest.exists() and not middle.exists()


def test_a_cache_within_its_bound_loses_nothing(tmp_path: Path) -> None:
    entries = [_entry(tmp_path, n, 1000, 1_000 * n) for n in (5, 6)]
    assert WheelCache(tmp_path, max_bytes=10_000).prune() == []
    assert all(e.is_dir() for e in entries)
