"""The numbers README.md and docs/reference.md state about envcheck itself are checked against what they
count: the rules of the catalog and of the engine, its families, and the tests of the suite and of its fast
tier. A number that goes stale fails here, naming the sentence."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck import api

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")
REFERENCE = (ROOT / "docs" / "reference.md").read_text(encoding="utf-8")
WORDS = {
    w: i
    for i, w in enumerate(
        [
            "zero",
            "one",
            "two",
            "three",
            "four",
            "five",
            "six",
            "seven",
            "eight",
            "nine",
            "ten",
            "eleven",
            "twelve",
            "thirteen",
            "fourteen",
            "fifteen",
            "sixteen",
            "seventeen",
            "eighteen",
            "nineteen",
            "twenty",
        ]
    )
}


def _number(text: str) -> int:
    return WORDS[text] if text in WORDS else int(text.replace(",", ""))


def test_the_catalogs_size_in_the_readme() -> None:
    (stated,) = re.findall(r"the rule catalog \((\d+) rules\)", README)
    assert int(stated) == len(api.rules())


def test_the_engines_rules_and_families_in_the_reference() -> None:
    (rules, families) = re.findall(r"runs (\d+) rules in (\w+)\s+families", REFERENCE)[0]
    engine = [r for r in api.rules() if r.kind in ("difference", "single")]
    assert int(rules) == len(engine)
    assert _number(families) == len({r.family for r in engine})


def _collected(*args: str) -> int:
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    match = re.search(r"(\d+)(?:/\d+)? tests? collected", done.stdout)
    assert match, done.stdout[-2000:] + done.stderr[-2000:]
    return int(match.group(1))


@pytest.mark.slow
def test_the_suites_size_in_the_readme() -> None:
    # "about": within 5 %, so that a test added since the last measured run does not make it false.
    prose = README.replace("\n", " ")
    (whole,) = re.findall(r"\(([\d,]+) tests, the Windows tier", prose)
    tier = r"runs the quick tier, every test not marked `slow`[^(]*\(about ([\d,]+)\s+tests"
    (fast,) = re.findall(tier, prose)
    assert abs(_collected() - _number(whole)) <= 0.05 * _number(whole), whole
    assert abs(_collected("-m", "fast") - _number(fast)) <= 0.05 * _number(fast), fast


MEASURED = ROOT / "ci" / "measured.json"


def _measured() -> dict[str, dict[str, float]]:
    import json

    return json.loads(MEASURED.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def test_the_readmes_times_are_the_recorded_runs() -> None:
    """The suite's times in the README are those of the runs ci/measured.json records (written by a run
    with ENVCHECK_RECORD_RUN, as .ci/run sets it): a number typed by hand, or left from an older run, fails
    here. The counts of tests are checked against collection by test_the_suites_size_in_the_readme."""
    record = _measured()
    full, fast = record["full"], record["fast"]
    (minutes, tests, windows) = re.findall(
        r"The full suite takes about (\d+) minutes on a 2-core machine \(([\d,]+) tests, the Windows "
        r"tier's (\d+) minutes",
        README.replace("\n", " "),
    )[0]
    assert int(minutes) == round(full["wall_s"] / 60), minutes
    assert _number(tests) == full["passed"] + full["failed"] + full["skipped"], tests
    assert int(windows) == round(full["windows_wall_s"] / 60), windows
    prose = README.replace("\n", " ")
    (fast_tests, cpu) = re.findall(r"\(about ([\d,]+) tests; (\d+) CPU seconds here", prose)[0]
    assert _number(fast_tests) == fast["passed"] + fast["failed"] + fast["skipped"], fast_tests
    assert int(cpu) == round(fast["cpu_s"]), cpu
    (win_tests, win_min, win_s) = re.findall(
        r"Measured here \(2 cores\): (\d+) tests in (\d+) min (\d+) s", README.replace("\n", " ")
    )[0]
    assert int(win_tests) == full["windows_tests"]
    assert (int(win_min), int(win_s)) == divmod(round(full["windows_wall_s"]), 60)
    assert full["cores"] == fast["cores"] == 2, "measured on another machine than the README says"
