"""ci/synth.py grows a real manifest into the 500-package / 500-library pair the diff budget is measured on;
both halves must stay valid manifests with the drift a fleet shows."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from diffdata import MANIFESTS

from envcheck.diff.engine import diff, doctor
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest

SYNTH = Path(__file__).resolve().parents[2] / "ci" / "synth.py"


def synthesize(seed: Path) -> tuple[Manifest, Manifest]:
    spec = importlib.util.spec_from_file_location("synth", SYNTH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base, target = module.synthesize(seed, packages=500, libraries=500)
    return decode(Manifest, base, source="base"), decode(Manifest, target, source="target")


@pytest.mark.parametrize("seed", ["dev-cpu", "cuda"])
def test_synthesized_pair_is_valid_large_and_drifts(seed: str) -> None:
    base, target = synthesize(MANIFESTS / f"{seed}.json")
    assert len(base.packages) == 500
    assert base.runtimes is not None and len(base.runtimes.loaded) == 500
    rules = {f.rule for f in diff(base, target) + doctor(target)}
    assert {"ENV-PKG-VERSION", "ENV-PKG-MISSING", "ENV-PKG-ADDED", "ENV-NATIVE-LOADED-FROM"} <= rules
    assert {"ENV-NUMERICS-SWITCH", "ENV-VAR-CHANGED"} <= rules
    assert diff(base, base) == []
