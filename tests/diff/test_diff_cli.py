"""The diff, doctor and rules commands through typer's CliRunner (and one real subprocess): exit codes,
formats, files, fleets, policies, and bad input as one clear line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from clirun import run
from diffdata import MANIFESTS, manifest

from envcheck.app.catalog import rule_ids
from envcheck.core.files import MAX_MANIFEST_BYTES
from envcheck.manifest.io import dumps

BAD = MANIFESTS.parent / "bad"
DEV, CUDA = str(MANIFESTS / "dev-cpu.json"), str(MANIFESTS / "cuda.json")
TWIN_A, TWIN_B = str(MANIFESTS / "twin-a.json"), str(MANIFESTS / "twin-b.json")


def test_same_environment_exits_0() -> None:
    code, out, err = run("diff", TWIN_A, TWIN_B)
    assert (code, err) == (0, "")
    assert "PASS: 0 errors, 0 warnings, 0 info" in out


def test_cpu_against_cuda_exits_1_with_the_errors_on_stdout() -> None:
    code, out, err = run("diff", DEV, CUDA)
    assert (code, err) == (1, "")
    # Both sides named the same way: by their labels (unique here).
    assert out.startswith("envcheck diff: dev-cpu → cuda\npolicy: none\nFAIL: 2 errors")
    assert "ENV-TORCH-VARIANT" in out and "ENV-TORCH-VERSION" in out
    assert "\x1b[" not in out  # not a terminal: plain text
    # One screen by default, every finding with --verbose.
    assert len(out.splitlines()) <= 60 and "\n--verbose shows every finding in full.\n" in out
    # The last lines repeat the verdict and the first root cause with its remedy.
    closing = out[out.rindex("\nFAIL: 2 errors") :]
    assert "  ENV-TORCH-VARIANT  torch (error): " in closing and "    remedy    On the target:" in closing
    code, everything, _ = run("diff", DEV, CUDA, "--verbose")
    assert code == 1 and len(everything.splitlines()) > len(out.splitlines())
    data = json.loads(run("diff", DEV, CUDA, "--format", "json")[1])
    assert all(f" {f['subject']}" in everything for f in data["findings"])


def test_titles_name_both_sides_alike() -> None:
    # Twins share a label: both sides are named by their paths.
    # (a title wider than the report is wrapped between words: its words are the same)
    title = run("diff", TWIN_A, TWIN_B)[1].split("\npolicy: ", 1)[0]
    assert title.split() == f"envcheck diff: {TWIN_A} → {TWIN_B}".split()
    assert run("doctor", DEV)[1].startswith("envcheck doctor: dev-cpu\n")


def test_fail_on_sets_the_threshold(tmp_path: Path) -> None:
    kmp = tmp_path / "kmp.json"
    kmp.write_text(dumps(manifest("dev-cpu", lambda d: d["env"].update(KMP_DUPLICATE_LIB_OK="TRUE"))))
    assert run("diff", DEV, str(kmp))[0] == 0  # a warning and an info
    assert run("diff", DEV, str(kmp), "--fail-on", "warning")[0] == 1
    assert run("doctor", str(kmp))[0] == 0
    assert run("doctor", str(kmp), "--fail-on", "WARNING")[0] == 1


def test_json_output_file_and_junit_file(tmp_path: Path) -> None:
    report, junit = tmp_path / "report.json", tmp_path / "report.xml"
    code, out, _ = run("diff", CUDA, DEV, "--format", "json", "--output", str(report), "--junit", str(junit))
    assert code == 1 and out == ""
    data = json.loads(report.read_text())
    assert data["result"] == "fail" and data["summary"]["error"] == 2
    assert {"rule", "severity", "subject", "base", "target", "message", "remedy"} <= set(data["findings"][0])
    from junitparser import JUnitXml

    suite = next(iter(JUnitXml.fromfile(str(junit))))
    failed = {case.name for case in suite if case.result}
    # One case per root cause, named by its id.
    assert failed == {"ENV-TORCH-VARIANT:torch", "ENV-TORCH-VERSION:torch"}
    assert {"id", "caused_by"} <= set(data["findings"][0])


def test_fleet_report_names_the_machine_of_each_finding() -> None:
    code, out, _ = run("diff", DEV, CUDA, str(MANIFESTS / "dev-cpu-again.json"), "--format", "json")
    assert code == 1
    data = json.loads(out)
    assert data["title"].endswith("→ 2 machines")
    # The other machine does not drift (its editable envcheck is listed, as on every machine that has one).
    assert {f["machine"] for f in data["findings"] if f["rule"] != "ENV-PKG-DIRECT"} == {"cuda"}


def test_intended_difference_keeps_the_gate_green_and_stays_in_the_report(tmp_path: Path) -> None:
    policy = tmp_path / "envcheck-policy.toml"
    policy.write_text(
        "[[intended]]\nrule = 'ENV-TORCH-*'\nreason = 'prod is CPU-only by design'\n", encoding="utf-8"
    )
    code, out, _ = run("diff", CUDA, DEV, "--policy", str(policy), "--format", "markdown")
    assert code == 0
    assert "**Intended:** prod is CPU-only by design" in out
    assert "PASS: 2 errors" in out


def test_rules_catalog_and_one_rule() -> None:
    code, out, _ = run("rules")
    assert code == 0 and all(rule in out for rule in rule_ids())
    code, out, _ = run("rules", "env-torch-variant")
    assert code == 0 and "FM-01" in out and "pytorch/pytorch#51858" in out and "difference rule" in out
    code, out, err = run("rules", "ENV-NOPE")
    assert code == 2 and out == "" and err.startswith("error: no rule 'ENV-NOPE'")


def test_doctor_on_a_clean_manifest() -> None:
    code, out, _ = run("doctor", TWIN_A)  # (DEV lists its editable envcheck: ENV-PKG-DIRECT, info)
    assert code == 0 and "No problems found." in out and "differences" not in out


BAD_FILES = {
    "not-json.json": "line 1 column 1: not valid JSON",
    "empty.json": "file is empty",
    "truncated.json": "(the file looks truncated)",
    "newer-schema.json": "schema_version 99 is newer than this envcheck reads",
    "wrong-types.json": "packages[3].version: expected a string, got a number",
    "not-an-object.json": "expected a JSON object",
    "no-schema-version.json": "schema_version: missing or not an integer",
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
@pytest.mark.parametrize("side", ["base", "target"])
def test_bad_manifest_exits_2_with_the_location(name: str, side: str) -> None:
    bad = str(BAD / name)
    code, out, err = run("diff", *((bad, TWIN_A) if side == "base" else (TWIN_A, bad)))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {bad}: ") and BAD_FILES[name] in err
    assert "Traceback" not in err


def test_missing_sections_are_named(tmp_path: Path) -> None:
    data = json.loads((MANIFESTS / "twin-a.json").read_text())
    del data["python"], data["packages"]
    path = tmp_path / "missing-sections.json"
    path.write_text(json.dumps(data))
    code, _, err = run("doctor", str(path))
    assert code == 2 and "python: missing" in err and "packages: missing" in err


def test_huge_manifest_is_refused_without_reading_it(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("wb") as f:  # sparse: 50 MB on paper, nothing on disk
        f.truncate(50 * 1024 * 1024)
    code, _, err = run("diff", str(huge), TWIN_A)
    assert code == 2 and f"{huge}: larger than {MAX_MANIFEST_BYTES} bytes" in err


def test_bad_policy_exits_2(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text("ignore = ['ENV-TYPO']\n")
    code, out, err = run("diff", TWIN_A, TWIN_B, "--policy", str(policy))
    assert (code, out) == (2, "") and "ignore[0]: unknown rule 'ENV-TYPO'" in err


def test_real_process_bad_manifest_is_one_line_and_exit_2() -> None:
    bad = str(BAD / "wrong-types.json")
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck", "diff", bad, TWIN_A],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 2 and proc.stdout == ""
    assert proc.stderr.startswith(f"error: {bad}: ") and "packages[3].version" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_real_process_diff_of_the_real_pair() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck", "diff", CUDA, DEV, "--format", "json"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.returncode == 1 and proc.stderr == ""
    assert json.loads(proc.stdout)["summary"]["failing"] == 2


@pytest.mark.slow
def test_diff_against_a_fresh_snapshot_of_this_machine() -> None:
    code, out, err = run("diff", DEV, "--format", "json", "--timeout", "120")
    assert code in (0, 1), err
    data = json.loads(out)
    # The base by its label, the live side by the interpreter inspected (no --python: this one).
    assert data["title"] == f"envcheck diff: dev-cpu → this machine ({sys.executable})"
    # The committed manifest was made from this very venv: torch did not change under it.
    assert not [f for f in data["findings"] if f["rule"] in ("ENV-TORCH-VERSION", "ENV-TORCH-VARIANT")]


def test_the_diff_path_imports_no_heavy_module() -> None:
    # docs/budgets.md: diff of two files must start fast: no rich (text to a pipe is plain), no native
    # parsers (packaging is the reader of requirements and versions, imported on first use). Checked in a
    # fresh interpreter.
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from envcheck.cli import app\n"
        f"r = CliRunner().invoke(app, ['diff', {DEV!r}, {CUDA!r}])\n"
        "heavy = ('rich', 'elftools', 'pefile', 'macholib', 'envcheck.native', 'torch')\n"
        "print(r.exit_code, sorted(m for m in heavy if m in sys.modules))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )
    assert proc.stdout.strip() == "1 []", proc.stderr
