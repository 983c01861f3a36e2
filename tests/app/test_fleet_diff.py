"""The fleet diff (``envcheck diff BASE FOLDER``): a synthetic fleet from ci/synth.py, grown from a real
manifest, run through the real CLI in a child process (its worker pool included) under the hostile-input
bounds, and its groups checked against the fleet's ground truth."""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
from pathlib import Path
from types import ModuleType

import pytest
from hostile import assert_bounded, envcheck_argv, run_bounded
from typer.testing import CliRunner

from envcheck.cli import app

ROOT = Path(__file__).resolve().parents[2]
MANIFESTS = ROOT / "tests" / "data" / "manifests"
MACHINES = 60
TIMEOUT = 120.0


def synth() -> ModuleType:
    spec = importlib.util.spec_from_file_location("synth", ROOT / "ci" / "synth.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, list[str]]]:
    """``(folder, truth)``: ``folder/base.json``, ``folder/machines/`` with 60 manifests of 500 packages
    and 500 libraries (90% the base recorded again elsewhere, the rest in three drift groups)."""
    out = tmp_path_factory.mktemp("fleet")
    truth = synth().write_fleet(MANIFESTS / "dev-cpu.json", out, machines=MACHINES)
    return out, truth


def run(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    result = run_bounded(envcheck_argv(*args), timeout=TIMEOUT, cwd=cwd)
    assert_bounded(result, timeout=TIMEOUT)
    return result.returncode, result.stdout, result.stderr


@pytest.mark.slow
def test_groups_are_the_fleets_ground_truth(fleet: tuple[Path, dict[str, list[str]]]) -> None:
    folder, truth = fleet
    assert sorted(len(v) for v in truth.values()) == [2, 2, 2, 54]  # 90% identical, three drift groups
    code, out, err = run("diff", str(folder / "base.json"), str(folder / "machines"), "--format", "json")
    assert (code, err) == (1, "")  # the synthetic base has an unmet requirement (an error) of its own
    report = json.loads(out)
    assert report["title"] == "envcheck diff: synth-base → 60 machines"
    assert report["fleet"] == {
        "machines": 60,
        "identical_to_base": 54,
        "drifting": 6,
        "drift_groups": 3,
        "line": "54 machines identical to the base; 6 machines in 3 groups",
    }
    groups = {g["name"]: g for g in report["groups"]}
    by_members = {tuple(g["members"]): g for g in report["groups"]}
    assert set(by_members) == {tuple(labels) for labels in truth.values()}  # every member, in order
    identical = by_members[tuple(truth["identical"])]
    assert identical["identical_to_base"] and identical["name"] == "node-0000 +53"
    assert identical["machines"] == 54 and len(identical["members"]) == 54  # JSON lists them all
    # Each group's findings are its drift, reported once for the group, whatever its size.
    rules: dict[str, set[tuple[str, str]]] = {name: set() for name in groups}
    for f in report["findings"]:
        rules[f["machine"]].add((f["rule"], f["subject"]))
    unmet = {(f["rule"], f["subject"]) for f in report["findings"] if f["rule"] == "ENV-PKG-UNMET"}
    assert len(unmet) == 1 and all(unmet <= found for found in rules.values())  # the base's own trap
    drift = {by_members[tuple(truth[name])]["name"]: name for name in truth if name != "identical"}
    assert {drift[name]: rules[name] - unmet for name in drift} == {
        "drift-threads": {("ENV-VAR-CHANGED", "OMP_NUM_THREADS")},
        "drift-numerics": {("ENV-VAR-CHANGED", "ONEDNN_DEFAULT_FPMATH_MODE")},
        "drift-package": {("ENV-PKG-VERSION", "synth-pkg-010")},
    }
    assert rules[identical["name"]] == unmet
    assert sum(f["machine"] == identical["name"] for f in report["findings"]) == 1  # not 54 copies


@pytest.mark.slow
def test_every_format_names_the_groups(fleet: tuple[Path, dict[str, list[str]]], tmp_path: Path) -> None:
    folder, _ = fleet
    junit = tmp_path / "fleet.xml"
    base, machines = str(folder / "base.json"), str(folder / "machines")
    code, text, _ = run("diff", base, machines, "--junit", str(junit))
    assert code == 1
    assert "FLEET  54 machines identical to the base; 6 machines in 3 groups" in text
    assert "  node-0000 +53: 54 machines, identical to the base: FAIL: 1 error" in text
    assert "    node-0000, node-0001, node-0002, node-0003, node-0004, node-0005, … and 48 more\n" in text
    assert "    node-0009, node-0039" in text
    code, verbose, _ = run("diff", base, machines, "--verbose")
    assert "node-0057, node-0058" in verbose.replace("\n    ", " ")  # --verbose lists every member
    code, md, _ = run("diff", base, machines, "--format", "markdown")
    assert "**Fleet:** 54 machines identical to the base; 6 machines in 3 groups" in md
    assert "| node-0000 +53 | 54 (identical to the base) | FAIL: 1 error, 0 warnings, 0 info |" in md
    assert "… and 34 more (see `--format json`)" in md
    xml = junit.read_text(encoding="utf-8")
    assert 'name="fleet" value="54 machines identical to the base; 6 machines in 3 groups"' in xml
    assert 'name="group node-0009 +1" value="node-0009, node-0039"' in xml


@pytest.mark.slow
def test_a_quoted_pattern_is_the_folder(fleet: tuple[Path, dict[str, list[str]]]) -> None:
    folder, _ = fleet
    base = str(folder / "base.json")
    by_folder = run("diff", base, str(folder / "machines"), "--format", "json")
    by_pattern = run("diff", base, str(folder / "machines" / "node-*.json"), "--format", "json")
    assert by_pattern == by_folder and by_folder[0] == 1


@pytest.mark.slow
def test_bad_files_in_a_fleet_are_named_and_the_rest_is_reported(
    fleet: tuple[Path, dict[str, list[str]]], tmp_path: Path
) -> None:
    """A corrupt, an oversized and a newer-schema manifest, a FIFO and a link loop among the machines: each
    is one line on stderr, the others are diffed and reported, and the run exits 2."""
    from envcheck.core.files import MAX_MANIFEST_BYTES

    folder, _ = fleet
    machines = tmp_path / "machines"
    shutil.copytree(folder / "machines", machines)
    good = (machines / "node-0001.json").read_text(encoding="utf-8")
    (machines / "node-0100-corrupt.json").write_text(good[: len(good) // 2], encoding="utf-8")
    (machines / "node-0101-huge.json").write_text(" " * (MAX_MANIFEST_BYTES + 1) + good, encoding="utf-8")
    newer = json.loads(good) | {"schema_version": 99}
    (machines / "node-0102-newer.json").write_text(json.dumps(newer), encoding="utf-8")
    os.mkfifo(machines / "node-0103-fifo.json")  # opened, it would block until a writer comes
    (machines / "node-0104-loop.json").symlink_to("node-0104-loop.json")
    code, out, err = run("diff", str(folder / "base.json"), str(machines), "--format", "json")
    assert code == 2
    lines = err.splitlines()
    assert len(lines) == 5 and all(line.startswith(f"error: {machines}/node-010") for line in lines)
    assert "the file looks truncated" in lines[0]
    assert f"node-0101-huge.json: larger than {MAX_MANIFEST_BYTES} bytes" in lines[1]
    assert "schema_version 99 is newer than this envcheck reads" in lines[2]
    assert "is a FIFO, not a regular file: not opened" in lines[3]
    assert "a symbolic link loop: not opened" in lines[4]
    report = json.loads(out)  # the 60 readable machines are still reported in full
    assert report["fleet"]["machines"] == 60 and report["fleet"]["drift_groups"] == 3


def test_a_duplicate_of_a_bad_manifest_is_bad_too(tmp_path: Path) -> None:
    doc = json.loads((MANIFESTS / "twin-a.json").read_text(encoding="utf-8"))
    doc["packages"][0]["version"] = 7  # invalid: the decode, run once for both, refuses it
    for name in ("a", "b"):
        doc["meta"]["label"] = name
        (tmp_path / f"{name}.json").write_text(json.dumps(doc), encoding="utf-8")
    code, _, err = run("diff", str(MANIFESTS / "twin-a.json"), str(tmp_path), "--format", "json")
    assert code == 2
    lines = err.splitlines()
    assert [line.split(": ")[1] for line in lines] == [f"{tmp_path}/a.json", f"{tmp_path}/b.json"]
    assert all("packages[0].version: expected a string, got a number" in line for line in lines)


@pytest.mark.parametrize(
    ("target", "message"),
    [
        ("nothing-*.json", "error: no file matches nothing-*.json"),
        ("empty", "error: empty: no manifest (*.json) in this folder"),
    ],
)
def test_a_pattern_or_folder_without_manifests_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, target: str, message: str
) -> None:
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / ".hidden.json").write_text("{}", encoding="utf-8")  # hidden files are left out
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["diff", str(MANIFESTS / "dev-cpu.json"), target])
    assert (result.exit_code, result.stdout, result.stderr) == (2, "", message + "\n")
