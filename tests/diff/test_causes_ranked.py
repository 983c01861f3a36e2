"""Causes ranked by what actually broke: one broken import is one root cause, the cause of a failed import
leads the report, and remedies name the real fix (never an unset variable, never the OS for a file a
distribution ships). Real venvs (tests/venvs.py), real gates."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from remedycheck import assert_no_unset_variable_remedies

from envcheck.commands.verify import run_gate
from envcheck.diff.policy import Policy
from envcheck.flows import Report
from envcheck.manifest.io import load
from envcheck.report.interface import groups

DEV_CPU = Path(__file__).resolve().parents[1] / "data" / "manifests" / "dev-cpu.json"


def gate(python: Path) -> Report:
    report, _ = run_gate(DEV_CPU, load(DEV_CPU), Policy(), str(python), 120.0)
    return report


@pytest.mark.slow
def test_a_failed_import_is_one_root_cause(broken_torch_python: Path) -> None:
    report = gate(broken_torch_python)
    found = groups(report.findings)
    failing = [g for g in found if any(f.subject in ("import torch", "import_torch") for f in g.members)]
    # The missing libc10.so, the probe's failed import, the suite's and the checks it stopped: one root.
    assert len(failing) == 1
    (group,) = failing
    assert (group.root.rule, group.root.target) == ("ENV-NATIVE-MISSING", "missing: libc10.so")
    rules = [f.rule for f in group.consequences]
    assert {"ENV-PROBE-FAILED", "VERIFY-ERROR"} <= set(rules)
    (not_run,) = [f for f in group.consequences if f.rule == "VERIFY-SKIPPED"]
    assert not_run.subject == "checks not run" and not_run.base == "29 checks ran"
    assert not_run.message.startswith("29 checks that ran on the golden machine could not run: import torch")
    # No check that could not run is a root of its own.
    assert not [
        g for g in found if g.root.rule in ("VERIFY-SKIPPED", "VERIFY-ERROR") and g.root.severity != "info"
    ]
    # The error section has exactly that one root, first.
    assert [g.root.key for g in found if g.severity == "error"] == [group.root.key]
    # libc10.so is torch's own file: reinstall torch at its exact build, never "from OS packages".
    assert "OS packages" not in group.root.remedy and "operating system" not in group.root.remedy
    assert "--force-reinstall --no-deps 'torch==2.13.0+cpu' --index-url" in group.root.remedy
    assert_no_unset_variable_remedies(report.findings, os.environ)  # the target inherits this environment
