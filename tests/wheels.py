"""Real wheels from the registry for the tests, cached: ``$ENVCHECK_TEST_WHEELS`` or
``${XDG_CACHE_HOME:-~/.cache}/envcheck/test-wheels``, where a first run downloads them with pip (``pip
download --no-deps``); without a registry the tests that need them skip, saying why."""

from __future__ import annotations

import functools
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest


def _cache() -> Path:
    given = os.environ.get("ENVCHECK_TEST_WHEELS")
    if given:
        return Path(given)
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "envcheck" / "test-wheels"


@functools.cache
def _wheel(requirement: str) -> Path | str:
    """The wheel of ``requirement`` for this interpreter from the cache, downloaded there first when
    missing; a string saying why when it cannot be had."""
    name, version = requirement.split("==")
    stem = f"{name.replace('-', '_')}-{version}-"
    folder = _cache()
    found = sorted(folder.glob(f"{stem}*.whl")) if folder.is_dir() else []
    if found:
        return found[0]
    folder.mkdir(parents=True, exist_ok=True)
    # Into a folder of this process's own, then renamed into place: another test process (a pytest-xdist
    # worker) never sees half a wheel.
    with tempfile.TemporaryDirectory(prefix=".download-", dir=folder) as tmp:
        argv = [
            sys.executable,
            "-m",
            "pip",
            "download",
            "-q",
            "--no-deps",
            "--only-binary=:all:",
            requirement,
        ]
        argv += ["-d", tmp, "--retries", "0", "--timeout", "30"]
        try:
            out = subprocess.run(argv, capture_output=True, text=True, timeout=600, check=False)
        except subprocess.TimeoutExpired:
            return f"pip download {requirement} did not finish within 600 s"
        for downloaded in Path(tmp).glob("*.whl"):
            downloaded.replace(folder / downloaded.name)
    found = sorted(folder.glob(f"{stem}*.whl"))
    if out.returncode != 0 or not found:
        return f"pip download {requirement} failed: {out.stderr.strip()[-200:]}"
    return found[0]


def wheel(requirement: str) -> Path:
    got = _wheel(requirement)
    if isinstance(got, str):
        pytest.skip(f"registry not reachable: {got}")
    return got


def pip_install(python: Path, *wheels: Path) -> None:
    """A real pip install of local wheels into the venv of ``python`` (which has no pip of its own)."""
    argv = [sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", "--no-index"]
    subprocess.run([*argv, *map(str, wheels)], check=True, capture_output=True)
