"""Real venvs for the tests, built cheaply from the test environment's own torch.

The test environment is the one `.ci/run` builds from `pip install -e .[test]`, so it has torch 2.13.0 (CPU).
Copies of it are made with hard links (same filesystem) so a "venv with a broken torch" costs milliseconds
and never touches the original files.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import sysconfig
from collections.abc import Callable
from pathlib import Path

import pytest

HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment")


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst)
    except OSError:
        shutil.copy2(src, dst)


def site_packages() -> Path:
    return Path(sysconfig.get_paths()["purelib"])


def make_venv(root: Path) -> Path:
    """A real, empty venv (no pip) at ``root``; returns its interpreter."""
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(root)], check=True)
    return root / ("Scripts/python.exe" if os.name == "nt" else "bin/python")


def venv_site(python: Path) -> Path:
    out = subprocess.run(
        [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
        check=True,
        capture_output=True,
        text=True,
    )
    return Path(out.stdout.strip())


def clone_site_packages(python: Path, *, skip: Callable[[Path], bool] = lambda p: False) -> Path:
    """Hard-link the test environment's site-packages into the venv of ``python`` (minus ``skip``)."""
    src = site_packages()
    dst = venv_site(python)
    for entry in src.iterdir():
        if entry.name.startswith(("envcheck", "__editable__", "_envcheck")) or entry.name == "__pycache__":
            continue  # the venv under test must not contain envcheck itself
        target = dst / entry.name
        if entry.is_dir():
            shutil.copytree(
                entry,
                target,
                copy_function=_link_or_copy,
                ignore=lambda d, names: [n for n in names if skip(Path(d) / n)],
                symlinks=True,
            )
        elif not skip(entry):
            _link_or_copy(str(entry), str(target))
    return dst


def fault_torch(venv_factory: Callable[[str], Path], name: str, body: str) -> Path:
    """A venv whose ``torch`` package runs ``body`` at import: injects a crash or a hang on purpose."""
    python = venv_factory(name)
    package = venv_site(python) / "torch"
    package.mkdir()
    (package / "__init__.py").write_text(body, encoding="utf-8")
    (package / "version.py").write_text("__version__ = '9.9.9+fault'\ncuda = None\n", encoding="utf-8")
    return python
