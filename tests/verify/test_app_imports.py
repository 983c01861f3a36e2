"""The application's imports in verify and gate: real venvs, real wheels (h5py 3.10.0 built against NumPy 1,
NumPy 1.26.4, Intel's OpenMP runtime), real import failures, crashes and hangs.

The wheels come from ``$ENVCHECK_TEST_WHEELS`` or the cache
``${XDG_CACHE_HOME:-~/.cache}/envcheck/test-wheels``, where a first run downloads them with pip (``pip
download --no-deps``, ~75 MB); without a registry the tests that need them skip, saying why.
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv, process_alive
from wheels import pip_install, wheel

from envcheck.cli import app
from envcheck.core.errors import UsageError
from envcheck.diff.policy import load_policy
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.verify import VerifySection
from envcheck.verify.imports import (
    MAX_APP_IMPORTS,
    AppImports,
    ImportResult,
    import_findings,
    plan_order,
    run_imports,
)

H5PY = "h5py==3.10.0"  # built against NumPy 1: its import fails under NumPy 2
NUMPY1 = "numpy==1.26.4"
INTEL_OPENMP = "intel-openmp==2026.2.0"  # libiomp5.so, installed into the venv's lib folder


# ------------------------------------------------------------------------------------------- helpers


def invoke(args: list[str]) -> tuple[int, dict, str]:  # type: ignore[type-arg]
    """``envcheck ARGS --format json``: exit code, the report, stderr."""
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"])
    stdout = result.stdout
    report = json.loads(stdout[stdout.index("{") :]) if "{" in stdout else {}
    return result.exit_code, report, result.stderr


def by_rule(report: dict, rule: str) -> list[dict]:  # type: ignore[type-arg]
    return [f for f in report["findings"] if f["rule"] == rule]


def from_imports(report: dict) -> list[dict]:  # type: ignore[type-arg]
    """The findings the application's imports gave (their subjects name the import)."""
    return [
        f
        for f in report["findings"]
        if f["subject"].startswith(("import ", "OpenMP (app")) or f["rule"].startswith("VERIFY-IMPORT")
    ]


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with the test environment's torch and NumPy 2 (hard-linked, never written to)."""
    python = make_venv(tmp_path_factory.mktemp("healthy") / "venv")
    clone_site_packages(python)
    return python


# ---------------------------------------------------------------------------- plan and policy (no target)


def test_the_plan_is_ordered_capped_and_skips_what_the_policy_names() -> None:
    found = [(f"m{i:02d}", f"d{i}", "1.0") for i in range(5)]
    planned, over = plan_order(found, ["app.main", "app.main", "m01"], ["m03"], limit=4)
    # The application's modules are never cut; the plan's fill what is left of the cap, in order.
    assert [r.module for r in planned] == ["m00", "m02", "m03", "app.main", "m01"]
    assert [r.status for r in planned] == ["passed", "passed", "skipped", "passed", "passed"]
    assert over == ["m04"]
    # not_imported names a package: its submodules are skipped too.
    skipped, _ = plan_order([], ["pkg.sub", "pkgother"], ["pkg"])
    assert [r.status for r in skipped] == ["skipped", "passed"]
    assert MAX_APP_IMPORTS >= 16


def test_over_the_cap_is_said_not_silent() -> None:
    run = AppImports(results=(ImportResult(module="a"),), over_cap=("b", "c"))
    (finding,) = import_findings(run)
    assert finding.rule == "VERIFY-IMPORT" and finding.severity == "warning"
    assert "2 modules with native code were not imported" in finding.message


def test_openmp_runtimes_are_counted_by_the_files_each_import_mapped() -> None:
    from envcheck.verify.imports import Together

    torch = ImportResult(module="torch", distribution="torch", version="2.13.0+cpu")
    app_result = ImportResult(module="app")
    gomp = "/v/site-packages/torch/lib/libgomp.so.1"

    def run(*loaded: tuple[str, tuple[str, ...]]) -> list:  # type: ignore[type-arg]
        together = Together(modules=("app", "torch"), loaded=loaded)
        return import_findings(AppImports(results=(app_result, torch), together=together))

    assert run(("torch", (gomp, "/v/site-packages/torch/lib/libtorch_cpu.so"))) == []
    (mixed,) = run(("app", ("/v/lib/libiomp5.so",)), ("torch", (gomp,)))
    assert mixed.rule == "VERIFY-IMPORT-OPENMP" and mixed.severity == "error"
    assert "libiomp5.so (Intel) loaded by `import app`" in mixed.message
    assert "libgomp.so.1 (GNU, torch's) loaded by `import torch`" in mixed.message
    (gnu,) = run(("app", ("/usr/lib/x86_64-linux-gnu/libgomp.so.1",)), ("torch", (gomp,)))
    assert gnu.severity == "warning"


