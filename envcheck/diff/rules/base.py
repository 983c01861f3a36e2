"""The rule interface: a ``Rule`` is metadata (stable id, default severity, evidence) plus a pure check.

Two kinds:

- ``difference`` rules compare a base manifest with a target (``check(base, target)``);
- ``single`` rules look at one environment (``check(manifest)``): traps that need no baseline.

Each family module registers its rules with ``@difference_rule`` / ``@single_rule``; the engine
(``envcheck.diff.engine``) imports the families and ``envcheck.core.findings`` holds the one registry. A
check yields ``Finding``s built with ``Rule.finding`` so that the rule id and default severity come from one
place.

Versions and names are ``packaging``'s (``Version``, ``canonicalize_name``), imported on first use: the
rule modules are imported by every command, most of which never compare a version.

The engine builds one ``View`` of each manifest per run (``views``): the name index and the requirement
graph that many rules ask for thousands of times on a 500-package manifest. Checks keep their signatures
and reach it through ``view(m)`` / ``pkg(m, name)``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from envcheck.core.findings import Finding, Rule, RuleKind, Severity, register

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest

DifferenceCheck = Callable[["Rule", "Manifest", "Manifest"], Iterable[Finding]]
SingleCheck = Callable[["Rule", "Manifest"], Iterable[Finding]]

# The ids of the rules whose checks read only facts a predicted manifest holds (packages, torch's version
# file, the native tree, the prediction itself), declared with ``static_facts=True``. On a predicted side
# the engine runs only these: every other rule reads live facts the prediction marks absent
# (``meta.absent``) and would report their absence as "lost" or "changed".
STATIC_FACT_RULES: set[str] = set()


def runs_on(rule: Rule, *manifests: Manifest) -> bool:
    """Whether the engine runs ``rule`` over ``manifests``: always, unless one of them is predicted and the
    rule reads live facts."""
    return rule.id in STATIC_FACT_RULES or not any(m.meta.kind == "predicted" for m in manifests)


@dataclass(frozen=True, kw_only=True, slots=True)
class _Meta:
    family: str
    severity: Severity
    title: str
    why: str
    fm: Iterable[str] = ()
    evidence: Iterable[str] = ()
    fixes: Iterable[str] = ()

    def rule(self, id: str, kind: RuleKind) -> Rule:
        return Rule(
            id=id,
            kind=kind,
            family=self.family,
            severity=self.severity,
            title=self.title,
            why=self.why,
            failure_modes=tuple(self.fm),
            evidence=tuple(self.evidence),
            fixes=tuple(self.fixes),
        )


def difference_rule(
    id: str,
    *,
    family: str,
    severity: Severity,
    title: str,
    why: str,
    fm: Iterable[str] = (),
    evidence: Iterable[str] = (),
    static_facts: bool = False,
    fixes: Iterable[str] = (),
) -> Callable[[DifferenceCheck], DifferenceCheck]:
    """Register ``check(rule, base, target)`` as a difference rule (``static_facts``: it reads only facts
    a predicted manifest holds, see ``STATIC_FACT_RULES``; ``fixes``: ``Rule.fixes``)."""
    meta = _Meta(
        family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence, fixes=fixes
    )

    def decorate(check: DifferenceCheck) -> DifferenceCheck:
        register(replace(meta.rule(id, "difference"), difference=check))
        if static_facts:
            STATIC_FACT_RULES.add(id)
        return check

    return decorate


def single_rule(
    id: str,
    *,
    family: str,
    severity: Severity,
    title: str,
    why: str,
    fm: Iterable[str] = (),
    evidence: Iterable[str] = (),
    static_facts: bool = False,
    fixes: Iterable[str] = (),
) -> Callable[[SingleCheck], SingleCheck]:
    """Register ``check(rule, manifest)`` as a single-environment rule (``static_facts``, ``fixes``: as
    above)."""
    meta = _Meta(
        family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence, fixes=fixes
    )

    def decorate(check: SingleCheck) -> SingleCheck:
        register(replace(meta.rule(id, "single"), single=check))
        if static_facts:
            STATIC_FACT_RULES.add(id)
        return check

    return decorate
