"""Real venvs for ``envcheck lock``: built with ``python -m venv`` and pip from pip's configured sources,
snapshotted by the real ``envcheck snapshot``, locked by the real pip-compile.

``small_env``: two small pure-Python distributions (fast: the hostile cases lock it again and again).
``torch_env``: the test environment's torch at its installed full version (whatever build that is: read
from the metadata, never assumed) and the same two small distributions; the round trip rebuilds it.
Installs skip byte-compiling (``--no-compile``): torch's thousands of modules would double the time.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from venvs import HAS_TORCH, installed_torch, venv_with_pip

SMALL = ("six", "tabulate")
TIMEOUT = 600


@dataclass(frozen=True)
class Env:
    python: Path
    manifest: Path
    lock: Path  # `envcheck lock manifest -o lock`, as written


def envcheck(*args: str | Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real CLI in a subprocess (as a user runs it: exit code, stdout, stderr)."""
    return subprocess.run(
        [sys.executable, "-m", "envcheck", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        env={**os.environ, **(env or {})},
        check=False,
    )


def pip(python: Path, *args: str) -> None:
    done = subprocess.run(
        [str(python), "-m", "pip", *args],
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
        check=False,
        env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]


def installed(python: Path) -> dict[str, str]:
    """``{canonical name: version}`` of every distribution in ``python``'s environment, as it reports."""
    code = (
        "import importlib.metadata as m, json, re\n"
        "print(json.dumps({re.sub(r'[-_.]+', '-', d.metadata['Name']).lower(): d.version "
        "for d in m.distributions()}))"
    )
    # -I: not the current folder on sys.path (the repository's envcheck.egg-info would count).
    out = subprocess.run(
        [str(python), "-I", "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    found: dict[str, str] = json.loads(out.stdout)
    return found


def snapshot(python: Path, out: Path) -> Path:
    done = envcheck("snapshot", "--python", python, "--no-verify", "-q", "-o", out)
    assert done.returncode == 0, done.stderr
    return out


def _build(root: Path, *requirements: str) -> Env:
    python = venv_with_pip(root / "venv")
    pip(python, "install", "--no-compile", *requirements)
    manifest = snapshot(python, root / "manifest.json")
    lock = root / "requirements.txt"
    done = envcheck("lock", manifest, "-o", lock)
    assert done.returncode == 0, done.stderr
    return Env(python=python, manifest=manifest, lock=lock)


@pytest.fixture(scope="package")
def small_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    return _build(tmp_path_factory.mktemp("small"), *SMALL)


@pytest.fixture(scope="package")
def torch_env(tmp_path_factory: pytest.TempPathFactory) -> Env:
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    version, _ = installed_torch()
    return _build(tmp_path_factory.mktemp("torch"), f"torch=={version}", *SMALL)
