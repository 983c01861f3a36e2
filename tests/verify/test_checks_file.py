"""A ``--checks`` file that does not compile or import is an input error: exit 2 with file:line, and a
syntax error is found before anything runs in the target."""

from __future__ import annotations

import subprocess
import textwrap
from pathlib import Path

import pytest
from conftest import needs_torch
from hostile import assert_bounded, envcheck_argv, make_fifo, run_bounded
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.core.errors import UsageError
from envcheck.manifest.verify import CheckResult, VerifySection
from envcheck.verify.checks_file import MAX_CHECKS_BYTES, compile_checks_file, load_failure

TWIN_A = str(Path(__file__).parents[1] / "data" / "manifests" / "twin-a.json")


def write(path: Path, text: str) -> Path:
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


@pytest.fixture
def spy_python(tmp_path: Path) -> tuple[str, Path]:
    """An "interpreter" that only leaves a mark when anything starts it."""
    mark = tmp_path / "started"
    python = tmp_path / "spy-python"
    python.write_text(f"#!/bin/sh\ntouch {mark}\nexit 1\n", encoding="utf-8")
    python.chmod(0o755)
    return str(python), mark


@pytest.mark.parametrize("command", ["verify", "gate"])
def test_a_syntax_error_is_exit_2_with_file_line_before_anything_runs(
    tmp_path: Path, spy_python: tuple[str, Path], command: str
) -> None:
    checks = write(
        tmp_path / "my_checks.py",
        """\
        import math

        def check_forward(ctx)
            return math.pi
        """,
    )
    python, mark = spy_python
    args = [command, *([TWIN_A] if command == "gate" else []), "--checks", str(checks), "--python", python]
    result = CliRunner().invoke(app, args)
    assert (result.exit_code, result.stdout) == (2, "")
    first = result.stderr.splitlines()[0]
    assert first.startswith(f"error: {checks}:3:") and "SyntaxError" in first
    assert "Traceback" not in result.stderr
    assert not mark.exists()  # the target was never started


@pytest.mark.parametrize(
    ("source", "where", "kind"),
    [
        ("def check_a():\n    return 1\n  return 2\n", ":3:", "IndentationError"),
        ("def check_a():\n\tif 1:\n        return 1\n", ":3:", "TabError"),
        ("x = 1\ny = (\n", ":2:", "SyntaxError"),
        ("x = 1\nprint 'py2'\n", ":2:", "SyntaxError"),
        ("x = " + "(" * 300 + "1" + ")" * 300 + "\n", ":1:", "SyntaxError"),
    ],
)
def test_compile_errors_name_the_line(tmp_path: Path, source: str, where: str, kind: str) -> None:
    path = tmp_path / "c.py"
    path.write_text(source, encoding="utf-8")
    with pytest.raises(UsageError) as info:
        compile_checks_file(path)
    assert str(info.value).startswith(f"{path}{where}") and kind in str(info.value)


def test_nul_bytes_and_deep_nesting_are_input_errors(tmp_path: Path) -> None:
    nul = tmp_path / "nul.py"
    nul.write_bytes(b"x = 1\x00\n")
    deep = tmp_path / "deep.py"
    deep.write_text("x = " + "-" * 200_000 + "1\n", encoding="utf-8")
    for path in (nul, deep):
        with pytest.raises(UsageError) as info:
            compile_checks_file(path)
        assert str(info.value).startswith(f"{path}")


def test_a_good_file_compiles_and_is_not_run(tmp_path: Path) -> None:
    mark = tmp_path / "ran"
    path = write(tmp_path / "c.py", f"open({str(mark)!r}, 'w').close()\ndef check_a():\n    return 1\n")
    compile_checks_file(path)
    assert not mark.exists()


def test_missing_folder_and_huge_files_are_refused(tmp_path: Path) -> None:
    huge = tmp_path / "huge.py"
    with huge.open("wb") as f:
        f.truncate(MAX_CHECKS_BYTES + 1)
    cases = {tmp_path / "nope.py": "cannot read", tmp_path: "not a regular file", huge: "larger than"}
    for path, expected in cases.items():
        with pytest.raises(UsageError, match=expected):
            compile_checks_file(path)


def test_a_fifo_as_checks_file_is_refused_not_waited_on(tmp_path: Path) -> None:
    fifo = make_fifo(tmp_path / "checks.py")
    result = run_bounded(envcheck_argv("verify", "--checks", str(fifo)), timeout=30)
    assert_bounded(result, timeout=30)
    assert result.returncode == 2 and "not a regular file" in result.stderr.splitlines()[0]


