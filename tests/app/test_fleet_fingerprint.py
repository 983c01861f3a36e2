"""The fleet's fingerprint and grouping, in process: which fields are volatile (and that a change to any
other field of a real manifest changes the fingerprint), each distinct environment decoded once, groups
split by a policy's machine globs, and machine names escaped in every format."""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from envcheck.app import fleet, flows
from envcheck.diff.policy import Intended, Policy, Selector
from envcheck.manifest.codec import decode
from envcheck.manifest.model import Manifest
from envcheck.report import FormatName, Report, render

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
VOLATILE = {
    "meta.created",
    "meta.duration_s",
    "meta.probe.duration_s",
    "meta.label",
    "platform.hostname",
    "verify.wall_s",
    "verify.results[].duration_s",
    "verify.results[].metrics",
}


def document(name: str = "dev-cpu") -> dict[str, Any]:
    data: dict[str, Any] = json.loads((MANIFESTS / f"{name}.json").read_text(encoding="utf-8"))
    return data


def leaves(value: Any, path: tuple[str | int, ...] = ()) -> Iterator[tuple[str | int, ...]]:
    """Every path to a scalar, an empty list or an empty object in ``value``."""
    if isinstance(value, dict) and value:
        for key, item in value.items():
            yield from leaves(item, (*path, key))
    elif isinstance(value, list) and value:
        for i, item in enumerate(value):
            yield from leaves(item, (*path, i))
    else:
        yield path


def pattern(path: tuple[str | int, ...]) -> str:
    return ".".join("[]" if isinstance(p, int) else p for p in path).replace(".[]", "[]")


def is_volatile(path: tuple[str | int, ...]) -> bool:
    text = pattern(path)
    return any(text == v or text.startswith(v + ".") for v in VOLATILE)


@contextmanager
def changed(data: dict[str, Any], path: tuple[str | int, ...]) -> Iterator[dict[str, Any]]:
    """``data`` with the leaf at ``path`` changed (another value of its type), restored afterwards."""
    parent: Any = data
    for key in path[:-1]:
        parent = parent[key]
    old = parent[path[-1]]
    new: Any
    if isinstance(old, bool):
        new = not old
    elif isinstance(old, int | float):
        new = old + 1
    elif isinstance(old, str):
        new = old + "x"
    elif old is None:
        new = "set"
    elif isinstance(old, list):
        new = ["x"]
    else:
        new = {"x": 1}
    parent[path[-1]] = new
    try:
        yield data
    finally:
        parent[path[-1]] = old


def by_field(paths: Iterator[tuple[str | int, ...]]) -> list[tuple[str | int, ...]]:
    """The first and the last occurrence of each field (``packages[].version``: the first package's
    version and the last one's): every kind of field, within a test's time."""
    first: dict[str, tuple[str | int, ...]] = {}
    last: dict[str, tuple[str | int, ...]] = {}
    for path in paths:
        first.setdefault(pattern(path), path)
        last[pattern(path)] = path
    return sorted({*first.values(), *last.values()}, key=str)


def test_the_volatile_fields_are_the_documented_ones() -> None:
    assert set(fleet.volatile_fields()) == VOLATILE
    for name in VOLATILE:
        assert name in (fleet.volatile_fields.__doc__ or "")


def test_volatile_fields_leave_the_fingerprint_alone() -> None:
    data = document("twin-a")  # a small real manifest with every section
    base = fleet.fingerprint(data)
    volatile = by_field(p for p in leaves(data) if is_volatile(p))
    assert {pattern(p).split(".metrics")[0] for p in volatile} == VOLATILE - {"verify.results[].metrics"} | {
        "verify.results[]"
    }
    for path in volatile:
        with changed(data, path):
            assert fleet.fingerprint(data) == base, pattern(path)
    again = document("dev-cpu-again")  # the same environment recorded again: only volatile fields differ
    assert again != document() and fleet.fingerprint(again) == fleet.fingerprint(document())


