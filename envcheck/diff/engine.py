"""The pure engine: rules over manifests, policy applied, findings sorted. No I/O, no printing.

Each run builds one ``View`` per manifest (``envcheck.manifest.query.views``): the package index and the
requirement graph the rules share, instead of caches that outlive the run.

The engine imports the rule families it runs (``FAMILIES``, in the order ``envcheck rules`` lists them);
each registers its rules on import, and the engine takes the difference and single-environment rules from
the registry."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import ModuleType
from typing import TYPE_CHECKING

from envcheck.core.findings import Finding, registered_rules
from envcheck.diff.rules import (
    builtfor,
    cuda,
    envvars,
    fpmode,
    install,
    interpreter,
    native,
    numerics,
    openmp,
    packages,
    platform,
    predict,
    process,
    torch,
    windows,
)
from envcheck.diff.rules.base import runs_on
from envcheck.manifest.query import views, without_absent

if TYPE_CHECKING:
    from envcheck.core.deadline import Deadline
    from envcheck.core.findings import Rule
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest

# The diff rule families, in the catalog's family order (``envcheck.app.catalog`` adds the other kinds).
FAMILIES: tuple[ModuleType, ...] = (
    platform,
    install,
    interpreter,
    packages,
    torch,
    builtfor,
    cuda,
    native,
    windows,
    openmp,
    numerics,
    fpmode,
    envvars,
    process,
    predict,
)


def checked_rules() -> tuple[Rule, ...]:
    """The rules this engine runs (difference and single-environment: ``FAMILIES``' rules), sorted by id."""
    return registered_rules("difference", "single")


def _rules(given: Iterable[Rule] | None) -> Sequence[Rule]:
    return list(given) if given is not None else checked_rules()


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
    ``Finding.sort_key``. ``rules`` defaults to ``checked_rules()`` (single-environment rules in it are
    skipped); ``policy`` ignores, re-grades or marks findings intended. Pure; raises nothing for
    well-formed manifests but ``DeadlineExpired``, checked before each rule, once ``deadline`` passed."""
    findings: list[Finding] = []
    base, target = _comparable(base, target)
    with views(base, target):  # one view of each manifest for every rule of this run
        for rule in _rules(rules):
            # A predicted side lacks the live facts: only the rules that read none of them run.
            if rule.difference is not None and runs_on(rule, base, target):
                if deadline is not None:
                    deadline.check("diffing", f"before rule {rule.id}")
                findings.extend(rule.difference(rule, base, target))
    return _finish(findings, policy)


def _comparable(base: Manifest, target: Manifest) -> tuple[Manifest, Manifest]:
    """``base`` and ``target`` as the rules compare them: a container image's manifest (``meta.kind``
    ``image``) lacks what only a run knows (``meta.absent``: the runtime probe, the CPU...), so the other
    side's values of those facts are set aside; what both hold is compared as between two snapshots."""
    if target.meta.kind == "image" and base.meta.kind != "image":
        base = without_absent(base, target.meta.absent or ())
    elif base.meta.kind == "image" and target.meta.kind != "image":
        target = without_absent(target, base.meta.absent or ())
    return base, target


def doctor(
    manifest: Manifest,
    *,
    rules: Iterable[Rule] | None = None,
    policy: Policy | None = None,
    deadline: Deadline | None = None,
) -> list[Finding]:
    """Single-environment rules only: traps in one environment that need no baseline, sorted (see ``diff``
    for ``deadline``)."""
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
    with views(base, target):
        return diff(base, target, deadline=deadline) + beside_a_base(doctor(target, deadline=deadline))
