"""``Finding``: one difference or trap that matters, with why and what to do. Shared by diff, doctor,
verify and gate, and by every report format."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Severity = Literal["error", "warning", "info"]

SEVERITY_RANK: dict[Severity, int] = {"error": 0, "warning": 1, "info": 2}


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One finding. ``rule`` is a stable id (``ENV-TORCH-VARIANT``) that users put in policy files.

    ``base`` / ``target`` are the two values compared (``None`` for single-environment rules or where a
    side lacks the fact). ``intended`` holds the policy's reason when the difference is declared intended:
    it is still reported but never fails the gate. ``machine`` names the target in a fleet report.
    """

    rule: str
    severity: Severity
    subject: str
    message: str
    remedy: str
    base: str | None = None
    target: str | None = None
    intended: str | None = None
    machine: str | None = None

    def sort_key(self) -> tuple[int, str, str, str, str]:
        """Errors first, then by rule id, subject and machine: the same input gives the same report."""
        return (SEVERITY_RANK[self.severity], self.rule, self.subject, self.machine or "", self.target or "")


def at_or_above(finding: Finding, threshold: Severity) -> bool:
    """True when ``finding`` counts against a gate set to ``--fail-on threshold`` (intended ones never do)."""
    return finding.intended is None and SEVERITY_RANK[finding.severity] <= SEVERITY_RANK[threshold]