def test_any_other_change_changes_the_fingerprint() -> None:
    data = document("twin-a")
    base = fleet.fingerprint(data)
    others = by_field(p for p in leaves(data) if not is_volatile(p))
    assert len(others) > 100  # every field of every section, each in its first and last place
    same = []
    for path in others:
        with changed(data, path):
            if fleet.fingerprint(data) == base:
                same.append(pattern(path))
    assert same == []
    # A key added or removed anywhere counts too, and the fingerprint leaves the document as it was.
    assert fleet.fingerprint(data | {"extra": None}) != base
    assert fleet.fingerprint({k: v for k, v in data.items() if k != "env"}) != base
    assert data == document("twin-a")


@pytest.mark.slow
def test_each_distinct_environment_is_decoded_and_diffed_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    base_doc, cuda_doc = document(), document("cuda")
    paths = []
    for i in range(9):  # six of the base recorded on other hosts, three of the CUDA machine
        doc = copy.deepcopy(cuda_doc if i % 3 == 2 else base_doc)
        doc["meta"]["label"] = f"m{i}"
        doc["meta"]["created"] = f"2026-12-0{1 + i}T00:00:00+00:00"
        if doc["platform"]:
            doc["platform"]["hostname"] = f"host{i}.invalid"
        paths.append(str(tmp_path / f"m{i}.json"))
        Path(paths[-1]).write_text(json.dumps(doc, indent=i % 3), encoding="utf-8")  # layout is no content
    decoded: list[str] = []

    def counting(cls: type, data: object, *, source: str = "manifest", location: str = "") -> Any:
        decoded.append(source)
        return decode(cls, data, source=source, location=location)

    monkeypatch.setattr("envcheck.manifest.codec.decode", counting)
    base = decode(Manifest, base_doc, source="base")
    result = fleet.diff_files(base, fleet.fingerprint(base_doc), paths, jobs=1)
    assert decoded == [paths[2]]  # the CUDA machine's first manifest; the base's copies need no decode
    members = [e.members for e in result.environments]
    assert members == [("m0", "m1", "m3", "m4", "m6", "m7"), ("m2", "m5", "m8")]
    assert [e.identical_to_base for e in result.environments] == [True, False]
    assert {f.rule for f in result.environments[1].findings} >= {"ENV-TORCH-VARIANT", "ENV-TORCH-VERSION"}
    assert result.unreadable == ()


def _fleet(base_name: str, base: Manifest, targets: list[tuple[str, Manifest]], policy: Policy) -> Report:
    """Several in-memory targets down the one fleet path (``envcheck.api.fleet_diff`` takes it too)."""
    return flows.diff_fleet(base_name, fleet.diff_manifests(base, targets), policy)


def test_in_memory_targets_are_grouped_too() -> None:
    base = decode(Manifest, document(), source="base")
    again = decode(Manifest, document("dev-cpu-again"), source="again")
    cuda = decode(Manifest, document("cuda"), source="cuda")
    report = _fleet("dev", base, [("a", again), ("c", cuda), ("b", base)], Policy())
    assert [(g.name, g.members, g.identical_to_base) for g in report.groups] == [
        ("a +1", ("a", "b"), True),
        ("c", ("c",), False),
    ]
    assert report.title == "envcheck diff: dev → 3 machines"
    assert {f.machine for f in report.findings} == {"c"}
    single = flows.diff("dev", base, ("c", cuda), Policy())  # one target: today's report, no group
    assert single.groups == () and {f.machine for f in single.findings} == {None}
    assert {(f.rule, f.subject) for f in single.findings} == {(f.rule, f.subject) for f in report.findings}


