"""The diff engine's view of the one catalog (``envcheck.findings``): the rules it runs."""

from __future__ import annotations

from envcheck.findings import FAMILY_MODULES, Rule, catalog, get_rule
from envcheck.findings import rule_ids as _rule_ids

__all__ = ["FAMILY_MODULES", "Rule", "all_rule_ids", "all_rules", "get_rule", "rule_ids"]


def all_rules() -> tuple[Rule, ...]:
    """Every rule the diff engine runs (difference and single-environment rules), sorted by id."""
    return tuple(r for r in catalog() if r.kind != "verify")


def rule_ids() -> tuple[str, ...]:
    """The diff catalog's ids (what diff and doctor check), sorted."""
    return _rule_ids("difference", "single")


def all_rule_ids() -> tuple[str, ...]:
    """Every id a finding of any command can carry (diff rules and the smoke suite's ``VERIFY-*``), sorted:
    what a policy may name."""
    return _rule_ids()
