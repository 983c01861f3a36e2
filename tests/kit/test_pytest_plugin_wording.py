"""The pytest plugin's words: its summary line counts in the plural its numbers take, worst first, and an
item's findings show a root cause before what it causes."""

from __future__ import annotations

from envcheck.app.flows import Report
from envcheck.core.findings import Finding
from envcheck.pytest_plugin.gate import _describe, _summary_line

CAUSE = Finding(
    rule="ENV-VAR-CHANGED",
    severity="warning",
    subject="LD_LIBRARY_PATH",
    message="LD_LIBRARY_PATH is set on the target only.",
    remedy="Unset LD_LIBRARY_PATH.",
    base="unset",
    target="/opt/lib",
)
EFFECT = Finding(
    rule="ENV-NATIVE-SHADOWED",
    severity="error",
    subject="libgomp.so.1",
    message="libgomp.so.1 loads from /opt/lib.",
    remedy="Remove /opt/lib/libgomp.so.1.",
    caused_by=CAUSE.key,
)


def _report(findings: list[Finding]) -> Report:
    return Report(
        title="envcheck gate: here against lock.json",
        findings=tuple(sorted(findings, key=Finding.sort_key)),
        rules=(),
        policy_line="policy: none",
        policy_changed=False,
    )


def test_the_summary_counts_in_the_plural_worst_first() -> None:
    warnings = [
        Finding(rule="ENV-PKG-MISSING", severity="warning", subject=f"p{i}", message="m", remedy="r")
        for i in range(3)
    ]
    info = Finding(rule="ENV-PKG-ADDED", severity="info", subject="x", message="m", remedy="r")
    line = _summary_line(_report([info, *warnings, EFFECT]), 1, "error")
    assert "1 error, 3 warnings, 1 info;" in line and "3 warning," not in line
    one = _summary_line(_report([warnings[0]]), 0, "error")
    assert ": 1 warning; the gate passes." in one
    assert ": no findings; the gate passes." in _summary_line(_report([]), 0, "error")


def test_a_cause_is_described_before_what_it_causes() -> None:
    # Sorted as a report sorts them (errors first), the consequence would come first.
    text = _describe(sorted([CAUSE, EFFECT], key=Finding.sort_key))
    assert text.index("WARNING ENV-VAR-CHANGED LD_LIBRARY_PATH") < text.index("ERROR ENV-NATIVE-SHADOWED")
    assert f"caused by: {CAUSE.key}" in text
