"""The README's story end to end: a Linux dev manifest gated on the customer's Windows machine.

The dev manifest is a real snapshot of this test environment on Linux (torch 2.13.0+cpu). The customer's
machine is Wine with the official embeddable CPython and the torch 2.13.0 Windows wheel, in a prefix of
this module's own whose System32 holds none of the VC++ redistributable's DLLs and whose registry has no
record of it, as on a Windows machine where it was never installed (Wine's builtin copies are kept out with
``wine.NO_VC_RUNTIME``). envcheck itself runs there too, under the tool's embeddable CPython.

Wine 8 cannot finish ``import torch`` even with the runtime (Intel OpenMP's ``OMP: System error #120``), so
with the runtime present what is asserted is that the missing-runtime root cause is gone, not that the
import succeeds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wine
from wine import Wine, windows_path

from .conftest import WinPython, run_envcheck

pytestmark = [pytest.mark.windows, pytest.mark.slow]

VC_KEY = r"HKLM\SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64"
VC_FILES = ("msvcp140*.dll", "vcruntime140*.dll", "concrt140.dll", "vcomp140.dll")
ROOT = "ENV-WIN-DLL-NOT-FOUND:MSVCP140.dll"


def system32(machine: Wine) -> Path:
    return machine.prefix / "drive_c" / "windows" / "system32"


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wine]:
    """The customer's machine: a prefix without the VC++ redistributable (no DLLs, no registry key)."""
    session = wine.make_wine(tmp_path_factory.mktemp("seed-wine") / "prefix")
    for pattern in VC_FILES:
        for path in system32(session).glob(pattern):
            path.unlink()
    session.run(["reg", "delete", VC_KEY, "/f"], timeout=60)
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def dev_manifest(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The dev box's manifest: this (Linux) test environment, torch 2.13.0+cpu, snapshotted by envcheck."""
    out = tmp_path_factory.mktemp("dev") / "dev.json"
    done = subprocess.run(
        [sys.executable, "-m", "envcheck", "snapshot", "-o", str(out), "--label", "dev", "-q"],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    manifest = json.loads(out.read_text(encoding="utf-8"))
    assert manifest["platform"]["system"] == "Linux"
    assert manifest["torch"]["static"]["version"].startswith("2.13.0")
    return out


def gate(
    machine: Wine, tool: WinPython, customer: WinPython, dev: Path
) -> tuple[int, list[dict[str, Any]], str]:
    done = run_envcheck(
        machine,
        tool,
        ["gate", windows_path(dev), "--python", customer.windows, "--format", "json", "--timeout", "240"],
        env={"COLUMNS": "120"},
        timeout=400,
    )
    assert "Traceback (most recent call last)" not in done.stdout + done.stderr, done.stderr[-3000:]
    assert done.stdout, f"exit {done.returncode}, no report:\n{done.stderr[-3000:]}"
    report = json.loads(done.stdout)
    return done.returncode, report["findings"], done.stderr


@pytest.fixture(scope="module")
def without_runtime(
    machine: Wine, tool: WinPython, customer: WinPython, dev_manifest: Path
) -> tuple[int, list[dict[str, Any]], str]:
    """The gate's exit code and JSON findings on the machine without the redistributable."""
    return gate(machine, tool, customer, dev_manifest)


def test_gate_without_the_redistributable(without_runtime: tuple[int, list[dict[str, Any]], str]) -> None:
    """Exit 1; the first root cause is MSVCP140.dll, needed by c10.dll, with the redistributable and its
    minimum as the remedy; the failed import torch is a consequence under it, never a second root."""
    code, findings, stderr = without_runtime
    assert code == 1
    roots = [f for f in findings if f["caused_by"] is None]
    first = roots[0]
    assert first["id"] == ROOT, [f["id"] for f in roots[:5]]
    assert first["severity"] == "error"
    assert "needed by c10.dll" in first["message"]
    assert "is found nowhere the loader looks" in first["message"]
    assert "not installed (no redistributable registry key; no System32\\msvcp140.dll)" in first["message"]
    remedy = first["remedy"]
    assert "Microsoft Visual C++ 2015-2022 Redistributable (x64), 14.42 or newer" in remedy
    assert "torch:torch/lib/c10.dll: built with MSVC toolset 14.42" in remedy
    assert "winget install --exact --id Microsoft.VCRedist.2015+.x64" in remedy
    by_id = {f["id"]: f for f in findings}
    # The failed import, seen by the probe, the smoke suite and its import check: one failure, under the root.
    assert by_id["ENV-PROBE-FAILED:import torch"]["caused_by"] == ROOT
    assert by_id["VERIFY-IMPORT:import torch"]["caused_by"] == ROOT
    assert not any(f["rule"] == "ENV-PROBE-FAILED" for f in roots)
    # The static tree's VC++ runtime requirements are the same redistributable: folded under it.
    for f in findings:
        if f["rule"] in ("ENV-NATIVE-REQUIRES", "ENV-NATIVE-MISSING") and "140" in f["subject"]:
            assert f["caused_by"] == ROOT, f
    # The application's imports do not count the failed import of torch as passed.
    tally = next(line for line in stderr.splitlines() if " imports in " in line)
    assert "1 error" in tally, tally
    # The platform and version differences are beside it, after it.
    assert any(f["rule"] == "ENV-PLATFORM-OS" for f in roots)
    assert roots.index(by_id["ENV-PLATFORM-OS:platform"]) > 0


def test_gate_against_a_cuda_dev_box(machine: Wine, tool: WinPython, customer: WinPython) -> None:
    """Against a CUDA dev box's manifest (recorded on Linux: torch 2.14.1+cu130), the missing runtime still
    leads; the CPU-vs-CUDA variant and the torch version differences are root causes beside it, after it."""
    cuda = Path(__file__).resolve().parents[1] / "data" / "manifests" / "cuda.json"
    code, findings, _stderr = gate(machine, tool, customer, cuda)
    assert code == 1
    roots = [f["id"] for f in findings if f["caused_by"] is None]
    assert roots[0] == ROOT
    assert roots.index("ENV-TORCH-VARIANT:torch") > 0 and roots.index("ENV-TORCH-VERSION:torch") > 0
    by_id = {f["id"]: f for f in findings}
    assert (by_id["ENV-TORCH-VARIANT:torch"]["base"], by_id["ENV-TORCH-VARIANT:torch"]["target"]) == (
        "cu130",
        "cpu",
    )
    assert by_id["ENV-PROBE-FAILED:import torch"]["caused_by"] == ROOT


def test_gate_with_the_runtime_dlls(
    machine: Wine, tool: WinPython, customer: WinPython, dev_manifest: Path, vc_runtime: Path
) -> None:
    """Microsoft's runtime DLLs (msvc-runtime) in System32, as the redistributable installs them: the
    missing-runtime root cause is gone (Wine 8 still cannot finish the import: OMP: System error #120)."""
    copied = []
    for dll in sorted(vc_runtime.glob("*.dll")):
        target = system32(machine) / dll.name.lower()
        shutil.copy(dll, target)
        copied.append(target)
    try:
        code, findings, _stderr = gate(machine, tool, customer, dev_manifest)
    finally:
        for path in copied:
            path.unlink()
    assert not any(f["rule"] == "ENV-WIN-DLL-NOT-FOUND" for f in findings), [
        f["message"] for f in findings if f["rule"] == "ENV-WIN-DLL-NOT-FOUND"
    ]
    assert code == 1  # still Linux against Windows, and the import that Wine cannot finish


def test_gate_with_an_old_runtime(
    machine: Wine, tool: WinPython, customer: WinPython, dev_manifest: Path
) -> None:
    """msvc-runtime 14.34's DLLs in System32, older than the MSVC 14.42 that built torch 2.13.0's DLLs:
    every import of c10.dll loads, c10.dll's start-up code faults (WinError 998), and the old runtime is the
    root cause, with the import under it."""
    wheel = wine.need("msvc_runtime-14.34.*-win_amd64.whl")
    copied = []
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if "/scripts/" in name.lower() and name.lower().endswith(".dll"):
                target = system32(machine) / name.rsplit("/", 1)[-1].lower()
                target.write_bytes(zf.read(name))
                copied.append(target)
    try:
        code, findings, _stderr = gate(machine, tool, customer, dev_manifest)
    finally:
        for path in copied:
            path.unlink()
    assert code == 1
    roots = [f for f in findings if f["caused_by"] is None]
    first = roots[0]
    assert first["id"] == "ENV-WIN-VC-RUNTIME-OLD:VC++ runtime", [f["id"] for f in roots[:5]]
    assert first["found"].startswith("14.34.") and first["reference"] == ">= 14.42"
    assert "Loading c10.dll fails with error 998 though every import it has loads." in first["message"]
    assert "14.42 or newer" in first["remedy"]
    by_id = {f["id"]: f for f in findings}
    assert by_id["ENV-PROBE-FAILED:import torch"]["caused_by"] == first["id"]
    assert not any(f["rule"] == "ENV-WIN-DLL-NOT-FOUND" for f in findings)


# Every DLL of torch's lib folder loaded by the customer's CPython the way torch loads them (the DLL's own
# folder, then the default folders): Wine's loader names each import it cannot find, where Windows would
# stop at the first.
LOAD_EACH = r"""
import ctypes, glob, os, sys
kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
kernel32.LoadLibraryExW.restype = ctypes.c_void_p
for path in sorted(glob.glob(os.path.join(sys.argv[1], "*.dll"))):
    kernel32.LoadLibraryExW(path, None, 0x00000100 | 0x00001000)
"""


def loader_missing(machine: Wine, customer: WinPython) -> set[str]:
    """The DLL names Wine's loader reports missing (``err:module:import_dll Library X (which is needed by
    ...) not found``) while loading every DLL of torch's lib folder, less the folder's own DLLs."""
    import re

    done = machine.run(
        [str(customer.exe), "-c", LOAD_EACH, windows_path(customer.site / "torch" / "lib")],
        env={"WINEDEBUG": "err+module"},
        dll_overrides=wine.NO_VC_RUNTIME,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    named = {m.lower() for m in re.findall(r"import_dll Library (\S+) \(which is needed by", done.stderr)}
    # A DLL of the folder that failed because of its own imports is named too: only what the folder (the
    # environment) does not hold is the machine's to provide.
    shipped = {p.name.lower() for p in (customer.site / "torch" / "lib").iterdir()}
    return named - shipped


def test_predict_and_the_live_gate_agree_on_what_the_machine_must_provide(
    machine: Wine,
    customer: WinPython,
    dev_manifest: Path,
    without_runtime: tuple[int, list[dict[str, Any]], str],
    tmp_path: Path,
) -> None:
    """``envcheck predict --platform win_amd64`` on Linux, the live gate under Wine and Wine's own loader
    name the same DLLs the machine must provide, and predict's minimum is the gate's."""
    saved = tmp_path / "predicted.json"
    cache = wine.cache_dir()
    links = ["--find-links", str(cache)] if cache is not None else []
    argv = [sys.executable, "-m", "envcheck", "predict", str(dev_manifest), "--platform", "win_amd64"]
    done = subprocess.run(
        [*argv, *links, "--save", str(saved), "--format", "json"],
        capture_output=True,
        text=True,
        timeout=900,
        check=False,
    )
    if done.returncode == 2:
        pytest.skip(f"predict could not resolve for win_amd64 here: {done.stderr.strip()[-300:]}")
    predicted = json.loads(saved.read_text(encoding="utf-8"))
    vc = [n for n in predicted["predicted"]["needs"] if n["kind"] == "vc-runtime"]
    assert len(vc) == 1 and vc[0]["provided"] == "machine"
    predicted_files = {f.lower() for f in vc[0]["files"]}

    _code, findings, _stderr = without_runtime
    live: set[str] = set()
    for f in findings:
        if f["rule"] == "ENV-WIN-DLL-NOT-FOUND":
            live.add(f["subject"].lower())
        elif f["rule"] == "ENV-NATIVE-MISSING" and f["caused_by"] == ROOT:
            live.update(n.lower() for n in (f["target"] or "").removeprefix("missing: ").split(", ") if n)

    assert predicted_files == live == loader_missing(machine, customer)
    assert predicted_files == {"msvcp140.dll", "msvcp140_atomic_wait.dll"}
    root = next(f for f in findings if f["id"] == ROOT)
    assert f"{vc[0]['minimum']} or newer" in root["remedy"]
