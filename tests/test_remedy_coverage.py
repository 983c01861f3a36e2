"""Every rule whose findings may carry a remedy by commands (``Rule.fixes``: an install, an uninstall, files
removed, a variable, a file edited, a rebuild) has at least one test that runs that remedy on a real broken
environment and then runs envcheck again (marked ``@pytest.mark.remedy("RULE-ID")``, see
``tests/remedyrun.py``). A rule added with a remedy and no such test fails here, by name."""

from __future__ import annotations

import ast
from pathlib import Path

from envcheck.app.catalog import rule_ids  # noqa: F401  (imports every family: the whole registry)
from envcheck.core.findings import registered_rules

TESTS = Path(__file__).parent


def proven() -> dict[str, list[str]]:
    """Rule id -> the tests marked as running its remedy."""
    out: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef):
                continue
            for deco in node.decorator_list:
                if (
                    isinstance(deco, ast.Call)
                    and isinstance(deco.func, ast.Attribute)
                    and deco.func.attr == "remedy"
                    and ast.unparse(deco.func.value) == "pytest.mark"
                ):
                    for arg in deco.args:
                        if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                            out.setdefault(arg.value, []).append(f"{path.relative_to(TESTS)}::{node.name}")
    return out


def test_every_rule_with_a_remedy_by_commands_has_a_test_that_runs_it() -> None:
    marked = proven()
    runnable = [r.id for r in registered_rules() if set(r.fixes) - {"manual"}]
    assert runnable, "no rule declares a remedy by commands"
    missing = [rule for rule in runnable if rule not in marked]
    assert not missing, "rules whose remedy no test runs:\n" + "\n".join(missing)


def test_marked_tests_name_registered_rules() -> None:
    ids = {r.id for r in registered_rules()}
    unknown = sorted(set(proven()) - ids)
    assert not unknown, f"tests marked with unknown rule ids: {unknown}"
