"""Hostile targets: a daemon holding stderr, endless or huge stderr, a huge or booby-trapped result file,
a hang, reruns that would multiply ``--timeout``. Each runs the envcheck CLI under ``hostile.run_bounded``
(timeout + RLIMIT_AS, peak RSS): it must end within ``--timeout`` + 5 s, under 300 MB, without a
traceback, leaving no process and no temp folder behind.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import Bounded, assert_bounded, envcheck_argv, run_bounded
from venvs import HOSTILE_TORCH, fault_torch, make_venv, process_alive, processes_mentioning

from envcheck.process.runner import RESULT_MAX_BYTES

TIMEOUT = 3.0


@pytest.fixture(scope="module")
def hostile_python(venv_factory: Callable[[str], Path]) -> Path:
    return fault_torch(venv_factory, "hostile-torch", HOSTILE_TORCH)


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """A folder for the run: ``tmp/`` is its TMPDIR, ``log/`` where the fake torch records its pids.
    Daemons still alive afterwards (a failed test) are killed here, not left to the machine."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "log").mkdir()
    yield tmp_path
    for pid in _pids(tmp_path / "log" / "daemons"):
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def _snapshot(
    python: Path, run_dir: Path, fault: str, *args: str, timeout: float = TIMEOUT
) -> tuple[Bounded, dict[str, Any]]:
    """``envcheck snapshot`` of ``python`` with ``fault`` at ``import torch``; the run and its manifest."""
    manifest = run_dir / "manifest.json"
    env = {
        **os.environ,
        "TMPDIR": str(run_dir / "tmp"),
        "ENVCHECK_TEST_FAULT": fault,
        "ENVCHECK_TEST_LOG": str(run_dir / "log"),
    }
    argv = envcheck_argv(
        "snapshot", "--python", str(python), "--timeout", str(timeout), "-o", str(manifest), *args
    )
    result = run_bounded(argv, timeout=timeout, env=env)
    assert_bounded(result, timeout=timeout)
    assert result.returncode == 0, result.stderr
    # Nothing of the run is left: its targets and their children, its temp folders.
    assert [p for p in _pids(run_dir / "log" / "pids") if process_alive(p)] == []
    assert processes_mentioning(str(run_dir / "tmp")) == {}
    assert list((run_dir / "tmp").iterdir()) == []
    return result, json.loads(manifest.read_text(encoding="utf-8"))


@pytest.mark.slow
def test_a_hang_is_killed_at_the_deadline_with_every_process_it_started(
    hostile_python: Path, run_dir: Path
) -> None:
    _, manifest = _snapshot(hostile_python, run_dir, "hang")
    probe = manifest["meta"]["probe"]
    assert probe["status"] == "timeout"
    assert probe["stage"] == "import torch"
    assert probe["timeout_s"] == TIMEOUT
    # The suite's main group hung at the same import, under the same deadline.
    results = {r["name"]: r for r in manifest["verify"]["results"]}
    assert results["import_torch"]["status"] == "timeout"
    # The runtime probe and the suite's main group both started a child; all four were recorded, all
    # four are gone (checked in _snapshot).
    assert len(_pids(run_dir / "log" / "pids")) == 4


@pytest.mark.slow
def test_a_daemon_holding_stderr_does_not_keep_envcheck_waiting(hostile_python: Path, run_dir: Path) -> None:
    _, manifest = _snapshot(hostile_python, run_dir, "daemon", "--no-verify")
    assert manifest["meta"]["probe"]["status"] != "timeout"  # the probe ended; only its daemon lingered
    # The daemon left the target's session, yet it is gone too: envcheck was its subreaper (Linux).
    daemons = _pids(run_dir / "log" / "daemons")
    assert daemons
    assert [pid for pid in daemons if process_alive(pid)] == []


@pytest.mark.slow
def test_endless_stderr_keeps_a_bounded_tail_and_names_the_cut(hostile_python: Path, run_dir: Path) -> None:
    _, manifest = _snapshot(hostile_python, run_dir, "endless-stderr", "--no-verify")
    probe = manifest["meta"]["probe"]
    assert probe["status"] == "timeout"
    first, _, rest = probe["stderr_tail"].partition("\n")
    assert first.startswith("[envcheck: stderr truncated: kept the last 4000 characters of ")
    assert rest.endswith("spam")
    assert len(rest) <= 4000


