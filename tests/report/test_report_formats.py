"""Report formats: golden files for text, JSON and Markdown; JUnit read back by junitparser; colour rules.

Regenerate the golden files after an intended format change with ``ENVCHECK_UPDATE_GOLDEN=1 pytest
tests/report`` and review the diff.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from junitparser import Failure, JUnitXml

from envcheck.diff.finding import Finding
from envcheck.report import FORMATS, render
from envcheck.report.options import ReportFormatChoice, use_color

GOLDEN = Path(__file__).parent / "golden"
TITLE = "envcheck diff: dev.json → prod.json"

FINDINGS = [
    Finding(
        rule="ENV-TORCH-VARIANT",
        severity="error",
        subject="torch",
        base="cu130",
        target="cpu",
        message="The base runs a cu130 (GPU) build of torch, the target a CPU-only build.",
        remedy="Install the cu130 build on the target, pinned with its local label (`torch==X+cu130`).",
        intended="prod is CPU-only by design",
    ),
    Finding(
        rule="ENV-TORCH-VERSION",
        severity="error",
        subject="torch",
        base="2.14.1+cu130",
        target="2.13.0+cpu",
        message="torch 2.14.1 on the base, 2.13.0 on the target: extensions built for one do not load.",
        remedy="Install torch==2.14.1 on the target.",
    ),
    Finding(
        rule="ENV-VAR-CHANGED",
        severity="warning",
        subject="OMP_NUM_THREADS",
        base="unset",
        target="'1'",
        message="A value with | a pipe and\na newline, which tables must survive.",
        remedy="Set OMP_NUM_THREADS the same way on both sides.",
        machine="prod-eu-1",
    ),
    Finding(
        rule="ENV-CUDA-NO-DRIVER",
        severity="info",
        subject="NVIDIA driver",
        target="no driver",
        message="torch is built for CUDA 13.0 but no NVIDIA driver is visible.",
        remedy="Pass the GPU into the container.",
    ),
    Finding(
        rule="VERIFY-CPU-MATMUL",
        severity="warning",
        subject="matmul float32",
        base="max rel 1e-7",
        target="max rel 3e-3",
        message="Outputs drift beyond the tolerance.",
        remedy="Check TF32 and oneDNN.",
    ),
]


def golden(name: str, text: str) -> None:
    path = GOLDEN / name
    if os.environ.get("ENVCHECK_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    ("fmt", "name"), [("text", "report.txt"), ("json", "report.json"), ("markdown", "report.md")]
)
def test_golden(fmt: str, name: str) -> None:
    assert fmt in FORMATS
    text = render(list(reversed(FINDINGS)), fmt, title=TITLE, fail_on="warning", rules=["ENV-TORCH-VARIANT"])
    golden(name, text)


def test_json_is_the_documented_structure() -> None:
    data = json.loads(render(FINDINGS, "json", title=TITLE, fail_on="error"))
    assert data["report"] == "envcheck" and data["version"] == 1
    assert data["summary"] == {"total": 5, "error": 2, "warning": 2, "info": 1, "intended": 1, "failing": 1}
    assert data["result"] == "fail"
    first = data["findings"][0]
    assert list(first) == [
        "rule",
        "severity",
        "subject",
        "base",
        "target",
        "message",
        "remedy",
        "intended",
        "machine",
        "fails",
    ]
    assert (first["rule"], first["fails"], first["intended"]) == (
        "ENV-TORCH-VARIANT",
        False,
        "prod is CPU-only by design",
    )


def test_empty_reports_pass() -> None:
    assert render([], "text", title=TITLE, fail_on="error").splitlines()[1].startswith("PASS")
    assert json.loads(render([], "json", title=TITLE, fail_on="info"))["result"] == "pass"
    assert "No differences that matter." in render([], "markdown", title=TITLE, fail_on="error")


def test_junit_has_one_case_per_rule_and_fails_at_the_threshold(tmp_path: Path) -> None:
    checked = [
        "ENV-TORCH-VARIANT",
        "ENV-TORCH-VERSION",
        "ENV-PKG-MISSING",
        "VERIFY-CPU-MATMUL",
        "VERIFY-CPU-CONV",
    ]
    path = tmp_path / "report.xml"
    path.write_text(
        render(FINDINGS, "junit", title=TITLE, fail_on="warning", rules=checked), encoding="utf-8"
    )
    suites = JUnitXml.fromfile(str(path))
    (suite,) = list(suites)
    cases = {case.name: case for case in suite}
    # Every checked rule is a case, plus the rules that produced findings without being listed.
    assert set(cases) == {*checked, "ENV-VAR-CHANGED", "ENV-CUDA-NO-DRIVER"}
    failing = {name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    # The intended error and the info finding do not fail; the warnings do at --fail-on warning.
    assert failing == {"ENV-TORCH-VERSION", "ENV-VAR-CHANGED", "VERIFY-CPU-MATMUL"}
    assert suite.tests == len(cases) and suite.failures == 3
    assert "prod is CPU-only by design" in (cases["ENV-TORCH-VARIANT"].system_out or "")
    assert cases["VERIFY-CPU-MATMUL"].classname == "envcheck.VERIFY"


def test_junit_default_rules_are_the_catalog() -> None:
    from envcheck.diff.catalog import rule_ids

    xml = render([], "junit", title=TITLE, fail_on="error")
    assert all(f'name="{rule}"' in xml for rule in rule_ids())
    assert 'failures="0"' in xml


def test_colour_only_for_a_terminal_without_no_color(monkeypatch: pytest.MonkeyPatch) -> None:
    coloured = render(FINDINGS, "text", title=TITLE, fail_on="error", color=True)
    assert "\x1b[" in coloured and "ENV-TORCH-VARIANT" in coloured
    assert "\x1b[" not in render(FINDINGS, "text", title=TITLE, fail_on="error")
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.delenv("NO_COLOR", raising=False)
    assert use_color(ReportFormatChoice.text, None) is True
    assert use_color(ReportFormatChoice.json, None) is False
    assert use_color(ReportFormatChoice.text, "report.txt") is False
    monkeypatch.setenv("NO_COLOR", "1")
    assert use_color(ReportFormatChoice.text, None) is False


def test_unknown_format_is_a_value_error() -> None:
    with pytest.raises(ValueError, match="unknown report format"):
        render(FINDINGS, "yaml", title=TITLE, fail_on="error")  # type: ignore[arg-type]


def test_markdown_cuts_info_short_but_never_failures() -> None:
    from envcheck.report.markdown import INFO_ROWS

    many = [
        Finding(rule="ENV-PKG-ADDED", severity="info", subject=f"pkg-{i:03d}", message="m", remedy="r")
        for i in range(INFO_ROWS + 7)
    ]
    warnings = [
        Finding(rule="ENV-PKG-VERSION", severity="warning", subject=f"w-{i:03d}", message="m", remedy="r")
        for i in range(INFO_ROWS + 7)
    ]
    text = render(many + warnings, "markdown", title=TITLE, fail_on="error")
    assert "… and 7 more (see `--format json`)." in text
    assert f"pkg-{INFO_ROWS - 1:03d}" in text and f"pkg-{INFO_ROWS:03d}" not in text
    assert f"w-{INFO_ROWS + 6:03d}" in text
