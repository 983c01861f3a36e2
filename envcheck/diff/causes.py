"""Linking consequences to their root causes: one ``LD_LIBRARY_PATH`` and the libraries it moved, one torch
variant and the CUDA stack it drops, one library resolved elsewhere and its echoes.

``link(findings)`` is pure: it returns the same findings, each consequence with ``caused_by`` set to the
``key`` of its root cause. Reports lead with root causes and fold their consequences under them. A finding
is linked only when the cause explains it: nothing is hidden, and an unexplained finding stays a root.
"""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.findings import Finding


def link(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with ``caused_by`` set on each consequence whose cause is among them. A finding that
    already names a cause that is present keeps it; one naming a cause that is absent (the policy ignored
    it) becomes a root again, so nothing is folded under a finding the report does not show."""
    present = {f.key for f in findings}
    return [f if f.caused_by is None or f.caused_by in present else _as_root(f) for f in findings]


def _as_root(finding: Finding) -> Finding:
    import dataclasses

    return dataclasses.replace(finding, caused_by=None)
