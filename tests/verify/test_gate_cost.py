"""The gate's runtime probe runs first in the smoke suite's ``main`` process (one ``import torch`` for
both, docs/architecture.md): counted with a fake torch that logs each process that imports it, and the
endings of the shared process, each given to the one it belongs to: a probe that dies outside the import
leaves the suite a fresh process; a hang at the import is killed at the deadline with every child."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded
from venvs import HOSTILE_TORCH, clone_site_packages, fault_torch, needs_torch, process_alive

from envcheck.core.errors import ProbeError, UsageError
from envcheck.diff.policy import Policy
from envcheck.manifest.model import ProbeOutcome
from envcheck.process.runner import TargetRun
from envcheck.verify.runner import RuntimeProbe, _probe_run

EXAMPLE = Path(__file__).resolve().parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"

# A fake torch that records the pid of every process that imports it, then does what the hostile torch
# does for ENVCHECK_TEST_FAULT (nothing when unset).
COUNTING_TORCH = (
    "import os\n"
    "_log = os.environ.get('ENVCHECK_TEST_LOG', '')\n"
    "if _log:\n"
    "    with open(os.path.join(_log, 'imported'), 'a') as f:\n"
    "        f.write('%d\\n' % os.getpid())\n"
    "__version__ = '9.9.9+fault'\n" + HOSTILE_TORCH
)


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture(scope="module")
def counting_python(venv_factory: Callable[[str], Path]) -> Path:
    return fault_torch(venv_factory, "counting-torch", COUNTING_TORCH)


@pytest.mark.slow
@pytest.mark.parametrize(("args", "processes"), [(["--no-imports"], 1), (["--import", "torch"], 2)])
def test_the_gate_imports_torch_once_for_the_probe_and_the_suite(
    counting_python: Path, tmp_path: Path, args: list[str], processes: int
) -> None:
    (tmp_path / "log").mkdir()
    env = {**os.environ, "ENVCHECK_TEST_LOG": str(tmp_path / "log"), "TMPDIR": str(tmp_path)}
    argv = envcheck_argv("gate", str(EXAMPLE), "--python", str(counting_python), "--quiet", *args)
    result = subprocess.run(argv, env=env, capture_output=True, text=True, check=False)
    assert result.returncode == 1, result.stderr  # a fake torch fails the gate; it is counted here
    # The probe and the suite's main group share one process; the application's imports all together
    # are the second (torch is not imported alone again: that is the suite's import_torch check).
    assert len(set(_pids(tmp_path / "log" / "imported"))) == processes


@pytest.mark.slow
def test_a_hang_at_the_shared_import_is_killed_at_the_deadline_with_its_children(
    counting_python: Path, tmp_path: Path
) -> None:
    (tmp_path / "log").mkdir()
    (tmp_path / "tmp").mkdir()
    env = {
        **os.environ,
        "ENVCHECK_TEST_FAULT": "hang",
        "ENVCHECK_TEST_LOG": str(tmp_path / "log"),
        "TMPDIR": str(tmp_path / "tmp"),
    }
    report = tmp_path / "report.json"
    argv = envcheck_argv(
        "gate", str(EXAMPLE), "--python", str(counting_python), "--timeout", "3", "--no-imports", "--quiet"
    )
    result = run_bounded([*argv, "--format", "json", "-o", str(report)], timeout=3.0, env=env)
    assert_bounded(result, timeout=3.0)
    assert result.returncode == 1, result.stderr
    # One process hung at the import (the probe and the suite's main group): it and its child are gone.
    pids = _pids(tmp_path / "log" / "pids")
    assert len(pids) == 2
    assert [pid for pid in pids if process_alive(pid)] == []
    assert list((tmp_path / "tmp").iterdir()) == []
    findings = json.loads(report.read_text(encoding="utf-8"))["findings"]
    timed_out = [f for f in findings if f["rule"] == "VERIFY-TIMEOUT"]
    assert [f["subject"] for f in timed_out] == ["import_torch"]


@pytest.mark.slow
def test_a_daemon_forked_at_the_shared_import_neither_holds_the_gate_nor_outlives_it(
    counting_python: Path, tmp_path: Path
) -> None:
    (tmp_path / "log").mkdir()
    env = {**os.environ, "ENVCHECK_TEST_FAULT": "daemon", "ENVCHECK_TEST_LOG": str(tmp_path / "log")}
    argv = envcheck_argv("gate", str(EXAMPLE), "--python", str(counting_python), "--no-imports", "--quiet")
    result = run_bounded([*argv, "--timeout", "20"], timeout=20.0, env=env)
    assert_bounded(result, timeout=20.0)
    assert result.returncode == 1, result.stderr  # the fake torch's failures, not a wait on the daemon
    daemons = _pids(tmp_path / "log" / "daemons")
    assert len(daemons) == 1  # one process imported torch: the probe's and the suite's
    assert [pid for pid in daemons if process_alive(pid)] == []


@pytest.fixture(scope="module")
def aborting_threadpoolctl(venv_factory: Callable[[str], Path]) -> Path:
    """The test venv's clone whose threadpoolctl aborts at import: the runtime probe dies at its "thread
    pools" step, after torch imported; the suite never imports it."""
    python = venv_factory("aborting-threadpoolctl")
    site = clone_site_packages(python)
    module = site / "threadpoolctl.py"
    fresh = site / "threadpoolctl.py.new"  # a new file: the clone's is a hard link to the test venv's
    fresh.write_text("import os\nos.abort()\n", encoding="utf-8")
    fresh.replace(module)
    shutil.rmtree(site / "__pycache__", ignore_errors=True)
    return python


