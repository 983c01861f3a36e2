"""The per-kind item limits of a manifest (``envcheck.manifest.io``): a count past its limit is refused with
one line naming the kind and the limit, before anything is decoded or diffed, and a manifest at every limit
is still diffed under the hostile-input budget (``tests/hostile.py``: 300 MB, the deadline + 5 s).

Before the limits: 300 k requirement lines cost a diff 36 s and 670 MB, 400 k environment variables 40 s and
744 MB, and 32 MiB of short JSON strings parse into ~4 M objects (~300 MB) before any check. At every limit
at once, a diff peaked here at ~210 MB (JUnit) and ~190 MB for the whole process tree."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded

from envcheck.core.errors import ManifestError
from envcheck.manifest.io import (
    MAX_DISTRIBUTIONS,
    MAX_ENV_VARIABLES,
    MAX_JSON_VALUES,
    MAX_NATIVE_FILES,
    MAX_REQUIREMENT_LINES,
    loads,
)

EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
# No target runs: the budget is the hostile-input bound's, for reading, diffing and rendering.
TIMEOUT = 60.0


def _example() -> dict[str, Any]:
    data: dict[str, Any] = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    return data


def _requirements(data: dict[str, Any], count: int) -> None:
    for dist in data["packages"]:
        dist["requires"] = []
    data["packages"][0]["requires"] = [f"pkg{i}>=1.0; python_version >= '3.8'" for i in range(count)]


def _variables(data: dict[str, Any], count: int) -> None:
    data["env"] = {f"OMP_VAR_{i}": "x" * 20 for i in range(count)}


def _distributions(data: dict[str, Any], count: int) -> None:
    template = data["packages"][1]
    data["packages"] = [dict(template, name=f"dist{i}", requires=[], native_files=[]) for i in range(count)]


def _native_files(data: dict[str, Any], count: int) -> None:
    for dist in data["packages"]:
        dist["native_files"] = []
    data["packages"][1]["native_files"] = [
        {"path": f"lib/x{i}.so", "sha256": None, "size": None} for i in range(count)
    ]


def _callers(data: dict[str, Any], count: int) -> None:
    data["env_caller"] = [f"VAR_{i}" for i in range(count)]


KINDS = [
    pytest.param("requirement lines", _requirements, MAX_REQUIREMENT_LINES, "packages[].requires"),
    pytest.param("environment variables", _variables, MAX_ENV_VARIABLES, "env"),
    pytest.param("distributions", _distributions, MAX_DISTRIBUTIONS, "packages"),
    pytest.param(
        "native files", _native_files, MAX_NATIVE_FILES, "packages[].native_files", marks=pytest.mark.slow
    ),
    pytest.param("environment variables", _callers, MAX_ENV_VARIABLES, "env_caller"),
]


@pytest.mark.parametrize(("kind", "grow", "limit", "location"), KINDS)
def test_a_count_past_its_limit_is_refused_naming_it(kind: str, grow: Any, limit: int, location: str) -> None:
    data = _example()
    grow(data, limit + 1)
    with pytest.raises(ManifestError) as refused:
        loads(json.dumps(data), source="m.json")
    assert refused.value.problems == (
        f"{location}: {limit + 1} {kind}, more than the {limit} a manifest may hold: not read",
    )


def test_the_values_a_text_may_hold_are_bounded_before_it_is_parsed(monkeypatch: pytest.MonkeyPatch) -> None:
    def parse(*args: object, **kwargs: object) -> None:
        raise AssertionError("parsed")

    text = "[" + ",".join("0" for _ in range(MAX_JSON_VALUES + 1)) + "]"
    monkeypatch.setattr(json, "loads", parse)
    with pytest.raises(ManifestError, match=f"more than the {MAX_JSON_VALUES} a manifest may hold"):
        loads(text, source="m.json")


@pytest.mark.slow
def test_a_manifest_at_every_limit_still_loads() -> None:
    data = _example()
    _requirements(data, MAX_REQUIREMENT_LINES)
    _variables(data, MAX_ENV_VARIABLES)
    assert len(loads(json.dumps(data)).env) == MAX_ENV_VARIABLES


@pytest.mark.slow
@pytest.mark.parametrize(
    ("grow", "count"),
    [(_requirements, 300_000), (_variables, 400_000)],
    ids=["300k-requirement-lines", "400k-variables"],
)
def test_the_manifests_that_took_a_diff_past_600_mb_are_refused_in_one_line(
    tmp_path: Path, grow: Any, count: int
) -> None:
    data = _example()
    grow(data, count)
    target = tmp_path / "hostile.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    for argv in (["diff", str(EXAMPLE), str(target)], ["doctor", str(target)], ["show", str(target)]):
        result = run_bounded(envcheck_argv(*argv), timeout=TIMEOUT)
        assert_bounded(result, timeout=TIMEOUT, tree=True)
        assert result.returncode == 2, result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith(f"error: {target}: ") and "a manifest may hold" in line


@pytest.mark.slow
def test_a_fleet_member_past_a_limit_is_named_and_the_others_reported(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    (fleet / "a.json").write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
    data = _example()
    _variables(data, MAX_ENV_VARIABLES + 1)
    (fleet / "b.json").write_text(json.dumps(data), encoding="utf-8")
    result = run_bounded(envcheck_argv("diff", str(EXAMPLE), str(fleet)), timeout=TIMEOUT)
    assert_bounded(result, timeout=TIMEOUT, tree=True)
    assert result.returncode == 2
    assert f"env: {MAX_ENV_VARIABLES + 1} environment variables" in result.stderr
    assert "1 machine" in result.stdout or "a.json" in result.stdout, result.stdout


@pytest.mark.slow
def test_a_diff_of_manifests_at_every_limit_stays_within_the_budget(tmp_path: Path) -> None:
    data = _example()
    _distributions(data, MAX_DISTRIBUTIONS)
    _requirements(data, MAX_REQUIREMENT_LINES)
    _variables(data, MAX_ENV_VARIABLES)
    _native_files(data, MAX_NATIVE_FILES)
    target = tmp_path / "full.json"
    target.write_text(json.dumps(data), encoding="utf-8")
    for fmt in ("json", "junit"):  # JUnit is the largest rendering of the same findings
        out = tmp_path / f"report.{fmt}"
        argv = envcheck_argv("diff", str(EXAMPLE), str(target), "--format", fmt, "-o", str(out))
        result = run_bounded(argv, timeout=TIMEOUT)
        assert_bounded(result, timeout=TIMEOUT, tree=True)
        assert result.returncode == 1, result.stderr
    report = json.loads((tmp_path / "report.json").read_text(encoding="utf-8"))
    assert len(report["findings"]) >= MAX_REQUIREMENT_LINES + MAX_DISTRIBUTIONS


def test_a_manifest_past_a_limit_is_never_written() -> None:
    from envcheck.manifest.io import dumps, load

    manifest = load(EXAMPLE)
    many = manifest.replace(env={f"OMP_VAR_{i}": "1" for i in range(MAX_ENV_VARIABLES + 1)})
    with pytest.raises(ManifestError) as refused:
        dumps(many)
    assert refused.value.problems == (
        f"env: {MAX_ENV_VARIABLES + 1} environment variables, more than the {MAX_ENV_VARIABLES} a manifest "
        "may hold: not written",
    )
    assert loads(dumps(manifest)) == manifest


@pytest.mark.slow
def test_a_snapshot_of_a_target_past_a_limit_writes_nothing(tmp_path: Path) -> None:
    """A target whose environment holds 10,001 allowlisted variables: its manifest would be refused by
    every command that reads it, so the snapshot refuses to write it."""
    import os
    import sys

    env = {**os.environ, **{f"OMP_VAR_{i}": "1" for i in range(MAX_ENV_VARIABLES + 1)}}
    out = tmp_path / "m.json"
    argv = envcheck_argv("snapshot", "--python", sys.executable, "--no-probe", "-o", str(out))
    result = run_bounded(argv, timeout=TIMEOUT, env=env)
    assert_bounded(result, timeout=TIMEOUT, tree=True)
    assert result.returncode == 2, result.stderr
    found = re.fullmatch(
        r"error: the manifest to write: env: (\d+) environment variables, more than the (\d+) a manifest may "
        r"hold: not written",
        result.stderr.splitlines()[0],
    )
    assert found is not None, result.stderr
    assert int(found.group(1)) > MAX_ENV_VARIABLES == int(found.group(2))
    assert not out.exists()
