"""The import cap (``MAX_APP_IMPORTS``) chooses by risk, never by alphabet, and never passes in silence.

The attack, built for real: seventy native modules installed (real C extension modules, compiled once
with the C compiler, each file with its own ``PyInit_<name>``, installed with a dist-info and a RECORD
into a real venv cloned from the test environment), the alphabetically last ones failing their import.
A cut by name never imports them; the gate then passed with one info finding. The cap now takes the
application's imports first, then the modules that link torch (``libtorch*``/``libc10*`` in their ELF
``DT_NEEDED``, or a distribution that requires torch) or need NumPy (a distribution that requires numpy),
then the rest by name; what it leaves out is a warning naming each module.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
import shutil
import subprocess
import sysconfig
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv, venv_site

from envcheck.cli import app
from envcheck.verify.imports import (
    MAX_APP_IMPORTS,
    AppImports,
    ImportResult,
    import_findings,
    plan_order,
    run_imports,
)

CC = shutil.which("cc") or shutil.which("gcc")
needs_cc = pytest.mark.skipif(CC is None, reason="no C compiler (cc or gcc) to build extension modules")
EXT_SUFFIX = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
# The head of a test package's ``__init__``: it logs the process that imports it, and whether torch was
# imported there before it, one line ``<pid> <True|False>`` a process into ``$ENVCHECK_TEST_LOG/<name>``.
IMPORT_LOG = (
    "import os, sys\n"
    "_log = os.environ.get('ENVCHECK_TEST_LOG')\n"
    "if _log:\n"
    "    with open(os.path.join(_log, __name__), 'a') as f:\n"
    "        f.write('%d %s\\n' % (os.getpid(), 'torch' in sys.modules))\n"
)

# One source for every module: a macro per name. A module that loads returns an empty module; one that
# fails raises ImportError from its PyInit, as a broken native library does.
_SOURCE_HEAD = r"""
#include <Python.h>
#define LOADS(name) \
    static struct PyModuleDef def_##name = {PyModuleDef_HEAD_INIT, #name, NULL, -1, NULL}; \
    PyMODINIT_FUNC PyInit_##name(void) { return PyModule_Create(&def_##name); }
#define FAILS(name) \
    PyMODINIT_FUNC PyInit_##name(void) { \
        PyErr_SetString(PyExc_ImportError, #name ": undefined symbol: _ZN3c1017broken_on_purposeEv"); \
        return NULL; \
    }
