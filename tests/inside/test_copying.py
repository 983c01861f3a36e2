"""The copy of ``envcheck.inside`` a target runs (``copy_package``): its byte-code goes with it, for the
target of the same Python only, and a ``.pyc`` that does not match its source is never what runs.

Each case copies a small package of its own (``copying._HERE`` pointed at it), compiled by the real
``py_compile``, and runs the copy in a real interpreter under ``-v``, which names where each module's code
object came from.
"""

from __future__ import annotations

import os
import py_compile
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.inside import copying

TAG = sys.implementation.cache_tag


def _package(root: Path, source: str) -> Path:
    """A package folder holding ``__init__.py`` and ``mod.py`` (``source``), both compiled."""
    root.mkdir()
    (root / "__init__.py").write_text("", encoding="utf-8")
    (root / "mod.py").write_text(source, encoding="utf-8")
    for name in ("__init__.py", "mod.py"):
        py_compile.compile(str(root / name), doraise=True)
    return root


def _run_copy(folder: str) -> subprocess.CompletedProcess[str]:
    """``import mod`` from the copy, under ``-v`` (to stderr: where each code object came from)."""
    code = f"import sys; sys.path.insert(0, {folder!r}); from {copying.PACKAGE} import mod; print(mod.VALUE)"
    # -B: the copy stays as copied (what ran is what was shipped).
    return subprocess.run(
        [sys.executable, "-I", "-B", "-v", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )


def test_the_copy_carries_this_pythons_byte_code_and_the_target_runs_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path / "inside", "VALUE = 'compiled'\n")
    cache = package / "__pycache__"
    (cache / "mod.cpython-10.pyc").write_bytes(b"another Python's")
    (cache / f"mod.{TAG}.opt-1.pyc").write_bytes(b"an optimised build's")
    (cache / f"mod.{TAG}-pytest-9.2.0.pyc").write_bytes(b"pytest's assertion rewrite")
    (package / "stray.pyc").write_bytes(b"beside the sources")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    (cache / f"__main__.{TAG}.pyc").symlink_to(fifo)  # a link is never followed by the copy
    monkeypatch.setattr(copying, "_HERE", str(package))

    folder = copying.copy_package(str(tmp_path / "run"))
    copied = Path(folder) / copying.PACKAGE
    assert sorted(p.name for p in (copied / "__pycache__").iterdir()) == [
        f"__init__.{TAG}.pyc",
        f"mod.{TAG}.pyc",
    ]
    assert not (copied / "stray.pyc").exists()
    # The sources keep their times, so the byte-code's header still matches them.
    assert (copied / "mod.py").stat().st_mtime_ns == (package / "mod.py").stat().st_mtime_ns

    done = _run_copy(folder)
    assert done.stdout.strip() == "compiled"
    shipped = copied / "__pycache__" / f"mod.{TAG}.pyc"
    assert f"code object from '{shipped}'" in done.stderr, done.stderr[-3000:]


def test_byte_code_that_does_not_match_its_source_is_never_what_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The source edited after it was compiled (an editable install, a patched file): the .pyc's header
    # names the old source's time and size, and the target compiles the source instead.
    package = _package(tmp_path / "inside", "VALUE = 'old'\n")
    source = package / "mod.py"
    stamp = source.stat().st_mtime_ns
    source.write_text("VALUE = 'the edited source'\n", encoding="utf-8")
    os.utime(source, ns=(stamp + 2_000_000_000, stamp + 2_000_000_000))
    monkeypatch.setattr(copying, "_HERE", str(package))

    folder = copying.copy_package(str(tmp_path / "run"))
    done = _run_copy(folder)
    assert done.stdout.strip() == "the edited source"
    copied = Path(folder) / copying.PACKAGE
    assert f"code object from {copied / 'mod.py'}" in done.stderr, done.stderr[-3000:]
