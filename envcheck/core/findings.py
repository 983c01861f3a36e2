"""The bottom of envcheck's findings: ``Finding``, ``Severity``, ``Rule`` and the one registry of rules.

Every finding any command emits — a difference (``diff``), a trap of one environment (``doctor``), a
smoke-suite result (``VERIFY-*``), a scan's refusal — carries the id of a rule registered here, so that
``envcheck rules`` lists it, a policy can name it (a typo is refused with the closest id) and reports take
its explanation from one place. Rule families live above this module and register themselves on import;
``envcheck.app.catalog`` imports every family and is the whole catalog. This module imports nothing of
envcheck and loads nothing: its lookups see what is registered.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:
    from envcheck.core.remedy import Action

Severity = Literal["error", "warning", "info"]
SEVERITY_RANK: dict[Severity, int] = {"error": 0, "warning": 1, "info": 2}

RuleKind = Literal["difference", "single", "verify", "lock", "cluster"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Finding:
    """One finding. ``rule`` is a stable id (``ENV-TORCH-VARIANT``) that users put in policy files.

    ``base`` / ``target`` are the two values compared (``None`` for single-environment rules or where a
    side lacks the fact). ``intended`` holds the policy's reason when the difference is declared intended:
    it is still reported but never fails the gate. ``machine`` names the target in a fleet report.
    ``caused_by`` is the ``key`` of the root-cause finding this one is a consequence of (reports fold it
    under that one); ``None`` for a root cause. ``actions`` is the remedy as data
    (``envcheck.core.remedy``), in the order that works: ``remedy`` is its text for a person, and
    ``--remedies`` writes the actions as a script; empty where the remedy is advice no command carries out.
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
    caused_by: str | None = None
    actions: tuple[Action, ...] = ()

    @property
    def key(self) -> str:
        """A stable name for this finding within one report: ``RULE:subject`` (``@machine`` in a fleet)."""
        key = f"{self.rule}:{self.subject}"
        return f"{key}@{self.machine}" if self.machine else key

    def sort_key(self) -> tuple[int, int, str, str, str, str]:
        """Errors first; within a severity what makes torch import another tree or fail to import
        (``FIRST_CAUSES``) before the rest; then by rule id, subject and machine: the same input gives the
        same report."""
        return (
            SEVERITY_RANK[self.severity],
            FIRST_CAUSES.get(self.rule, len(FIRST_CAUSES)),
            self.rule,
            self.subject,
            self.machine or "",
            self.target or "",
        )


# Rules whose findings explain why ``import torch`` takes another tree or fails, in the order a report
# leads with them (within a severity): an installation broken by an interrupted or doubled install, the
# wrong torch, then a library its import cannot load, then the failed import itself. Findings that are
# consequences of these are linked to them by ``envcheck.diff.causes``; this order ranks the roots.
FIRST_CAUSES: dict[str, int] = {
    rule: rank
    for rank, rule in enumerate(
        (
            # An installation that disagrees with its own metadata: whatever else fails follows from it.
            "ENV-INSTALL-INTERRUPTED",
            "ENV-DIST-DUPLICATE",
            "ENV-FILE-SHARED",
            "ENV-VERSION-FILE",
            "ENV-TORCH-TREES",
            "ENV-TORCH-SHADOWED",
            # The interpreter the installation cannot run on, and builds made for another torch.
            "ENV-VENV-INTERPRETER",
            "ENV-WHEEL-TAG",
            "ENV-EXT-SUFFIX",
            "ENV-BUILT-FOR-VARIANT",
            "ENV-BUILT-FOR-ABI",
            "ENV-WIN-DLL-NOT-FOUND",
            "ENV-WIN-VC-RUNTIME-OLD",
            "ENV-NATIVE-MISSING",
            "ENV-SYMBOL-VERSION",
            "ENV-PROBE-FAILED",
        )
    )
}


@dataclass(frozen=True, kw_only=True, slots=True)
class MachineGroup:
    """Machines of a fleet (or ranks of a job) that share one environment, reported once: ``name`` is the
    ``Finding.machine`` of the group's findings, ``members`` the machines (or ``host:rank`` ranges) in it,
    ``machines`` how many machines those are when a member stands for several (0: one per member).
    ``identical_to_base``: the group has nothing that differs from the base."""

    name: str
    members: tuple[str, ...]
    identical_to_base: bool = False
    machines: int = 0

    @property
    def size(self) -> int:
        """How many machines the group holds: ``machines`` when a member names several (the ranks
        ``host:0-3``), else one per member."""
        return self.machines or len(self.members)


def at_or_above(finding: Finding, threshold: Severity) -> bool:
    """True when ``finding`` counts against a gate set to ``--fail-on threshold`` (intended ones never do)."""
    return finding.intended is None and SEVERITY_RANK[finding.severity] <= SEVERITY_RANK[threshold]


