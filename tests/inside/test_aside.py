"""Checks run aside (``envcheck.inside.aside``): the suite's main process forks a child after its
``import torch`` that runs the checks spending their time in torch's lazy imports (TorchScript,
``torch.export``) while the parent runs the rest. A crash, an exit or a hang in the child is still the one
check's result, the others still run, and where a fork is not safe every check runs in the parent.

A real venv cloned from the test environment (its torch) with a fault injector: a ``.pth`` file whose
module wraps ``torch.jit.trace`` (used only by the ``jit_trace`` check) once ``torch.jit`` is imported, as
``ENVCHECK_TEST_ASIDE`` says: ``segv``, ``exit`` (3), ``hang``, or only ``log`` the process it ran in;
``thread`` also starts a Python thread at start-up, where the suite must not fork.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv

from envcheck.cli import app
from envcheck.manifest.verify import VerifySection
from envcheck.verify.runner import run_suite

pytestmark = [pytest.mark.slow, needs_torch, pytest.mark.skipif(sys.platform != "linux", reason="Linux only")]

INJECTOR = r"""
import importlib.abc
import importlib.machinery
import os
import signal
import sys
import threading
import time

MODE = os.environ.get("ENVCHECK_TEST_ASIDE", "")
LOG = os.environ.get("ENVCHECK_TEST_LOG", "")


def _log(line):
    if LOG:
        with open(LOG, "a") as f:
            f.write(line + "\n")


def _wrap(module):
    real = module.trace

    def trace(*args, **kwargs):
        _log("trace %d %d" % (os.getpid(), os.getppid()))
        if MODE == "segv":
            os.kill(os.getpid(), signal.SIGSEGV)
        elif MODE == "exit":
            os._exit(3)
        elif MODE == "hang":
            while True:
                time.sleep(1)
        return real(*args, **kwargs)

    module.trace = trace