def test_a_policy_that_selects_machines_splits_their_group() -> None:
    base = decode(Manifest, document(), source="base")
    cuda = decode(Manifest, document("cuda"), source="cuda")
    machines = [(f"prod-{i}", cuda) for i in range(3)] + [(f"staging-{i}", cuda) for i in range(2)]
    policy = Policy(source="test", ignore=(Selector(rule="*", machine="staging-*"),))
    report = _fleet("dev", base, machines, policy)
    assert [(g.name, g.members) for g in report.groups] == [
        ("prod-0 +2", ("prod-0", "prod-1", "prod-2")),
        ("staging-0 +1", ("staging-0", "staging-1")),
    ]
    # The staging machines' findings are ignored, the prod machines' (same environment) are not.
    assert {f.machine for f in report.findings} == {"prod-0 +2"}
    assert "ENV-TORCH-VARIANT" in {f.rule for f in report.findings}
    # The globs select machines, never a group's name: "*-1" matches prod-1 and staging-1, not "prod-1 +1".
    ones = Intended(selector=Selector(rule="*", machine="*-1"), reason="r")
    policy = Policy(source="test", intended=(ones,))
    report = _fleet("dev", base, machines, policy)
    assert [(g.name, g.members) for g in report.groups] == [
        ("prod-0 +2", ("prod-0", "prod-2", "staging-0")),
        ("prod-1 +1", ("prod-1", "staging-1")),
    ]
    intended = {f.machine for f in report.findings if f.intended == "r"}
    assert intended == {"prod-1 +1"} and {f.machine for f in report.findings} == {"prod-0 +2", "prod-1 +1"}
    caused = [f for f in report.findings if f.caused_by]
    assert caused and all(f.caused_by.endswith(f"@{f.machine}") for f in caused)  # causes renamed too


HOSTILE = "\x1b[31mnode\u202e|<script>x</script>`**"


def test_machine_names_are_escaped_in_every_format() -> None:
    base = decode(Manifest, document(), source="base")
    cuda = decode(Manifest, document("cuda"), source="cuda")
    report = _fleet("dev", base, [(HOSTILE, cuda), (HOSTILE + "2", cuda)], Policy())
    assert report.groups[0].members == (HOSTILE, HOSTILE + "2")
    for fmt in (FormatName.text, FormatName.json, FormatName.markdown, FormatName.junit):
        out = render(report.findings, fmt, title=report.title, fail_on="error", groups=report.groups)
        assert "\x1b" not in out and "\u202e" not in out, fmt
        if fmt in (FormatName.markdown, FormatName.junit):
            assert "<script>" not in out, fmt
        if fmt is FormatName.json:
            assert json.loads(out)["groups"][0]["members"] == [HOSTILE, HOSTILE + "2"]


@pytest.mark.slow
def test_the_text_report_of_many_groups_fits_a_screen() -> None:
    data = document()
    base = decode(Manifest, data, source="base")
    targets = []
    for k in range(12):  # twelve environments, each on twenty machines
        drifted = copy.deepcopy(data)
        drifted["env"][f"VAR{k}"] = "1"
        manifest = decode(Manifest, drifted, source=f"drift {k}")
        targets += [(f"node-{k:02d}-{j:02d}", manifest) for j in range(20)]
    report = _fleet("base", base, targets, Policy())
    assert len(report.groups) == 12 and len(report.findings) == 12  # one finding per environment, not 240
    text = render(report.findings, "text", title=report.title, fail_on="error", groups=report.groups)
    lines = text.splitlines()
    assert len(lines) <= 60
    assert "FLEET  0 machines identical to the base; 240 machines in 12 groups" in lines
    assert "  node-00-00 +19: 20 machines: PASS: 0 errors, 0 warnings, 1 info" in lines
    first = ", ".join(f"node-00-{j:02d}" for j in range(6))
    assert f"    {first}, … and 14 more" in lines
    assert "  … and 2 more groups (--verbose)" in lines
    verbose = render(
        report.findings, "text", title=report.title, fail_on="error", groups=report.groups, verbose=True
    )
    assert "node-11-00 +19: 20 machines" in verbose and "node-11-19" in verbose