"""


def build_extension(
    folder: Path, loads: list[str], fails: list[str], *, link: list[str] | None = None, name: str = "ext"
) -> Path:
    """One shared object holding ``PyInit_<name>`` for every name (one compiler run); ``link``: extra
    linker arguments (``-L DIR -lc10``: a DT_NEEDED entry, as a torch extension has)."""
    assert CC is not None
    source = folder / f"{name}.c"
    source.write_text(
        _SOURCE_HEAD + "".join(f"LOADS({n})\n" for n in loads) + "".join(f"FAILS({n})\n" for n in fails),
        encoding="utf-8",
    )
    out = folder / f"{name}.so"
    include = sysconfig.get_paths()["include"]
    argv = [CC, "-shared", "-fPIC", "-O0", f"-I{include}", "-o", str(out), str(source), *(link or [])]
    subprocess.run(argv, check=True, capture_output=True)
    return out


def _hash(data: bytes) -> str:
    return "sha256=" + base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()


def install_extension(
    site: Path, module: str, built: Path, *, requires: tuple[str, ...] = (), init: str | None = None
) -> None:
    """``module`` as a top-level extension module (a copy of ``built``) of a distribution of its own, with
    the dist-info a wheel install leaves: METADATA, WHEEL, INSTALLER and a RECORD with real hashes.
    ``init``: ``module`` is a package instead, this its ``__init__.py``, and ``built`` its ``_native``
    extension module (built with ``_native`` among the names that load)."""
    data = built.read_bytes()
    rows = []
    if init is None:
        file = f"{module}{EXT_SUFFIX}"
    else:
        (site / module).mkdir()
        file = f"{module}/_native{EXT_SUFFIX}"
        (site / module / "__init__.py").write_text(init, encoding="utf-8")
        rows.append(f"{module}/__init__.py,{_hash(init.encode())},{len(init.encode())}")
    (site / file).write_bytes(data)
    dist = site / f"{module}-1.0.dist-info"
    dist.mkdir()
    meta = f"Metadata-Version: 2.1\nName: {module}\nVersion: 1.0\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    files = {
        "METADATA": meta,
        "WHEEL": "Wheel-Version: 1.0\nGenerator: envcheck-tests\nRoot-Is-Purelib: false\n",
        "INSTALLER": "pip\n",
    }
    rows.append(f"{file},{_hash(data)},{len(data)}")
    for name, text in files.items():
        (dist / name).write_text(text, encoding="utf-8")
        raw = text.encode()
        rows.append(f"{dist.name}/{name},{_hash(raw)},{len(raw)}")
    rows.append(f"{dist.name}/RECORD,,")
    (dist / "RECORD").write_text("\n".join(rows) + "\n", encoding="utf-8")


def uninstall_extension(site: Path, module: str) -> None:
    """Undo ``install_extension``: the module (or package) and its dist-info."""
    package = site / module
    if package.is_dir():
        shutil.rmtree(package)
    else:
        (site / f"{module}{EXT_SUFFIX}").unlink()
    shutil.rmtree(site / f"{module}-1.0.dist-info")


def package_venv(root: Path, inits: dict[str, str]) -> tuple[Path, Path, Path]:
    """A venv under ``root`` cloned from the test environment, with a package of native code per name of
    ``inits`` (its ``__init__.py``), all sharing one built ``_native`` extension: the interpreter, its site
    folder and the built extension (for packages a test adds later)."""
    python = make_venv(root / "venv")
    site = clone_site_packages(python)
    build = root / "build"
    build.mkdir()
    built = build_extension(build, ["_native"], [])
    for name, init in inits.items():
        install_extension(site, name, built, init=init)
    return python, site, built


def invoke(args: list[str]) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"])
    stdout = result.stdout
    report = json.loads(stdout[stdout.index("{") :]) if "{" in stdout else {}
    return result.exit_code, report, result.stderr


# ------------------------------------------------------------------------------ the order (no target)


def test_the_cap_takes_the_applications_imports_then_torch_and_numpy_modules_then_the_rest() -> None:
    found = [(f"m{i:02d}", f"d{i}", "1.0") for i in range(8)]
    risk = {"m06": "torch", "m07": "numpy", "m05": "torch"}
    planned, over = plan_order(found, ["app.main"], [], limit=4, risk=risk)
    chosen = {r.module for r in planned}
    # The application's module, then the two that link torch, then the one that needs NumPy: the
    # alphabetically first ones are what the cap leaves out, not the risky last ones.
    assert chosen == {"app.main", "m05", "m06", "m07"}
    assert over == ["m00", "m01", "m02", "m03", "m04"]
    # The imports still run in the recorded order: the installed modules by name, then the application's.
    assert [r.module for r in planned] == ["m05", "m06", "m07", "app.main"]
    # Without risk the rest are taken by name, as before.
    planned, over = plan_order(found, [], [], limit=3)
    assert [r.module for r in planned] == ["m00", "m01", "m02"] and over[0] == "m03"


def test_a_module_left_out_by_the_cap_is_a_warning_that_names_it() -> None:
    run = AppImports(results=(ImportResult(module="a"),), over_cap=("zz_fails", "zz_other"))
    (finding,) = import_findings(run)
    assert finding.rule == "VERIFY-IMPORT" and finding.severity == "warning"
    assert "2 modules with native code were not imported" in finding.message
    assert "zz_fails" in finding.message and "zz_other" in finding.message
    many = AppImports(over_cap=tuple(f"m{i:03d}" for i in range(300)))
    (finding,) = import_findings(many)
    assert "300 modules" in finding.message and "m000" in finding.message and "more" in finding.message


# ----------------------------------------------------------------------------- real modules, real venvs


@needs_cc
@pytest.mark.slow
def test_the_plan_reads_which_modules_link_torch_or_need_numpy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real plan in a real venv: the extension that links ``libc10.so`` and the one whose distribution
    requires NumPy are taken before an application-less alphabet would take them."""
    build = tmp_path / "build"
    build.mkdir()
    # A stand-in libc10.so: the plan reads the extension's DT_NEEDED, it never loads it.
    (build / "empty.c").write_text("int c10_stand_in;\n", encoding="utf-8")
    subprocess.run(
        [CC, "-shared", "-fPIC", "-o", str(build / "libc10.so"), str(build / "empty.c")], check=True
    )
    names = ["aa_plain", "zz_torchext", "zy_numpyext", "ab_plain"]
    plain = build_extension(build, names, [])
    linked = build_extension(
        build, names, [], link=[f"-L{build}", "-Wl,--no-as-needed", "-lc10"], name="linked"
    )
    python = make_venv(tmp_path / "venv")
    site = venv_site(python)
    install_extension(site, "aa_plain", plain)
    install_extension(site, "ab_plain", plain)
    install_extension(site, "zz_torchext", linked)
    install_extension(site, "zy_numpyext", plain, requires=("numpy>=1.22",))
    project = tmp_path / "project"
    project.mkdir()
    (project / "app_main.py").write_text("X = 1\n", encoding="utf-8")
    monkeypatch.chdir(project)  # where the application's module is found
    run = run_imports(str(python), timeout=60, modules=["app_main"], limit=3)
    assert {r.module for r in run.results} == {"app_main", "zz_torchext", "zy_numpyext"}
    assert run.over_cap == ("aa_plain", "ab_plain")
    (warning,) = [f for f in import_findings(run) if f.subject == "app imports"]
    assert warning.severity == "warning" and "aa_plain, ab_plain" in warning.message


