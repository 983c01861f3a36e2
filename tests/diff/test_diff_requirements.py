"""The fast requirement reader agrees with ``packaging`` wherever it answers, on every real metadata line."""

from __future__ import annotations

import pytest
from diffdata import raw
from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.version import Version

from envcheck.diff.rules._requirements import (
    fast_marker,
    fast_satisfies,
    marker_environment,
    parse_requirement,
)
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest

NAMES = ("dev-cpu", "cuda", "twin-a")


def all_lines() -> list[str]:
    return sorted({line for name in NAMES for d in raw(name)["packages"] for line in d["requires"]})


def test_parsing_matches_packaging() -> None:
    lines = all_lines()
    assert len(lines) > 50
    for line in lines:
        fast, slow = parse_requirement(line), Requirement(line)
        assert fast is not None
        assert (fast.written, fast.extras) == (slow.name, frozenset(slow.extras)), line
        assert SpecifierSet(fast.specifier) == slow.specifier, line


@pytest.mark.parametrize("name", NAMES)
def test_markers_match_packaging_on_each_machine(name: str) -> None:
    manifest = decode(Manifest, raw(name))
    answered = 0
    for line in all_lines():
        req = Requirement(line)
        if req.marker is None:
            continue
        for extra in ("", "test", "all", "cublas"):
            env = marker_environment(manifest, extra)
            fast = fast_marker(str(req.marker), env)
            if fast is not None:
                answered += 1
                assert fast == Marker(str(req.marker)).evaluate(env), (line, extra)
    assert answered > 100


VERSIONS = ["2.13.0", "2.13.0+cpu", "2.14.1+cu130", "13.0.88", "13.5.37", "9.24.0.43", "1.0", "2", "3.4.30"]
SPECIFIERS = [
    "==2.13.0",
    "==2.13",
    "!=2.13.0",
    ">=2.13.0",
    "<2.14",
    "<=2.13.0",
    ">2.13.0",
    "<14,>=13.0.88",
    "==13.1.1.3.*",
    "==9.24.0.43",
    "~=3.4",
    "~=3.4.1",
    "==2.*",
    "!=2.13.*",
]


@pytest.mark.parametrize("specifier", SPECIFIERS)
def test_specifiers_match_packaging(specifier: str) -> None:
    for version in VERSIONS:
        fast = fast_satisfies(version, specifier)
        if fast is not None:
            assert fast == SpecifierSet(specifier).contains(Version(version), prereleases=True), version


def test_unusual_shapes_are_left_to_packaging() -> None:
    assert fast_satisfies("2.6.0.dev20241112", "==2.6.0") is None
    assert fast_satisfies("1.0", "===1.0") is None
    assert fast_satisfies("2.13.0+cpu", "<2.14") is None
    assert fast_marker('"linux" in sys_platform', {"sys_platform": "linux"}) is None
    assert fast_marker('os_name == "nt" or', {"os_name": "nt"}) is None
    assert fast_marker('(os_name == "nt"', {"os_name": "nt"}) is None
    assert fast_marker(
        '(os_name == "nt" or os_name == "posix") and extra == "x"', {"os_name": "nt", "extra": "x"}
    )
    req = parse_requirement("pkg @ https://example.invalid/pkg.whl")
    assert req is not None and req.name == "pkg"
