"""A predicted manifest, offline: the one ``envcheck predict`` wrote for the dev box's CPU manifest on
``win_amd64`` (``data/``; wheel URLs rewritten to ``files.invalid``), validated by the same schema and
diffed by the same engine, which runs only the rules that read facts a prediction holds."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.diff import engine
from envcheck.diff.rules.base import STATIC_FACT_RULES
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.io import load
from envcheck.manifest.model import Manifest

from .conftest import CPU, CUDA

PREDICTED = Path(__file__).parent / "data" / "torch-2.13.0-cpu-linux.win_amd64.predicted.json"


def test_the_prediction_is_a_manifest_of_the_same_schema_with_its_live_facts_absent() -> None:
    predicted = load(PREDICTED)
    assert predicted.is_predicted and predicted.meta.kind == "predicted"
    absent = set(predicted.meta.absent or [])
    assert {"runtimes", "gpu", "platform.cpu", "python.executable", "torch.runtime"} <= absent
    assert predicted.runtimes is None and predicted.gpu is None and predicted.torch.runtime is None
    # Validating is a round trip: what was written is what the model holds.
    assert encode(predicted) == json.loads(PREDICTED.read_text(encoding="utf-8"))


def test_a_manifest_from_before_reads_as_a_snapshot() -> None:
    old = load(CPU)
    assert old.meta.kind == "snapshot" and old.meta.absent is None and not old.is_predicted
    assert old.predicted is None


def test_the_prediction_says_what_the_windows_machine_must_provide() -> None:
    predicted = load(PREDICTED).predicted
    assert predicted is not None
    target = (predicted.platform, predicted.python_version, predicted.implementation)
    assert target == ("win_amd64", "3.11", "cp")
    needs = {n.kind: n for n in predicted.needs}
    vc = needs["vc-runtime"]
    assert {"MSVCP140.dll", "VCRUNTIME140.dll", "VCRUNTIME140_1.dll"} <= set(vc.files)
    assert vc.name.startswith("Microsoft Visual C++ 2015-2022 Redistributable")
    assert any(k.startswith("torch:torch/lib/") for k in vc.needed_by)
    # numpy bundles a copy of msvcp140: its PE FileVersion is the minimum the binaries imply.
    assert vc.minimum is not None and vc.evidence is not None and "PE FileVersion" in vc.evidence
    assert needs["openmp"].files == ["libiomp5md.dll"] and needs["openmp"].provided == "bundled"
    assert [d.name for d in predicted.left_out] == ["envcheck"]


def test_the_engine_runs_only_static_fact_rules_on_a_predicted_side() -> None:
    base, predicted = load(CPU), load(PREDICTED)
    findings = engine.diff(base, predicted) + engine.doctor(predicted)
    rules = {f.rule for f in findings}
    assert rules <= STATIC_FACT_RULES
    assert {"ENV-PREDICT-RUNTIME", "ENV-PREDICT-OPENMP-BLAS", "ENV-PREDICT-LEFT-OUT"} <= rules
    # Between two snapshots every rule still runs.
    assert "ENV-TORCH-VARIANT" in {f.rule for f in engine.diff(base, load(CUDA))}


def test_diff_against_a_saved_prediction_gives_the_same_report() -> None:
    result = CliRunner().invoke(app, ["diff", str(CPU), str(PREDICTED), "--format", "json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    rules = {f["rule"] for f in report["findings"]}
    assert "ENV-PREDICT-RUNTIME" in rules and "ENV-NATIVE-LOST" not in rules


def test_the_wheels_a_prediction_downloads_are_not_direct_installs() -> None:
    # The predicted side records each wheel's download URL in direct_url (a local wheel store's file:// URL
    # on some machines): that is where pip would fetch the index's release, not an install from a path.
    text = PREDICTED.read_text(encoding="utf-8").replace("https://files.invalid/", "file:///srv/wheel-store/")
    assert "file:///srv/wheel-store/" in text
    base, predicted = load(CPU), decode(Manifest, json.loads(text))
    findings = engine.diff_and_doctor(base, predicted)
    assert not [f for f in findings if f.rule in ("ENV-PKG-SOURCE", "ENV-PKG-DIRECT")]