# A rule's check, typed loosely here so that this module needs no manifest model: diff rules take
# ``(rule, base, target)`` or ``(rule, manifest)`` (``envcheck.diff.rules.base`` types them precisely).
Check = Callable[..., Iterable[Finding]]


@dataclass(frozen=True, kw_only=True, slots=True)
class Rule:
    """One rule of the catalog. ``failure_modes`` are ids of docs/failure-modes.md (``FM-01``); ``evidence``
    lists the upstream issues behind it (``pytorch/pytorch#131662``). ``remedy`` is the general advice
    (each finding carries its own, specific one). ``kind``: ``difference`` and ``single`` rules have a
    check the diff engine runs; ``verify`` rules are emitted by the smoke suite's comparison, ``lock`` rules
    by ``envcheck lock --check``, ``cluster`` rules by ``envcheck cluster``."""

    id: str
    kind: RuleKind
    family: str
    severity: Severity
    title: str
    why: str
    failure_modes: tuple[str, ...] = ()
    evidence: tuple[str, ...] = ()
    remedy: str = ""
    fixes: tuple[str, ...] = ()
    difference: Check | None = field(default=None, compare=False)
    single: Check | None = field(default=None, compare=False)

    def finding(
        self,
        subject: str,
        message: str,
        remedy: str,
        *,
        base: str | None = None,
        target: str | None = None,
        severity: Severity | None = None,
        caused_by: str | None = None,
        actions: tuple[Action, ...] = (),
    ) -> Finding:
        """A finding of this rule (its default severity unless the check knows better). ``actions`` may be
        only of the kinds the rule declares in ``fixes`` (and manual steps): a programming error otherwise,
        so that the test that proves each kind by running it cannot be skipped."""
        undeclared = {a.kind for a in actions} - {*self.fixes, "manual"}
        if undeclared:
            raise ValueError(f"{self.id} emits remedy actions it does not declare: {sorted(undeclared)}")
        return Finding(
            rule=self.id,
            severity=severity or self.severity,
            subject=subject,
            message=message,
            remedy=remedy,
            base=base,
            target=target,
            caused_by=caused_by,
            actions=actions,
        )


REGISTRY: dict[str, Rule] = {}


def register(rule: Rule) -> Rule:
    """Add ``rule`` to the registry. Raises ``ValueError`` for an id registered twice (a programming error
    that the catalog test catches)."""
    if rule.id in REGISTRY:
        raise ValueError(f"rule id {rule.id} registered twice")
    REGISTRY[rule.id] = rule
    return rule


def registrar(kind: RuleKind, family: str) -> Callable[..., Rule]:
    """``register`` for the rules a command emits itself (no engine check): one ``kind`` and ``family``,
    the rest given per rule as ``(id, severity, title, why, remedy, fm=(), fixes=())`` (``fixes``:
    ``Rule.fixes``)."""

    def add(
        id: str,
        severity: Severity,
        title: str,
        why: str,
        remedy: str,
        fm: tuple[str, ...] = (),
        *,
        fixes: tuple[str, ...] = (),
    ) -> Rule:
        return register(
            Rule(
                id=id,
                kind=kind,
                family=family,
                severity=severity,
                title=title,
                why=why,
                remedy=remedy,
                failure_modes=fm,
                fixes=fixes,
            )
        )

    return add


def registered_rule(rule_id: str) -> Rule | None:
    """The registered rule with this id (case-insensitive), or None. Loads nothing: a rule is here once its
    family's module was imported (the run that emitted a finding did; ``envcheck.app.catalog`` imports
    every family)."""
    return REGISTRY.get(rule_id.strip().upper())


def registered_rules(*kinds: RuleKind) -> tuple[Rule, ...]:
    """The registered rules of ``kinds`` (default: all), sorted by id; loads nothing (``registered_rule``)."""
    return tuple(REGISTRY[k] for k in sorted(REGISTRY) if not kinds or REGISTRY[k].kind in kinds)


def registered_ids(*kinds: RuleKind) -> tuple[str, ...]:
    """The ids of ``registered_rules(*kinds)``."""
    return tuple(r.id for r in registered_rules(*kinds))


def describe(rule: Rule) -> dict[str, Any]:
    """The rule as plain data (``envcheck rules --format json``, Markdown and JUnit take from it)."""
    return {
        "id": rule.id,
        "kind": rule.kind,
        "family": rule.family,
        "severity": rule.severity,
        "title": rule.title,
        "why": rule.why,
        "remedy": rule.remedy,
        "fixes": list(rule.fixes),
        "failure_modes": list(rule.failure_modes),
        "evidence": list(rule.evidence),
    }
