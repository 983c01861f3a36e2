"""The API as a library user meets it: one door (the types its signatures use, manifests, rules, a
verdict), promises kept whoever calls (no probe, no suite; another environment's manifest refused before
the target starts; a re-snapshot keeps its label and says what it drops), facts instead of a face's flags,
and a short script written only against ``envcheck.api`` that ``mypy --strict`` accepts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck import api

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"
CPU = EXAMPLES / "torch-2.13.0-cpu-linux.json"
CUDA = EXAMPLES / "torch-2.14.1-cu130-linux-nogpu.json"

# Snapshots an interpreter, diffs it against a manifest file, prints the verdict and each root cause's
# rule, message and remedy: envcheck.api only.
SCRIPT = """\
import sys

from envcheck import api


def main(python: str, reference: str) -> int:
    here = api.snapshot(api.SnapshotOptions(python=python, verify=False))
    report = api.diff(api.load_manifest(reference), here)
    print("FAIL" if report.fails("error") else "PASS")
    for f in report.findings:
        if f.caused_by is None and f.severity != "info":
            print(f.rule, f.message, f.remedy, sep="\\n  ")
    return report.exit_code("error")


sys.exit(main(sys.argv[1], sys.argv[2]))
"""


def test_the_api_exports_the_types_its_signatures_use() -> None:
    for name in (
        "Manifest",
        "Finding",
        "Rule",
        "Severity",
        "Policy",
        "Report",
        "EnvcheckError",
        "UsageError",
        "ManifestError",
        "ProbeError",
        "OutputError",
        "DeadlineExpired",
        "load_manifest",
        "dump_manifest",
        "rules",
        "get_rule",
    ):
        assert name in api.__all__ and getattr(api, name) is not None, name
    assert issubclass(api.UsageError, api.EnvcheckError)
    rules = api.rules()
    assert len(rules) == len({r.id for r in rules}) > 100
    assert api.get_rule("env-torch-variant") is not None and api.get_rule("NO-SUCH") is None


def test_manifests_round_trip_and_bad_ones_are_manifest_errors(tmp_path: Path) -> None:
    manifest = api.load_manifest(CPU)
    again = tmp_path / "again.json"
    again.write_text(api.dump_manifest(manifest), encoding="utf-8")
    assert api.load_manifest(again) == manifest
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema": 1}', encoding="utf-8")
    with pytest.raises(api.ManifestError):
        api.load_manifest(bad)


def test_a_report_carries_its_verdict_and_the_cli_exit_code() -> None:
    report = api.diff(CPU, CUDA)
    assert report.fails("error") and report.exit_code("error") == 1
    assert all(f.severity == "error" and f.intended is None for f in report.failing("error"))
    clean = api.diff(CPU, CPU)
    assert not clean.fails("info") and clean.exit_code("info") == 0
    # What fails at warning includes what fails at error.
    assert set(report.failing("error")) <= set(report.failing("warning"))


@pytest.mark.slow
def test_no_probe_means_no_suite_and_no_flag_names_in_the_manifest() -> None:
    manifest = api.snapshot(api.SnapshotOptions(probe=False))  # verify left at its default: True
    assert manifest.verify is not None and not manifest.verify.results
    assert manifest.verify.skipped is not None and "--" not in manifest.verify.skipped
    assert manifest.torch.runtime is None  # nothing imported torch


def _marking_python(tmp_path: Path) -> tuple[Path, Path]:
    """An "interpreter" that leaves a mark when anything starts it."""
    mark = tmp_path / "started"
    python = tmp_path / "python3"
    python.write_text(f'#!/bin/sh\ntouch {mark}\nexec {sys.executable} "$@"\n', encoding="utf-8")
    python.chmod(0o755)
    return python, mark


def test_another_environments_manifest_is_refused_before_the_target_starts(tmp_path: Path) -> None:
    out = tmp_path / "envcheck.lock.json"
    out.write_bytes(CPU.read_bytes())  # recorded by another interpreter on another host
    before = out.read_bytes()
    python, mark = _marking_python(tmp_path)
    with pytest.raises(api.UsageError, match="holds the manifest of another environment"):
        api.snapshot(api.SnapshotOptions(python=str(python), verify=False), replaces=out)
    assert not mark.exists(), "the target was started before the refusal"
    assert out.read_bytes() == before


@pytest.mark.slow
def test_a_re_snapshot_keeps_the_label_and_says_what_it_drops(tmp_path: Path) -> None:
    out = tmp_path / "envcheck.lock.json"
    first = api.snapshot(api.SnapshotOptions(probe=False, label="dev"))
    # As if recorded with goldens: the replacement (without the suite) says it holds none.
    from envcheck.manifest.verify import CheckResult, VerifySection

    golden = VerifySection(
        results=[CheckResult(name="matmul", family="linalg", device="cpu", status="passed")]
    )
    out.write_text(api.dump_manifest(first.replace(verify=golden)), encoding="utf-8")
    told: list[str] = []
    again = api.snapshot(api.SnapshotOptions(probe=False), replaces=out, tell=told.append)
    assert again.meta.label == "dev"
    assert told[0] == "kept the label 'dev' of the manifest this one replaces"
    assert "held goldens for 1 smoke checks; this one holds none" in told[1]


@pytest.mark.slow
def test_a_fifteen_line_script_on_the_api_alone_type_checks_and_runs(tmp_path: Path) -> None:
    script = tmp_path / "gate_here.py"
    script.write_text(SCRIPT, encoding="utf-8")
    assert len(SCRIPT.strip().splitlines()) <= 16
    mypy = [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "--follow-imports=silent"]
    checked = subprocess.run(
        [*mypy, str(script)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, "MYPY_CACHE_DIR": str(tmp_path / ".mypy")},
    )
    assert checked.returncode == 0, checked.stdout + checked.stderr
    done = subprocess.run(
        [sys.executable, str(script), sys.executable, str(CUDA)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "FAIL" and "ENV-TORCH-VARIANT" in lines
