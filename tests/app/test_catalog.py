"""One catalog: every rule id any code path can emit is registered (``envcheck.core.findings`` holds the
registry, ``envcheck.app.catalog`` imports every family), with what a reader needs (title, why, family),
and `envcheck rules` explains each."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.app.catalog import FAMILY_MODULES, catalog, get_rule, rule_ids
from envcheck.cli import app

PACKAGE = Path(__file__).parents[2] / "envcheck"
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
    text = (Path(__file__).parents[2] / "docs" / "failure-modes.md").read_text(encoding="utf-8")
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
    text = (Path(__file__).parents[2] / "docs" / "failure-modes.md").read_text(encoding="utf-8")
    rows = dict(re.findall(r"^\| `([A-Z0-9-]+)` \| (.+) \|$", text, re.MULTILINE))
    expected = {r.id: f"{r.kind} | {r.family} | {', '.join(r.failure_modes) or '—'}" for r in catalog()}
    assert rows == expected


# The names a module calls to put rules in the registry.
_REGISTERS = frozenset({"register", "registrar", "difference_rule", "single_rule"})


def _registering_modules() -> set[str]:
    """The envcheck modules that register rules when imported: a module-level call (a decorator included) of
    one of ``_REGISTERS``, outside the modules that define them."""
    found = set()
    for path in sorted(PACKAGE.rglob("*.py")):
        module = ".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts).removesuffix(".__init__")
        if module in ("envcheck.core.findings", "envcheck.diff.rules.base"):
            continue
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            # A function's body runs later; its decorators run on import.
            runs_now = node.decorator_list if isinstance(node, ast.FunctionDef | ast.ClassDef) else [node]
            if any(
                isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _REGISTERS
                for part in runs_now
                for n in ast.walk(part)
            ):
                found.add(module)
    return found


def test_the_catalog_imports_every_module_that_registers_rules() -> None:
    assert _registering_modules() == set(FAMILY_MODULES)
    assert len(FAMILY_MODULES) == len(set(FAMILY_MODULES))


def test_the_registry_loads_nothing() -> None:
    # The registry sits at the bottom: loading the families by name from it would be an upward import that
    # tests/test_architecture.py cannot see. Names imported for the type checker only load nothing.
    source = (PACKAGE / "core" / "findings.py").read_text(encoding="utf-8")
    tree = ast.parse(source)
    typing_only = {
        id(inner)
        for n in ast.walk(tree)
        if isinstance(n, ast.If) and isinstance(n.test, ast.Name) and n.test.id == "TYPE_CHECKING"
        for inner in ast.walk(n)
    }
    imported = [
        alias.name if isinstance(n, ast.Import) else n.module or ""
        for n in ast.walk(tree)
        if isinstance(n, ast.Import | ast.ImportFrom) and id(n) not in typing_only
        for alias in n.names
    ]
    assert not [m for m in imported if m.split(".")[0] in ("envcheck", "importlib")]
    assert "import_module" not in source and "__import__" not in source


def test_the_diff_engine_registers_every_rule_it_runs() -> None:
    # In a fresh interpreter, importing the engine alone registers every difference and single rule of the
    # catalog: the engine's default rules do not depend on what else a command happened to import.
    code = (
        "import envcheck.diff.engine as e, sys; "
        "print(' '.join(r.id for r in e.checked_rules())); "
        "print('envcheck.app.catalog' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    ids, catalog_loaded = out.splitlines()
    assert ids.split() == list(rule_ids("difference", "single"))
    assert catalog_loaded == "False"