@needs_cc
@needs_torch
@pytest.mark.slow
def test_seventy_native_modules_the_last_failing_never_pass_the_gate(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    python = make_venv(tmp_path_factory.mktemp("seventy") / "venv")
    site = clone_site_packages(python)
    names = [f"capmod_{i:02d}" for i in range(70)]
    build = tmp_path / "build"
    build.mkdir()
    failing = names[-3:]  # capmod_67 links torch's libc10, capmod_68 needs NumPy, capmod_69 neither
    loads = names[:-3]
    built = build_extension(build, loads, failing)
    torch_lib = site / "torch" / "lib"
    linked = build_extension(
        build,
        loads,
        failing,
        link=[f"-L{torch_lib}", "-Wl,--no-as-needed", "-lc10", f"-Wl,-rpath,{torch_lib}"],
        name="linked",
    )
    for name in names[:-3]:
        install_extension(site, name, built)
    install_extension(site, "capmod_67", linked)
    install_extension(site, "capmod_68", built, requires=("numpy>=1.22",))
    install_extension(site, "capmod_69", built)

    ref = tmp_path / "ref.json"
    made = CliRunner().invoke(app, ["snapshot", "--python", str(python), "--no-verify", "-o", str(ref), "-q"])
    assert made.exit_code == 0, made.output
    code, report, stderr = invoke(["gate", str(ref), "--python", str(python)])
    subjects = {f["subject"]: f for f in report["findings"]}
    # The two risky ones are imported whatever their names, and their failures fail the gate.
    assert code == 1, stderr
    for module in ("capmod_67", "capmod_68"):
        finding = subjects[f"import {module}"]
        assert finding["rule"] == "VERIFY-IMPORT" and finding["severity"] == "error"
        assert "broken_on_purpose" in finding["message"]
    # The one beyond the cap by risk order is named in a warning, with how many were left out.
    capped = subjects["app imports"]
    assert capped["severity"] == "warning"
    assert (
        "capmod_69" in capped["message"] and "modules with native code were not imported" in capped["message"]
    )
    count = re.search(r"(\d+) modules with native code were not imported", capped["message"])
    # 70 of them and the test environment's own (torch and NumPy at least), less the cap.
    assert count is not None and int(count.group(1)) >= 70 + 2 - MAX_APP_IMPORTS
    assert "over the cap" in stderr
