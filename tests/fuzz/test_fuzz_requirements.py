"""The requirement and marker reader against ``packaging``, by hypothesis: on any ``Requires-Dist`` line that
``packaging`` accepts or rejects cleanly (``InvalidRequirement``), envcheck's reader raises nothing, reads
the same name, and a marker holds on a manifest's machine exactly when ``packaging`` evaluates it true
there (a marker ``packaging`` cannot evaluate counts as not holding). Lines are drawn from PEP 508's
grammar, with markers whose strings take either quote character and hold the other (the case that used
to end in "internal error"), URLs, odd versions, and plain noise; then whole rule runs (doctor and diff) on
manifests carrying the lines must end without an exception, and their install remedies must parse."""

from __future__ import annotations

import dataclasses
import json
import shlex
from functools import cache
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envcheck.app import flows
from envcheck.diff.policy import Policy
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest
from envcheck.manifest.requirements import (
    applies,
    marker_environment,
    parse_requirement,
    requirement_name,
    satisfies,
    specifier_set,
)

ROOT = Path(__file__).resolve().parents[2]

VARIABLES = (
    "os_name",
    "sys_platform",
    "platform_machine",
    "platform_release",
    "platform_system",
    "platform_version",
    "python_version",
    "python_full_version",
    "implementation_name",
    "platform_python_implementation",
    "extra",
    "undefined_name",
)
OPERATORS = ("==", "!=", "<", "<=", ">", ">=", "~=", "===", "in", "not in")
VERSIONS = ("1", "1.0", "3.11", "2.*", "2.13.0+cpu", "1!2.0rc1.post2.dev3", "0.0.0a0", "abc", "1..0", "")
NAMES = ("quoted-dep", "numpy", "torch", "Foo_Bar.baz", "nvidia-cublas-cu12", "x")
_TEXT = st.text(alphabet="aZ09 .-_'\"\\()@/:;,#=<>!~*+[]\t", max_size=12)


@st.composite
def literal(draw: st.DrawFn) -> str:
    """A marker string: usually well quoted (holding the other quote character), sometimes not."""
    quote = draw(st.sampled_from("'\""))
    body = draw(_TEXT)
    if draw(st.booleans()):
        body = body.replace(quote, "")
    return f"{quote}{body}{quote}"


@st.composite
def comparison(draw: st.DrawFn) -> str:
    left, right = draw(st.sampled_from(VARIABLES)), draw(literal())
    if draw(st.booleans()):
        left, right = right, left
    return f"{left} {draw(st.sampled_from(OPERATORS))} {right}"


def markers() -> st.SearchStrategy[str]:
    return st.recursive(
        comparison(),
        lambda inner: st.one_of(
            st.tuples(inner, st.sampled_from((" and ", " or ")), inner).map("".join),
            inner.map(lambda m: f"({m})"),
        ),
        max_leaves=4,
    )


@st.composite
def requirement_lines(draw: st.DrawFn) -> str:
    name = draw(
        st.one_of(st.sampled_from(NAMES), st.from_regex(r"[A-Za-z][A-Za-z0-9._-]{0,8}", fullmatch=True))
    )
    line = name
    if draw(st.booleans()):
        line += (
            "[" + ",".join(draw(st.lists(st.sampled_from(("x", "cuda", "Dev_Tools", "")), max_size=3))) + "]"
        )
    shape = draw(st.sampled_from(("plain", "spec", "paren", "url")))
    if shape == "url":
        line += " @ " + draw(
            st.sampled_from(("https://h.example/x-1.0-py3-none-any.whl", "file:///src/x", "h"))
        )
    elif shape != "plain":
        specs = [
            draw(st.sampled_from(OPERATORS[:8])) + draw(st.sampled_from(VERSIONS))
            for _ in range(draw(st.integers(1, 3)))
        ]
        line += f"({','.join(specs)})" if shape == "paren" else ",".join(specs)
    if draw(st.booleans()):
        line += draw(st.sampled_from((";", " ; ", "; "))) + draw(markers())
    return line


def lines() -> st.SearchStrategy[str]:
    return st.one_of(requirement_lines(), _TEXT, st.text(max_size=30))


@cache
def machines() -> tuple[Manifest, Manifest, Manifest]:
    """The real CPU manifest, the same recorded on a Windows machine, and one whose marker variables are
    hostile (quotes of both kinds, a version that is not one)."""
    data = json.loads((ROOT / "tests/data/manifests/dev-cpu.json").read_text(encoding="utf-8"))
    linux = decode(Manifest, data, source="dev-cpu.json")
    data["platform"]["system"] = "Windows"
    windows = decode(Manifest, data, source="dev-cpu.json (Windows)")
    data["platform"].update(system='It\'s "OS"', release="a'b\"c", kernel="#1 SMP 'x'", machine="")
    data["python"].update(version="3.x'\"", implementation='Py"thon')
    return linux, windows, decode(Manifest, data, source="dev-cpu.json (hostile)")


def _packaging(line: str) -> Requirement | None:
    """``packaging``'s reading; None for a clean rejection. Anything else it raises is its own bug, not a
    line the invariant covers."""
    try:
        return Requirement(line)
    except InvalidRequirement:
        return None
    except Exception:  # packaging raising anything else: outside the invariant
        assume(False)
        raise


def _packaging_holds(req: Requirement, m: Manifest, extra: str) -> bool:
    if req.marker is None:
        return True
    try:
        return bool(req.marker.evaluate({**marker_environment(m), "extra": extra}))
    except (UndefinedComparison, UndefinedEnvironmentName, InvalidMarker):
        return False


@pytest.mark.slow
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lines())
def test_the_reader_never_fails_and_agrees_with_packaging(line: str) -> None:
    theirs = _packaging(line)
    ours = parse_requirement(line)
    requirement_name(line)
    if theirs is None:
        return
    assert ours is not None, line
    assert ours.name == canonicalize_name(theirs.name) == requirement_name(line), line
    specifier_set(ours.specifier)
    for version in ("1.0", "2.13.0+cpu", "not a version"):
        satisfies(version, ours)
    for m in machines():
        for extra in ("", "x", "cuda"):
            assert applies(m, ours, (extra,)) == _packaging_holds(theirs, m, extra), (line, extra)


def _with_lines(m: Manifest, extra_lines: list[str]) -> Manifest:
    packages = [
        dataclasses.replace(d, requires=[*d.requires, *extra_lines]) if d.name == "torch" else d
        for d in m.packages
    ]
    return dataclasses.replace(m, packages=packages)


@pytest.mark.slow
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(requirement_lines(), min_size=1, max_size=4))
def test_doctor_and_diff_end_on_any_requirement_lines(extra_lines: list[str]) -> None:
    linux, windows, hostile = machines()
    for target in (_with_lines(m, extra_lines) for m in (linux, windows, hostile)):
        reports = [
            flows.doctor("t", target, Policy()),
            flows.diff("b", linux, ("t", target), Policy()),
        ]
        for report in reports:
            for f in report.findings:
                if (
                    f.rule == "ENV-PKG-UNMET"
                    and f.remedy.startswith("On this machine: `pip install ")
                    and (target is not windows)
                ):
                    command = f.remedy.split("`")[1]
                    assert shlex.split(command)[:2] == ["pip", "install"], f.remedy