@needs_torch
@pytest.mark.slow
def test_a_probe_that_dies_after_the_import_leaves_the_suite_a_fresh_process(
    aborting_threadpoolctl: Path,
) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from envcheck.api import snapshot_this_machine
    from envcheck.verify.runner import run_suite

    probe = RuntimeProbe()
    with ThreadPoolExecutor(1) as pool:
        live = pool.submit(snapshot_this_machine, str(aborting_threadpoolctl), timeout=120.0, runtime=probe)
        section = run_suite(str(aborting_threadpoolctl), timeout=120.0, runtime_probe=probe)
        manifest = live.result()
    outcome = manifest.meta.probe
    assert (outcome.status, outcome.stage, outcome.signal) == ("crashed", "thread pools", "SIGABRT")
    # What the probe learnt before it died is kept: torch imported, its facts and libraries.
    assert manifest.torch.runtime is not None
    # The suite is not charged with the probe's death: it ran again alone, every check to its end.
    statuses = {r.name: r.status for r in section.results}
    assert statuses["import_torch"] == "passed"
    assert not [name for name, status in statuses.items() if status not in ("passed", "skipped")]


def test_the_snapshot_never_waits_for_a_suite_that_does_not_start(tmp_path: Path) -> None:
    from envcheck.api import SuiteOptions, run_gate
    from envcheck.manifest.io import load

    missing = tmp_path / "no-such-checks.py"
    with pytest.raises(UsageError, match="checks file not found"):
        options = SuiteOptions(python=sys.executable, timeout=30.0, checks=missing, app_imports=False)
        run_gate(EXAMPLE, base=load(EXAMPLE), options=options, policy=Policy())


def test_a_runtime_probe_handed_over_once() -> None:
    probe = RuntimeProbe()
    run = TargetRun(data={"done": True}, outcome=ProbeOutcome(status="ok"))
    probe.deliver(run)
    probe.fail(ProbeError("late"))  # after the delivery: ignored
    assert probe.wait() is run
    failed = RuntimeProbe()
    failed.fail(ProbeError("the suite did not start"))
    with pytest.raises(ProbeError, match="did not start"):
        failed.wait()


def _suite_run(status: str = "ok", **fields: object) -> TargetRun:
    return TargetRun(data={"done": status == "ok"}, outcome=ProbeOutcome(status=status, **fields))  # type: ignore[arg-type]


def test_the_probes_ending_is_its_own_not_the_shared_process(tmp_path: Path) -> None:
    path = tmp_path / "runtime-probe.json"
    path.write_text(json.dumps({"stage": "torch facts", "done": True}), encoding="utf-8")
    # Done: ok, whatever the suite's process did after it.
    crashed = _suite_run("crashed", signal="SIGSEGV", stage="check jit_trace", exit_code=-11)
    assert _probe_run(path, crashed).outcome.status == "ok"
    # Raised: an error with its exception; the process went on with the suite.
    path.write_text(json.dumps({"stage": "small op", "exception": "RuntimeError: x"}), encoding="utf-8")
    ended = _probe_run(path, _suite_run()).outcome
    assert (ended.status, ended.stage, ended.exception) == ("error", "small op", "RuntimeError: x")
    # Died inside it: the process's ending, at the probe's own step.
    path.write_text(json.dumps({"stage": "gpu driver", "done": False}), encoding="utf-8")
    ended = _probe_run(path, crashed).outcome
    assert (ended.status, ended.stage, ended.signal) == ("crashed", "gpu driver", "SIGSEGV")


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
@pytest.mark.parametrize("hostile", ["fifo", "huge", "not-json", "link"])
def test_a_hostile_probe_result_is_not_read(tmp_path: Path, hostile: str) -> None:
    from envcheck.process.runner import RESULT_MAX_BYTES

    path = tmp_path / "runtime-probe.json"
    if hostile == "fifo":
        os.mkfifo(path)
    elif hostile == "huge":
        with path.open("wb") as f:  # sparse: nothing on disk
            f.seek(RESULT_MAX_BYTES + 1)
            f.write(b"}")
    elif hostile == "not-json":
        path.write_bytes(b"\xff{[")
    else:
        path.symlink_to("/dev/zero")
    ended = _probe_run(path, _suite_run())
    assert ended.data == {}
    assert ended.outcome.status == "error"
    assert ended.outcome.stderr_tail is not None and "result file not read" in ended.outcome.stderr_tail
