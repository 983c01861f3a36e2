"""Fixtures for ``envcheck predict``: the real example manifests, and whether the registry answers.

The network tests resolve with pip against the indexes it is configured with and download real wheels
into the user's cache (``${XDG_CACHE_HOME:-~/.cache}/envcheck/wheels``), so a second run is warm. Without
a reachable registry they skip, saying why.
"""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
CPU = ROOT / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
CUDA = ROOT / "manifests" / "examples" / "torch-2.14.1-cu130-linux-nogpu.json"


@functools.cache
def _registry_problem() -> str | None:
    """Why the registry cannot serve the tests (None when it can): pip must find a Windows torch wheel."""
    argv = [sys.executable, "-m", "pip", "index", "versions", "torch", "--only-binary", ":all:"]
    argv += ["--platform", "win_amd64", "--python-version", "3.11", "--retries", "0", "--timeout", "20"]
    try:
        out = subprocess.run(argv, capture_output=True, text=True, timeout=90, check=False)
    except subprocess.TimeoutExpired:
        return "pip index versions torch did not answer within 90 s"
    if "2.13.0" not in out.stdout:
        return f"the registry serves no Windows torch 2.13.0 wheel here: {out.stderr.strip()[-200:]}"
    return None


@pytest.fixture(scope="session")
def registry() -> None:
    """Skip the test when the registry cannot be reached (CI without network)."""
    problem = _registry_problem()
    if problem is not None:
        pytest.skip(f"registry not reachable: {problem}")
