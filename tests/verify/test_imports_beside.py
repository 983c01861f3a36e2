"""The imports together run beside the smoke suite, in a child forked from its process after its
``import torch`` (``envcheck.inside.together``): one ``import torch`` for the suite and the imports. What
that child does is the imports' own: a crash, a hang, a crash at exit or output without end there never
touches the suite's results, and each is still the one module's finding (the others are then imported
alone, and together again in a process of their own).

Real packages with real C extension modules in a real venv cloned from the test environment (its torch);
each ``__init__`` logs whether torch was already imported in its process, which tells the child of the
suite (torch imported before anything else) from a process of the imports' own (torch after them).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from conftest import needs_torch
from test_import_cap import IMPORT_LOG, install_extension, needs_cc, package_venv, uninstall_extension
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.core.deadline import Deadline
from envcheck.verify.imports import Beside

pytestmark = [pytest.mark.slow, needs_cc, needs_torch]

PLAIN = IMPORT_LOG + "from . import _native\n"
BROKEN = {
    "crash": IMPORT_LOG + "import signal\nos.kill(os.getpid(), signal.SIGSEGV)\n",
    "hang": IMPORT_LOG + "import time\nwhile True:\n    time.sleep(1)\n",
    "exitcrash": IMPORT_LOG
    + "import atexit, signal\natexit.register(lambda: os.kill(os.getpid(), signal.SIGABRT))\n",
    "chatter": IMPORT_LOG + "import time\nwhile True:\n    sys.stderr.write('x' * 65536)\n",
}
FINDING = {
    "crash": ("VERIFY-CRASH", "import crash"),
    "hang": ("VERIFY-TIMEOUT", "import hang"),
    "exitcrash": ("VERIFY-CRASH", "import exitcrash at exit"),
    "chatter": ("VERIFY-TIMEOUT", "import chatter"),
}


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, Path, Path]]:
    yield package_venv(tmp_path_factory.mktemp("beside"), {"aplain": PLAIN, "zplain": PLAIN})


def _verify(python: Path, log: Path, timeout: int = 60) -> tuple[int, dict[str, Any], str]:
    log.mkdir()
    argv = ["verify", "--python", str(python), "--timeout", str(timeout), "-f", "json", "--quiet"]
    result = CliRunner().invoke(app, argv, env={"ENVCHECK_TEST_LOG": str(log)})
    stdout = result.stdout
    return result.exit_code, json.loads(stdout[stdout.index("{") :]), result.stderr


def _log(log: Path, module: str) -> list[tuple[int, bool]]:
    path = log / module
    rows = path.read_text().split("\n") if path.exists() else []
    return [(int(pid), torch == "True") for pid, torch in (row.split() for row in rows if row)]


def _only_in_the_child(log: Path, module: str) -> bool:
    """``module`` was imported once, in the process that imported the plain ones (the suite's child, torch
    already there), and never again alone."""
    return _log(log, module) == [(_log(log, "aplain")[0][0], True)]


def test_a_healthy_venv_imports_them_beside_the_suite_with_its_torch(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, _, _ = venv
    code, report, stderr = _verify(python, tmp_path / "log")
    assert code == 0, stderr
    # One process imported each plain module, and torch was already there: the suite's child.
    ((pid_a, torch_a),) = _log(tmp_path / "log", "aplain")
    ((pid_z, torch_z),) = _log(tmp_path / "log", "zplain")
    assert pid_a == pid_z and torch_a and torch_z
    assert "2 of them only among the others" in stderr or "only among the others" in stderr
    assert not [f for f in report["findings"] if f["severity"] == "error"]


@pytest.mark.parametrize("name", sorted(BROKEN))
def test_what_the_child_does_is_the_modules_own_and_never_the_suites(
    venv: tuple[Path, Path], tmp_path: Path, name: str
) -> None:
    python, site, built = venv
    install_extension(site, name, built, init=BROKEN[name])
    timeout = 24
    started = time.monotonic()
    try:
        code, report, stderr = _verify(python, tmp_path / "log", timeout=timeout)
    finally:
        uninstall_extension(site, name)
    took = time.monotonic() - started
    errors = [(f["rule"], f["subject"]) for f in report["findings"] if f["severity"] == "error"]
    assert code == 1 and errors == [FINDING[name]], (errors, stderr[-2000:])
    # The suite's checks all ended as on a healthy machine: none is a crash, a hang or a missing one.
    assert not [f for f in report["findings"] if f["subject"].startswith(("main/", "import_torch"))]
    # First beside the suite (torch already imported), then alone: the plain ones passed alone too.
    runs = _log(tmp_path / "log", "aplain")
    assert runs[0][1] and len(runs) >= 2, runs
    assert took < timeout + 5, took


def test_the_child_imports_with_the_collector_on(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """The suite's process has the cyclic collector off; the child it forks imports the application's
    modules with it on, as the application does (a module that needs it imports beside the suite)."""
    python, site, built = venv
    needs = IMPORT_LOG + "import gc\nif not gc.isenabled():\n    raise ImportError('collector off')\n"
    install_extension(site, "collector", built, init=needs)
    try:
        code, report, stderr = _verify(python, tmp_path / "log")
    finally:
        uninstall_extension(site, "collector")
    assert code == 0, (report["findings"], stderr[-2000:])
    assert not [f for f in report["findings"] if "collector" in f["subject"]]
    assert _only_in_the_child(tmp_path / "log", "collector"), _log(tmp_path / "log", "collector")


def test_the_child_runs_torchs_parallel_operators(venv: tuple[Path, Path, Path], tmp_path: Path) -> None:
    """In the gate the child is forked inside the runtime probe, right after its ``import torch`` and before
    the probe's small operator: forked after one, it would hang in its first parallel region (OpenMP's
    threads are not there after a fork), and a module whose import computes with torch would be a timeout
    beside the suite only."""
    python, site, built = venv
    computes = IMPORT_LOG + (
        "import torch\nx, y = torch.ones(1 << 22), torch.ones(512, 512)\n"
        "assert float(x.sum()) == float(1 << 22) and float((y @ y)[0, 0]) == 512.0\n"
    )
    install_extension(site, "computes", built, init=computes)
    log = tmp_path / "log"
    log.mkdir()
    try:
        ref = tmp_path / "ref.json"
        snapshot = ["snapshot", "--python", str(python), "--no-verify", "-o", str(ref), "--quiet"]
        assert CliRunner().invoke(app, snapshot).exit_code == 0
        argv = ["gate", str(ref), "--python", str(python), "--timeout", "40", "-f", "json", "--quiet"]
        result = CliRunner().invoke(app, argv, env={"ENVCHECK_TEST_LOG": str(log)})
    finally:
        uninstall_extension(site, "computes")
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert not [f for f in report["findings"] if "computes" in f["subject"]], report["findings"]
    assert _only_in_the_child(log, "computes"), _log(log, "computes")


def test_a_suite_that_did_not_fork_sends_the_imports_to_a_process_of_their_own(tmp_path: Path) -> None:
    """``forked: false`` (not Linux, CUDA, a Python thread): the imports do not wait for the suite's end."""
    beside = Beside(tmp_path)
    beside.request(["aplain"], Deadline.after(10), 5.0, str(tmp_path))
    (tmp_path / "together.end").write_text(json.dumps({"forked": False, "why": "not Linux"}))
    started = time.monotonic()
    assert beside.wait() is None
    assert time.monotonic() - started < 1.0
    # A FIFO or a link where its files should be is never waited on nor followed.
    (tmp_path / "together.end").unlink()
    os.mkfifo(tmp_path / "together.end")
    (tmp_path / "together.stderr").symlink_to("/dev/zero")
    beside.ended()
    assert beside.wait() is None