class _Finder(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name != "torch.jit":
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        if spec is None:
            return None
        execute = spec.loader.exec_module

        def exec_module(module):
            execute(module)
            _wrap(module)

        spec.loader.exec_module = exec_module
        return spec


if MODE and "envcheck_target" in " ".join(sys.argv):
    _log("start %d" % os.getpid())
    sys.meta_path.insert(0, _Finder())
    if MODE == "thread":
        threading.Thread(target=time.sleep, args=(3600,), daemon=True).start()
"""
ASIDE = ("jit_script", "torch_export", "onnx_export")
# Checks the parent runs after ``jit_trace`` in the suite's order, whatever the child does.
PARENT = ("quant_dynamic", "matmul_fp32", "conv2d", "optim_adamw")


@pytest.fixture(scope="module")
def python(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    python = make_venv(tmp_path_factory.mktemp("aside") / "venv")
    site = clone_site_packages(python)
    (site / "_envcheck_test_aside.py").write_text(INJECTOR, encoding="utf-8")
    (site / "envcheck_test_aside.pth").write_text("import _envcheck_test_aside\n", encoding="utf-8")
    yield python


def _run(python: Path, tmp_path: Path, mode: str, timeout: float = 120.0) -> tuple[VerifySection, list[str]]:
    log = tmp_path / "log"
    env = {**os.environ, "ENVCHECK_TEST_ASIDE": mode, "ENVCHECK_TEST_LOG": str(log)}
    section = run_suite(str(python), timeout=timeout, env=env)
    lines = log.read_text(encoding="utf-8").splitlines() if log.exists() else []
    return section, lines


def _by_name(section: VerifySection) -> dict[str, object]:
    return {r.name: r for r in section.results}


def test_the_checks_aside_run_in_a_child_of_the_suites_process(python: Path, tmp_path: Path) -> None:
    section, lines = _run(python, tmp_path, "log")
    results = _by_name(section)
    assert {r.status for r in section.results} <= {"passed", "skipped"}, section.results
    assert results["jit_trace"].status == "passed"  # type: ignore[attr-defined]
    assert results["speed_matmul"].status == "passed"  # type: ignore[attr-defined]
    # The suite's processes (one a group: main, custom), and the process that traced.
    started = {line.split()[1] for line in lines if line.startswith("start ")}
    trace = [line.split()[1:] for line in lines if line.startswith("trace ")]
    assert len(trace) == 1, lines
    pid, parent = trace[0]
    assert pid not in started and parent in started, lines  # a child of the main group's process


def test_with_a_python_thread_there_is_no_fork_and_every_check_runs_in_order(
    python: Path, tmp_path: Path
) -> None:
    section, lines = _run(python, tmp_path, "thread")
    assert {r.status for r in section.results} <= {"passed", "skipped"}, section.results
    started = {line.split()[1] for line in lines if line.startswith("start ")}
    trace = [line.split()[1] for line in lines if line.startswith("trace ")]
    assert len(trace) == 1 and trace[0] in started, lines  # the main group's own process traced
    names = [r.name for r in section.results]
    assert names.index("jit_trace") < names.index("quant_dynamic") < names.index("speed_matmul")


@pytest.mark.parametrize(("mode", "signal", "exit_code"), [("segv", "SIGSEGV", None), ("exit", None, 3)])
def test_a_crash_aside_is_its_checks_and_the_rest_still_run(
    python: Path, tmp_path: Path, mode: str, signal: str | None, exit_code: int | None
) -> None:
    section, _ = _run(python, tmp_path, mode)
    results = _by_name(section)
    crashed = results["jit_trace"]
    assert crashed.status == "crashed", crashed  # type: ignore[attr-defined]
    assert (crashed.signal, crashed.exit_code) == (signal, exit_code)  # type: ignore[attr-defined]
    if mode == "segv":  # faulthandler's dump, from the child's own stderr
        assert "Fatal Python error" in (crashed.stderr_tail or "")  # type: ignore[attr-defined]
    for name in (*ASIDE, *PARENT, "speed_matmul"):
        assert results[name].status in ("passed", "skipped"), results[name]  # type: ignore[attr-defined]
    assert [r.name for r in section.results].count("jit_trace") == 1


def test_a_hang_aside_times_out_its_check_not_the_parents(python: Path, tmp_path: Path) -> None:
    section, _ = _run(python, tmp_path, "hang", timeout=40.0)
    results = _by_name(section)
    assert results["jit_trace"].status == "timeout", results["jit_trace"]  # type: ignore[attr-defined]
    for name in PARENT:  # they ran beside the hang, before the deadline
        assert results[name].status == "passed", results[name]  # type: ignore[attr-defined]
    for name in ("jit_script", "torch_export", "speed_matmul"):  # queued behind it: no silent gap
        assert results[name].status == "timeout", results[name]  # type: ignore[attr-defined]


def test_under_the_gate_the_child_is_forked_before_any_operator_ran(python: Path, tmp_path: Path) -> None:
    """The gate's suite process runs the runtime probe first, torch's operators included (OpenMP's threads
    start there): forked after them, the child would hang in its first parallel region."""
    log = tmp_path / "log"
    env = {"ENVCHECK_TEST_ASIDE": "log", "ENVCHECK_TEST_LOG": str(log)}
    ref = tmp_path / "ref.json"
    runner = CliRunner()
    made = runner.invoke(app, ["snapshot", "--python", str(python), "--no-verify", "-o", str(ref), "-q"])
    assert made.exit_code == 0, made.output
    gate = runner.invoke(app, ["gate", str(ref), "--python", str(python), "--timeout", "120", "-q"], env=env)
    assert gate.exit_code == 0, gate.output
    lines = log.read_text(encoding="utf-8").splitlines()
    started = {line.split()[1] for line in lines if line.startswith("start ")}
    trace = [line.split()[1:] for line in lines if line.startswith("trace ")]
    assert len(trace) == 1 and trace[0][0] not in started and trace[0][1] in started, lines
