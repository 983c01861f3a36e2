"""``--remedies FILE`` end to end through the CLI: the script of a report's root causes is written for the
environment the report is about, opens by refusing any other, runs that environment's own interpreter,
and ends with what is left to do by hand; ``.ps1`` gives PowerShell. A bad suffix, a file another output
already names, or a fleet is refused in one line with exit 2 before any work; a FIFO, a device or a link
get the guarantees of ``-o`` (tests/core/test_outputs.py). Nothing in a finding's message or a manifest's
label leaves the script's comments.

The broken environment is a real manifest (tests/data/manifests/dev-cpu.json) moved under the test's
folder, filelock gone (``ENV-PKG-UNMET``: ``pip install filelock``) and mpmath too old and installed
outside it (a manual step: a pip command there would change another folder). The scripts run in a real
bash against a recording interpreter at the manifest's path: what it was asked to do is its log.
"""

from __future__ import annotations

import json
import shutil
import stat
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from clirun import run
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded
from powershell import powershell_tokens

from envcheck import api
from envcheck.report.remedies import remedy_script

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"
DEV = MANIFESTS / "dev-cpu.json"
RECORDED_PREFIX = "/root/venvs/dev"
BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")
HOSTILE = "\ntouch pwned-{0}\n$(touch pwned-{0}2)`touch pwned-{0}3`"
GUARD_CALL = ["-c", "import sys; print(sys.prefix)"]


def broken(folder: Path, *, hostile: bool = False) -> tuple[Path, Path]:
    """dev-cpu's manifest moved to ``folder/env``, filelock gone and mpmath 0.1 outside the environment;
    ``hostile``: its label, sympy's version and mpmath's folder hold newlines, ``$(…)`` and backticks.
    The manifest's path and the environment's prefix."""
    prefix = folder / "env"
    text = DEV.read_text(encoding="utf-8").replace(RECORDED_PREFIX, str(prefix))
    data = json.loads(text)
    data["packages"] = [p for p in data["packages"] if p["name"] != "filelock"]
    mpmath = next(p for p in data["packages"] if p["name"] == "mpmath")
    outside = "/usr/lib/python3/dist-packages" + (HOSTILE.format("folder") if hostile else "")
    mpmath.update(version="0.1", location=outside, metadata_dir=f"{outside}/mpmath-0.1.dist-info")
    if hostile:
        data["meta"]["label"] = "dev" + HOSTILE.format("label")
        sympy = next(p for p in data["packages"] if p["name"] == "sympy")
        sympy["version"] = "1.14.0" + HOSTILE.format("version")
    path = folder / "broken.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path, prefix


def recording_python(prefix: Path, log: Path, *, answers: str | None) -> Path:
    """An interpreter at ``prefix/bin/python`` that logs its arguments (NUL-separated) and does nothing
    else; asked for ``sys.prefix`` it says ``answers`` (``None``: the test's own interpreter answers, a
    different environment)."""
    python = prefix / "bin" / "python"
    python.parent.mkdir(parents=True)
    answer = f"printf '%s\\n' '{answers}'" if answers is not None else f"exec '{sys.executable}' \"$@\""
    python.write_text(
        f"#!{BASH}\nprintf '%s\\0' \"$@\" >> '{log}'\nif [ \"$1\" = -c ]; then {answer}; fi\n",
        encoding="utf-8",
    )
    python.chmod(0o755)
    return python


def run_script(script: Path, folder: Path) -> subprocess.CompletedProcess[str]:
    """``bash SCRIPT`` in an empty ``folder``, as a person runs it."""
    folder.mkdir(exist_ok=True)
    return subprocess.run(
        [BASH or "bash", str(script)],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
    )


