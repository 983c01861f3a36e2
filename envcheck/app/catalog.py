"""The whole rule catalog: every rule family imported, so every rule any command emits is registered.

``envcheck.core.findings`` holds the registry and looks up what is registered; the families register
themselves on import and live above it: the diff engine's (``envcheck.diff.engine.FAMILIES``), the smoke
suite's ``VERIFY-*`` (``envcheck.verify.rules``), ``envcheck lock --check``'s (``envcheck.lock.rules``) and
``envcheck cluster``'s (``envcheck.cluster.rules``). This module imports them all, so ``catalog()`` is every
rule: ``envcheck rules`` lists it, a policy is checked against its ids and the docs index is tested on it.
A new family gets its import and its row in ``FAMILY_MODULES`` here.
"""

from __future__ import annotations

import envcheck.cluster.rules
import envcheck.lock.rules
import envcheck.verify.rules
from envcheck.core.findings import Rule, RuleKind, registered_ids, registered_rule, registered_rules
from envcheck.diff.engine import FAMILIES as DIFF_FAMILIES

# The modules that register rules, in the order ``envcheck rules`` lists their families.
FAMILY_MODULES: tuple[str, ...] = (
    *(module.__name__ for module in DIFF_FAMILIES),
    envcheck.verify.rules.__name__,
    envcheck.cluster.rules.__name__,
    envcheck.lock.rules.__name__,
)


def catalog() -> tuple[Rule, ...]:
    """Every rule of every family, sorted by id."""
    return registered_rules()


def get_rule(rule_id: str) -> Rule | None:
    """The rule with this id (case-insensitive), or None."""
    return registered_rule(rule_id)


def rule_ids(*kinds: RuleKind) -> tuple[str, ...]:
    """The ids of the rules of ``kinds`` (default: all), sorted."""
    return registered_ids(*kinds)
