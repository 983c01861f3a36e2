"""Bad input to ``envcheck predict`` gets one line on stderr and exit 2; what needs no network."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.app.catalog import get_rule
from envcheck.cli import app
from envcheck.core.errors import UsageError
from envcheck.manifest.io import load
from envcheck.predict.resolve import _not_from_an_index, pin, pip_inputs
from envcheck.predict.target import parse_target

from .conftest import CPU, CUDA


def _one_line_exit_2(args: list[str]) -> str:
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 2, result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("error: "), result.stderr
    assert "Traceback" not in result.stderr
    assert len([line for line in lines if line.startswith("error")]) == 1, result.stderr
    return result.stderr


@pytest.mark.parametrize("tag", ["win_amd65", "macosx_arm64", "linux", "", "manylinux_2_28_x86_64\x1b[31m"])
def test_an_unknown_platform_tag_is_one_line_and_exit_2(tag: str) -> None:
    err = _one_line_exit_2(["predict", str(CPU), "--platform", tag, "--python-version", "3.11"])
    assert "unknown platform tag" in err
    assert "\x1b" not in err


@pytest.mark.parametrize("version", ["3", "2.7", "3.11.4", "three"])
def test_a_bad_python_version_is_one_line_and_exit_2(version: str) -> None:
    err = _one_line_exit_2(["predict", str(CPU), "--platform", "win_amd64", "--python-version", version])
    assert "--python-version" in err


def test_a_manifest_from_a_newer_schema_is_one_line_and_exit_2(tmp_path: Path) -> None:
    data = json.loads(CPU.read_text(encoding="utf-8"))
    data["schema_version"] = 99
    newer = tmp_path / "newer.json"
    newer.write_text(json.dumps(data), encoding="utf-8")
    err = _one_line_exit_2(["predict", str(newer), "--platform", "win_amd64", "--python-version", "3.11"])
    assert "schema_version 99 is newer" in err


@pytest.mark.slow
def test_an_unreachable_index_is_one_line_and_exit_2() -> None:
    # Real pip against a port nothing listens on (connection refused at once): no network needed.
    err = _one_line_exit_2(
        [
            "predict",
            str(CPU),
            "--platform",
            "win_amd64",
            "--python-version",
            "3.11",
            "--index-url",
            "http://127.0.0.1:9/simple",
        ]
    )
    assert "the index http://127.0.0.1:9/simple/" in err
    assert "cannot be reached" in err


@pytest.mark.slow
def test_a_secret_in_an_unreachable_index_url_is_redacted() -> None:
    err = _one_line_exit_2(
        [
            "predict",
            str(CPU),
            "--platform",
            "win_amd64",
            "--index-url",
            "http://user:s3cr3t-token@127.0.0.1:9/simple",
        ]
    )
    assert "s3cr3t-token" not in err
    assert "cannot be reached" in err


def test_targets_carry_the_marker_environment_of_their_platform() -> None:
    win = parse_target("win_amd64", "3.11")
    assert win.markers()["sys_platform"] == "win32"
    assert win.markers()["platform_machine"] == "AMD64"
    mac = parse_target("macosx_11_0_arm64", "3.12")
    assert (mac.system, mac.machine, mac.macos_minimum) == ("Darwin", "arm64", "11.0")
    linux = parse_target("manylinux2014_aarch64", "3.10")
    assert (linux.markers()["platform_system"], linux.machine, linux.glibc_floor) == (
        "Linux",
        "aarch64",
        "2.17",
    )
    with pytest.raises(UsageError):
        parse_target("win_amd64", "3.11", "jython")


def test_roots_are_pinned_and_path_installed_distributions_left_out() -> None:
    source = load(CPU)
    roots, constraints, left_out = pip_inputs(source)
    names = {d.name for d in roots}
    assert {"torch", "numpy"} <= names
    # A dependency of a root is a constraint, never a root.
    assert "filelock" in {d.name for d in constraints} and "filelock" not in names
    assert [d.name for d in left_out] == ["envcheck"]
    assert "editable" in left_out[0].reason
    assert pin("2.13.0+cpu") == "2.13.0"
    assert _not_from_an_index(source.package("numpy")) is None  # type: ignore[arg-type]


def test_the_cuda_manifest_pins_torch_and_constrains_triton() -> None:
    roots, constraints, _ = pip_inputs(load(CUDA))
    assert "torch" in {d.name for d in roots}
    # triton is required by torch (on Linux only): a constraint, dropped by markers elsewhere.
    assert "triton" in {d.name for d in constraints}


def test_every_prediction_rule_is_registered_with_failure_modes() -> None:
    for rule_id in (
        "ENV-PREDICT-NO-WHEEL",
        "ENV-PREDICT-VARIANT",
        "ENV-PREDICT-RUNTIME",
        "ENV-PREDICT-OPENMP-BLAS",
        "ENV-PREDICT-PYTHON",
        "ENV-PREDICT-LEFT-OUT",
        "ENV-PREDICT-NOT-INSTALLED",
    ):
        rule = get_rule(rule_id)
        assert rule is not None, rule_id
        assert rule.why and rule.failure_modes, rule_id


def test_a_hostile_name_or_version_never_reaches_pip(tmp_path: Path) -> None:
    data = json.loads(CPU.read_text(encoding="utf-8"))
    template = next(p for p in data["packages"] if p["name"] == "pefile")
    data["packages"] += [
        {**template, "name": "evil\n--index-url http://attacker.invalid/simple"},
        {**template, "name": "-r/etc/passwd"},
        {**template, "name": "okname", "version": "1.0\n--extra-index-url http://attacker.invalid"},
    ]
    path = tmp_path / "hostile.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    roots, constraints, left_out = pip_inputs(load(path))
    passed = [(d.name, d.version) for d in roots + constraints]
    assert not any("\n" in n or n.startswith("-") or "\n" in v for n, v in passed)
    reasons = {d.name: d.reason for d in left_out}
    assert "not a valid distribution name" in reasons["-r/etc/passwd"]
    assert "not a valid version" in reasons["okname"]
