"""A real exit: the processes that import the application's modules leave through the interpreter's normal
exit, under a deadline of their own, so what a native library does as the process ends is seen.

Every target used to leave through ``os._exit(0)`` once its result was written: an atexit hook that
crashes, a destructor that aborts or a non-daemon thread that never ends was never run, and the gate
passed an application that dies or hangs each time it ends. Built for real here: packages with native
code (a real C extension module, compiled with the C compiler) installed with a dist-info and a RECORD,
one registering an atexit hook that kills its process with SIGSEGV, one starting a non-daemon thread that
never ends.
"""

from __future__ import annotations

import base64
import hashlib
import json
import shutil
import subprocess
import sysconfig
import time
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv, venv_site

from envcheck.cli import app
from envcheck.verify.imports import AppImports, ImportResult, Together, import_findings, run_imports, tally

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc or gcc) to build extension modules")
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"

NATIVE_SOURCE = r"""
#include <Python.h>
static struct PyModuleDef def = {PyModuleDef_HEAD_INIT, "_native", NULL, -1, NULL};
PyMODINIT_FUNC PyInit__native(void) { return PyModule_Create(&def); }
"""

# Each package imports its native part, then does what its name says when the interpreter ends.
PACKAGES = {
    "exitcrash": (
        "import atexit, os, signal\n"
        "from . import _native\n\n\n"
        "def _at_exit():\n"
        "    os.kill(os.getpid(), signal.SIGSEGV)\n\n\n"
        "atexit.register(_at_exit)\n"
    ),
    "exithang": (
        "import threading\n"
        "from . import _native\n\n\n"
        "def _serve_forever():\n"
        "    threading.Event().wait()\n\n\n"
        "threading.Thread(target=_serve_forever, name='exithang-worker').start()\n"
    ),
    # The control: an atexit hook that works, and a daemon thread that never ends (the interpreter does
    # not wait for daemon threads).
    "exitclean": (
        "import atexit, threading\n"
        "from . import _native\n\n"
        "atexit.register(lambda: None)\n"
        "threading.Thread(target=threading.Event().wait, daemon=True).start()\n"
    ),
}


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


