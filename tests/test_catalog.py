"""One catalog: every rule id any code path can emit is registered in ``envcheck.core.findings``, with what a
reader needs (title, why, family), and `envcheck rules` explains each."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.app.catalog import catalog, get_rule, rule_ids
from envcheck.cli import app

PACKAGE = Path(__file__).parent.parent / "envcheck"
# A rule id as code writes it: a string literal ENV-… or VERIFY-… (not a glob or a prefix).
_ID_LITERAL = re.compile(r"""["']((?:ENV|VERIFY)-[A-Z0-9]+(?:-[A-Z0-9]+)*)["']""")


def _ids_written_in_code() -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        for match in _ID_LITERAL.finditer(path.read_text(encoding="utf-8")):
            found.setdefault(match.group(1), []).append(str(path.relative_to(PACKAGE.parent)))
    return found


def test_every_id_written_in_the_code_is_in_the_catalog() -> None:
    known = set(rule_ids())
    unknown = {rule: where for rule, where in _ids_written_in_code().items() if rule not in known}
    assert not unknown, f"ids emitted or named without a rule in the catalog: {unknown}"


def test_the_literal_scan_sees_both_families() -> None:
    # Guards the test above against a pattern that silently matches nothing.
    written = _ids_written_in_code()
    assert "VERIFY-NUMERICS" in written
    assert "ENV-TORCH-VARIANT" in written


def test_every_rule_explains_itself() -> None:
    for rule in catalog():
        assert rule.title and rule.why and rule.family, rule.id
        assert rule.kind in ("difference", "single", "verify", "lock", "cluster"), rule.id
        # Only the engine's rules have a check; the others are emitted by their command's comparison.
        has_check = (rule.difference or rule.single) is not None
        assert (rule.kind in ("difference", "single")) == has_check, rule.id
        assert all(re.fullmatch(r"FM-\d\d", fm) for fm in rule.failure_modes), rule.id


def test_every_failure_mode_a_rule_cites_is_defined_in_the_docs() -> None:
    text = (Path(__file__).parents[1] / "docs" / "failure-modes.md").read_text(encoding="utf-8")
    defined = set(re.findall(r"^## (FM-\d\d) ", text, re.MULTILINE))
    assert len(defined) >= 26
    cited = {fm: rule.id for rule in catalog() for fm in rule.failure_modes}
    assert {fm: rule for fm, rule in cited.items() if fm not in defined} == {}


@pytest.mark.parametrize("rule_id", ["VERIFY-SPEED", "VERIFY-INFO", "ENV-TORCH-VARIANT"])
def test_rules_explains_every_family(rule_id: str) -> None:
    result = CliRunner().invoke(app, ["rules", rule_id])
    assert result.exit_code == 0, result.output
    rule = get_rule(rule_id)
    assert rule is not None
    assert result.stdout.startswith(f"{rule_id}: {rule.title}")


def test_a_mistyped_id_gets_the_closest_one() -> None:
    result = CliRunner().invoke(app, ["rules", "VERIFY-SPED"])
    assert result.exit_code == 2
    assert "Did you mean VERIFY-SPEED?" in result.stderr


def test_the_docs_index_lists_every_rule_with_what_it_cites() -> None:
    text = (Path(__file__).parents[1] / "docs" / "failure-modes.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([A-Z0-9-]+)` \| (.+) \|$", text, re.MULTILINE))
    expected = {r.id: f"{r.kind} | {r.family} | {', '.join(r.failure_modes) or '—'}" for r in catalog()}
    assert rows == expected
