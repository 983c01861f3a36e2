"""Nothing envcheck starts outlives it, whichever face started it (docs/guarantees.md, "Process lifetime").

Real processes throughout: a fake torch whose import starts daemons (double fork + ``setsid``, each
leaving its parent's session and process group), a chain of them each starting the next, and a target
that stops envcheck itself with SIGSTOP. Checked for the CLI (``envcheck gate``), for a long-lived Python
process calling ``envcheck.api.gate`` twice (its own unrelated child untouched), and for the deadline
watchdog. Every pid a fake torch starts is logged; any still alive after a test is killed by the fixture,
never left to the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hostile import GRACE_S, assert_bounded, envcheck_argv, run_bounded
from venvs import HOSTILE_TORCH, fault_torch, process_alive

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux: /proc, prctl, setsid")

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
TIMEOUT = 3.0
# The gate stopped by its target: a deadline the standard-library facts probe, which runs beside the suite,
# meets on a busy machine too (3 s did not, with another test process on the other core: exit 2 from the
# facts, before the stop this test is about was ever reached).
STOPPED_TIMEOUT = 10.0
CHAIN = 24

# A fake torch. ``chain``: the first target to import it starts a chain of CHAIN daemons, each a double
# fork + setsid away from the one before (its setsid'd middle process stays, supervising it), each
# starting the next and then sleeping; the import returns once the whole chain is up; ``stop-parent``: the
# target stops envcheck (its parent) with SIGSTOP, then hangs.
LIFETIME_TORCH = r'''
import os
import signal
import sys
import time

fault = os.environ.get("ENVCHECK_TEST_FAULT", "")
log_dir = os.environ.get("ENVCHECK_TEST_LOG", "")


def log(line):
    with open(os.path.join(log_dir, "daemons"), "a") as f:
        f.write(line + "\n")


def daemon(n):
    """Start daemon ``n`` (fork + setsid + fork) and return in the caller at once. The setsid'd middle
    process stays, watching its daemon (a supervisor), so the chain is a deep tree of sessions of their
    own: killing what hangs from envcheck reaches only its top."""
    read, write = os.pipe()
    if os.fork():
        os.close(write)
        os.read(read, 1)  # the supervisor is up
        os.close(read)
        return
    os.close(read)
    os.setsid()
    log(str(os.getpid()))
    child = os.fork()
    if child:
        os.close(write)
        try:
            os.waitpid(child, 0)
        finally:
            os._exit(0)
    try:
        log(str(os.getpid()))
        if n < CHAIN:
            daemon(n + 1)
        os.write(write, b"x")
        os.close(write)
        time.sleep(600)
    finally:
        os._exit(0)


CHAIN = int(os.environ.get("ENVCHECK_TEST_CHAIN", "24"))
if fault == "chain":
    try:
        os.close(os.open(os.path.join(log_dir, "started"), os.O_CREAT | os.O_EXCL | os.O_WRONLY))
    except FileExistsError:
        pass
    else:
        daemon(1)
elif fault == "stop-parent":
    with open(os.path.join(log_dir, "daemons"), "a") as f:
        f.write("%d\n" % os.getpid())
    os.kill(os.getppid(), signal.SIGSTOP)
    time.sleep(600)
'''


@pytest.fixture(scope="module")
def chain_python(venv_factory: Callable[[str], Path]) -> Path:
    return fault_torch(venv_factory, "lifetime-torch", LIFETIME_TORCH)


@pytest.fixture(scope="module")
def daemon_python(venv_factory: Callable[[str], Path]) -> Path:
    return fault_torch(venv_factory, "daemon-torch", HOSTILE_TORCH)


def _pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


@pytest.fixture
def run_dir(tmp_path: Path) -> Iterator[Path]:
    """``tmp/``: the run's TMPDIR; ``log/``: where the fake torch writes the pids it starts."""
    (tmp_path / "tmp").mkdir()
    (tmp_path / "log").mkdir()
    shutil.copyfile(EXAMPLE, tmp_path / "envcheck.lock.json")
    yield tmp_path
    for name in ("daemons", "pids"):
        for pid in _pids(tmp_path / "log" / name):
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def _alive_after_settling(log: Path) -> list[int]:
    """The logged pids still alive once a daemon caught mid-start has had time to log itself."""
    time.sleep(1.0)
    return [pid for pid in _pids(log) if process_alive(pid)]


