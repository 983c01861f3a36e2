"""Requirement lines are ``packaging``'s to read; the name filter agrees with it on every real line, and
markers are evaluated for the manifest's machine, not the one running the tests."""

from __future__ import annotations

import pytest
from diffdata import manifest, raw
from hypothesis import given, settings
from hypothesis import strategies as st
from packaging.markers import Marker
from packaging.requirements import InvalidRequirement, Requirement
from packaging.utils import canonicalize_name

from envcheck.manifest.query import local_label, major, release
from envcheck.manifest.requirements import (
    _holds,
    _simple_requirement,
    applies,
    parse_requirement,
    requirement_name,
    satisfies,
)

NAMES = ("dev-cpu", "cuda", "twin-a")


def all_lines() -> list[str]:
    return sorted({line for name in NAMES for d in raw(name)["packages"] for line in d["requires"]})


def test_the_name_filter_matches_packaging_on_every_real_line() -> None:
    lines = all_lines()
    assert len(lines) > 50
    for line in lines:
        slow = Requirement(line)
        assert requirement_name(line) == canonicalize_name(slow.name), line
        req = parse_requirement(line)
        assert req is not None and req.written == slow.name and req.specifier == str(slow.specifier), line


def _as_packaging_reads_it(line: str) -> tuple[object, ...] | None:
    try:
        r = Requirement(line)
    except InvalidRequirement:
        return None
    marker = str(r.marker) if r.marker is not None else None
    extras = frozenset(map(canonicalize_name, r.extras))
    return (canonicalize_name(r.name), r.name, extras, str(r.specifier), marker)


def _as_read_here(line: str) -> tuple[object, ...] | None:
    req = _simple_requirement(line)
    return None if req is None else (req.name, req.written, req.extras, req.specifier, req.marker)


def test_the_fast_reader_agrees_with_packaging_on_every_real_line() -> None:
    lines = all_lines()
    fast = [line for line in lines if _simple_requirement(line) is not None]
    assert len(fast) > len(lines) // 2  # the common shape is common, or the fast path is pointless
    for line in fast:
        assert _as_read_here(line) == _as_packaging_reads_it(line), line


@pytest.mark.parametrize(
    "line",
    [
        "a_B.c [X_Y , z]( >= 1.0 , <2 ) ; extra == 'Foo_Bar'",
        "pytest (>=4.6) ; extra == 'develop'",
        "x==1.*",
        "x != 2.0.*, ~=1.2rc1.post3.dev4",
        "y>=1.0.post1,!=1.3.dev0,>=1.0.post1",
        "z<=0",
        "numpy",
        'n ;extra=="a.b"',
    ],
)
def test_the_fast_reader_reads_the_common_shape_as_packaging_does(line: str) -> None:
    assert _as_read_here(line) is not None
    assert _as_read_here(line) == _as_packaging_reads_it(line)


@pytest.mark.parametrize(
    "line",
    [
        "x===1.0",  # arbitrary equality
        "x==2.13.0+cpu",  # a local label
        "x>=1.*",  # not PEP 440, packaging refuses it
        "x~=1",  # ~= needs two release parts
        "x>=1.0; python_version < '3.11'",  # any marker but extra
        "x @ https://example.invalid/x.whl",
        "x>=1.0 extra",
        "(x)",
    ],
)
def test_every_other_shape_is_left_to_packaging(line: str) -> None:
    assert _simple_requirement(line) is None


@settings(max_examples=400, deadline=None)
@given(st.text(alphabet="aBz_.-09 ,;()[]=!<>~*'\"xtrposdevcb+@", max_size=40))
def test_whatever_the_fast_reader_accepts_packaging_reads_the_same(line: str) -> None:
    mine = _as_read_here(line)
    if mine is not None:
        assert mine == _as_packaging_reads_it(line)


@pytest.mark.parametrize("extra", ["", "foo-bar", "Foo_Bar", "FOO..bar", "other"])
def test_an_extra_marker_holds_as_packaging_evaluates_it(extra: str) -> None:
    text = 'extra == "foo-bar"'
    assert _holds(text, (), extra) == Marker(text).evaluate({"extra": extra})


def test_markers_are_evaluated_for_the_manifests_machine() -> None:
    linux = manifest("dev-cpu")
    windows = manifest("dev-cpu", lambda d: d["platform"].update(system="Windows"))
    req = parse_requirement('colorama; platform_system == "Windows"')
    assert req is not None
    assert not applies(linux, req) and applies(windows, req)
    extra = parse_requirement('pytest; extra == "Test"')
    assert extra is not None
    assert not applies(linux, extra) and applies(linux, extra, ("", "test"))


def test_specifiers_follow_pep_440_with_local_labels() -> None:
    def sat(version: str, line: str) -> bool:
        req = parse_requirement(line)
        assert req is not None
        return satisfies(version, req)

    assert sat("2.13.0+cpu", "torch==2.13.0")
    assert not sat("2.13.0+cpu", "torch==2.13.0+cu130")
    assert sat("2.6.0.dev20241112", "torch>=2.5")
    assert not sat("13.0.88", "nvidia-cuda-nvrtc==13.0.48.*")
    assert sat("1.0", "x===1.0") and sat("garbage", "x==1")  # unparseable: not this rule's finding


def test_version_helpers_are_packagings() -> None:
    assert major("2.13.0+cpu") == "2" and major("not a version") is None
    assert release("2.13.0+cpu", 2) == (2, 13) and release("2", 3) == (2, 0, 0)
    assert local_label("2.13.0+cpu") == "cpu" and local_label("2.13.0") is None
    assert local_label("2.13.0+CU130") == "cu130"  # PEP 440 normal form
