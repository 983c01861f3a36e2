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

import envcheck.app.catalog  # noqa: F401 - registers every rule, as the run that made the findings would
from envcheck.core.findings import Finding
from envcheck.core.remedy import Install, RemoveFiles
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
        rule="ENV-NATIVE-LOST",
        severity="warning",
        subject="torch",
        base="libtorch_cuda.so",
        target="not loaded",
        message="torch's CUDA libraries are not loaded on the target.",
        remedy="Install the cu130 build of torch.",
        caused_by="ENV-TORCH-VARIANT:torch",
    ),
    Finding(
        rule="ENV-PKG-MISSING",
        severity="info",
        subject="nvidia-cudnn-cu13",
        base="9.10.2.21",
        target="missing",
        message="nvidia-cudnn-cu13 9.10.2.21 is installed on the base but not on the target.",
        remedy="Install the cu130 build of torch, which pulls it in.",
        caused_by="ENV-TORCH-VARIANT:torch",
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
    assert data["summary"] == {
        "total": 7,
        "error": 2,
        "warning": 3,
        "info": 2,
        "intended": 1,
        "failing": 1,
        "roots": 5,
        "consequences": 2,
    }
    assert data["result"] == "fail"
    first = data["findings"][0]
    assert list(first) == [
        "id",
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
        "caused_by",
        "kind",
        "reference",
        "found",
        "actions",
    ]
    assert (first["id"], first["rule"], first["fails"], first["intended"], first["caused_by"]) == (
        "ENV-TORCH-VARIANT:torch",
        "ENV-TORCH-VARIANT",
        False,
        "prod is CPU-only by design",
        None,
    )
    by_id = {f["id"]: f for f in data["findings"]}
    assert by_id["ENV-NATIVE-LOST:torch"]["caused_by"] == "ENV-TORCH-VARIANT:torch"
    # A finding about one environment names what was found; base/target keep the same values.
    driver = by_id["ENV-CUDA-NO-DRIVER:NVIDIA driver"]
    assert (driver["kind"], driver["found"], driver["target"]) == ("single", "no driver", "no driver")
    assert by_id["ENV-TORCH-VERSION:torch"]["found"] is None


def test_empty_reports_pass() -> None:
    assert render([], "text", title=TITLE, fail_on="error").splitlines()[1].startswith("PASS")
    assert json.loads(render([], "json", title=TITLE, fail_on="info"))["result"] == "pass"
    assert "No differences that matter." in render([], "markdown", title=TITLE, fail_on="error")
    for fmt in ("text", "markdown"):
        said = render([], fmt, title=TITLE, fail_on="error", nothing_found="No problems found.")
        assert "No problems found." in said and "differences" not in said


def test_junit_has_one_case_per_root_cause_and_fails_at_the_threshold(tmp_path: Path) -> None:
    checked = [
        "ENV-TORCH-VARIANT",
        "ENV-TORCH-VERSION",
        "ENV-PKG-MISSING",
        "ENV-NATIVE-LOST",
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
    # A case per root cause (named by its id), and one per checked rule that found nothing at all. The
    # rules whose findings are all consequences (ENV-NATIVE-LOST, ENV-PKG-MISSING) have no case: they did
    # not pass, their findings are in their root cause's case.
    roots = {
        "ENV-TORCH-VARIANT:torch",
        "ENV-TORCH-VERSION:torch",
        "ENV-VAR-CHANGED:OMP_NUM_THREADS@prod-eu-1",
        "VERIFY-CPU-MATMUL:matmul float32",
        "ENV-CUDA-NO-DRIVER:NVIDIA driver",
    }
    assert set(cases) == roots | {"VERIFY-CPU-CONV"}
    failing = {name for name, case in cases.items() if any(isinstance(r, Failure) for r in case.result)}
    # The intended variant fails through its consequence (a warning at --fail-on warning); the info
    # finding does not fail.
    assert failing == {
        "ENV-TORCH-VARIANT:torch",
        "ENV-TORCH-VERSION:torch",
        "ENV-VAR-CHANGED:OMP_NUM_THREADS@prod-eu-1",
        "VERIFY-CPU-MATMUL:matmul float32",
    }
    assert suite.tests == len(cases) and suite.failures == 4
    variant = cases["ENV-TORCH-VARIANT:torch"].result[0].text
    assert "prod is CPU-only by design" in variant
    assert "It causes 2 findings" in variant and "ENV-NATIVE-LOST: torch" in variant
    assert "nvidia-cudnn-cu13" in variant
    assert "found: no driver" in (cases["ENV-CUDA-NO-DRIVER:NVIDIA driver"].system_out or "")
    assert cases["VERIFY-CPU-MATMUL:matmul float32"].classname == "envcheck.VERIFY"
    assert not cases["VERIFY-CPU-CONV"].result  # checked, found nothing: passes


def test_junit_default_rules_are_the_catalog() -> None:
    from envcheck.app.catalog import rule_ids

    xml = render([], "junit", title=TITLE, fail_on="error")
    assert all(f'name="{rule}"' in xml for rule in rule_ids("difference", "single"))
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
    with pytest.raises(ValueError, match="unknown report format 'yaml'"):
        render(FINDINGS, "yaml", title=TITLE, fail_on="error")


def test_one_enum_maps_every_format_to_its_formatter() -> None:
    from envcheck.report.formats import FormatName
    from envcheck.report.interface import ReportFormat

    assert ReportFormatChoice is FormatName and tuple(FormatName) == FORMATS
    classes = {name: type(name.formatter()) for name in FormatName}
    assert all(issubclass(c, ReportFormat) for c in classes.values())
    assert len(set(classes.values())) == len(FormatName)  # no two names share a formatter
    for name in FormatName:  # a name and its string render the same report
        assert render(FINDINGS, name, title=TITLE, fail_on="error") == render(
            FINDINGS, name.value, title=TITLE, fail_on="error"
        )


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


def test_a_group_whose_member_names_several_machines_counts_them() -> None:
    """A torchrun job reports its ranks as ranges (``host:0-3``): four machines in one member."""
    from envcheck.core.findings import MachineGroup
    from envcheck.report.interface import fleet_line

    groups = [
        MachineGroup(name="host:0-3", members=("host:0-3",), identical_to_base=True, machines=4),
        MachineGroup(name="host:4", members=("host:4",)),
    ]
    assert fleet_line(groups) == "4 machines identical to the base; 1 machine in 1 group"


def test_json_gives_a_remedys_actions_as_data() -> None:
    actions = (
        RemoveFiles(paths=("/v/lib/python3.11/site-packages/~orch",)),
        Install(
            pins=(("torch", "2.13.0+cpu"),), index_url="https://download.pytorch.org/whl/cpu", force=True
        ),
    )
    finding = Finding(
        rule="ENV-INSTALL-INTERRUPTED",
        severity="error",
        subject="torch",
        message="m",
        remedy="r",
        actions=actions,
    )
    (data,) = json.loads(render([finding], "json", title=TITLE, fail_on="error"))["findings"]
    assert data["actions"] == [
        {"kind": "remove", "paths": ["/v/lib/python3.11/site-packages/~orch"]},
        {
            "kind": "install",
            "pins": [["torch", "2.13.0+cpu"]],
            "requirements": [],
            "index_url": "https://download.pytorch.org/whl/cpu",
            "wheel_url": None,
            "force": True,
            "no_deps": False,
        },
    ]