def test_the_policy_takes_imports_and_not_imported_and_still_refuses_unknown_keys(tmp_path: Path) -> None:
    policy = tmp_path / "p.toml"
    policy.write_text('imports = ["myapp.main"]\nnot_imported = ["somepkg"]\n', encoding="utf-8")
    loaded = load_policy(policy, tmp_path)
    assert loaded.imports == ("myapp.main",) and loaded.not_imported == ("somepkg",)
    for text, expected in (
        ('imported = ["x"]\n', "imported: unknown key"),
        ('imports = "x"\n', "imports: expected an array"),
        ('imports = ["os; rm -rf /"]\n', "is not a Python module name"),
        ("not_imported = [3]\n", "is not a Python module name"),
        ("imports = [" + ", ".join(f'"m{i}"' for i in range(MAX_APP_IMPORTS + 1)) + "]\n", "more than"),
    ):
        policy.write_text(text, encoding="utf-8")
        with pytest.raises(UsageError, match=expected):
            load_policy(policy, tmp_path)


def test_recorded_imports_round_trip_and_an_old_section_is_written_as_before() -> None:
    old = VerifySection(skipped="--no-verify")
    assert "imports" not in encode(old)
    assert decode(VerifySection, encode(old)) == old
    new = VerifySection(skipped="--no-verify", imports=["myapp.main"])
    assert encode(new)["imports"] == ["myapp.main"]
    assert decode(VerifySection, json.loads(json.dumps(encode(new)))) == new


# ------------------------------------------------------------------------------ hostile imports (real)


