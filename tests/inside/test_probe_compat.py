"""The code that runs inside target interpreters must run on Python 3.8 (the torch 1.13 era).

That code is the package ``envcheck/inside/`` (the probe, the smoke-suite harness and its check families),
copied into each target as a top-level package: it may import the standard library and itself (relative
imports), never envcheck.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

PACKAGE = Path(__file__).parents[2] / "envcheck" / "inside"
TARGET_SIDE = sorted(PACKAGE.rglob("*.py"))
# Modules a target may import besides its own package: the standard library, and what the probe and the
# suite look for when the target has it (torch and its companions are imported only there).
OPTIONAL_THIRD_PARTY = {"torch", "numpy", "threadpoolctl", "packaging", "pip", "onnx", "onnxruntime"}


def test_the_package_is_all_there() -> None:
    names = {p.relative_to(PACKAGE).as_posix() for p in TARGET_SIDE}
    assert {"probe.py", "suite.py", "redact.py", "result.py", "record.py", "checks/cpu.py"} <= names


@pytest.mark.slow
def test_vermin_finds_nothing_newer_than_python_3_8() -> None:
    pytest.importorskip("vermin")
    vermin = Path(sys.executable).with_name("vermin")  # its console script, installed with the test extra
    result = subprocess.run(
        [str(vermin), "--no-tips", "--violations", "-t=3.8-", "--eval-annotations", *map(str, TARGET_SIDE)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def _imports(tree: ast.AST) -> list[tuple[int, int, str]]:
    """``(line, level, module)`` of every import: level 0 is absolute, 1+ relative."""
    out: list[tuple[int, int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.extend((node.lineno, 0, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            out.append((node.lineno, node.level, node.module or ""))
    return out


@pytest.mark.parametrize("path", TARGET_SIDE, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_target_side_code_imports_only_the_stdlib_and_itself(path: Path) -> None:
    """Absolute imports name the standard library or an optional package of the target; the package's own
    modules are imported relatively, so the copy works under any top-level name."""
    allowed = set(sys.stdlib_module_names) | OPTIONAL_THIRD_PARTY
    for line, level, module in _imports(ast.parse(path.read_text(encoding="utf-8"))):
        if level:
            continue
        top = module.split(".")[0]
        assert top in allowed, f"{path.name}:{line} imports {module}"


@pytest.mark.parametrize("path", TARGET_SIDE, ids=lambda p: p.relative_to(PACKAGE).as_posix())
def test_target_side_code_parses_with_the_3_8_grammar(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))


def test_the_copy_runs_without_envcheck_and_hides_its_folder(tmp_path: Path) -> None:
    """The copy runs in a bare interpreter (``-I -S``: no site-packages, so no envcheck), takes its own
    folder off the ``sys.path`` it records, and imports nothing named envcheck."""
    from envcheck.inside.copying import copy_package
    from envcheck.process.runner import _BOOT, PROBE_MODULE

    folder = copy_package(str(tmp_path))
    out = tmp_path / "result.json"
    result = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _BOOT, folder, PROBE_MODULE, str(out), "facts"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    import json

    data = json.loads(out.read_text(encoding="utf-8"))
    assert data["done"] is True
    assert folder not in data["python"]["sys_path"]
    assert not any("envcheck" in p for p in data["python"]["sys_path"])


def test_the_record_reader_knows_version_parts_that_are_not_all_digits() -> None:
    """LLVM's plugins are versioned like ``.so.23.0git``; a text file named ``.so.txt`` is no library."""
    from envcheck.inside.record import parse_record_natives

    record = (
        "triton/_C/libMLIRDialectPlugin.so.23.0git,sha256=AAAA,4\n"
        "torch/lib/libcudart.so.12,,\n"
        "torch/_C.cpython-311-x86_64-linux-gnu.so,,7\n"
        "docs/notes.so.txt,,1\n"
        "torch/lib/backup.so.bak,,1\n"
        "torch\\lib\\c10.DLL,,2\n"
    )
    paths = [n["path"] for n in parse_record_natives(record)]
    assert paths == [
        "triton/_C/libMLIRDialectPlugin.so.23.0git",
        "torch/lib/libcudart.so.12",
        "torch/_C.cpython-311-x86_64-linux-gnu.so",
        "torch/lib/c10.DLL",
    ]
    assert parse_record_natives(record)[0]["sha256"] == "000000"
    assert parse_record_natives(record)[0]["size"] == 4
