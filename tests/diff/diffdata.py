"""Test data for the diff tests (a plain module: a second ``conftest`` would shadow ``tests/conftest.py``).

Real manifests (made by envcheck from real venvs; see tests/data/manifests/regenerate.py) and a way to
edit them realistically: change the JSON a snapshot wrote, then validate it like any manifest."""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"

Edit = Callable[[dict[str, Any]], object]


@cache
def raw(name: str) -> dict[str, Any]:
    """The JSON data of ``tests/data/manifests/<name>.json`` (cached; callers must copy before editing)."""
    data: dict[str, Any] = json.loads((MANIFESTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def manifest(name: str, *edits: Edit) -> Manifest:
    """A real manifest, optionally with ``edits`` applied to a copy of its JSON, validated by the codec."""
    data = copy.deepcopy(raw(name))
    for edit in edits:
        edit(data)
    return decode(Manifest, data, source=f"{name}.json (edited)")


def dist_entry(data: dict[str, Any], name: str) -> dict[str, Any]:
    return next(d for d in data["packages"] if d["name"].lower() == name.lower())
