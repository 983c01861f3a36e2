"""envcheck's commands run under the official embeddable CPython on Wine, against a customer's CPython with
the torch 2.13.0 Windows wheel and no VC++ redistributable: every command a customer's machine runs, each
with a real assertion on what it printed or wrote, and no traceback.

Wine 8 cannot finish ``import torch`` even with the runtime (Intel OpenMP's ``OMP: System error #120``), so
what is asserted of the import is the DLL-level verdict: without the runtime it fails on ``c10.dll``.
"""

from __future__ import annotations

import json
import subprocess
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from wine import Wine, windows_path

from .conftest import WinPython, run_envcheck, temp_folders

pytestmark = [pytest.mark.windows, pytest.mark.slow]


def _no_traceback(done: subprocess.CompletedProcess[str]) -> None:
    assert "Traceback (most recent call last)" not in done.stderr + done.stdout, done.stderr[-3000:]


def _envcheck(
    wine_session: Wine, tool: WinPython, args: list[str], *, code: int
) -> subprocess.CompletedProcess[str]:
    """Run envcheck under Wine; assert its exit code, no traceback, and no temp folder left behind."""
    before = temp_folders(wine_session)
    done = run_envcheck(wine_session, tool, args)
    _no_traceback(done)
    assert done.returncode == code, done.stdout[-2000:] + done.stderr[-3000:]
    assert temp_folders(wine_session) - before == set()
    return done


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


def test_show_prints_the_windows_machine(
    wine_session: Wine, tool: WinPython, customer_manifest: Path
) -> None:
    done = _envcheck(wine_session, tool, ["show", windows_path(customer_manifest)], code=0)
    assert "Windows AMD64" in done.stdout
    assert "2.13.0+cpu" in done.stdout
    assert "c10.dll" in done.stdout  # the failed import, as the probe saw it


@pytest.mark.parametrize("form", ["text", "json", "markdown", "junit", "html"])
def test_diff_against_the_linux_dev_manifest_in_every_format(
    wine_session: Wine,
    tool: WinPython,
    customer_manifest: Path,
    linux_manifest: Path,
    tmp_path: Path,
    form: str,
) -> None:
    out = tmp_path / f"report.{form}"
    args = ["diff", windows_path(linux_manifest), windows_path(customer_manifest), "-f", form]
    _envcheck(wine_session, tool, [*args, "-o", windows_path(out)], code=1)
    text = out.read_text(encoding="utf-8")
    assert "ENV-PLATFORM-OS" in text  # Linux x86_64 on the base, Windows AMD64 here
    if form == "json":
        report = json.loads(text)
        assert report["result"] == "fail"
        assert any(f["rule"] == "ENV-PLATFORM-OS" for f in report["findings"])
    elif form == "junit":
        assert ET.fromstring(text).tag in ("testsuites", "testsuite")
    elif form == "html":
        assert text.lstrip().lower().startswith("<!doctype html")


def test_doctor_names_the_missing_vc_runtime(
    wine_session: Wine, tool: WinPython, customer: WinPython
) -> None:
    done = _envcheck(wine_session, tool, ["doctor", "--python", customer.windows, "-f", "json"], code=1)
    report = json.loads(done.stdout)
    assert report["result"] == "fail"
    assert "MSVCP140.dll" in json.dumps(report["findings"])


def test_verify_fails_import_torch_on_c10_dll(
    wine_session: Wine, tool: WinPython, customer: WinPython
) -> None:
    done = _envcheck(wine_session, tool, ["verify", "--python", customer.windows, "-f", "json"], code=1)
    report = json.loads(done.stdout)
    failed = [f for f in report["findings"] if f["subject"] == "import_torch"]
    assert failed, report["findings"]
    assert "c10.dll" in json.dumps(failed)


def test_gate_against_the_linux_dev_manifest(
    wine_session: Wine, tool: WinPython, customer: WinPython, linux_manifest: Path, tmp_path: Path
) -> None:
    junit = tmp_path / "gate.xml"
    args = ["gate", windows_path(linux_manifest), "--python", customer.windows, "-f", "json"]
    done = _envcheck(wine_session, tool, [*args, "--junit", windows_path(junit)], code=1)
    report = json.loads(done.stdout)
    rules = {f["rule"] for f in report["findings"]}
    assert "ENV-PLATFORM-OS" in rules
    assert "MSVCP140.dll" in json.dumps(report["findings"])
    assert ET.parse(junit).getroot().tag in ("testsuites", "testsuite")


@pytest.mark.parametrize("form", ["text", "json"])
def test_scan_of_the_torch_folder_lists_what_the_machine_must_provide(
    wine_session: Wine, tool: WinPython, customer: WinPython, form: str
) -> None:
    torch = windows_path(customer.site / "torch")
    done = _envcheck(wine_session, tool, ["scan", torch, "--format", form], code=0)
    if form == "json":
        json.loads(done.stdout)
    assert "MSVCP140.dll" in done.stdout
    assert "c10.dll" in done.stdout


def test_lock_check_against_the_customer_machine(
    wine_session: Wine, tool: WinPython, customer: WinPython, customer_manifest: Path, tmp_path: Path
) -> None:
    manifest = json.loads(customer_manifest.read_text(encoding="utf-8"))
    pins = [f"{p['name']}=={p['version']}" for p in manifest["packages"]]
    lock = tmp_path / "requirements.lock"
    lock.write_text("\n".join(pins) + "\n", encoding="utf-8")
    args = ["lock", "--check", windows_path(lock), "--python", customer.windows]
    done = _envcheck(wine_session, tool, args, code=0)
    assert "match" in (done.stdout + done.stderr).lower()
    lock.write_text("\n".join([*pins, "requests==2.0"]) + "\n", encoding="utf-8")
    done = _envcheck(wine_session, tool, args, code=1)
    assert "LOCK-MISSING" in done.stdout
    # The remedy is pasted into PowerShell on this machine: its call operator and its quoting.
    assert f"& '{customer.windows}' -m pip install 'requests==2.0'" in " ".join(done.stdout.split())


def test_export_writes_a_cyclonedx_sbom(
    wine_session: Wine, tool: WinPython, customer_manifest: Path, tmp_path: Path
) -> None:
    out = tmp_path / "sbom.json"
    _envcheck(
        wine_session, tool, ["export", windows_path(customer_manifest), "-o", windows_path(out)], code=0
    )
    sbom = json.loads(out.read_text(encoding="utf-8"))
    assert sbom["bomFormat"] == "CycloneDX"
    assert any(c.get("name") == "torch" for c in sbom["components"])
    # A file outside every distribution is named by its whole Windows path, drive letter included.
    names = [c.get("name", "") for c in sbom["components"]]
    assert any(n.lower().endswith("\\python\\vcruntime140.dll") and n[1:3] == ":\\" for n in names), names


def test_a_missing_interpreter_is_one_line_with_a_windows_tip(
    wine_session: Wine, tool: WinPython, tmp_path: Path
) -> None:
    missing = windows_path(tmp_path) + "\\venv\\Scripts\\python.exe"
    done = _envcheck(wine_session, tool, ["doctor", "--python", missing], code=2)
    assert done.stderr.splitlines() == [
        f"error: the target interpreter {missing} does not exist",
        "Tip: Pass the path of a Python executable with --python (e.g. .venv\\Scripts\\python.exe).",
    ]
