"""The rule catalog: every rule of every family, by stable id (what ``envcheck rules`` prints)."""

from __future__ import annotations

from envcheck.diff.rules.base import REGISTRY, Rule

# One module per family; importing them registers their rules. The order is the catalog's family order.
FAMILY_MODULES = (
    "envcheck.diff.rules.platform",
    "envcheck.diff.rules.packages",
    "envcheck.diff.rules.torch",
    "envcheck.diff.rules.cuda",
    "envcheck.diff.rules.native",
    "envcheck.diff.rules.openmp",
    "envcheck.diff.rules.numerics",
    "envcheck.diff.rules.envvars",
    "envcheck.diff.rules.process",
)


def all_rules() -> tuple[Rule, ...]:
    """Every rule, sorted by id."""
    import importlib

    for module in FAMILY_MODULES:
        importlib.import_module(module)
    return tuple(REGISTRY[k] for k in sorted(REGISTRY))


def get_rule(rule_id: str) -> Rule | None:
    """The rule with this id (case-insensitive), or None."""
    wanted = rule_id.strip().upper()
    return next((r for r in all_rules() if r.id == wanted), None)


def rule_ids() -> tuple[str, ...]:
    """The diff catalog's ids (what diff and doctor check), sorted."""
    return tuple(r.id for r in all_rules())


def all_rule_ids() -> tuple[str, ...]:
    """Every id a finding of any command can carry: the diff catalog and the smoke suite's ``VERIFY-*``
    ids (``envcheck.verify.compare.VERIFY_RULES``), sorted. What a policy may name; what gate checks."""
    # Imported here: verify sits beside diff, and only this question needs both.
    from envcheck.verify.compare import VERIFY_RULES

    return tuple(sorted({*rule_ids(), *VERIFY_RULES}))
