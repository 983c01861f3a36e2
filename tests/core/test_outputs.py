"""Writing outputs: nothing that is not a regular file is ever replaced, nothing half-written survives a
failure, and every failure is one line and exit 2 (docs/guarantees.md). Devices and FIFOs are made in temp
folders (tests run as root); the real /dev is never touched."""

from __future__ import annotations

import os
import resource
import signal
import stat
import subprocess
import threading
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded

from envcheck.core.errors import EnvcheckError
from envcheck.core.outputs import OutputError, destination, write

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"
A = str(MANIFESTS / "dev-cpu.json")


def _envcheck(*args: str, **kwargs: object) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        envcheck_argv(*args), capture_output=True, text=True, timeout=60, check=False, **kwargs
    )  # type: ignore[call-overload]


def _one_error_line(stderr: str) -> None:
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines, "no message"
    assert lines[0].startswith("error: "), stderr
    assert all(line.startswith(("error: ", "Tip: ")) for line in lines), stderr
    assert "Traceback" not in stderr


def test_a_null_device_stays_a_device(tmp_path: Path) -> None:
    null = make_char_device(tmp_path / "null", 1, 3)
    result = _envcheck("diff", A, A, "-o", str(null))
    assert result.returncode == 0, result.stderr
    assert stat.S_ISCHR(null.stat().st_mode)


@pytest.mark.slow
def test_a_full_device_is_one_line_and_exit_2(tmp_path: Path) -> None:
    full = make_char_device(tmp_path / "full", 1, 7)
    result = _envcheck("diff", A, A, "-o", str(full))
    assert result.returncode == 2
    _one_error_line(result.stderr)
    assert "No space left on device" in result.stderr
    assert stat.S_ISCHR(full.stat().st_mode)


@pytest.mark.slow
def test_a_full_stdout_is_one_line_and_exit_2(tmp_path: Path) -> None:
    full = make_char_device(tmp_path / "full", 1, 7)
    with full.open("w") as stdout:
        result = subprocess.run(
            envcheck_argv("diff", A, A),
            stdout=stdout,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    assert result.returncode == 2
    _one_error_line(result.stderr)
    assert "stdout" in result.stderr


def test_a_symlink_is_written_through_and_stays_a_link(tmp_path: Path) -> None:
    real = tmp_path / "real.txt"
    real.write_text("old\n")
    link = tmp_path / "link.txt"
    link.symlink_to(real)
    result = _envcheck("diff", A, A, "-o", str(link))
    assert result.returncode == 0, result.stderr
    assert link.is_symlink()
    assert "old" not in real.read_text()
    assert real.read_text() == link.read_text()


def test_an_overwritten_file_keeps_its_mode(tmp_path: Path) -> None:
    manifest = tmp_path / "secret.json"
    manifest.write_text("{}")
    manifest.chmod(0o600)
    result = _envcheck("diff", A, A, "-o", str(manifest))
    assert result.returncode == 0, result.stderr
    assert stat.S_IMODE(manifest.stat().st_mode) == 0o600


def test_a_new_file_gets_the_umask_mode(tmp_path: Path) -> None:
    out = tmp_path / "new.txt"
    result = _envcheck("diff", A, A, "-o", str(out))
    assert result.returncode == 0
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(out.stat().st_mode) == 0o666 & ~umask


def test_a_fifo_with_a_reader_gets_the_report(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "pipe")
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()))
    reader.start()
    result = _envcheck("diff", A, A, "-o", str(fifo))
    reader.join(timeout=30)
    assert result.returncode == 0, result.stderr
    assert b"PASS" in received[0]
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.slow
def test_a_fifo_without_a_reader_fails_at_once(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "pipe")
    result = run_bounded(envcheck_argv("diff", A, A, "-o", str(fifo)), timeout=20)
    assert_bounded(result, timeout=20)
    assert result.returncode == 2
    _one_error_line(result.stderr)
    assert "no reader" in result.stderr
    assert stat.S_ISFIFO(fifo.stat().st_mode)


@pytest.mark.slow
def test_dev_stdout_is_written_in_place(tmp_path: Path) -> None:
    result = _envcheck("diff", A, A, "-o", "/dev/stdout")
    assert result.returncode == 0, result.stderr
    assert "PASS" in result.stdout


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda p: p / "missing" / "x.json", "does not exist"),
        (lambda p: p, "it is a folder"),
        (lambda p: p / "", "it is a folder"),
    ],
)
def test_a_bad_output_path_is_refused_before_the_work(tmp_path: Path, make, message: str) -> None:  # type: ignore[no-untyped-def]
    with pytest.raises(OutputError, match=message):
        destination(str(make(tmp_path)))


@pytest.mark.slow
def test_snapshot_checks_its_output_before_it_starts(tmp_path: Path) -> None:
    # A target that hangs past the bound: only a check made before it starts can answer in time.
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    argv = envcheck_argv("snapshot", "-o", str(tmp_path / "no" / "x.json"), "--python", str(hang))
    result = run_bounded([*argv, "--timeout", "120"], timeout=10)
    assert_bounded(result, timeout=10)
    assert result.returncode == 2
    _one_error_line(result.stderr)
    assert "does not exist" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize(
    ("command", "option"),
    [
        (["diff", A], "-o"),
        (["doctor"], "--junit"),
        (["verify"], "-o"),
        (["gate", A], "--junit"),
    ],
)
def test_every_live_command_checks_its_outputs_before_it_starts(
    tmp_path: Path, command: list[str], option: str
) -> None:
    hang = tmp_path / "python"
    hang.write_text("#!/bin/sh\nexec sleep 600\n")
    hang.chmod(0o755)
    argv = envcheck_argv(
        *command, "--python", str(hang), "--timeout", "120", option, str(tmp_path / "no" / "x")
    )
    result = run_bounded(argv, timeout=10)
    assert_bounded(result, timeout=10)
    assert result.returncode == 2
    _one_error_line(result.stderr)
    assert "does not exist" in result.stderr


def _limited_file_size() -> None:
    # A real write failure (EFBIG) past 4 KiB, as a full disk would give; the signal would kill us instead.
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))


@pytest.mark.slow
def test_a_failed_write_leaves_the_old_file_whole(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    out.write_text("the old report\n")
    result = subprocess.run(
        envcheck_argv("diff", A, str(MANIFESTS / "cuda.json"), "--format", "json", "-o", str(out)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
        preexec_fn=_limited_file_size,
    )
    assert result.returncode == 2, result.stderr
    _one_error_line(result.stderr)
    assert out.read_text() == "the old report\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["report.json"], "a temp file was left behind"


def test_output_error_is_an_envcheck_error() -> None:
    assert issubclass(OutputError, EnvcheckError)


def test_write_to_a_regular_file_in_process(tmp_path: Path) -> None:
    out = tmp_path / "x.txt"
    write(destination(str(out)), "caf\u00e9 \udcff\n")
    # A lone surrogate (an undecodable file name, PEP 383) is written visibly, never as invalid UTF-8.
    assert out.read_bytes() == "caf\u00e9 \\udcff\n".encode()
