"""Pruning the wheel cache never follows a link out of it, and removes only what this user's envcheck made.

When the cache's ``wheels/`` is a link to a shared folder, the stale ``.tmp-*`` download folders and the
ledger-listed wheels found there are another user's: before the fix, pruning deleted them."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from envcheck.predict import fetch
from envcheck.predict.fetch import WheelCache

TAG = "cp311-cp311-manylinux_2_28_x86_64"
OLD = time.time() - 2 * fetch._STALE_S


def _stale_folder(path: Path) -> Path:
    path.mkdir()
    (path / "dl").mkdir()
    (path / "dl" / "partial.whl").write_bytes(b"x" * 10)
    os.utime(path, (OLD, OLD))
    return path


def _shared(tmp_path: Path) -> tuple[Path, Path, Path, Path]:
    """A shared folder holding another run's cache: an old download folder, and a wheel its ledger
    lists; the shared folder, that folder, the wheel and the ledger's text."""
    shared = tmp_path / "shared"
    shared.mkdir()
    theirs = WheelCache(shared, max_bytes=0)
    other_tmp = _stale_folder(shared / ".tmp-x1y2z3")
    mine_named = _stale_folder(shared / f"{fetch._tmp_prefix()}abc")
    entry = shared / ("c" * 64)
    entry.mkdir()
    wheel = entry / f"theirs-1.0-{TAG}.whl"
    wheel.write_bytes(b"w" * 100)
    theirs.record(wheel)
    return shared, other_tmp, mine_named, wheel


@pytest.mark.parametrize("link", ["wheels", "cache"])
def test_a_linked_cache_root_is_never_pruned(tmp_path: Path, link: str) -> None:
    """``wheels/`` a link to a shared folder (or, as here too, the envcheck folder above it): nothing
    there is removed, neither stale download folders nor the wheels a ledger there lists."""
    shared, other_tmp, mine_named, wheel = _shared(tmp_path)
    base = tmp_path / "home" / ".cache"
    base.mkdir(parents=True)
    if link == "wheels":
        (base / "envcheck").mkdir()
        (base / "envcheck" / "wheels").symlink_to(shared)
        root = base / "envcheck" / "wheels"
    else:
        (base / "envcheck").symlink_to(shared.parent)
        root = base / "envcheck" / "shared"
    cache = WheelCache(root, max_bytes=0)
    cache._remove_stale()
    removed = cache.prune()
    if link == "wheels":
        assert removed == []
        assert other_tmp.is_dir() and mine_named.is_dir(), "a linked wheels/ is never pruned"
        assert wheel.is_file()
    else:
        # Links above wheels/ (a ~/.cache on another disk) are the user's own layout: wheels/ is a real
        # folder, pruned as usual, and still only what this user's envcheck made.
        assert other_tmp.is_dir(), "another run's download folder is not this user's envcheck's"
        assert not mine_named.exists()


def test_stale_download_folders_removed_are_this_users_own_real_folders(tmp_path: Path) -> None:
    root = tmp_path / "wheels"
    root.mkdir()
    cache = WheelCache(root)
    prefix = fetch._tmp_prefix()
    own_old = _stale_folder(root / f"{prefix}old")
    own_new = root / f"{prefix}new"
    own_new.mkdir()
    foreign = _stale_folder(root / ".tmp-someone-else")
    # A link carrying this user's prefix, to a folder of precious files: never followed, never removed.
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "keep.txt").write_text("mine")
    linked = root / f"{prefix}linked"
    linked.symlink_to(precious, target_is_directory=True)
    os.utime(linked, (OLD, OLD), follow_symlinks=False)
    os.utime(precious, (OLD, OLD))
    cache._remove_stale()
    assert not own_old.exists()
    assert own_new.is_dir(), "a folder of a run still going is kept"
    assert foreign.is_dir(), "a folder envcheck's naming does not mark as this user's is kept"
    assert linked.is_symlink() and (precious / "keep.txt").read_text() == "mine"


@pytest.mark.skipif(
    not hasattr(os, "geteuid") or os.geteuid() != 0, reason="needs root to give a folder away"
)
def test_a_stale_folder_of_another_user_is_kept_even_with_this_users_prefix(tmp_path: Path) -> None:
    root = tmp_path / "wheels"
    root.mkdir()
    theirs = _stale_folder(root / f"{fetch._tmp_prefix()}theirs")
    os.chown(theirs, 54321, 54321)
    os.utime(theirs, (OLD, OLD))
    WheelCache(root)._remove_stale()
    assert theirs.is_dir()


def test_a_download_folder_carries_this_users_marker(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The folder ``fetch`` downloads into is named with ``_tmp_prefix()``, so a later run can tell it."""
    made: list[str] = []
    real = fetch.sessions.make_folder

    def recording(prefix: str, parent: str | None = None) -> str:
        folder = real(prefix, parent)
        made.append(Path(folder).name)
        fetch.sessions.remove_folder(folder)
        raise RuntimeError("stop before pip")

    monkeypatch.setattr(fetch.sessions, "make_folder", recording)
    wheel = fetch.ResolvedWheel(
        name="x",
        version="1.0",
        filename=f"x-1.0-{TAG}.whl",
        url="https://example.invalid/x-1.0.whl",
        sha256="d" * 64,
        requires=(),
        requested=True,
    )
    with pytest.raises(RuntimeError, match="stop before pip"):
        WheelCache(tmp_path / "wheels").fetch([wheel], None, None)  # type: ignore[arg-type]
    assert [m[: len(fetch._tmp_prefix())] for m in made] == [fetch._tmp_prefix()]
