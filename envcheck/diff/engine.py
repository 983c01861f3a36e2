"""The pure engine: rules over manifests, policy applied, findings sorted. No I/O, no printing.

Each run builds one ``View`` per manifest (``envcheck.diff.rules.base.views``): the package index and the
requirement graph the rules share, instead of caches that outlive the run."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from envcheck.core.findings import Finding

if TYPE_CHECKING:
    from envcheck.core.deadline import Deadline
    from envcheck.core.findings import Rule
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest


def _rules(rules: Iterable[Rule] | None) -> Sequence[Rule]:
    if rules is not None:
        return list(rules)
    from envcheck.core.findings import catalog

    return [r for r in catalog() if r.kind in ("difference", "single")]


def _finish(findings: list[Finding], policy: Policy | None) -> list[Finding]:
    if policy is not None:
        findings = policy.apply(findings)
    # Exact duplicates (a rule reaching one fact by two roads) are reported once.
    return sorted(set(findings), key=Finding.sort_key)


def diff(
    base: Manifest,
    target: Manifest,
    *,
    rules: Iterable[Rule] | None = None,
    policy: Policy | None = None,
    deadline: Deadline | None = None,
) -> list[Finding]:
    """Difference rules only: what changed from ``base`` to ``target`` that matters, sorted by
    ``Finding.sort_key``. ``rules`` defaults to the whole catalog (single-environment rules in it are
    skipped); ``policy`` ignores, re-grades or marks findings intended. Pure; raises nothing for
    well-formed manifests but ``DeadlineExpired``, checked before each rule, once ``deadline`` passed."""
    from envcheck.diff.rules.base import runs_on
    from envcheck.manifest.query import views

    findings: list[Finding] = []
    with views(base, target):  # one view of each manifest for every rule of this run
        for rule in _rules(rules):
            # A predicted side lacks the live facts: only the rules that read none of them run.
            if rule.difference is not None and runs_on(rule, base, target):
                if deadline is not None:
                    deadline.check("diffing", f"before rule {rule.id}")
                findings.extend(rule.difference(rule, base, target))
    return _finish(findings, policy)


def doctor(
    manifest: Manifest,
    *,
    rules: Iterable[Rule] | None = None,
    policy: Policy | None = None,
    deadline: Deadline | None = None,
) -> list[Finding]:
    """Single-environment rules only: traps in one environment that need no baseline, sorted (see ``diff``
    for ``deadline``)."""
    from envcheck.diff.rules.base import runs_on
    from envcheck.manifest.query import views

    findings: list[Finding] = []
    with views(manifest):
        for rule in _rules(rules):
            if rule.single is not None and runs_on(rule, manifest):
                if deadline is not None:
                    deadline.check("running the single-environment rules", f"before rule {rule.id}")
                findings.extend(rule.single(rule, manifest))
    return _finish(findings, policy)


# Single-environment facts that speak only where there is no base: beside one, the difference rules say
# what matters (ENV-PKG-SOURCE for an install's source), and the same editable checkout on both sides, or
# on every machine of a fleet, is no news.
DOCTOR_ONLY = frozenset({"ENV-PKG-DIRECT"})


def beside_a_base(findings: Iterable[Finding]) -> list[Finding]:
    """``findings`` of a target's single rules, less those that speak only in ``envcheck doctor``."""
    return [f for f in findings if f.rule not in DOCTOR_ONLY]


def diff_and_doctor(base: Manifest, target: Manifest, deadline: Deadline | None = None) -> list[Finding]:
    """What ``envcheck diff`` and ``gate`` report of one target: the difference rules against ``base``,
    then the target's own single rules (``beside_a_base``), sharing one view of each manifest."""
    from envcheck.manifest.query import views

    with views(base, target):
        return diff(base, target, deadline=deadline) + beside_a_base(doctor(target, deadline=deadline))