def logged(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").split("\0")[:-1] if log.exists() else []


def one_error_line(stderr: str) -> str:
    """The error: one line (a tip may follow), never a traceback."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), stderr
    assert all(line.startswith("Tip: ") for line in lines[1:]), stderr
    assert "Traceback" not in stderr
    return lines[0]


# ---- the script ------------------------------------------------------------------------------------------


def test_the_script_is_written_for_the_environment_of_the_report(tmp_path: Path) -> None:
    out = tmp_path / "fix.sh"
    code, _, err = run("doctor", str(DEV), "--no-policy", "-q", "--remedies", str(out))
    assert code == 0, err
    text = out.read_text(encoding="utf-8")
    lines = text.splitlines()
    assert lines[:2] == ["#!/bin/sh", "# envcheck remedies: envcheck doctor: dev-cpu"]
    assert f"python='{RECORDED_PREFIX}/bin/python'" in lines
    assert any(line.startswith("if [") and line.endswith(f"!= '{RECORDED_PREFIX}' ]; then") for line in lines)
    # What the CLI wrote is the report's script: the same report the API gives.
    report = api.doctor(DEV, policy=api.load_policy(disabled=True))
    assert text == remedy_script(report, out)


def test_commands_come_first_and_manual_steps_are_listed_at_the_end(tmp_path: Path) -> None:
    manifest, prefix = broken(tmp_path)
    out = tmp_path / "fix.sh"
    code, _, err = run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))
    assert code == 1, err  # errors found: the report fails; the script is written all the same
    lines = out.read_text(encoding="utf-8").splitlines()
    assert f"python='{prefix}/bin/python'" in lines
    install = lines.index("\"$python\" -m pip install 'filelock'")
    assert lines[install - 1].startswith("# ENV-PKG-UNMET filelock (error): ")
    still = lines.index("# Still to do by hand:")
    assert install < still
    assert lines[still + 1].startswith("#   mpmath is installed in /usr/lib/python3/dist-packages, outside")
    assert lines[-1].startswith("printf '%s\\n' 'envcheck remedies: done; still to do by hand: mpmath")
    assert all(line.startswith("#") for line in lines[still:-1])


@needs_bash
@pytest.mark.slow
def test_the_script_runs_its_environments_interpreter(tmp_path: Path) -> None:
    manifest, prefix = broken(tmp_path)
    log = tmp_path / "log"
    recording_python(prefix, log, answers=str(prefix))
    out = tmp_path / "fix.sh"
    assert run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))[0] == 1
    done = run_script(out, tmp_path / "cwd")
    assert done.returncode == 0, done.stderr
    assert logged(log) == [*GUARD_CALL, "-m", "pip", "install", "filelock"]
    assert "still to do by hand: mpmath is installed in" in done.stdout


@needs_bash
@pytest.mark.slow
@pytest.mark.parametrize("other", ["another interpreter", "no interpreter"])
def test_the_script_refuses_another_environment(tmp_path: Path, other: str) -> None:
    manifest, prefix = broken(tmp_path)
    log = tmp_path / "log"
    python = recording_python(prefix, log, answers=None)  # the test's own interpreter says its prefix
    if other == "no interpreter":
        python.unlink()
    out = tmp_path / "fix.sh"
    assert run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))[0] == 1
    done = run_script(out, tmp_path / "cwd")
    assert done.returncode == 1
    assert done.stderr == f"envcheck remedies: this script is for the environment at {prefix}\n"
    assert done.stdout == ""
    # Nothing done: the interpreter was only asked for its prefix.
    assert logged(log) == ([] if other == "no interpreter" else GUARD_CALL)
    assert list((tmp_path / "cwd").iterdir()) == []


def test_ps1_gives_powershell(tmp_path: Path) -> None:
    manifest, prefix = broken(tmp_path)
    out = tmp_path / "fix.ps1"
    assert run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))[0] == 1
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0] == "# envcheck remedies: envcheck doctor: dev-cpu" and "#!/bin/sh" not in lines
    assert "$ErrorActionPreference = 'Stop'" in lines and f"$Python = '{prefix}/bin/python'" in lines
    install = lines.index("& $Python -m pip install 'filelock'")
    # A native command's failure stops the script: PowerShell does not on its own.
    assert lines[install + 1] == "if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }"
    assert lines.index("# Still to do by hand:") > install
    assert lines[-1].startswith("Write-Output 'envcheck remedies: done; still to do by hand: mpmath")
    # Every line that is not a comment reads as PowerShell: literals in single quotes, our own words bare.
    code = [line for line in lines if line.strip() and not line.startswith("#")]
    for line in code:
        if line.startswith(("if ", "    Write-Error", "}")):
            continue  # the guard: envcheck's own PowerShell, its values single-quoted
        powershell_tokens(line)
    guard = next(line for line in code if line.startswith("if ((& $Python"))
    assert guard.endswith(f"-ne '{prefix}') {{")


# ---- refused before any work -----------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["fix.txt", "fix", "fix.bash", "fix.sh.json"])
def test_a_bad_suffix_is_one_line_and_exit_2(tmp_path: Path, name: str) -> None:
    code, out, err = run("doctor", str(DEV), "--no-policy", "--remedies", str(tmp_path / name))
    assert code == 2
    assert one_error_line(err) == (
        f"error: --remedies {tmp_path / name}: the file's suffix says which shell runs it: .sh (POSIX) or "
        ".ps1 (PowerShell)"
    )
    assert out == ""  # refused before the report
    assert list(tmp_path.iterdir()) == []


@pytest.mark.slow
def test_a_bad_suffix_is_refused_before_the_snapshot(tmp_path: Path) -> None:
    # A target that hangs past the bound: only a check made before it starts can answer in time.
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    argv = envcheck_argv("doctor", "--python", str(hang), "--timeout", "120", "--remedies", "fix.txt")
    result = run_bounded(argv, timeout=10, cwd=tmp_path)
    assert_bounded(result, timeout=10)
    assert result.returncode == 2
    assert "suffix" in one_error_line(result.stderr)


@pytest.mark.parametrize("flag", ["-o", "--junit"])
def test_the_script_may_not_replace_another_output(tmp_path: Path, flag: str) -> None:
    same = tmp_path / "out.sh"
    alias = tmp_path / "alias.sh"
    alias.symlink_to(same)
    for other in (same, alias):
        code, out, err = run("doctor", str(DEV), "--no-policy", flag, str(other), "--remedies", str(same))
        assert code == 2
        assert one_error_line(err) == f"error: {flag} {other} and --remedies {same} name the same file"
        assert out == ""
    assert not same.exists()


@pytest.mark.parametrize(
    "targets",
    [
        [str(MANIFESTS / "cuda.json"), str(MANIFESTS / "twin-a.json")],
        [str(MANIFESTS)],
        [str(MANIFESTS / "twin-*.json")],
    ],
    ids=["several", "a folder", "a pattern"],
)
def test_a_fleet_diff_is_refused(tmp_path: Path, targets: list[str]) -> None:
    out = tmp_path / "fix.sh"
    code, stdout, err = run("diff", str(DEV), *targets, "--no-policy", "--remedies", str(out))
    assert code == 2
    assert one_error_line(err) == (
        f"error: --remedies {out} writes the fixes of one environment: a fleet has several"
    )
    assert stdout == "" and not out.exists()


def test_one_target_of_a_diff_gets_its_script(tmp_path: Path) -> None:
    manifest, prefix = broken(tmp_path)
    out = tmp_path / "fix.sh"
    code, _, err = run("diff", str(DEV), str(manifest), "--no-policy", "-q", "--remedies", str(out))
    assert code == 1, err
    lines = out.read_text(encoding="utf-8").splitlines()
    # For the target, never the base.
    assert f"python='{prefix}/bin/python'" in lines and f"python='{RECORDED_PREFIX}/bin/python'" not in lines
    # The base's build, once: the consequence (filelock unmet) carries no command of its own.
    installs = [line for line in lines if "pip install" in line]
    assert installs == ["\"$python\" -m pip install 'filelock==4.3.1'"]


# ---- where the script goes: the guarantees of -o --------------------------------------------------------


def test_a_null_device_stays_a_device(tmp_path: Path) -> None:
    null = make_char_device(tmp_path / "null.sh", 1, 3)
    code, _, err = run("doctor", str(DEV), "--no-policy", "--remedies", str(null))
    assert code == 0, err
    assert stat.S_ISCHR(null.stat().st_mode)


def test_a_full_device_is_one_line_and_exit_2(tmp_path: Path) -> None:
    full = make_char_device(tmp_path / "full.sh", 1, 7)
    code, _, err = run("doctor", str(DEV), "--no-policy", "--remedies", str(full))
    assert code == 2
    assert "No space left on device" in one_error_line(err)
    assert stat.S_ISCHR(full.stat().st_mode)


def test_a_fifo_with_a_reader_gets_the_script(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "pipe.sh")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    code, _, err = run("doctor", str(DEV), "--no-policy", "--remedies", str(fifo))
    reader.join(timeout=30)
    assert code == 0, err
    assert received[0].startswith(b"#!/bin/sh\n# envcheck remedies: envcheck doctor: dev-cpu\n")
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.slow
def test_a_fifo_without_a_reader_fails_at_once(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "pipe.sh")
    result = run_bounded(
        envcheck_argv("doctor", str(DEV), "--no-policy", "--remedies", str(fifo)), timeout=20
    )
    assert_bounded(result, timeout=20)
    assert result.returncode == 2
    assert "no reader" in one_error_line(result.stderr)
    assert stat.S_ISFIFO(fifo.stat().st_mode)


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.sh"
    real.write_text("old\n")
    link = tmp_path / "fix.sh"
    link.symlink_to(real)
    code, _, err = run("doctor", str(DEV), "--no-policy", "--remedies", str(link))
    assert code == 0, err
    assert link.is_symlink() and link.resolve() == real
    assert real.read_text(encoding="utf-8").startswith("#!/bin/sh\n") and "old" not in real.read_text()


# ---- nothing leaves a comment ----------------------------------------------------------------------------


def test_a_hostile_message_stays_in_its_comment(tmp_path: Path) -> None:
    manifest, _ = broken(tmp_path, hostile=True)
    for name in ("fix.sh", "fix.ps1"):
        out = tmp_path / name
        assert run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))[0] == 1
        lines = out.read_text(encoding="utf-8").splitlines()
        carrying = [line for line in lines if "pwned" in line]
        # The label, the message and the manual step, each on its comment line; and the last line's message.
        assert len(carrying) >= 4, lines
        assert all(line.startswith("#") for line in carrying[:-1]), carrying
        assert carrying[-1] == lines[-1] and lines[-1].startswith(("printf '%s\\n' '", "Write-Output '"))
        assert not [line for line in lines if line.startswith(("touch", "$(", "`"))]


@needs_bash
@pytest.mark.slow
def test_nothing_runs_from_a_comment(tmp_path: Path) -> None:
    manifest, prefix = broken(tmp_path, hostile=True)
    log = tmp_path / "log"
    recording_python(prefix, log, answers=str(prefix))
    out = tmp_path / "fix.sh"
    assert run("doctor", str(manifest), "--no-policy", "-q", "--remedies", str(out))[0] == 1
    assert "pwned" in out.read_text(encoding="utf-8")
    done = run_script(out, tmp_path / "cwd")
    assert done.returncode == 0, done.stderr
    assert list((tmp_path / "cwd").iterdir()) == [], "a comment ran"
    assert logged(log) == [*GUARD_CALL, "-m", "pip", "install", "filelock"]
    # The last line prints the manual step as it was written: the payload as text.
    assert "$(touch pwned-folder2)" in done.stdout