# ------------------------------------------------------------------ a load failure in the target's suite


def section(*results: CheckResult) -> VerifySection:
    return VerifySection(
        results=[CheckResult(name="matmul", family="cpu", device="cpu", status="passed"), *results]
    )


def load_error(**fields: object) -> CheckResult:
    return CheckResult(name="custom/load", family="custom", device="cpu", **fields)  # type: ignore[arg-type]


CHECKS = """\
import math
import numpy as np
from os.path import joinn
SCALE = math.tau * FACTOR
OFFSET = np.pie

def check_a(ctx):
    return undefined_inside_a_function
"""


@pytest.mark.parametrize(
    ("error", "line"),
    [
        ("ModuleNotFoundError: No module named 'numpy'", "2:1"),
        (
            "ImportError: cannot import name 'joinn' from 'posixpath' (/usr/lib/python3.11/posixpath.py)",
            "3:1",
        ),
        ("NameError: name 'FACTOR' is not defined", "4:20"),
        ("AttributeError: module 'numpy' has no attribute 'pie'", "5:10"),
    ],
)
def test_an_import_failure_is_located_in_the_source(tmp_path: Path, error: str, line: str) -> None:
    path = write(tmp_path / "checks.py", CHECKS)
    found = load_failure(section(load_error(status="error", error=error)), path)
    assert found is not None
    assert str(found) == f"{path}:{line}: cannot be imported in the target: {error}"


def test_a_traceback_gives_the_innermost_line_in_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "checks.py", CHECKS)
    traceback = (
        'Traceback (most recent call last):\n  File "/x/suite.py", line 390, in main\n'
        f'  File "{path.resolve()}", line 7, in <module>\n  File "{path.resolve()}", line 8, in helper\n'
        "ZeroDivisionError: division by zero\n"
    )
    found = load_failure(
        section(load_error(status="error", error="ZeroDivisionError: division by zero", traceback=traceback)),
        path,
    )
    assert found is not None and str(found).startswith(f"{path}:8: cannot be imported")


def test_a_syntax_error_of_the_targets_own_python_is_located(tmp_path: Path) -> None:
    path = write(tmp_path / "checks.py", "x = 1\n")
    error = f"SyntaxError: invalid syntax ({path.name}, line 12)"
    found = load_failure(section(load_error(status="error", error=error)), path)
    assert found is not None and str(found).startswith(f"{path}:12: ")


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        ({"status": "crashed", "signal": "SIGSEGV"}, "the target died while loading it (SIGSEGV)"),
        ({"status": "crashed", "exit_code": 3}, "the target died while loading it (exit code 3)"),
        ({"status": "timeout", "timeout_s": 20.0}, "it did not finish loading within 20.0 s"),
        (
            {"status": "error", "error": "RuntimeError: from an entry point"},
            "RuntimeError: from an entry point "
            "(while loading the checks file and the envcheck.checks entry points)",
        ),
    ],
)
def test_other_load_failures_are_input_errors_too(
    tmp_path: Path, fields: dict[str, object], expected: str
) -> None:
    path = write(tmp_path / "checks.py", CHECKS)
    found = load_failure(section(load_error(**fields)), path)
    assert found is not None and str(found) == f"{path}: cannot be imported in the target: {expected}"


def test_a_loaded_file_is_no_failure(tmp_path: Path) -> None:
    path = write(tmp_path / "checks.py", CHECKS)
    custom = CheckResult(name="custom/a", family="custom", device="cpu", status="error", error="NameError: x")
    assert load_failure(section(custom), path) is None
    assert load_failure(VerifySection(skipped="--no-verify"), path) is None


@pytest.mark.slow
@needs_torch
def test_a_real_import_failure_in_the_target_is_exit_2_with_file_line(tmp_path: Path) -> None:
    """The real suite imports the file in the target's custom group; the failure is found there."""
    checks = write(
        tmp_path / "my_checks.py",
        """\
        import math

        # the deployment lacks this package
        import envcheck_no_such_package_anywhere

        def check_forward():
            return math.pi
        """,
    )
    # Not a hostile input: a plain child (the suite's torch processes exceed the hostile RSS bound).
    result = subprocess.run(
        envcheck_argv("verify", "--checks", str(checks), "--timeout", "120"),
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == 2 and result.stdout == "" and "Traceback" not in result.stderr
    assert result.stderr.splitlines()[0] == (
        # The line comes from the traceback's frame in the file (no column there).
        f"error: {checks}:4: cannot be imported in the target: "
        "ModuleNotFoundError: No module named 'envcheck_no_such_package_anywhere'"
    )
