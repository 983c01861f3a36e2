"""The code that runs inside target interpreters must run on Python 3.8 (the torch 1.13 era)."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parent.parent / "envcheck"
# Everything executed by a target interpreter: the probe, and the smoke suite's target-side checks.
TARGET_SIDE = sorted([ROOT / "probe" / "target.py", *(ROOT / "verify" / "checks").glob("*.py")])


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


@pytest.mark.parametrize("path", TARGET_SIDE, ids=lambda p: p.name)
def test_target_side_code_imports_nothing_from_envcheck(path: Path) -> None:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            names = [node.module or ""]
        else:
            continue
        assert not any(n.split(".")[0] == "envcheck" for n in names), f"{path.name}:{node.lineno}"


@pytest.mark.parametrize("path", TARGET_SIDE, ids=lambda p: p.name)
def test_target_side_code_parses_with_the_3_8_grammar(path: Path) -> None:
    ast.parse(path.read_text(encoding="utf-8"), feature_version=(3, 8))
