"""On a healthy machine each module with native code is imported once: alone first only where a fresh
process can tell something the others' process cannot, and alone after all when that process fails.

The invariant the alone step holds: an import that passes among the others passes alone too. It can be
masked only by what an earlier import left in the process; the import that does it in the wild is
``import torch`` (an extension that loads its library, linked to libc10, before torch is imported fails
alone and passes after it). So the application's modules and those that link or require torch go alone
first; the rest go straight in with them, and only a process that is not clean (an import raised, crashed
or hung, or its exit did) has each of them imported alone too, so that every failure is still its own.

Real packages, each with a real C extension module (compiled here), installed with a RECORD into a real
venv cloned from the test environment; each ``__init__`` writes its process id to a log, so the tests
count the processes that imported it.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import needs_torch
from test_import_cap import IMPORT_LOG, install_extension, needs_cc, package_venv, uninstall_extension

from envcheck.verify.imports import AppImports, import_findings, run_imports, tally

pytestmark = [pytest.mark.slow, needs_cc, needs_torch]

# Each package's __init__ logs the process that imports it, then does its own thing, then loads its
# extension module.
PLAIN = IMPORT_LOG + "from . import _native\n"
# Loads a library linked to libc10 before torch is imported: fails alone, passes after `import torch`.
BEFORE_TORCH = (
    IMPORT_LOG + "if 'torch' not in sys.modules:\n"
    "    raise ImportError('libc10.so: cannot open shared object file: No such file or directory')\n"
    "from . import _native\n"
)
# The same package done right: it imports torch itself first.
AFTER_TORCH = IMPORT_LOG + "import torch\nfrom . import _native\n"
HANGS = IMPORT_LOG + "import time\nwhile True:\n    time.sleep(1)\n"
RAISES = (
    IMPORT_LOG
    + "raise ImportError('libfoo.so.1: cannot open shared object file: No such file or directory')\n"
)


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    """A venv with the test environment's torch and NumPy, and packages with native code: two plain ones,
    and one that requires torch and imports it first (a healthy torch extension); the broken ones are
    installed only where a test asks for it. The interpreter, its site folder, the built extension."""
    python, site, built = package_venv(tmp_path_factory.mktemp("once"), {"aplain": PLAIN, "bplain": PLAIN})
    install_extension(site, "visionok", built, init=AFTER_TORCH, requires=("torch",))
    yield python, site, built


def _imports(python: Path, log: Path, timeout: float = 60.0) -> AppImports:
    log.mkdir()
    env = {**os.environ, "ENVCHECK_TEST_LOG": str(log)}
    suite = {"torch": "the smoke suite's import_torch check"}
    return run_imports(str(python), timeout=timeout, env=env, alone_elsewhere=suite)


def _processes(log: Path, module: str) -> int:
    path = log / module
    return len({line.split()[0] for line in path.read_text().splitlines() if line}) if path.exists() else 0


def _results(run: AppImports) -> dict[str, tuple[str, bool]]:
    return {r.module: (r.status, r.among_others) for r in run.results}


def test_a_healthy_venv_imports_each_plain_module_once(venv: tuple[Path, Path], tmp_path: Path) -> None:
    python, _, _ = venv
    run = _imports(python, tmp_path / "log")
    results = _results(run)
    # The plain ones: one process, the one that imports them all.
    assert results["aplain"] == results["bplain"] == ("passed", True)
    assert _processes(tmp_path / "log", "aplain") == _processes(tmp_path / "log", "bplain") == 1
    # The one that requires torch: alone first, then among the others.
    assert results["visionok"] == ("passed", False)
    assert _processes(tmp_path / "log", "visionok") == 2
    assert run.together is not None and run.together.status == "ok"
    assert {"aplain", "bplain", "visionok", "torch"} <= set(run.together.modules)
    assert import_findings(run) == []
    assert "only among the others" in tally(run)


def test_an_extension_loaded_before_torch_still_fails_alone(venv: tuple[Path, Path], tmp_path: Path) -> None:
    """The masked import: among the others, after torch, it passes; the fresh process tells."""
    python, site, built = venv
    install_extension(site, "visionbad", built, init=BEFORE_TORCH, requires=("torch>=2",))
    try:
        run = _imports(python, tmp_path / "log")
    finally:
        uninstall_extension(site, "visionbad")
    results = _results(run)
    assert results["visionbad"] == ("error", False)
    (finding,) = [f for f in import_findings(run) if f.subject == "import visionbad"]
    assert finding.rule == "VERIFY-IMPORT" and "libc10.so" in finding.message
    # The others stay as cheap as on a healthy machine.
    assert results["aplain"] == ("passed", True)


@pytest.mark.parametrize(
    ("name", "init", "status", "rule"),
    [
        ("chang", HANGS, "timeout", "VERIFY-TIMEOUT"),
        ("craises", RAISES, "error", "VERIFY-IMPORT"),
    ],
)
def test_a_plain_module_that_fails_among_the_others_is_its_own_failure(
    venv: tuple[Path, Path], tmp_path: Path, name: str, init: str, status: str, rule: str
) -> None:
    """Not clean among the others: every plain module is imported alone too, the failure is the one
    module's, the others pass alone, and a hang costs the first try no more than one import alone."""
    python, site, built = venv
    install_extension(site, name, built, init=init)
    timeout = 24.0
    started = time.monotonic()
    try:
        run = _imports(python, tmp_path / "log", timeout=timeout)
    finally:
        uninstall_extension(site, name)
    took = time.monotonic() - started
    results = _results(run)
    assert results[name] == (status, False)
    assert results["aplain"] == results["bplain"] == ("passed", False)
    # Alone once, and in the first try among the others.
    assert _processes(tmp_path / "log", "aplain") == 3  # the first try, alone, then the passed together
    findings = [f for f in import_findings(run) if f.severity == "error"]
    assert [(f.rule, f.subject) for f in findings] == [(rule, f"import {name}")]
    assert took < timeout + 5, took
    assert run.together is not None and name not in run.together.modules
