"""``envcheck.api.rules`` and ``get_rule``: the rule catalog, every rule any job emits (as ``envcheck
rules`` lists them)."""

from __future__ import annotations

from envcheck.api._common import public
from envcheck.app.catalog import FAMILY_MODULES, catalog
from envcheck.app.catalog import get_rule as _get_rule
from envcheck.core.findings import Rule

__all__ = ["FAMILY_MODULES", "get_rule", "rules"]


@public
def rules() -> tuple[Rule, ...]:
    """Every rule of the catalog, sorted by id: its id, family, severity, title, why, remedy, the kinds of
    remedy action its findings may carry (``fixes``), failure modes and evidence."""
    return catalog()


@public
def get_rule(rule_id: str) -> Rule | None:
    """The rule with this id (case-insensitive: ``env-torch-variant``), or ``None``."""
    return _get_rule(rule_id)
