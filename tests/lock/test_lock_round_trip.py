"""The round trip: a torch venv → manifest → ``envcheck lock`` → a new venv built from the lock with
``pip install -r`` and with ``pip-sync`` → ``envcheck diff`` finds no package, version or variant
difference, and ``envcheck lock --check`` passes; one package changed and it fails naming it."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from junitparser import JUnitXml
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from envcheck.app.catalog import catalog
from envcheck.lock.inputs import INSTALLER_TOOLING

from .conftest import Env, envcheck, installed, pip, snapshot, venv_with_pip

pytestmark = pytest.mark.slow


def _package_rules() -> set[str]:
    """The catalog's rules about distributions, their versions and build variants."""
    return {
        r.id
        for r in catalog()
        if r.kind == "difference" and (r.family == "packages" or r.id.endswith(("-VERSION", "-VARIANT")))
    }


def _pins(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(("#", " ", "-")):
            req = Requirement(line.rstrip(" \\"))
            (spec,) = req.specifier
            pins[canonicalize_name(req.name)] = spec.version
    return pins


def _diff_findings(base: Path, target: Path) -> list[dict[str, str]]:
    done = envcheck("diff", base, target, "--format", "json", "--no-policy")
    assert done.returncode in (0, 1), done.stderr
    findings: list[dict[str, str]] = json.loads(done.stdout)["findings"]
    return findings


def _check(lock: Path, python: Path, *more: str) -> tuple[int, list[dict[str, str]], str]:
    done = envcheck("lock", "--check", lock, "--python", python, "--format", "json", *more)
    report = json.loads(done.stdout) if done.stdout.strip() else {"findings": []}
    return done.returncode, report["findings"], done.stderr


def test_the_lock_pins_every_distribution_at_its_full_version(torch_env: Env) -> None:
    want = {n: v for n, v in installed(torch_env.python).items() if n not in INSTALLER_TOOLING}
    assert _pins(torch_env.lock) == want  # torch with its local label, whatever build is installed
    text = torch_env.lock.read_text(encoding="utf-8")
    # Roots are the manifest's requirements; the rest are explained by what requires them.
    assert f"torch=={want['torch']}\n    # via {torch_env.manifest} (required by nothing else)" in text
    assert "sympy==" in text and "\n    # via torch\n" in text
    assert "mpmath==" + want["mpmath"] + "\n    # via sympy\n" in text
    assert "# The following packages are considered to be unsafe" in text  # torch requires setuptools
    assert "setuptools==" not in text and "pip==" not in text


def test_a_venv_rebuilt_with_pip_install_r_matches(torch_env: Env, tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-compile", "-r", str(torch_env.lock))
    rebuilt = snapshot(python, tmp_path / "rebuilt.json")
    found = [f for f in _diff_findings(torch_env.manifest, rebuilt) if f["rule"] in _package_rules()]
    assert not found, found
    code, findings, stderr = _check(torch_env.lock, python)
    assert (code, findings) == (0, []), stderr
    # Locking the rebuilt environment gives the same pins: the lock reproduces, it does not re-resolve.
    again = tmp_path / "again.txt"
    assert envcheck("lock", rebuilt, "-o", again).returncode == 0
    assert _pins(again) == _pins(torch_env.lock)


def test_a_venv_rebuilt_with_pip_sync_matches_until_one_changes(torch_env: Env, tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    sync = [sys.executable, "-m", "piptools", "sync", "--python-executable", str(python)]
    done = subprocess.run(
        [*sync, "--pip-args", "--no-compile", str(torch_env.lock)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    rebuilt = snapshot(python, tmp_path / "rebuilt.json")
    found = [f for f in _diff_findings(torch_env.manifest, rebuilt) if f["rule"] in _package_rules()]
    assert not found, found
    assert envcheck("lock", "--check", torch_env.lock, "--python", python).returncode == 0

    locked = _pins(torch_env.lock)["tabulate"]
    other = "0.8.10" if locked != "0.8.10" else "0.10.0"
    pip(python, "install", "--no-compile", f"tabulate=={other}")
    code, findings, _ = _check(torch_env.lock, python)
    assert code == 1
    assert [(f["rule"], f["subject"], f["base"], f["target"]) for f in findings] == [
        ("LOCK-VERSION", "tabulate", locked, other)
    ]
    assert f"install 'tabulate=={locked}'" in findings[0]["remedy"]

    pip(python, "uninstall", "-y", "six")
    code, findings, _ = _check(torch_env.lock, python)
    assert code == 1
    assert {(f["rule"], f["subject"]) for f in findings} == {
        ("LOCK-VERSION", "tabulate"),
        ("LOCK-MISSING", "six"),
    }


def test_lock_check_names_an_extra_distribution_in_every_format(small_env: Env, tmp_path: Path) -> None:
    python = venv_with_pip(tmp_path / "venv")
    pip(python, "install", "--no-compile", "-r", str(small_env.lock), "iniconfig")
    code, findings, _ = _check(small_env.lock, python)
    assert code == 1
    assert [(f["rule"], f["subject"]) for f in findings] == [("LOCK-EXTRA", "iniconfig")]
    assert "uninstall -y 'iniconfig'" in findings[0]["remedy"]
    junit = tmp_path / "report.xml"
    text = envcheck("lock", "--check", small_env.lock, "--python", python, "--junit", junit)
    assert text.returncode == 1 and "LOCK-EXTRA" in text.stdout and "iniconfig" in text.stdout
    cases = {c.name: c for suite in JUnitXml.fromfile(str(junit)) for c in suite}
    assert any("LOCK-EXTRA" in name for name in cases), list(cases)


def test_hashes_are_written_and_tolerated_by_check(small_env: Env, tmp_path: Path) -> None:
    lock = tmp_path / "hashed.txt"
    done = envcheck("lock", small_env.manifest, "--hashes", "-o", lock)
    assert done.returncode == 0, done.stderr
    text = lock.read_text(encoding="utf-8")
    assert text.count("--hash=sha256:") >= 2
    assert envcheck("lock", "--check", lock, "--python", small_env.python).returncode == 0
