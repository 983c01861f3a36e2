"""Manifests are untrusted input: every bad file is a clear one-line error and exit 2, never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.core.errors import ManifestError
from envcheck.core.files import MAX_MANIFEST_BYTES
from envcheck.manifest import dumps, load, loads, save

DATA = Path(__file__).parents[1] / "data"
BAD = DATA / "bad"
EXAMPLE = Path(__file__).parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
SCHEMA = Path(__file__).parents[2] / "manifests" / "envcheck-manifest.schema.json"

# Each bad file, paired with what the one error line must say.
EXPECTED = {
    "not-json.json": "line 1 column 1: not valid JSON",
    "empty.json": "file is empty",
    "truncated.json": "(the file looks truncated)",
    "newer-schema.json": "schema_version 99 is newer than this envcheck reads (1)",
    "wrong-types.json": "packages[3].version: expected a string, got a number",
    "not-an-object.json": "expected a JSON object",
    "no-schema-version.json": "schema_version: missing or not an integer",
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_show_rejects_a_bad_manifest_with_one_clear_line(name: str) -> None:
    result = CliRunner().invoke(app, ["show", str(BAD / name)])
    assert result.exit_code == 2
    assert result.stdout == ""
    assert result.stderr.startswith(f"error: {BAD / name}: ")
    assert EXPECTED[name] in result.stderr
    assert "Traceback" not in result.stderr
    assert not isinstance(result.exception, ManifestError)  # handled at the chokepoint


def test_wrong_types_lists_every_problem_with_its_location() -> None:
    with pytest.raises(ManifestError) as caught:
        load(BAD / "wrong-types.json")
    problems = caught.value.problems
    assert "python: missing" in problems
    assert "packages[3].version: expected a string, got a number" in problems
    assert any(p.startswith("meta.probe.status: expected one of 'ok', 'error'") for p in problems)


def test_a_huge_file_is_refused_before_it_is_parsed(tmp_path: Path) -> None:
    huge = tmp_path / "huge.json"
    with huge.open("w") as f:
        f.write('{"schema_version": 1, "padding": "')
        f.write("x" * (50 * 1024 * 1024))
        f.write('"}')
    result = CliRunner().invoke(app, ["show", str(huge)])
    assert result.exit_code == 2
    assert f"{huge}: larger than {MAX_MANIFEST_BYTES} bytes" in result.stderr


def test_a_missing_file_is_an_input_error(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["show", str(tmp_path / "absent.json")])
    assert result.exit_code == 2
    assert "cannot read: No such file or directory" in result.stderr


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero", "urandom-link"])
def test_a_fifo_or_a_device_is_refused_unread(tmp_path: Path, kind: str) -> None:
    if kind == "fifo":
        path = make_fifo(tmp_path / "m.json")  # nobody writes: an open(2) without O_NONBLOCK waits forever
    elif kind == "zero":
        path = make_char_device(tmp_path / "m.json", 1, 5)
    else:
        path = tmp_path / "m.json"
        path.symlink_to(make_char_device(tmp_path / "urandom", 1, 9))
    result = run_bounded(envcheck_argv("show", str(path)), timeout=10)
    assert_bounded(result, timeout=10)
    assert result.returncode == 2
    assert result.stderr.startswith(f"error: {path}: cannot read: it is a character device") or (
        kind == "fifo" and "it is a FIFO" in result.stderr
    ), result.stderr


def test_a_real_process_prints_no_traceback_either() -> None:
    result = subprocess.run(
        [sys.executable, "-m", "envcheck", "show", str(BAD / "truncated.json")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1
    assert "Traceback" not in result.stderr


def test_a_nested_bomb_is_an_input_error(tmp_path: Path) -> None:
    bomb = tmp_path / "bomb.json"
    bomb.write_text('{"schema_version": 1, "x": ' + "[" * 100_000 + "]" * 100_000 + "}")
    result = CliRunner().invoke(app, ["show", str(bomb)])
    assert result.exit_code == 2
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("example", sorted(EXAMPLE.parent.glob("*.json")), ids=lambda p: p.name)
def test_every_example_manifest_round_trips_byte_for_byte(example: Path) -> None:
    text = example.read_text(encoding="utf-8")
    manifest = loads(text)
    assert dumps(manifest) == text


def test_save_is_atomic_and_keeps_the_old_file_on_failure(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manifest = load(EXAMPLE)
    target = tmp_path / "envcheck.lock.json"
    target.write_text("previous content", encoding="utf-8")
    from envcheck.manifest import io

    def interrupted(fd: int) -> None:  # the write is cut short, as by Ctrl-C or a full disk
        raise KeyboardInterrupt

    with monkeypatch.context() as patch:
        patch.setattr(io.os, "fsync", interrupted)
        with pytest.raises(KeyboardInterrupt):
            save(manifest, target)
    assert target.read_text(encoding="utf-8") == "previous content"
    assert [p.name for p in tmp_path.iterdir()] == ["envcheck.lock.json"]
    save(manifest, target)
    assert load(target) == manifest


def test_the_committed_json_schema_is_the_one_the_models_define() -> None:
    from envcheck.manifest.schema import schema_text

    assert SCHEMA.read_text(encoding="utf-8") == schema_text(), (
        "regenerate: python -m envcheck.manifest.schema"
    )


@pytest.mark.slow
@pytest.mark.parametrize("example", sorted(EXAMPLE.parent.glob("*.json")), ids=lambda p: p.name)
def test_every_example_manifest_validates_against_the_json_schema(example: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(json.loads(example.read_text(encoding="utf-8")), json.loads(SCHEMA.read_text()))
