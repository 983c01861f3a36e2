"""Shared fixtures: real interpreters and real venvs (see ``venvs.py``)."""

from __future__ import annotations

import atexit
import datetime
import functools
import inspect
import json
import os
import re
import resource
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from venvs import HAS_TORCH, clone_site_packages, make_venv, needs_torch

__all__ = ["HAS_TORCH", "needs_torch"]


# What makes a fixture slow: it builds a venv, installs, snapshots or starts processes (a real interpreter,
# Wine, torchrun). A test that pulls such a fixture, directly or through another, is slow whatever its
# own marks say: the fast tier never waits for one (docs: README, "the quick tier").
SLOW_FIXTURE = re.compile(
    r"make_venv|clone_site_packages|venv_factory|pip_install|subprocess|snapshot|wine_session|torchrun"
    r"|runpytest|envcheck_argv|\bgcc\b|cc_build|build_"
)
FAST_BUDGET_CPU_S = 60.0
# ``ENVCHECK_RECORD_RUN=FILE``: the run writes what it measured (tests, wall and CPU seconds, the Windows
# tier's share) into FILE under the run's tier ("full" or "fast"). ci/measured.json is the record of the
# last runs on a quiet 2-core machine; tests/test_doc_numbers.py holds the README's times to it.
RECORD_RUN = "ENVCHECK_RECORD_RUN"
# Taken out of the environment: the pytest runs that tests start (the plugin's, the collections of
# tests/test_doc_numbers.py) are not the run the record is of.
_RECORD = os.environ.pop(RECORD_RUN, None)
# pytest-xdist gives its workers the controller's terminal size as COLUMNS and LINES (80 x 24 where it has no
# terminal); envcheck lays its text report out in COLUMNS. The tests see what a run without xdist sees.
if os.environ.get("PYTEST_XDIST_WORKER"):
    for _name in ("COLUMNS", "LINES"):
        os.environ.pop(_name, None)
# envcheck's file-hash cache: the run's own, never the user's (pytest-xdist's workers inherit the
# controller's). The tests' venvs leave thousands of entries for native files at paths gone after the run,
# which a user's later runs would read until one wrote the cache again (16,000 after a day of tests here).
if "ENVCHECK_CACHE_DIR" not in os.environ:
    _HASH_CACHE = tempfile.mkdtemp(prefix="envcheck-test-hash-cache-")
    os.environ["ENVCHECK_CACHE_DIR"] = _HASH_CACHE
    atexit.register(shutil.rmtree, _HASH_CACHE, ignore_errors=True)
_STARTED = time.monotonic()
# pytest caches each test module's rewritten assertions, and Python each module's byte-code, unless
# PYTHONDONTWRITEBYTECODE is set (as on machines that keep images small): then every run compiles the
# suite and envcheck again, a third of the fast tier's CPU. This process caches them (in the __pycache__
# folders git ignores); the processes tests start keep the variable, so no test environment is written to.
sys.dont_write_bytecode = False


@functools.cache
def _slow_fixture(func: Callable[..., object], depth: int = 0) -> bool:
    """Whether ``func``'s body does slow work (``SLOW_FIXTURE``), itself or through a function of its own
    module that it calls (``_build(...)`` making a venv), followed three calls deep."""
    try:
        source = inspect.getsource(func)
    except (OSError, TypeError):
        return False
    body = source.split(":", 1)[-1]
    if SLOW_FIXTURE.search(body):
        return True
    if depth >= 3:
        return False
    scope = getattr(func, "__globals__", {})
    for name in sorted(set(_CALLED.findall(body))):
        helper = scope.get(name)
        if inspect.isfunction(helper) and helper is not func and _slow_fixture(helper, depth + 1):
            return True
    return False


_CALLED = re.compile(r"\b([A-Za-z_]\w*)\(")


def _pulls_a_slow_fixture(item: pytest.Item) -> str | None:
    info = getattr(item, "_fixtureinfo", None)
    if info is None:
        return None
    for name in item.fixturenames:  # type: ignore[attr-defined]
        for fixturedef in info.name2fixturedefs.get(name, ()):
            if fixturedef.baseid and _slow_fixture(fixturedef.func):
                return name
    return None


# The most workers ``-n auto`` starts (pytest-xdist; pyproject's addopts): each builds its own session
# fixtures (real venvs), so more workers than this cost more than they save.
MAX_WORKERS = 4
# Folders whose tests share session fixtures that take minutes to build (Wine and its filled site folders,
# the real container images): all their tests run on one worker, and first, being the longest.
ONE_WORKER_FOLDERS = ("windows", "image")


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """``-n auto``: one worker a core, at most ``MAX_WORKERS``; none for the fast tier, whose budget is in
    CPU seconds (every worker collects the whole suite again)."""
    if (config.getoption("markexpr") or "").strip() == "fast":
        return 0
    return max(1, min(MAX_WORKERS, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else 1))


