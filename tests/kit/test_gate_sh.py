"""ci/gate.sh, run for real: it installs envcheck into its own venv and gates a real environment.

The first run installs envcheck the real way (pip, from a copy of this repository's source, with its
dependencies from pip's configured sources) into a cache folder (``ENVCHECK_GATE_VENV``); the later runs
reuse it, as a CI runner with a cache would. gate.ps1 cannot run here (no PowerShell in Debian's
packages): it is held to gate.sh's options, variables and messages instead.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from junitparser import Failure, JUnitXml

from .conftest import DRIFT_PACKAGE, REPO, KitEnvs

GATE_SH = REPO / "ci" / "gate.sh"
GATE_PS1 = REPO / "ci" / "gate.ps1"


@dataclass(frozen=True)
class Run:
    code: int
    stdout: str
    stderr: str


def gate_sh(*args: str | Path, env: Mapping[str, str] | None = None, cwd: Path | None = None) -> Run:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ENVCHECK_")}
    # envcheck runs on the interpreter running the tests (3.10+); the target is named with --python.
    environ["ENVCHECK_GATE_TOOL_PYTHON"] = sys.executable
    environ.update(env or {})
    done = subprocess.run(
        ["sh", str(GATE_SH), *map(str, args)],
        env=environ,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    return Run(done.returncode, done.stdout, done.stderr)


def source_copy(dest: Path) -> Path:
    """What `pip install <folder>` needs of this repository, copied: pip builds in the folder it is given,
    and the working tree is shared."""
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        if (REPO / name).exists():
            shutil.copy2(REPO / name, dest / name)
    shutil.copytree(REPO / "envcheck", dest / "envcheck", ignore=shutil.ignore_patterns("__pycache__"))
    return dest


@dataclass(frozen=True)
class Cached:
    venv: Path
    spec: Path
    first: Run  # the run that installed envcheck: the matching environment, gated
    junit: Path


@pytest.fixture(scope="module")
def cached(kit_envs: KitEnvs, tmp_path_factory: pytest.TempPathFactory) -> Cached:
    root = tmp_path_factory.mktemp("gate-sh")
    (root / "src").mkdir()
    spec = source_copy(root / "src")
    venv = root / "tool-venv"
    junit = root / "matching.xml"
    first = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.matching,
        "--junit",
        junit,
        "--envcheck",
        spec,
        env={"ENVCHECK_GATE_VENV": str(venv)},
        cwd=root,
    )
    return Cached(venv=venv, spec=spec, first=first, junit=junit)


def _cases(junit: Path) -> list[Any]:
    return [case for suite in JUnitXml.fromfile(str(junit)) for case in suite]


@pytest.mark.slow
def test_matching_environment_passes_and_writes_junit(cached: Cached) -> None:
    run = cached.first
    assert run.code == 0, run.stderr + run.stdout
    assert re.search(r"^gate\.sh: installed envcheck \S+ in ", run.stderr, re.M), run.stderr
    assert f"gate.sh: JUnit report: {cached.junit}" in run.stderr
    cases = _cases(cached.junit)
    assert len(cases) > 10
    assert not [c for c in cases if any(isinstance(r, Failure) for r in c.result)]
    # The installed envcheck has its dependencies from pip's sources, in its own venv only.
    listed = subprocess.run(
        [str(cached.venv / "bin" / "python"), "-m", "pip", "list", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    names = {p["name"].lower() for p in json.loads(listed.stdout)}
    assert {"envcheck", "typer", "packaging", "pyelftools"} <= names
    assert (cached.venv / "envcheck-gate.spec").read_text() == str(cached.spec)


@pytest.mark.slow
def test_drifting_environment_fails_naming_the_finding(
    cached: Cached, kit_envs: KitEnvs, tmp_path: Path
) -> None:
    junit = tmp_path / "drifting.xml"
    run = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.drifting,
        "--junit",
        junit,
        "--envcheck",
        cached.spec,
        env={"ENVCHECK_GATE_VENV": str(cached.venv)},
        cwd=tmp_path,
    )
    assert run.code == 1, run.stderr + run.stdout
    assert "gate.sh: reusing envcheck" in run.stderr  # the cache, not a second install
    assert DRIFT_PACKAGE in run.stdout  # the text report on stdout
    failed = [c for c in _cases(junit) if any(isinstance(r, Failure) for r in c.result)]
    assert failed
    names = [c.name for c in failed]
    assert f"ENV-PKG-MISSING:{DRIFT_PACKAGE}" in names, names
    missing = next(c for c in failed if c.name == f"ENV-PKG-MISSING:{DRIFT_PACKAGE}")
    text = " ".join((r.message or "") + " " + (r.text or "") for r in missing.result)
    assert "markdown-it-py" in text and "pip install" in text


@pytest.mark.slow
def test_extra_arguments_reach_the_gate(cached: Cached, kit_envs: KitEnvs, tmp_path: Path) -> None:
    # A policy that ignores the packages family makes the drifting environment pass: the arguments after
    # `--` reached `envcheck gate`, and its exit code is the script's.
    policy = tmp_path / "policy.toml"
    policy.write_text('ignore = ["ENV-PKG-*"]\n', encoding="utf-8")
    run = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.drifting,
        "--junit",
        tmp_path / "j.xml",
        "--envcheck",
        cached.spec,
        "--",
        "--policy",
        policy,
        "--format",
        "json",
        env={"ENVCHECK_GATE_VENV": str(cached.venv)},
        cwd=tmp_path,
    )
    assert run.code == 0, run.stderr + run.stdout
    report = json.loads(run.stdout)
    assert not [f for f in report["findings"] if f["rule"].startswith("ENV-PKG-")]


@pytest.mark.slow
def test_malformed_manifest_is_the_gates_exit_2(cached: Cached, kit_envs: KitEnvs, tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": ', encoding="utf-8")
    run = gate_sh(
        bad,
        "--python",
        kit_envs.matching,
        "--envcheck",
        cached.spec,
        env={"ENVCHECK_GATE_VENV": str(cached.venv)},
        cwd=tmp_path,
    )
    assert run.code == 2
    assert "error: " in run.stderr and "bad.json" in run.stderr
    assert "Traceback" not in run.stderr
    assert not (tmp_path / "envcheck-junit.xml").exists()


def _one_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert len(lines) == 1, stderr
    return lines[0]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["missing.json"], "gate.sh: error: manifest not found: missing.json"),
        ([], "gate.sh: error: no MANIFEST given"),
        (["m.json", "--frobnicate"], "gate.sh: error: unknown option --frobnicate"),
        (["m.json", "--python"], "gate.sh: error: --python needs a value"),
        (["m.json", "n.json"], "gate.sh: error: one MANIFEST only"),
        (["m.json", "--python", "/nonexistent/python9"], "gate.sh: error: target interpreter not found"),
        ([".", "--python", sys.executable], "gate.sh: error: manifest is not a regular file"),
    ],
)
def test_bad_usage_is_one_line_and_exit_2(args: list[str], expected: str, tmp_path: Path) -> None:
    (tmp_path / "m.json").write_text("{}", encoding="utf-8")
    (tmp_path / "n.json").write_text("{}", encoding="utf-8")
    # Refused before any environment is made: TMPDIR stays empty.
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    run = gate_sh(*args, env={"TMPDIR": str(tmp)}, cwd=tmp_path)
    assert run.code == 2
    assert _one_line(run.stderr).startswith(expected)
    assert not list(tmp.iterdir())


def test_cache_folder_that_is_not_a_venv_is_refused(kit_envs: KitEnvs, tmp_path: Path) -> None:
    precious = tmp_path / "home"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me", encoding="utf-8")
    run = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.matching,
        env={"ENVCHECK_GATE_VENV": str(precious)},
        cwd=tmp_path,
    )
    assert run.code == 2
    assert "is a folder that is not a virtual environment" in _one_line(run.stderr)
    assert (precious / "notes.txt").read_text(encoding="utf-8") == "keep me"


@pytest.mark.slow
def test_a_spec_that_does_not_install_is_exit_2_and_leaves_nothing(kit_envs: KitEnvs, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    not_a_project = tmp_path / "not-a-project"
    not_a_project.mkdir()
    run = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.matching,
        "--envcheck",
        not_a_project,
        env={"TMPDIR": str(tmp)},
        cwd=tmp_path,
    )
    assert run.code == 2
    line = _one_line(run.stderr)
    assert line.startswith(f"gate.sh: error: could not install envcheck from '{not_a_project}': ERROR")
    assert not list(tmp.iterdir()), "the temporary environment is removed on exit"
    assert not (tmp_path / "envcheck-junit.xml").exists()


@pytest.mark.slow
def test_a_password_in_the_spec_never_reaches_the_log(kit_envs: KitEnvs, tmp_path: Path) -> None:
    tmp = tmp_path / "tmp"
    tmp.mkdir()
    spec = "https://ci-bot:s3cret-token@pkgs.invalid/envcheck-0.1.0.tar.gz"
    run = gate_sh(
        kit_envs.manifest,
        "--python",
        kit_envs.matching,
        "--envcheck",
        spec,
        env={"TMPDIR": str(tmp), "ENVCHECK_GATE_PIP_ARGS": "--retries 0 --timeout 5"},
        cwd=tmp_path,
    )
    assert run.code == 2
    line = _one_line(run.stderr)
    assert "s3cret-token" not in line + run.stdout
    assert "https://***@pkgs.invalid/" in line
    assert not list(tmp.iterdir())


def test_help_is_exit_0(tmp_path: Path) -> None:
    run = gate_sh("--help", cwd=tmp_path)
    assert run.code == 0
    assert run.stdout.startswith("usage: ci/gate.sh MANIFEST")


def test_gate_sh_is_shellcheck_clean() -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian: apt-get install shellcheck)")
    done = subprocess.run(
        [shellcheck, "--shell=sh", str(GATE_SH)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stdout


def _options(text: str) -> set[str]:
    return set(re.findall(r"--(?:python|junit|envcheck|help)\b", text))


def test_gate_ps1_mirrors_gate_sh() -> None:
    # gate.ps1 cannot run here; it must at least take the same options and variables and say the same
    # things, so that a fix to one is seen missing from the other.
    sh, ps1 = GATE_SH.read_text(encoding="utf-8"), GATE_PS1.read_text(encoding="utf-8")
    assert _options(sh) == _options(ps1) == {"--python", "--junit", "--envcheck", "--help"}
    variables = set(re.findall(r"ENVCHECK_GATE_[A-Z_]+", sh))
    assert variables == set(re.findall(r"ENVCHECK_GATE_[A-Z_]+", ps1))
    assert len(variables) == 4
    messages = [
        "manifest not found: ",
        "manifest is not a regular file: ",
        "target interpreter not found: ",
        "could not install envcheck from '",
        "installed no working envcheck command",
        "is a folder that is not a virtual environment",
        "envcheck gate ended with exit code ",
        "JUnit report: ",
        "envcheck-gate.spec",
        "--disable-pip-version-check",
    ]
    for message in messages:
        assert message in sh and message in ps1, message
    pwsh = shutil.which("pwsh")
    if pwsh is not None:  # where PowerShell exists, at least the usage path runs
        done = subprocess.run(
            [pwsh, "-NoProfile", "-File", str(GATE_PS1), "--help"],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert done.returncode == 0 and done.stdout.startswith("usage: ci\\gate.ps1 MANIFEST")


@pytest.mark.slow
def test_another_spec_is_a_fresh_environment_not_the_cached_one(cached: Cached, tmp_path: Path) -> None:
    # A copy of the cache (hard links) installed from another SPEC: gate.sh must not reuse the envcheck in
    # it. The new SPEC does not install, so the old environment is gone and nothing is reused.
    venv = tmp_path / "tool-venv"
    shutil.copytree(cached.venv, venv, copy_function=os.link, symlinks=True)
    assert (venv / "envcheck-gate.spec").exists()
    manifest = tmp_path / "m.json"
    manifest.write_text("{}", encoding="utf-8")
    run = gate_sh(
        manifest,
        "--python",
        sys.executable,
        "--envcheck",
        tmp_path / "no-such-project",
        env={"ENVCHECK_GATE_VENV": str(venv)},
        cwd=tmp_path,
    )
    assert run.code == 2
    assert "could not install envcheck from" in _one_line(run.stderr)
    assert not (venv / "envcheck-gate.spec").exists()
    assert not (venv / "bin" / "envcheck").exists()
    assert (cached.venv / "bin" / "envcheck").exists()  # the cache it was copied from is untouched
