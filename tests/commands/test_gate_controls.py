"""The healthy control of docs/broken-environments.md: a plain venv gated against its own snapshot, by the
default gate (integrity, the application's imports, the smoke suite against its goldens), reports no error
and no warning. Every rule that fires on a broken environment must stay silent here, or the gate's "exit
1" means nothing."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner
from venvs import HAS_TORCH, clone_site_packages, make_venv

from envcheck.cli import app

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed in the test environment"),
]


def _run(*args: str | Path) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout) if result.stdout.startswith("{") else {}, result.stderr


def test_a_plain_venv_gated_against_itself_has_no_error_or_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ENVCHECK_CACHE_DIR", str(tmp_path / "cache"))
    python = make_venv(tmp_path / "venv")
    clone_site_packages(python)
    reference = tmp_path / "reference.json"
    code, _, err = _run("snapshot", "--python", python, "-o", reference, "--quiet")
    assert code == 0, err

    code, report, err = _run("gate", reference, "--python", python, "--format", "json", "--quiet")
    serious = [
        (f["rule"], f["subject"], f["message"])
        for f in report["findings"]
        if f["severity"] in ("error", "warning")
    ]
    assert serious == []
    assert code == 0, err
    # The default gate did its whole work: the imports ran (their order is said on stderr), and nothing ran
    # out of time.
    assert "import" in err
    assert not [f for f in report["findings"] if f["rule"] == "VERIFY-TIMEOUT"], report