def _scope(nodeid: str) -> str:
    """The unit of work a worker takes whole: a test file, or a folder of ``ONE_WORKER_FOLDERS``."""
    path = nodeid.split("::", 1)[0]
    parts = path.split("/")
    if len(parts) > 2 and parts[0] == "tests" and parts[1] in ONE_WORKER_FOLDERS:
        return "/".join(parts[:2])
    return path


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """pytest-xdist's scheduling by scope, the scope ``_scope``: a module's fixtures (a real venv) and a
    tier's are built once, on the one worker that runs them all. (``--dist loadgroup`` would do it with
    marks, but reads a node id that pytest 9 no longer lets it change.)"""
    from xdist.scheduler import LoadScopeScheduling

    class ByFile(LoadScopeScheduling):  # type: ignore[misc]
        def _split_scope(self, nodeid: str) -> str:
            return _scope(nodeid)

    config.option.loadscopereorder = False  # collection order: the long tiers first
    return ByFile(config, log)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``fast`` is every test that is not ``slow`` and pulls no slow fixture (``SLOW_FIXTURE``, through
    any fixture it depends on): ``pytest -m fast`` runs the quick tier, which covers every module of
    envcheck within ``FAST_BUDGET_CPU_S`` CPU seconds, printed at the end of its run. The folders of
    ``ONE_WORKER_FOLDERS`` run first (in that order), so that under pytest-xdist the longest units start
    first; each file's tests keep their order."""
    for item in items:
        if item.get_closest_marker("slow") is None and _pulls_a_slow_fixture(item) is not None:
            item.add_marker(pytest.mark.slow)
        if item.get_closest_marker("slow") is None:
            item.add_marker(pytest.mark.fast)
    first = {f"tests/{name}": i for i, name in enumerate(ONE_WORKER_FOLDERS)}
    items.sort(key=lambda item: first.get(_scope(item.nodeid), len(first)))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    """The CPU seconds of the run (this process and its children), against the fast tier's budget when
    the run is the fast tier: wall time depends on how busy the machine is, CPU time much less."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime
    ran = terminalreporter.stats.get("passed", []) + terminalreporter.stats.get("failed", [])
    if (config.getoption("markexpr") or "").strip() == "fast":
        verdict = "within" if cpu <= FAST_BUDGET_CPU_S else "OVER"
        terminalreporter.write_line(
            f"fast tier: {len(ran)} tests in {cpu:.1f} CPU s, {verdict} its budget of "
            f"{FAST_BUDGET_CPU_S:g} CPU s"
        )
    else:
        terminalreporter.write_line(f"{len(ran)} tests in {cpu:.1f} CPU s (this process and its children)")
    if _RECORD and not config.getoption("collectonly"):
        _record_run(Path(_RECORD), terminalreporter, config, cpu)


def _record_run(path: Path, terminalreporter: Any, config: pytest.Config, cpu: float) -> None:
    """Merge this run's measures into the record at ``path`` (see ``RECORD_RUN``)."""
    markexpr = (config.getoption("markexpr") or "").strip()
    if markexpr not in ("", "fast") or config.getoption("keyword") or config.args != ["tests"]:
        return  # a partial run measures nothing the README states
    stats = terminalreporter.stats
    reports = [r for key in ("passed", "failed") for r in stats.get(key, []) if r.when == "call"]
    windows = [r for r in reports if r.nodeid.startswith("tests/windows/")]
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        record = {}
    record["fast" if markexpr else "full"] = {
        "date": datetime.date.today().isoformat(),
        "cores": os.cpu_count(),
        "passed": len(stats.get("passed", [])),
        "failed": len(stats.get("failed", [])),
        "skipped": len(stats.get("skipped", [])),
        "wall_s": round(time.monotonic() - _STARTED, 1),
        "cpu_s": round(cpu, 1),
        "windows_tests": len(windows),
        # The Windows tier's tests, set-up included (its Wine prefix and site folders are made there).
        "windows_wall_s": round(sum(_spent(r2) for r in windows for r2 in _phases(stats, r.nodeid)), 1),
    }
    path.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _phases(stats: dict[str, list[Any]], nodeid: str) -> list[Any]:
    return [r for reports in stats.values() for r in reports if getattr(r, "nodeid", None) == nodeid]


def _spent(report: Any) -> float:
    return float(getattr(report, "duration", 0.0) or 0.0)


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