@pytest.fixture(scope="module")
def bare(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A venv with nothing installed: the plan finds no native module, only the application's run."""
    return make_venv(tmp_path_factory.mktemp("bare") / "venv")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The application's folder, the current one (where `--import`'s modules are found last)."""
    folder = tmp_path / "project"
    folder.mkdir()
    monkeypatch.chdir(folder)
    return folder


def _module(project: Path, name: str, body: str) -> None:
    (project / f"{name}.py").write_text(textwrap.dedent(body), encoding="utf-8")


@pytest.mark.slow
def test_a_hang_a_crash_and_endless_output_are_each_their_own_import(bare: Path, project: Path) -> None:
    log = project / "pids"
    _module(
        project,
        "hangs",
        f"""
        import os, subprocess, sys, time
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        with open({str(log)!r}, "w") as f:
            f.write("%d %d" % (os.getpid(), child.pid))
        time.sleep(600)
        """,
    )
    _module(project, "segfaults", "import ctypes\nctypes.string_at(0)\n")
    _module(project, "spams", "import sys\nwhile True:\n    sys.stderr.write('spam ' * 2000 + '\\n')\n")
    _module(project, "fine", "import json\n")
    run = run_imports(
        str(bare), timeout=12, modules=["hangs", "segfaults", "spams", "no_such_module_here", "fine"]
    )
    status = {r.module: r for r in run.results}
    assert [r.module for r in run.results] == ["hangs", "segfaults", "spams", "no_such_module_here", "fine"]
    assert status["hangs"].status == "timeout"
    assert status["segfaults"].status == "crashed" and status["segfaults"].signal == "SIGSEGV"
    assert status["spams"].status == "timeout"
    assert status["spams"].stderr_tail is not None and len(status["spams"].stderr_tail) < 5000
    assert "truncated" in status["spams"].stderr_tail
    assert status["no_such_module_here"].status == "error"
    assert "ModuleNotFoundError" in (status["no_such_module_here"].error or "")
    assert status["fine"].status == "passed"
    # Only what passed alone is imported together.
    assert run.together is not None and run.together.modules == ("fine",) and run.together.status == "ok"
    # The hang's whole process session went at its deadline, its child included.
    pids = [int(p) for p in log.read_text(encoding="utf-8").split()]
    assert pids and not any(process_alive(p) for p in pids)

    rules = {f.subject: f for f in import_findings(run)}
    assert rules["import hangs"].rule == "VERIFY-TIMEOUT" and rules["import hangs"].severity == "error"
    assert rules["import segfaults"].rule == "VERIFY-CRASH" and "SIGSEGV" in rules["import segfaults"].message
    assert rules["import spams"].rule == "VERIFY-TIMEOUT"
    missing = rules["import no_such_module_here"]
    assert missing.rule == "VERIFY-IMPORT" and missing.severity == "error"
    assert "No module named 'no_such_module_here'" in missing.message
    assert "import fine" not in rules


@pytest.mark.slow
def test_two_imports_that_pass_alone_but_not_together(bare: Path, project: Path) -> None:
    _module(project, "first", "X = 1\n")
    _module(
        project,
        "second",
        "import os, signal, sys\nif 'first' in sys.modules:\n    os.kill(os.getpid(), signal.SIGABRT)\n",
    )
    run = run_imports(str(bare), timeout=30, modules=["first", "second"])
    assert [r.status for r in run.results] == ["passed", "passed"]
    (finding,) = import_findings(run)
    assert finding.rule == "VERIFY-CRASH" and finding.subject == "import second"
    assert "passes alone but killed the process (SIGABRT) after `first`" in finding.message


@pytest.mark.slow
def test_a_module_imported_alone_elsewhere_is_imported_only_together(bare: Path, project: Path) -> None:
    log = project / "imported"
    _module(project, "counted", f"with open({str(log)!r}, 'a') as f:\n    f.write('x')\n")
    run = run_imports(str(bare), timeout=30, modules=["counted"], alone_elsewhere={"counted": "the suite"})
    (result,) = run.results
    assert result.status == "passed" and result.reason == "imported alone by the suite"
    assert run.together is not None and run.together.modules == ("counted",)
    assert log.read_text(encoding="utf-8") == "x"  # once: in the process that imports them all


@pytest.mark.slow
def test_the_cli_reports_a_missing_module_and_refuses_a_bad_name(bare: Path, project: Path) -> None:
    _module(project, "skipped_one", f"open({str(project / 'imported')!r}, 'w').close()\n")
    (project / "pyproject.toml").write_text(
        '[tool.envcheck]\nimports = ["skipped_one"]\nnot_imported = ["skipped_one"]\n', encoding="utf-8"
    )
    code, report, stderr = invoke(
        ["verify", "--python", str(bare), "--import", "no_such_app", "--timeout", "30"]
    )
    assert code == 1
    (missing,) = [f for f in from_imports(report) if f["subject"] == "import no_such_app"]
    assert missing["rule"] == "VERIFY-IMPORT" and missing["severity"] == "error"
    assert "Traceback" not in stderr
    # The policy's not_imported wins over its imports: the module never ran.
    assert not (project / "imported").exists()
    assert "1 skipped" in stderr
    # The tally's second line is a line of its own, not an escaped newline inside the first.
    assert "\nimported in this order: " in stderr and "\\n" not in stderr

    refused = CliRunner().invoke(app, ["verify", "--python", str(bare), "--import", "not a module"])
    assert refused.exit_code == 2
    assert "is not a Python module name" in refused.output and "Traceback" not in refused.output
    refused = CliRunner().invoke(app, ["snapshot", "--python", str(bare), "--import", "-x", "-o", "-"])
    assert refused.exit_code == 2 and "is not a Python module name" in refused.output


def test_a_manifest_that_records_a_bad_module_name_is_refused_before_anything_runs(
    bare: Path, project: Path
) -> None:
    example = Path(__file__).parents[2] / "manifests" / "examples" / "torch-2.13.0-cpu-linux.json"
    data = json.loads(example.read_text(encoding="utf-8"))
    data["verify"]["imports"] = ["os; rm -rf /\x1b[31m"]
    hostile = project / "hostile.json"
    hostile.write_text(json.dumps(data), encoding="utf-8")
    for args in (["gate", str(hostile)], ["verify", "--against", str(hostile)]):
        result = CliRunner().invoke(app, [*args, "--python", str(bare)])
        assert result.exit_code == 2, result.output
        assert "verify.imports[0]" in result.output and "is not a Python module name" in result.output
        assert "\x1b" not in result.output and "Traceback" not in result.output


# --------------------------------------------------------------------------- real wheels, real venvs


@needs_torch
@pytest.mark.slow
def test_a_healthy_venv_gets_nothing_from_its_imports(clone: Path, tmp_path: Path) -> None:
    ref = tmp_path / "ref.json"
    made = CliRunner().invoke(app, ["snapshot", "--python", str(clone), "--no-verify", "-o", str(ref), "-q"])
    assert made.exit_code == 0, made.output
    code, report, stderr = invoke(["gate", str(ref), "--python", str(clone)])
    assert code == 0, report
    assert [f for f in from_imports(report) if f["severity"] in ("error", "warning")] == []
    line = next(x for x in stderr.splitlines() if " imports in " in x)
    assert "passed" in line and "error" not in line and "crashed" not in line and "timeout" not in line


@needs_torch
@pytest.mark.slow
def test_an_extension_built_for_numpy_1_fails_the_gate_under_the_numpy_change(
    tmp_path_factory: pytest.TempPathFactory, tmp_path: Path
) -> None:
    h5py, numpy1 = wheel(H5PY), wheel(NUMPY1)
    target = make_venv(tmp_path_factory.mktemp("numpy2") / "venv")
    clone_site_packages(target)
    pip_install(target, h5py)
    base = make_venv(tmp_path_factory.mktemp("numpy1") / "venv")
    clone_site_packages(base, skip=lambda p: p.name.startswith("numpy"))
    pip_install(base, h5py, numpy1)
    ref = tmp_path / "numpy1.json"
    made = CliRunner().invoke(app, ["snapshot", "--python", str(base), "--no-verify", "-o", str(ref), "-q"])
    assert made.exit_code == 0, made.output

    code, report, _ = invoke(["gate", str(ref), "--python", str(target)])
    assert code == 1
    (numpy_change,) = by_rule(report, "ENV-NUMPY-MAJOR")
    # A root cause is as severe as what it causes: the NumPy change breaks h5py's import, an error.
    assert numpy_change["severity"] == "error" and numpy_change["caused_by"] is None
    (broken,) = [f for f in by_rule(report, "VERIFY-IMPORT") if f["subject"] == "import h5py"]
    assert broken["severity"] == "error"
    assert broken["caused_by"] == "ENV-NUMPY-MAJOR:numpy"
    assert "NumPy ABI break" in broken["message"] and "numpy.dtype size changed" in broken["message"]
    # The import's remedy is its root's: NumPy 1 back, from the registry.
    assert broken["remedy"].startswith("Follows from ENV-NUMPY-MAJOR") and not broken["actions"]
    assert "`pip install 'numpy==1.26.4'`" in numpy_change["remedy"]
    # The report leads with the NumPy change: the only root cause with an error under it.
    text = CliRunner().invoke(app, ["gate", str(ref), "--python", str(target), "--quiet"]).stdout
    errors = text[text.index("ERRORS (") :].splitlines()
    assert "ENV-NUMPY-MAJOR" in errors[1]
    assert any("↳ error" in line and "VERIFY-IMPORT" in line and "import h5py" in line for line in errors)

    # One machine, no base: the import failure is an error that says what it is and both ways out.
    code, report, _ = invoke(["verify", "--python", str(target)])
    assert code == 1
    (alone,) = [f for f in by_rule(report, "VERIFY-IMPORT") if f["subject"] == "import h5py"]
    assert alone["severity"] == "error" and alone["caused_by"] is None
    assert "NumPy ABI break" in alone["message"] and "h5py 3.10.0" in alone["message"]
    # A release of h5py built for NumPy 2 (what `pip install --upgrade` takes), or NumPy 1 back.
    assert (
        alone["remedy"].startswith("`pip install 'h5py>3.10.0'`")
        and "`pip install 'numpy<2'`" in alone["remedy"]
    )


@needs_torch
@pytest.mark.slow
def test_an_app_import_that_brings_intel_openmp_beside_torchs_fails_the_gate(
    clone: Path, tmp_path_factory: pytest.TempPathFactory, project: Path
) -> None:
    omp = wheel(INTEL_OPENMP)
    target = make_venv(tmp_path_factory.mktemp("intel-omp") / "venv")
    clone_site_packages(target)
    pip_install(target, omp)
    # The application: an entry module that loads Intel's runtime (as `import mkl` does), in its folder.
    _module(
        project,
        "omp_app",
        "import ctypes, os, sys\nctypes.CDLL(os.path.join(sys.prefix, 'lib', 'libiomp5.so'))\n",
    )
    ref = project / "ref.json"
    made = CliRunner().invoke(
        app, ["snapshot", "--python", str(clone), "--no-verify", "--import", "omp_app", "-o", str(ref), "-q"]
    )
    assert made.exit_code == 0, made.output
    assert json.loads(ref.read_text(encoding="utf-8"))["verify"]["imports"] == ["omp_app"]

    # The gate imports the recorded entry module: no --import needed.
    code, report, _ = invoke(["gate", str(ref), "--python", str(target)])
    assert code == 1
    (finding,) = by_rule(report, "VERIFY-IMPORT-OPENMP")
    assert finding["severity"] == "error"
    assert "libiomp5.so (Intel) loaded by `import omp_app`" in finding["message"]
    assert "(GNU, torch's) loaded by `import torch`" in finding["message"]
    # The probe (torch alone) saw one runtime: only the imports tell.
    assert by_rule(report, "ENV-OPENMP-MULTIPLE") == []
