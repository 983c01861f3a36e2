"""Reports lead with root causes and fold their consequences under them; the text report fits a screen.

Findings are built here with ``caused_by`` set, as the rules set it (``Rule.finding(..., caused_by=key)``),
and once from the real CPU↔CUDA pair through the real engine and ``flows.finish``.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from junitparser import Failure, JUnitXml

import envcheck.app.catalog  # noqa: F401 - registers every rule, as the run that made the findings would
from envcheck.core.findings import Finding, Severity
from envcheck.report import render
from envcheck.report.interface import groups, summarize
from envcheck.report.text import MAX_LINES, SHOWN_CONSEQUENCES, SUMMARY_ROOTS

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
EXAMPLES = Path(__file__).resolve().parents[2] / "manifests" / "examples"
TITLE = "envcheck diff: base → target"
LONG = "A sentence long enough to wrap onto a second line of the report, as real explanations do. " * 2


def finding(
    rule: str,
    subject: str,
    severity: Severity = "warning",
    *,
    caused_by: str | None = None,
    base: str | None = "a",
    target: str | None = "b",
    intended: str | None = None,
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        subject=subject,
        base=base,
        target=target,
        message=f"{rule} on {subject}. {LONG}",
        remedy=f"Fix {subject}. {LONG}",
        caused_by=caused_by,
        intended=intended,
    )


# One LD_LIBRARY_PATH moved two libraries; one moved library echoes as LOST + ADDED (a chain); the torch
# variant drops packages; one finding stands alone.
VAR = finding("ENV-VAR-CHANGED", "LD_LIBRARY_PATH", base="unset", target="/usr/lib/x86_64-linux-gnu")
GOMP = finding("ENV-NATIVE-SHADOWED", "libgomp.so.1", "error", caused_by=VAR.key)
PY = finding("ENV-NATIVE-SHADOWED", "libpython3.11.so.1.0", caused_by=VAR.key)
GOMP_LOST = finding("ENV-NATIVE-LOST", "libgomp.so.1", "info", caused_by=GOMP.key)
GOMP_ADDED = finding("ENV-NATIVE-ADDED", "libgomp.so.1", "info", caused_by=GOMP.key)
VARIANT = finding("ENV-TORCH-VARIANT", "torch", "error", base="cu130", target="cpu")
PKGS = [finding("ENV-PKG-MISSING", f"nvidia-{i}", "info", caused_by=VARIANT.key) for i in range(6)]
ALONE = finding("ENV-PKG-VERSION", "numpy", "info")
ALL = [VAR, GOMP, PY, GOMP_LOST, GOMP_ADDED, VARIANT, *PKGS, ALONE]


def test_every_finding_is_in_one_group_under_the_root_its_chain_ends_at() -> None:
    found = groups(sorted(ALL, key=Finding.sort_key))
    assert [g.root for g in found] == [VARIANT, VAR, ALONE]  # worst group first, then the root's rank
    by_root = {g.root.key: set(g.consequences) for g in found}
    assert by_root[VAR.key] == {GOMP, PY, GOMP_LOST, GOMP_ADDED}  # the echoes of GOMP end at VAR
    assert by_root[VARIANT.key] == set(PKGS)
    assert sorted((f for g in found for f in g.members), key=Finding.sort_key) == sorted(
        ALL, key=Finding.sort_key
    )
    # The variable is a warning that causes an error: its group ranks with the errors.
    assert next(g for g in found if g.root == VAR).severity == "error"


def test_a_missing_cause_or_a_loop_leaves_roots_and_hides_nothing() -> None:
    orphan = finding("ENV-NATIVE-LOST", "libx.so", caused_by="ENV-VAR-CHANGED:PATH")
    a = finding("ENV-NATIVE-LOST", "a.so", caused_by="ENV-NATIVE-ADDED:b.so")
    b = finding("ENV-NATIVE-ADDED", "b.so", caused_by="ENV-NATIVE-LOST:a.so")
    under = finding("ENV-NATIVE-REQUIRES", "c.so", caused_by=a.key)
    found = groups([orphan, a, b, under])
    assert {g.root for g in found} == {orphan, a, b, under}
    assert all(not g.consequences for g in found)


def test_the_summary_counts_roots_and_consequences_apart() -> None:
    summary = summarize(ALL, "error")
    assert (summary.total, summary.roots, summary.consequences) == (len(ALL), 3, len(ALL) - 3)
    text = render(ALL, "text", title=TITLE, fail_on="error")
    assert text.splitlines()[2] == "3 root causes (1 error, 1 warning, 1 info), 10 consequences " + (
        "(1 error, 1 warning, 8 info)"
    )
    assert json.loads(render(ALL, "json", title=TITLE, fail_on="error"))["summary"]["roots"] == 3


def _section(text: str, heading: str) -> str:
    start = text.index(heading)
    rest = text[start + len(heading) :]
    end = re.search(r"\n\n[A-Z]+ \(", rest)
    return rest[: end.start()] if end else rest


def test_text_nests_consequences_under_their_root() -> None:
    text = render(ALL, "text", title=TITLE, fail_on="error")
    errors = _section(text, "ERRORS (2 root causes)")
    # The variable leads its group; its consequences follow it, errors first, one line each.
    var_at = errors.index("  ENV-VAR-CHANGED  LD_LIBRARY_PATH  (warning)")
    # (a shadowed library is a finding about one environment: it shows what was found)
    gomp_at = errors.index("    ↳ error    ENV-NATIVE-SHADOWED  libgomp.so.1: found b")
    assert var_at < gomp_at
    # The variant's six packages: the first few shown, the rest counted.
    assert errors.count("↳ info     ENV-PKG-MISSING") == SHOWN_CONSEQUENCES
    assert f"… and {6 - SHOWN_CONSEQUENCES} more ({6 - SHOWN_CONSEQUENCES} info): --verbose" in errors
    verbose = render(ALL, "text", title=TITLE, fail_on="error", verbose=True)
    assert all(f"↳ ENV-PKG-MISSING  nvidia-{i}  (info)" in verbose for i in range(6))
    assert "more (" not in verbose and "--verbose" not in verbose
    assert all(f.message.split(".")[0] in verbose for f in ALL)


def test_hidden_failing_consequences_are_counted_by_severity() -> None:
    root = finding("ENV-TORCH-VARIANT", "torch", "warning")
    errors = [finding("ENV-NATIVE-LOST", f"lib{i}.so", "error", caused_by=root.key) for i in range(10)]
    text = render([root, *errors], "text", title=TITLE, fail_on="error")
    assert f"… and {10 - SHOWN_CONSEQUENCES} more ({10 - SHOWN_CONSEQUENCES} errors): --verbose" in text


def test_the_default_text_report_fits_a_screen_and_counts_what_it_leaves_out() -> None:
    errors = [finding("ENV-TORCH-VERSION", f"torch-{i}", "error") for i in range(3)]
    under = [finding("ENV-PKG-ADDED", f"dep-{i}", "info", caused_by=errors[0].key) for i in range(40)]
    warnings = [finding("ENV-PKG-MISSING", f"pkg-{i:02d}", "warning") for i in range(30)]
    infos = [finding("ENV-PKG-ADDED", f"extra-{i:02d}", "info") for i in range(50)]
    findings = [*errors, *under, *warnings, *infos]
    text = render(findings, "text", title=TITLE, fail_on="error")
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    # Every error root is shown, the first in full; what did not fit is counted on the last line.
    assert all(f"ENV-TORCH-VERSION  torch-{i}" in text for i in range(3))
    assert "remedy    Fix torch-0." in text
    shown = sum(1 for f in warnings + infos if f"  {f.rule}  {f.subject}:" in text)
    hidden = len(warnings) + len(infos) - shown
    at = next(i for i, line in enumerate(lines) if line.startswith("… "))
    count = " ".join(line.strip() for line in lines[at : at + 2])  # wrapped to the width
    assert hidden > 0 and count.startswith(f"… {hidden} more root causes not shown (")
    assert count.endswith("--verbose shows every finding in full.")
    # The report ends with the verdict again and the first root cause with its remedy.
    closing = lines[lines.index(lines[1], 2) :]
    assert closing[1].startswith("  ENV-TORCH-VERSION  torch-0 (error): ENV-TORCH-VERSION on torch-0.")
    assert closing[2].startswith("    remedy    Fix torch-0.")
    # Ranked: the warnings are shown before any info is.
    assert shown >= len(warnings) or "extra-00" not in text
    verbose = render(findings, "text", title=TITLE, fail_on="error", verbose=True)
    assert all(f"  {f.subject}" in verbose for f in findings)


def test_errors_past_the_screen_are_counted_as_errors() -> None:
    errors = [finding("ENV-PKG-MISSING", f"pkg-{i:03d}", "error") for i in range(120)]
    lines = render(errors, "text", title=TITLE, fail_on="error").splitlines()
    assert len(lines) <= MAX_LINES
    body = lines[: lines.index(lines[1], 2)]  # up to the closing summary, which repeats the verdict
    shown = sum(1 for f in errors if any(f.subject in line for line in body))
    (count,) = [line for line in body if line.startswith("… ")]
    assert count.startswith(f"… {120 - shown} more root causes not shown ({120 - shown} errors)")
    assert lines[-1] == f"  … and {120 - SUMMARY_ROOTS} more root causes ({120 - SUMMARY_ROOTS} errors)"


def test_single_environment_findings_say_found_not_base() -> None:
    doctor = [
        finding("ENV-NATIVE-SHADOWED", "libgomp.so.1", base="torch/lib/libgomp.so.1", target="/usr/lib/x.so"),
        finding("ENV-CUDA-NO-DRIVER", "NVIDIA driver", base=None, target="no driver"),
    ]
    text = render(doctor, "text", title="envcheck doctor: prod", fail_on="error")
    assert "    found     /usr/lib/x.so" in text and "    found     no driver" in text
    assert "reference torch/lib/libgomp.so.1" in text
    assert "base" not in text and "target" not in text
    md = render(doctor, "markdown", title="envcheck doctor: prod", fail_on="error")
    assert "| Rule | Subject | Reference | Found | Why | Remedy |" in md and "| Base |" not in md
    # Mixed with differences, a one-environment finding's cells say what they hold.
    variant = finding("ENV-TORCH-VARIANT", "torch", base="cu130", target="cpu")
    mixed = render([*doctor, variant], "markdown", title=TITLE, fail_on="error")
    assert "*found:* /usr/lib/x.so" in mixed and "| Base | Target |" in mixed


def test_markdown_folds_consequences_in_a_details_block_after_their_root() -> None:
    md = render(ALL, "markdown", title=TITLE, fail_on="error")
    errors = md[md.index("### Errors (2 root causes)") :]
    assert errors.index("| `ENV-VAR-CHANGED` | LD_LIBRARY_PATH |") < errors.index(
        "<summary>2. ENV-VAR-CHANGED LD_LIBRARY_PATH: 4 consequences (1 error, 1 warning, 2 info)</summary>"
    )
    block = errors[errors.index("<summary>2.") : errors.index("</details>", errors.index("<summary>2."))]
    assert all(f"| {f.subject} |" in block for f in (GOMP, PY, GOMP_LOST))
    assert "**Causes 4 findings** (below: 2.)" in errors


def test_junit_has_a_case_per_root_cause_with_its_consequences(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text(render(ALL, "junit", title=TITLE, fail_on="error", rules=[]), encoding="utf-8")
    (suite,) = list(JUnitXml.fromfile(str(path)))
    cases = {case.name: case for case in suite}
    assert set(cases) == {VAR.key, VARIANT.key, ALONE.key}
    # The variable is a warning, but it causes an error: its case fails, and lists what it caused.
    (failure,) = [r for r in cases[VAR.key].result if isinstance(r, Failure)]
    assert failure.type == "error" and "It causes 4 findings" in failure.text
    assert all(f.subject in failure.text for f in (GOMP, PY, GOMP_LOST, GOMP_ADDED))
    assert not cases[ALONE.key].result or not any(isinstance(r, Failure) for r in cases[ALONE.key].result)


def _real_pair() -> tuple[str, str, str]:
    from envcheck.app import flows
    from envcheck.diff.policy import load_policy
    from envcheck.manifest.io import load

    base, target = load(MANIFESTS / "dev-cpu.json"), load(MANIFESTS / "cuda.json")
    report = flows.diff("dev-cpu", base, ("cuda", target), load_policy(None, Path("/"), disabled=True))
    args = {"title": report.title, "fail_on": "error", "rules": report.rules, "policy": report.policy_line}
    text = render(report.findings, "text", **args)  # type: ignore[arg-type]
    verbose = render(report.findings, "text", verbose=True, **args)  # type: ignore[arg-type]
    data = render(report.findings, "json", **args)  # type: ignore[arg-type]
    return text, verbose, data


def test_the_real_cpu_cuda_pair_fits_a_screen_with_the_torch_errors_first() -> None:
    text, verbose, data = _real_pair()
    lines = text.splitlines()
    assert len(lines) <= MAX_LINES
    errors = _section(text, "ERRORS (")
    assert "  ENV-TORCH-VARIANT  torch" in errors and "  ENV-TORCH-VERSION  torch" in errors
    # Verbose shows every finding; each finding's cause, when named, is a root shown before it.
    findings = json.loads(data)["findings"]
    assert all(f" {f['subject']}" in verbose for f in findings)
    keys = {f["id"] for f in findings}
    assert all(f["caused_by"] is None or f["caused_by"] in keys for f in findings)
