"""The snapshot's native scan asks only for what ``envcheck.native.ScanOptions`` names: any object with
``verify_files``, ``integrity`` and ``deadline`` will do, and native/ imports nothing of collect/ (the layer
above it), not even for its annotations."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from envcheck.core.deadline import Deadline
from envcheck.manifest.io import load
from envcheck.native import scan_for_snapshot

ROOT = Path(__file__).parent.parent.parent
EXAMPLE = ROOT / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"


@dataclass(frozen=True)
class _Options:
    verify_files: bool = False
    integrity: bool = False
    deadline: Deadline | None = None


def test_any_object_with_the_three_fields_drives_the_scan() -> None:
    section = scan_for_snapshot(load(EXAMPLE), _Options(deadline=Deadline(at=0.0, seconds=9)))
    assert section is not None and section.skipped is not None
    assert re.search(r"deadline \(--timeout 9 s\) passed while walking the native tree", section.skipped)


def test_native_imports_nothing_of_collect() -> None:
    for path in sorted((ROOT / "envcheck" / "native").rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            assert not [n for n in names if n.startswith("envcheck.collect")], f"{path}:{node.lineno}"
