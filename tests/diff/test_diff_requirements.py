"""Requirement lines are ``packaging``'s to read; the name filter agrees with it on every real line, and
markers are evaluated for the manifest's machine, not the one running the tests."""

from __future__ import annotations

from diffdata import manifest, raw
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envcheck.diff.rules._requirements import (
    applies,
    parse_requirement,
    requirement_name,
    satisfies,
)
from envcheck.diff.rules.base import local_label, major, release

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