@pytest.fixture(scope="module")
def native(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """A real extension module ``_native`` (one compiler run for the whole file)."""
    if CC is None:
        pytest.skip("no C compiler (cc or gcc) to build extension modules")
    folder = tmp_path_factory.mktemp("native")
    (folder / "native.c").write_text(NATIVE_SOURCE, encoding="utf-8")
    include = sysconfig.get_paths()["include"]
    out = folder / "native.so"
    subprocess.run(
        [CC, "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(folder / "native.c")],
        check=True,
        capture_output=True,
    )
    return out.read_bytes()


def install(site: Path, name: str, native: bytes) -> None:
    """Package ``name`` (its ``__init__.py`` from ``PACKAGES`` and the ``_native`` extension) with the
    dist-info a wheel install leaves, its RECORD listing both files with their hashes."""
    package = site / name
    package.mkdir()
    files = {
        f"{name}/__init__.py": PACKAGES[name].encode(),
        f"{name}/_native{EXT_SUFFIX}": native,
    }
    dist = f"{name}-1.0.dist-info"
    files[f"{dist}/METADATA"] = f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n".encode()
    files[f"{dist}/WHEEL"] = b"Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: false\n"
    files[f"{dist}/INSTALLER"] = b"pip\n"
    (site / dist).mkdir()
    rows = []
    for path, data in files.items():
        (site / path).write_bytes(data)
        rows.append(f"{path},{_hash(data)},{len(data)}")
    rows.append(f"{dist}/RECORD,,")
    (site / dist / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def exiting(tmp_path_factory: pytest.TempPathFactory, native: bytes) -> Path:
    """A venv with nothing but the three packages."""
    python = make_venv(tmp_path_factory.mktemp("exiting") / "venv")
    site = venv_site(python)
    for name in PACKAGES:
        install(site, name, native)
    return python


@needs_cc
@pytest.mark.slow
def test_a_crash_and_a_hang_at_exit_are_each_the_modules_own(exiting: Path) -> None:
    started = time.monotonic()
    run = run_imports(str(exiting), timeout=60)
    wall = time.monotonic() - started
    status = {r.module: r for r in run.results}
    assert set(status) == {"exitcrash", "exithang", "exitclean"}
    assert status["exitcrash"].status == "crashed" and status["exitcrash"].signal == "SIGSEGV"
    assert status["exitcrash"].at_exit
    assert status["exithang"].status == "timeout" and status["exithang"].at_exit
    # The exit has a deadline of its own, a few seconds, not the import's quarter of --timeout.
    assert status["exithang"].timeout_s is not None and status["exithang"].timeout_s <= 5
    assert wall < 12
    assert status["exitclean"].status == "passed" and not status["exitclean"].at_exit
    # Only what ended cleanly alone is imported together, and that process ends cleanly too.
    assert run.together is not None and run.together.modules == ("exitclean",)
    assert run.together.status == "ok"

    findings = {f.subject: f for f in import_findings(run)}
    assert set(findings) == {"import exitcrash at exit", "import exithang at exit"}
    crash, hang = findings["import exitcrash at exit"], findings["import exithang at exit"]
    assert crash.rule == "VERIFY-CRASH" and crash.severity == "error"
    assert "at exit" in crash.message and "SIGSEGV" in crash.message and "exitcrash" in crash.message
    assert hang.rule == "VERIFY-TIMEOUT" and hang.severity == "error"
    assert "at exit" in hang.message and "exithang" in hang.message
    # The stack dump of the hang names the thread that kept the process alive.
    assert "_serve_forever" in (status["exithang"].stderr_tail or "")
    assert "at exit" in tally(run)


@needs_cc
@pytest.mark.slow
def test_a_crash_at_exit_of_the_imports_together_names_the_module_it_came_from(exiting: Path) -> None:
    """A module imported alone elsewhere (as torch is, by the suite) is seen exiting only among the others:
    the process's Python stack at the signal names the module whose hook it was."""
    run = run_imports(
        str(exiting),
        timeout=60,
        not_imported=["exithang"],
        alone_elsewhere={"exitcrash": "another check"},
    )
    assert run.together is not None and run.together.modules == ("exitclean", "exitcrash")
    assert run.together.status == "crashed" and run.together.at_exit
    (finding,) = [f for f in import_findings(run) if f.rule == "VERIFY-CRASH"]
    assert finding.subject == "import exitcrash at exit"
    assert "at exit" in finding.message and "SIGSEGV" in finding.message


def test_a_crash_at_exit_that_no_frame_names_is_the_imports_together() -> None:
    together = Together(modules=("a", "b"), status="crashed", signal="SIGABRT", at_exit=True)
    run = AppImports(results=(ImportResult(module="a"), ImportResult(module="b")), together=together)
    (finding,) = import_findings(run)
    assert finding.rule == "VERIFY-CRASH" and finding.subject == "app imports at exit"
    assert "`a`, `b`" in finding.message and "crashed at exit (SIGABRT)" in finding.message
    assert "the imports together: crashed at exit" in tally(run)


@needs_cc
@needs_torch
@pytest.mark.slow
def test_the_gate_fails_a_module_that_crashes_or_hangs_at_exit(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path, native: bytes
) -> None:
    python = make_venv(tmp_path_factory.mktemp("exit-gate") / "venv")
    site = clone_site_packages(python)
    for name in PACKAGES:
        install(site, name, native)
    ref = tmp_path / "ref.json"
    made = CliRunner().invoke(app, ["snapshot", "--python", str(python), "--no-verify", "-o", str(ref), "-q"])
    assert made.exit_code == 0, made.output
    result = CliRunner().invoke(
        app, ["gate", str(ref), "--python", str(python), "--format", "json", "--quiet"]
    )
    report = json.loads(result.stdout[result.stdout.index("{") :])
    assert result.exit_code == 1, result.stderr
    errors = {f["subject"]: f for f in report["findings"] if f["severity"] == "error"}
    assert "import exitcrash at exit" in errors, report["findings"]
    assert errors["import exitcrash at exit"]["rule"] == "VERIFY-CRASH"
    assert errors["import exithang at exit"]["rule"] == "VERIFY-TIMEOUT"
    assert not any("exitclean" in subject for subject in errors)
