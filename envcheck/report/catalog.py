"""The rule catalog as text: ``envcheck rules`` (every rule, by family) and ``envcheck rules ID`` (one rule
explained with its evidence)."""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.core.findings import Rule

# How ``envcheck rules ID`` names each kind of rule.
KINDS = {
    "difference": "difference rule (base vs target)",
    "single": "single-environment rule (doctor)",
    "verify": "smoke-suite rule (verify, gate)",
    "lock": "lock rule (lock --check)",
    "cluster": "cluster rule (cluster)",
}


def catalog_text(rules: Sequence[Rule], family_modules: Sequence[str]) -> str:
    """Every rule, one line each, grouped by family; the families in the order of the modules that
    register them (``family_modules``: a family ranks where the module of its first check stands)."""
    width = max(len(r.id) for r in rules)
    order = {module: i for i, module in enumerate(family_modules)}
    rank: dict[str, int] = {}
    for r in rules:
        module = getattr(r.difference or r.single, "__module__", "envcheck.verify.rules")
        rank[r.family] = min(rank.get(r.family, len(order)), order.get(module, len(order)))
    families = sorted(rank, key=lambda f: (rank[f], f))
    lines: list[str] = []
    for family in families:
        lines += [*([""] if lines else []), family.upper()]
        lines += [
            f"  {r.id:<{width}}  {r.kind:<10}  {r.severity:<8}  {r.title}"
            for r in rules
            if r.family == family
        ]
    lines.append(
        f"\n{len(rules)} rules (kind: difference = base vs target, single = one environment (doctor), "
        "verify = the smoke suite). `envcheck rules ID` explains one."
    )
    return "\n".join(lines)


def rule_text(rule: Rule) -> str:
    """One rule explained: its kind, family, default severity, why it matters, what to do, the failure
    modes it catches and the evidence it reads."""
    lines = [
        f"{rule.id}: {rule.title}",
        f"  kind            {KINDS[rule.kind]}",
        f"  family          {rule.family}",
        f"  severity        {rule.severity} (by default; a finding may be graded by its consequence)",
        f"  why it matters  {rule.why}",
        *([f"  what to do      {rule.remedy}"] if rule.remedy else []),
        f"  failure modes   {', '.join(rule.failure_modes) or '-'}",
        f"  evidence        {', '.join(rule.evidence) or '-'}",
    ]
    return "\n".join(lines)