@pytest.mark.slow
def test_300_mb_of_stderr_costs_no_memory(hostile_python: Path, run_dir: Path) -> None:
    result, manifest = _snapshot(hostile_python, run_dir, "stderr-300mb", "--no-verify", timeout=30.0)
    probe = manifest["meta"]["probe"]
    assert probe["exit_code"] == 3
    first, _, rest = probe["stderr_tail"].partition("\n")
    assert rest.endswith("x" * 100)
    assert first.startswith("[envcheck: stderr truncated: kept the last ")
    assert int(first.split(" of ")[1].split()[0]) >= 300 * 1024 * 1024
    assert result.max_rss_mb < 300


@pytest.mark.slow
@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("result-2gb", f"2147483649 bytes, over the cap of {RESULT_MAX_BYTES} bytes"),
        ("result-zero-link", "result file not read"),
        ("result-fifo", "not a regular file"),
    ],
)
def test_a_hostile_result_file_is_not_read(hostile_python: Path, run_dir: Path, fault: str, why: str) -> None:
    _, manifest = _snapshot(hostile_python, run_dir, fault, "--no-verify")
    probe = manifest["meta"]["probe"]
    assert probe["status"] == "crashed"  # exited without a result
    assert probe["stderr_tail"].startswith("[envcheck: ")
    assert why in probe["stderr_tail"]


@pytest.mark.slow
def test_reruns_share_the_deadline_instead_of_multiplying_it(hostile_python: Path, run_dir: Path) -> None:
    # Four checks that hang: before, each rerun got the full --timeout (4 x 3 s, past the bound).
    log = run_dir / "log" / "started"
    checks = run_dir / "hangs.py"
    checks.write_text(
        "import time\n"
        + "".join(
            f"def check_{name}():\n    open({str(log)!r}, 'a').write('{name}\\n')\n    time.sleep(600)\n"
            for name in ("a", "b", "c", "d")
        ),
        encoding="utf-8",
    )
    _, manifest = _snapshot(hostile_python, run_dir, "", "--checks", str(checks))
    results = {r["name"]: r for r in manifest["verify"]["results"]}
    for name in ("a", "b", "c", "d"):
        assert results[f"custom/{name}"]["status"] == "timeout"
        assert results[f"custom/{name}"]["timeout_s"] == TIMEOUT
    # Once the deadline passed, no process was started for the rest.
    assert log.read_text().split() == ["a"]


@pytest.mark.slow
def test_a_relative_python_is_resolved_against_the_callers_folder(
    venv_factory: Callable[[str], Path], tmp_path: Path
) -> None:
    python = make_venv(tmp_path / "venv")
    argv = envcheck_argv(
        "snapshot", "--python", "venv/bin/python", "--no-probe", "--no-verify", "-o", "out.json"
    )
    result = run_bounded(argv, timeout=60.0, cwd=tmp_path)
    assert_bounded(result, timeout=60.0)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    # Absolute, but not resolved: the venv's python is a link whose location selects the venv.
    assert manifest["meta"]["target"] == str(python)


@pytest.mark.slow
def test_a_bare_python_is_found_on_path(tmp_path: Path) -> None:
    python = make_venv(tmp_path / "venv")
    env = {**os.environ, "PATH": f"{python.parent}{os.pathsep}{os.environ['PATH']}"}
    argv = envcheck_argv("snapshot", "--python", "python", "--no-probe", "--no-verify", "-o", "out.json")
    result = run_bounded(argv, timeout=60.0, cwd=tmp_path, env=env)
    assert_bounded(result, timeout=60.0)
    assert result.returncode == 0, result.stderr
    manifest = json.loads((tmp_path / "out.json").read_text(encoding="utf-8"))
    assert manifest["meta"]["target"] == str(python)


@pytest.mark.slow
@pytest.mark.parametrize(
    ("given", "message"),
    [
        ("nowhere/bin/python", "does not exist"),
        ("not-a-python-anywhere", "is not a command on PATH"),
        ("plain.txt", "is not executable"),
    ],
)
def test_a_python_that_cannot_run_is_one_clear_error(tmp_path: Path, given: str, message: str) -> None:
    (tmp_path / "plain.txt").write_text("not a program\n", encoding="utf-8")
    given = f"./{given}" if given == "plain.txt" else given
    argv = envcheck_argv("snapshot", "--python", given, "--no-verify", "-o", "out.json")
    result = run_bounded(argv, timeout=60.0, cwd=tmp_path)
    assert_bounded(result, timeout=60.0)
    assert result.returncode == 2
    lines = result.stderr.splitlines()
    assert lines[0].startswith("error: the target interpreter ")
    assert message in lines[0]
    assert all(line.startswith("Tip: ") for line in lines[1:])
    assert not (tmp_path / "out.json").exists()
