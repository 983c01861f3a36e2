"""Policy: ignore, severity change and intended differences, from a file or from pyproject.toml."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from diffdata import manifest

from envcheck.diff.engine import diff
from envcheck.diff.finding import at_or_above
from envcheck.diff.policy import Policy, load_policy
from envcheck.errors import UsageError


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_no_policy_anywhere_is_empty(tmp_path: Path) -> None:
    assert load_policy(None, tmp_path) == Policy()
    write(tmp_path / "pyproject.toml", "[project]\nname = 'x'\n")
    assert load_policy(None, tmp_path) == Policy()


def test_policy_file_ignores_regrades_and_intends(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path / "policy.toml",
            """
ignore = ["ENV-PKG-*", "ENV-NATIVE-ADDED:torch"]

[severity]
"ENV-TORCH-VERSION" = "warning"

[[intended]]
rule = "ENV-TORCH-VARIANT"
subject = "torch"
reason = "prod is CPU-only by design"
""",
        ),
        tmp_path,
    )
    findings = diff(manifest("cuda"), manifest("dev-cpu"), policy=policy)
    rules = {f.rule for f in findings}
    assert not any(r.startswith("ENV-PKG-") for r in rules)
    (version,) = [f for f in findings if f.rule == "ENV-TORCH-VERSION"]
    assert version.severity == "warning"
    (variant,) = [f for f in findings if f.rule == "ENV-TORCH-VARIANT"]
    assert variant.severity == "error" and variant.intended == "prod is CPU-only by design"
    assert not at_or_above(variant, "error")
    assert not any(at_or_above(f, "error") for f in findings)


def test_pyproject_tool_table_is_read(tmp_path: Path) -> None:
    write(
        tmp_path / "pyproject.toml",
        """
[project]
name = "app"

[tool.envcheck]
ignore = ["ENV-VAR-CHANGED"]

[[tool.envcheck.intended]]
rule = "ENV-TORCH-*"
reason = "upgrading torch in this release"
""",
    )
    policy = load_policy(None, tmp_path)
    assert policy.source is not None and "pyproject.toml" in policy.source
    assert len(policy.ignore) == 1 and len(policy.intended) == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("ignore = 'ENV-PKG-ADDED'", "ignore: expected an array"),
        ("ignore = ['ENV-NO-SUCH-RULE']", "ignore[0]: unknown rule 'ENV-NO-SUCH-RULE'"),
        (
            "[severity]\n'ENV-PKG-ADDED' = 'fatal'",
            "severity.ENV-PKG-ADDED: expected 'error', 'warning' or 'info'",
        ),
        (
            "[[intended]]\nrule = 'ENV-TORCH-VARIANT'",
            "intended[0].reason: an intended difference needs a reason",
        ),
        ("colour = true", "colour: unknown key"),
        ("ignore = [", "not valid TOML"),
    ],
)
def test_bad_policies_name_the_key(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        load_policy(write(tmp_path / "p.toml", text), tmp_path)
    assert expected in str(info.value)


def test_missing_policy_file_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot read policy"):
        load_policy(tmp_path / "nope.toml", tmp_path)


def test_other_producers_rule_ids_are_accepted(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path / "p.toml", "ignore = ['VERIFY-CPU-MATMUL']"), tmp_path)
    assert policy.ignore[0].rule == "VERIFY-CPU-MATMUL"


def test_ignore_tables_select_by_machine(tmp_path: Path) -> None:
    policy = load_policy(
        write(tmp_path / "p.toml", "[[ignore]]\nrule = 'ENV-TORCH-*'\nmachine = 'staging-*'\n"), tmp_path
    )
    findings = [f for f in diff(manifest("cuda"), manifest("dev-cpu")) if f.rule == "ENV-TORCH-VARIANT"]
    staged = [dataclasses.replace(f, machine="staging-1") for f in findings]
    prod = [dataclasses.replace(f, machine="prod-1") for f in findings]
    assert policy.apply(staged) == [] and policy.apply(prod) == prod
