"""Shared fixtures: real interpreters and real venvs (see ``venvs.py``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from venvs import HAS_TORCH, clone_site_packages, make_venv, needs_torch

__all__ = ["HAS_TORCH", "needs_torch"]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``fast`` is every test that is not ``slow``: ``pytest -m fast`` runs the quick tier, which covers
    every module of envcheck in well under a minute."""
    for item in items:
        if item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)


@pytest.fixture(scope="session")
def torch_python() -> str:
    """The test interpreter, which has torch 2.13.0 (CPU) installed."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    return sys.executable


@pytest.fixture(scope="session")
def venv_factory(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Callable[[str], Path]]:
    def make(name: str) -> Path:
        return make_venv(tmp_path_factory.mktemp(name) / "venv")

    yield make


@pytest.fixture(scope="session")
def broken_torch_python(venv_factory: Callable[[str], Path]) -> Path:
    """A copy of the test venv whose ``torch/lib/libc10.so`` is gone: ``import torch`` raises."""
    if not HAS_TORCH:
        pytest.skip("torch is not installed in the test environment")
    python = venv_factory("broken-torch")
    clone_site_packages(python, skip=lambda p: p.name.startswith("libc10.") and p.parent.name == "lib")
    return python
