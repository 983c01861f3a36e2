"""Policy: ignore, severity change and intended differences, from a file or from pyproject.toml."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest
from diffdata import MANIFESTS, manifest
from typer.testing import CliRunner

from envcheck.app.catalog import rule_ids
from envcheck.cli import app
from envcheck.core.errors import UsageError
from envcheck.core.findings import Finding, at_or_above
from envcheck.diff.engine import diff
from envcheck.diff.policy import Policy, Selector, load_policy, policy_line
from envcheck.verify.compare import VERIFY_RULES


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


def test_verify_rule_ids_are_accepted_with_a_subject(tmp_path: Path) -> None:
    policy = load_policy(write(tmp_path / "p.toml", "ignore = ['VERIFY-NUMERICS:matmul*']"), tmp_path)
    assert policy.ignore[0] == Selector(rule="VERIFY-NUMERICS", subject="matmul*")


def test_ignore_tables_select_by_machine(tmp_path: Path) -> None:
    policy = load_policy(
        write(tmp_path / "p.toml", "[[ignore]]\nrule = 'ENV-TORCH-*'\nmachine = 'staging-*'\n"), tmp_path
    )
    findings = [f for f in diff(manifest("cuda"), manifest("dev-cpu")) if f.rule == "ENV-TORCH-VARIANT"]
    staged = [dataclasses.replace(f, machine="staging-1") for f in findings]
    prod = [dataclasses.replace(f, machine="prod-1") for f in findings]
    assert policy.apply(staged) == [] and policy.apply(prod) == prod


# ------------------------------------------------------------------------------ rule ids and suggestions


@pytest.mark.parametrize(
    ("entry", "expected"),
    [
        (
            "ignore = ['ENV-PKG-ADED']",
            "ignore[0]: unknown rule 'ENV-PKG-ADED' (did you mean 'ENV-PKG-ADDED'?)",
        ),
        ("ignore = ['env-pkg-added']", "unknown rule 'env-pkg-added' (did you mean 'ENV-PKG-ADDED'?)"),
        ("ignore = ['VERIFY-NUMERIC']", "(did you mean 'VERIFY-NUMERICS'?)"),
        ("ignore = ['ENV-PKG-ADED*']", "ignore[0]: no rule matches 'ENV-PKG-ADED*' (did you mean"),
        ("[severity]\n'ENV-TORCH-VERSON' = 'info'", "severity.ENV-TORCH-VERSON: unknown rule"),
        ("[[intended]]\nrule = 'ENV-TORCH-VARIENT'\nreason = 'x'", "(did you mean 'ENV-TORCH-VARIANT'?)"),
        ("[[ignore]]\nrule = 'NOTHING-LIKE-IT'", "ignore[0].rule: unknown rule 'NOTHING-LIKE-IT' (see"),
    ],
)
def test_unknown_rule_ids_are_refused_with_the_closest_id(tmp_path: Path, entry: str, expected: str) -> None:
    with pytest.raises(UsageError) as info:
        load_policy(write(tmp_path / "p.toml", entry), tmp_path)
    assert expected in str(info.value)


def test_known_ids_globs_and_subjects_keep_working(tmp_path: Path) -> None:
    text = (
        "ignore = ['ENV-PKG-*', 'ENV-VAR-CHANGED:PIP_*', 'VERIFY-SPEED', '*']\n"
        "[severity]\n'VERIFY-*' = 'info'"
    )
    policy = load_policy(write(tmp_path / "p.toml", text), tmp_path)
    assert [s.rule for s in policy.ignore] == ["ENV-PKG-*", "ENV-VAR-CHANGED", "VERIFY-SPEED", "*"]
    assert policy.ignore[1].subject == "PIP_*"


def test_every_verify_id_a_command_emits_is_known() -> None:
    """The one list of VERIFY ids (compare.VERIFY_RULES) holds every id the code can emit."""
    root = Path(__file__).resolve().parents[2] / "envcheck"
    emitted: set[str] = set()
    for source in [root / "verify" / "compare.py", root / "commands" / "verify.py"]:
        emitted |= set(re.findall(r"[\"'](VERIFY-[A-Z-]+)[\"']", source.read_text(encoding="utf-8")))
    assert emitted and emitted <= set(VERIFY_RULES)
    assert all(r.startswith("VERIFY-") for r in VERIFY_RULES)
    others = set(rule_ids("difference", "single")) | set(rule_ids("lock", "cluster"))
    assert set(rule_ids()) == others | set(VERIFY_RULES)


# ---------------------------------------------------------------------- what a policy did, in one line


def _finding(rule: str, severity: str = "error", subject: str = "torch") -> Finding:
    return Finding(rule=rule, severity=severity, subject=subject, message="m", remedy="r")  # type: ignore[arg-type]


def test_applying_counts_ignored_downgraded_upgraded_and_intended(tmp_path: Path) -> None:
    policy = load_policy(
        write(
            tmp_path / "p.toml",
            "ignore = ['ENV-PKG-ADDED']\n"
            "[severity]\n'ENV-TORCH-VERSION' = 'warning'\n'ENV-VAR-CHANGED' = 'error'\n"
            "[[intended]]\nrule = 'ENV-TORCH-VARIANT'\nreason = 'cpu by design'\n",
        ),
        tmp_path,
    )
    findings = [
        _finding("ENV-PKG-ADDED", "info", "a"),
        _finding("ENV-PKG-ADDED", "info", "b"),
        _finding("ENV-PKG-ADDED", "info", "b"),  # an exact duplicate counts once
        _finding("ENV-TORCH-VERSION"),
        _finding("ENV-VAR-CHANGED", "info"),
        _finding("ENV-TORCH-VARIANT"),
        _finding("ENV-PKG-REMOVED"),
    ]
    outcome = policy.apply_counted(findings)
    assert (outcome.ignored, outcome.downgraded, outcome.upgraded, outcome.intended) == (2, 1, 1, 1)
    assert sorted(f.rule for f in outcome.findings) == [
        "ENV-PKG-REMOVED",
        "ENV-TORCH-VARIANT",
        "ENV-TORCH-VERSION",
        "ENV-VAR-CHANGED",
    ]
    assert policy_line(policy, outcome, rule_ids=rule_ids("difference", "single")) == (
        f"policy: {tmp_path / 'p.toml'}: 2 ignored, 1 downgraded, 1 upgraded, 1 intended"
    )
    assert policy.apply(findings) == list(outcome.findings)


def test_the_policy_line_without_a_policy_and_with_no_policy(tmp_path: Path) -> None:
    assert policy_line(load_policy(None, tmp_path)) == "policy: none"
    assert policy_line(load_policy(None, tmp_path, disabled=True)) == "policy: none (--no-policy)"
    with pytest.raises(UsageError, match="--policy and --no-policy"):
        load_policy(tmp_path / "p.toml", tmp_path, disabled=True)


@pytest.mark.parametrize(
    ("text", "note"),
    [
        ("ignore = ['*']", "ignores every rule"),
        ("ignore = ['*:*']", "ignores every rule"),
        ("ignore = ['ENV-*', 'VERIFY-*']", "ignores every rule"),
        ("[[ignore]]\nrule = '*'\nmachine = '**'", "ignores every rule"),
        ("[severity]\n'*' = 'info'", "grades every rule info"),
    ],
)
def test_a_policy_that_sweeps_every_rule_says_so(tmp_path: Path, text: str, note: str) -> None:
    write(
        tmp_path / "pyproject.toml",
        "[tool.envcheck]\n"
        + text.replace("[severity]", "[tool.envcheck.severity]").replace(
            "[[ignore]]", "[[tool.envcheck.ignore]]"
        ),
    )
    policy = load_policy(None, tmp_path)
    outcome = policy.apply_counted(diff(manifest("cuda"), manifest("dev-cpu")))
    # The rules diff and gate check (lock --check and cluster have their own LOCK-* and CLUSTER-* rules).
    line = policy_line(policy, outcome, rule_ids=rule_ids("difference", "single", "verify"))
    assert line.startswith(f"policy: {tmp_path / 'pyproject.toml'} [tool.envcheck] ({note})")


@pytest.mark.parametrize(
    "text", ["ignore = ['ENV-*']", "ignore = ['*:torch']", "[[ignore]]\nrule = '*'\nmachine = 'prod-*'"]
)
def test_a_selective_policy_is_not_called_sweeping(tmp_path: Path, text: str) -> None:
    policy = load_policy(write(tmp_path / "p.toml", text), tmp_path)
    assert "every rule" not in policy_line(policy, rule_ids=rule_ids())


# ---------------------------------------------------------------- the CLI: visible policies, --no-policy

CUDA, DEV = str(MANIFESTS / "cuda.json"), str(MANIFESTS / "dev-cpu.json")


def cli(*args: str) -> tuple[int, str, str]:
    result = CliRunner().invoke(app, list(args))
    return result.exit_code, result.stdout, result.stderr


def test_a_pyproject_that_ignores_everything_passes_but_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(tmp_path / "pyproject.toml", "[tool.envcheck]\nignore = ['*']\n")
    monkeypatch.chdir(tmp_path)
    code, _, err = cli("diff", CUDA, DEV, "--format", "json")
    assert code == 0
    (line,) = [x for x in err.splitlines() if x.startswith("policy: ")]
    assert line.startswith(f"policy: {tmp_path / 'pyproject.toml'} [tool.envcheck] (ignores every rule): ")
    assert int(line.split(": ")[-1].split(" ignored")[0]) >= 2
    code, _, err = cli("diff", CUDA, DEV, "--no-policy", "--format", "json")
    assert code == 1 and "policy:" not in err


def test_every_report_names_the_policy_applied(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    write(tmp_path / "pyproject.toml", "[tool.envcheck]\nignore = ['*']\n")
    monkeypatch.chdir(tmp_path)
    _, out, err = cli("diff", CUDA, DEV, "--format", "json")
    (line,) = [x for x in err.splitlines() if x.startswith("policy: ")]
    assert json.loads(out)["policy"] == line
    _, out, _ = cli("diff", CUDA, DEV, "--no-policy", "--format", "json")
    assert json.loads(out)["policy"] == "policy: none (--no-policy)"


@pytest.mark.parametrize("command", [["diff", CUDA, DEV], ["doctor", DEV]])
def test_no_policy_and_policy_together_are_a_usage_error(tmp_path: Path, command: list[str]) -> None:
    policy = write(tmp_path / "p.toml", "ignore = ['ENV-PKG-ADDED']\n")
    code, out, err = cli(*command, "--policy", str(policy), "--no-policy")
    assert (code, out) == (2, "") and err.startswith("error: --policy and --no-policy contradict")


def test_a_downgrade_is_announced_on_stderr(tmp_path: Path) -> None:
    policy = write(tmp_path / "p.toml", "[severity]\n'ENV-TORCH-*' = 'warning'\n")
    code, _, err = cli("diff", CUDA, DEV, "--policy", str(policy))
    assert code == 0
    assert err.splitlines() == [f"policy: {policy}: 0 ignored, 2 downgraded"]


def test_a_downgrade_is_counted_in_the_report(tmp_path: Path) -> None:
    policy = write(tmp_path / "p.toml", "[severity]\n'ENV-TORCH-*' = 'warning'\n")
    _, out, _ = cli("diff", CUDA, DEV, "--policy", str(policy), "--format", "markdown")
    assert f"policy: {policy}: 0 ignored, 2 downgraded" in out
