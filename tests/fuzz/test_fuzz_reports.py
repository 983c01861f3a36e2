"""Fuzz: mutated real manifests through show, diff, doctor, the verify comparison and every format.

Properties (the issue's "done when"): loading raises nothing but ``EnvcheckError``; for manifests that
load, ``show``'s summary, ``diff``, ``doctor`` and ``verify``'s comparison raise nothing; every report
prints inertly (no raw ESC, C1, BEL or lone surrogate), every JUnit file parses with junitparser, every JSON
report round-trips through ``json.loads`` to the findings' exact strings, and no Markdown report carries raw
HTML. Bounded for CI: derandomized, no deadline, a few hundred examples in all.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from hostile_manifests import (
    LARGE,
    SMALL,
    assert_junit_parses,
    assert_no_raw_html,
    assert_printable,
    manifest_text,
    mutations,
)
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from envcheck.core.errors import EnvcheckError
from envcheck.core.findings import Finding
from envcheck.diff import engine
from envcheck.manifest.io import loads
from envcheck.manifest.model import Manifest
from envcheck.report import FORMATS, render
from envcheck.report.summary import summary
from envcheck.verify.compare import compare, outcomes

# The HTML report's own elements: a manifest's strings show as text (&lt;script&gt;), never as a tag.
HTML_TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "input", "output", "main",
    "section", "details", "summary", "span", "div", "dl", "dt", "dd", "pre", "code", "table", "thead",
    "tbody", "tr", "th", "td", "script",
}  # fmt: skip

# How escaped hostile data looks in a text report: evidence that mutations reach the output.
HOSTILE_MARKS = ("\\x1b", "\\x07", "<script>", "\\udc", "[bold red]", "\\u202e")

FUZZ = settings(
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)


def load_or_refuse(text: str) -> Manifest | None:
    """The manifest, or None when the loader refused it the one allowed way (an ``EnvcheckError``)."""
    try:
        return loads(text, source="fuzzed.json")
    except EnvcheckError as e:
        assert_printable(str(e))  # the CLI prints this line on stderr
        return None


def check_reports(findings: list[Finding], title: str) -> None:
    for fmt in FORMATS:
        text = render(findings, fmt, title=title, fail_on="warning", policy=f"policy: {title}")
        assert_printable(text)
        if fmt == "markdown":
            assert_no_raw_html(text)
        elif fmt == "junit":
            assert_junit_parses(text)
        elif fmt == "html":
            assert set(re.findall(r"</?([a-zA-Z][a-zA-Z0-9]*)", text)) <= HTML_TAGS
            assert text.count("<script") == 1
        elif fmt == "json":
            data = json.loads(text)
            ordered = sorted(findings, key=Finding.sort_key)
            assert [
                (f["rule"], f["subject"], f["base"], f["target"], f["message"], f["machine"])
                for f in data["findings"]
            ] == [(f.rule, f.subject, f.base, f.target, f.message, f.machine) for f in ordered]
    assert_printable(render(findings, "text", title=title, fail_on="error", color=True), coloured=True)


def exercise(base: Manifest, target: Manifest) -> None:
    """Everything a user can run over two manifests, checked."""
    for manifest in (base, target):
        assert_printable(summary(manifest, short=False))
        assert_printable(summary(manifest, short=True))
    title = f"envcheck diff: {base.meta.label} → {target.meta.label}"
    findings = engine.diff(base, target) + engine.doctor(target)
    if base.verify is not None and target.verify is not None:
        findings += compare(base.verify, target.verify) + outcomes(target.verify)
    # A fleet report names machines: here the (hostile) labels.
    fleet = [
        Finding(**{**{s: getattr(f, s) for s in Finding.__slots__}, "machine": target.meta.label or "?"})
        for f in findings[:20]
    ]
    check_reports(findings + fleet, title)
    check_reports(engine.doctor(base), f"envcheck doctor: {base.meta.label}")


def _pairs(paths: list[Path]) -> st.SearchStrategy[tuple[Path, Path]]:
    return st.tuples(st.sampled_from(paths), st.sampled_from(paths))


@st.composite
def mutated_pair(draw: st.DrawFn, paths: list[Path], max_changes: int) -> tuple[str, str]:
    base, target = draw(_pairs(paths))
    return (
        manifest_text(base, draw(mutations(base, max_changes))),
        manifest_text(target, draw(mutations(target, max_changes))),
    )


def run_pair(texts: tuple[str, str]) -> None:
    base, target = (load_or_refuse(t) for t in texts)
    event(f"loaded: base {base is not None}, target {target is not None}")
    if base is not None and target is not None:
        exercise(base, target)
        text = render(engine.diff(base, target), "text", title="t", fail_on="error")
        event(f"hostile data in the diff report: {any(m in text for m in HOSTILE_MARKS)}")
    elif base is not None:
        exercise(base, base)


@pytest.mark.slow
@settings(FUZZ, max_examples=300)
@given(mutated_pair(SMALL, max_changes=8))
def test_small_manifests(texts: tuple[str, str]) -> None:
    run_pair(texts)


@pytest.mark.slow
@settings(FUZZ, max_examples=60)
@given(mutated_pair(LARGE, max_changes=4))
def test_large_manifests(texts: tuple[str, str]) -> None:
    run_pair(texts)


@pytest.mark.parametrize("path", [*SMALL, *LARGE], ids=lambda p: p.name)
def test_every_real_manifest_is_exercised_unmutated(path: Path) -> None:
    """The baseline the mutations start from loads and passes every check (else the fuzz tests nothing)."""
    manifest = load_or_refuse(manifest_text(path, []))
    assert manifest is not None
    exercise(manifest, manifest)