def _env(run_dir: Path, fault: str) -> dict[str, str]:
    return {
        **os.environ,
        "TMPDIR": str(run_dir / "tmp"),
        "ENVCHECK_TEST_FAULT": fault,
        "ENVCHECK_TEST_LOG": str(run_dir / "log"),
    }


@pytest.mark.slow
def test_the_cli_gate_leaves_no_daemon_of_a_chain_alive(chain_python: Path, run_dir: Path) -> None:
    # Before: 10 of the 24 were alive after the gate (8 rounds of killing the subreaper's children, with
    # no wait between them, while each daemon started the next).
    argv = envcheck_argv(
        "gate", str(run_dir / "envcheck.lock.json"), "--python", str(chain_python), "--timeout", "30"
    )
    result = run_bounded(argv, timeout=30.0, env=_env(run_dir, "chain"), cwd=run_dir)
    assert_bounded(result, timeout=30.0)
    assert result.returncode in (0, 1), result.stderr
    log = run_dir / "log" / "daemons"
    assert len(_pids(log)) == 2 * CHAIN  # the whole chain started (daemons and supervisors), during the gate
    assert _alive_after_settling(log) == []
    assert list((run_dir / "tmp").iterdir()) == []


# A long-lived process (the user's): a child of its own started first, then two gates through the API.
_API_CALLER = r"""
import ctypes, json, os, subprocess, sys
from pathlib import Path

from envcheck import api

manifest, python, log = sys.argv[1], sys.argv[2], Path(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)


def subreaper():
    value = ctypes.c_int(-1)
    libc.prctl(37, ctypes.byref(value), 0, 0, 0)  # PR_GET_CHILD_SUBREAPER
    return value.value


def alive(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] not in "ZX"
    except OSError:
        return False


def zombies():
    out = []
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue
        if fields[1] == str(os.getpid()) and fields[0] == "Z":
            out.append(int(entry.name))
    return out


mine = subprocess.Popen(["sleep", "600"])
report = {"before": subreaper(), "calls": []}
for _ in range(2):
    api.gate(manifest, options=api.SuiteOptions(python=python, timeout=30.0))
    daemons = [int(p) for p in log.read_text().split()] if log.exists() else []
    report["calls"].append(
        {
            "daemons": daemons,
            "alive": [p for p in daemons if alive(p)],
            "subreaper": subreaper(),
            "zombies": zombies(),
            "mine": mine.poll(),
        }
    )
report["mine_alive"] = alive(mine.pid)
mine.kill()
mine.wait()
print(json.dumps(report))
"""


@pytest.mark.slow
def test_the_api_ends_every_daemon_after_each_call_and_spares_the_callers_child(
    daemon_python: Path, run_dir: Path
) -> None:
    # Before: every daemon outlived api.gate (the orphan killing ran only in the console script), so
    # the pytest plugin left them too.
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            _API_CALLER,
            str(run_dir / "envcheck.lock.json"),
            str(daemon_python),
            str(run_dir / "log" / "daemons"),
        ],
        env=_env(run_dir, "daemon"),
        cwd=run_dir,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    first, second = report["calls"]
    assert first["daemons"], "the fake torch started no daemon"
    assert len(second["daemons"]) > len(first["daemons"])  # the second call started its own
    for call in (first, second):
        assert call["alive"] == []
        assert call["subreaper"] == report["before"] == 0  # the caller's process as it was
        assert call["zombies"] == []  # the daemons it adopted are reaped
        assert call["mine"] is None  # the caller's own child: neither killed nor reaped
    assert report["mine_alive"] is True
    assert _alive_after_settling(run_dir / "log" / "daemons") == []


@pytest.mark.slow
def test_a_target_that_stops_envcheck_cannot_hold_the_gate_past_its_deadline(
    chain_python: Path, run_dir: Path
) -> None:
    # Before: SIGSTOP to its parent froze envcheck with its deadline; the gate never ended.
    argv = envcheck_argv(
        "gate",
        str(run_dir / "envcheck.lock.json"),
        "--python",
        str(chain_python),
        "--timeout",
        str(STOPPED_TIMEOUT),
        "--no-imports",
        "--format",
        "json",
    )
    result = run_bounded(argv, timeout=STOPPED_TIMEOUT, env=_env(run_dir, "stop-parent"), cwd=run_dir)
    assert_bounded(result, timeout=STOPPED_TIMEOUT)
    assert result.seconds < STOPPED_TIMEOUT + GRACE_S
    # As for any target that runs past the deadline: findings (exit 1), the suite's checks timed out.
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert "timeout" in json.dumps(report)
    assert _alive_after_settling(run_dir / "log" / "daemons") == []
