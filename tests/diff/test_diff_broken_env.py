"""doctor and diff on a really broken environment: a copy of the test venv whose torch/lib/libc10.so is
gone (tests/conftest.py). The probe fails at `import torch` and the native tree names the missing file."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from diffdata import manifest
from remedycheck import assert_no_unset_variable_remedies

from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.diff.engine import diff, doctor
from envcheck.native import scan_for_snapshot


@pytest.mark.slow
def test_a_venv_missing_libc10(broken_torch_python: Path) -> None:
    broken = take_snapshot(
        SnapshotOptions(python=str(broken_torch_python), timeout=120), native=scan_for_snapshot
    )
    found = {f.rule: f for f in doctor(broken)}
    probe = found["ENV-PROBE-FAILED"]
    assert probe.severity == "error" and probe.subject == "import torch"
    missing = [f for f in doctor(broken) if f.rule == "ENV-NATIVE-MISSING" and f.severity == "error"]
    assert missing and all("libc10.so" in (f.target or "") for f in missing)
    assert_no_unset_variable_remedies(doctor(broken), broken.env)
    assert_no_unset_variable_remedies(diff(manifest("dev-cpu"), broken), broken.env)
    # Against the healthy venv it came from: what the crashed probe could not see is unknown, not lost.
    rules = {f.rule for f in diff(manifest("dev-cpu"), broken)}
    assert not {"ENV-NATIVE-LOST", "ENV-NATIVE-ADDED", "ENV-TORCH-VERSION"} & rules


def test_kmp_duplicate_lib_ok_in_the_real_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KMP_DUPLICATE_LIB_OK", "TRUE")
    snap = take_snapshot(SnapshotOptions(python=sys.executable, probe=False, verify=False))
    (found,) = [f for f in doctor(snap) if f.rule == "ENV-KMP-DUPLICATE-LIB-OK"]
    assert (found.severity, found.target) == ("warning", "TRUE")
    monkeypatch.delenv("KMP_DUPLICATE_LIB_OK")
    clean = take_snapshot(SnapshotOptions(python=sys.executable, probe=False, verify=False))
    assert [f for f in doctor(clean) if f.rule == "ENV-KMP-DUPLICATE-LIB-OK"] == []
