"""envcheck's commands run under the official embeddable CPython on Wine, against a customer's CPython with
the torch 2.13.0 Windows wheel and no VC++ redistributable: every command a customer's machine runs, each
with a real assertion on what it printed or wrote, and no traceback.

Wine 8 cannot finish ``import torch`` even with the runtime (Intel OpenMP's ``OMP: System error #120``), so
what is asserted of the import is the DLL-level verdict: without the runtime it fails on ``c10.dll``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from wine import Wine, windows_path

from .conftest import WinPython, run_envcheck

pytestmark = [pytest.mark.windows, pytest.mark.slow]


def _no_traceback(done: object) -> None:
    stderr = getattr(done, "stderr", "")
    stdout = getattr(done, "stdout", "")
    assert "Traceback (most recent call last)" not in stderr + stdout, stderr[-3000:]


@pytest.fixture(scope="module")
def customer_manifest(
    wine_session: Wine, tool: WinPython, customer: WinPython, tmp_path_factory: pytest.TempPathFactory
) -> Path:
    """A live snapshot of the customer's CPython (no runtime), written by envcheck under Wine."""
    out = tmp_path_factory.mktemp("win-snapshot") / "customer.json"
    done = run_envcheck(
        wine_session,
        tool,
        ["snapshot", "--python", customer.windows, "-o", windows_path(out), "--label", "customer"],
    )
    _no_traceback(done)
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_snapshot_records_a_windows_platform(customer_manifest: Path, customer: WinPython) -> None:
    manifest = json.loads(customer_manifest.read_text(encoding="utf-8"))
    assert manifest["meta"]["label"] == "customer"
    assert manifest["platform"]["system"] == "Windows"
    assert manifest["python"]["executable"].lower() == customer.windows.lower()
    assert manifest["python"]["wheel_tags"][0] == "cp311-cp311-win_amd64"
    assert manifest["torch"]["static"]["version"] == "2.13.0+cpu"
    # Without the VC++ runtime the import fails where Windows fails first: torch's c10.dll.
    probe = manifest["meta"]["probe"]
    assert probe["stage"] == "import torch"
    assert "c10.dll" in probe["exception"]
