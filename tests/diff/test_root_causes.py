"""Severity and rank from consequence: the fact that explains a failure is the root cause, as severe as the
failure it causes, and the mechanism folds under it. Real venvs, real libraries built by g++.

- An ``LD_LIBRARY_PATH`` folder holding another build of a library torch ships (``libc10.so``,
  ``libtorch_cpu.so``): ``import torch`` dies on an undefined symbol. The variable leads, as an error; the
  library it moved and the failed import fold under it.
- Healthy: the same folder on ``LD_LIBRARY_PATH`` holding only a library torch does not use.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from conftest import needs_torch
from typer.testing import CliRunner
from venvs import clone_site_packages, make_venv

from envcheck.cli import app

pytestmark = [needs_torch, pytest.mark.slow]


def envcheck(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict]:  # type: ignore[type-arg]
    result = CliRunner().invoke(app, [*args, "--format", "json", "--quiet"], env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    out = result.stdout
    return result.exit_code, json.loads(out[out.index("{") :]) if "{" in out else {}


def roots(report: dict) -> list[dict]:  # type: ignore[type-arg]
    return [f for f in report["findings"] if f["caused_by"] is None]


@pytest.fixture(scope="module")
def venv(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A clone of the test environment and its own snapshot (taken without LD_LIBRARY_PATH)."""
    python = make_venv(tmp_path_factory.mktemp("env") / "venv")
    clone_site_packages(python)
    ref = tmp_path_factory.mktemp("ref") / "ref.json"
    result = CliRunner().invoke(app, ["snapshot", "--python", str(python), "-o", str(ref), "--quiet"])
    assert result.exit_code == 0, result.stderr
    return python, ref


def other_build(folder: Path, soname: str) -> Path:
    """A real shared library named ``soname`` built by g++, exporting nothing torch needs."""
    if shutil.which("g++") is None:
        pytest.skip("g++ is not installed: the library on LD_LIBRARY_PATH cannot be built")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder / "other.cpp"
    source.write_text(
        'extern "C" int other_build_of_' + soname.split(".", maxsplit=1)[0] + "() { return 1; }\n"
    )
    out = folder / soname
    subprocess.run(["g++", "-shared", "-fPIC", "-o", str(out), str(source)], check=True, capture_output=True)
    return out


@pytest.mark.parametrize("soname", ["libc10.so", "libtorch_cpu.so"])
def test_a_variable_that_moves_a_torch_library_leads_as_an_error(
    venv: tuple[Path, Path], tmp_path: Path, soname: str
) -> None:
    python, ref = venv
    folder = other_build(tmp_path / "elsewhere", soname).parent
    imported = subprocess.run(
        [str(python), "-c", "import torch"],
        env={"LD_LIBRARY_PATH": str(folder)},
        check=False,
        capture_output=True,
        text=True,
    )
    assert imported.returncode != 0 and "undefined symbol" in imported.stderr

    code, report = envcheck("gate", str(ref), "--python", str(python), env={"LD_LIBRARY_PATH": str(folder)})
    assert code == 1
    first = roots(report)[0]
    assert (first["rule"], first["subject"], first["severity"]) == (
        "ENV-VAR-CHANGED",
        "LD_LIBRARY_PATH",
        "error",
    )
    folded = {
        (f["rule"], f["subject"])
        for f in report["findings"]
        if f["caused_by"] == "ENV-VAR-CHANGED:LD_LIBRARY_PATH"
    }
    assert ("ENV-PROBE-FAILED", "import torch") in folded
    assert ("ENV-NATIVE-SHADOWED", soname) in folded
    assert [f["rule"] for f in roots(report) if f["severity"] == "error"] == ["ENV-VAR-CHANGED"]


def test_a_folder_on_ld_library_path_with_nothing_torch_loads_is_no_error(
    venv: tuple[Path, Path], tmp_path: Path
) -> None:
    python, ref = venv
    folder = other_build(tmp_path / "elsewhere", "libunrelated.so").parent
    code, report = envcheck("gate", str(ref), "--python", str(python), env={"LD_LIBRARY_PATH": str(folder)})
    assert code == 0, [(f["rule"], f["subject"]) for f in report["findings"] if f["severity"] == "error"]
    (var,) = [f for f in report["findings"] if f["subject"] == "LD_LIBRARY_PATH"]
    assert var["severity"] != "error"


@pytest.mark.parametrize(
    ("variable", "value"),
    [("ATEN_CPU_CAPABILITY", "default"), ("ONEDNN_DEFAULT_FPMATH_MODE", "BF16")],
)
def test_numbers_a_variable_moves_fold_under_it(venv: tuple[Path, Path], variable: str, value: str) -> None:
    """A variable the runtime-configuration catalog documents as changing numerics: what moved in the
    smoke suite is its consequence. Whether it moves anything depends on the CPU (oneDNN keeps f32 kernels
    under BF16 fpmath on some CPUs; ``default`` is the best capability on a CPU without AVX2), so the test
    reads what moved and asserts the links, whatever moved."""
    python, ref = venv
    code, report = envcheck("gate", str(ref), "--python", str(python), env={variable: value})
    moved = [f for f in report["findings"] if f["rule"] in ("VERIFY-NUMERICS", "VERIFY-WITHIN-TOLERANCE")]
    if not moved:
        pytest.skip(f"{variable}={value} moves no smoke-suite number on this CPU")
    key = f"ENV-VAR-CHANGED:{variable}"
    assert all(f["caused_by"] == key for f in moved), [(f["subject"], f["caused_by"]) for f in moved]
    (var,) = [f for f in report["findings"] if f["rule"] == "ENV-VAR-CHANGED" and f["subject"] == variable]
    assert var["caused_by"] is None
    if any(f["rule"] == "VERIFY-NUMERICS" and f["severity"] == "error" for f in moved):
        # Numbers beyond tolerance fail the gate, and the variable that moved them leads, as an error.
        assert code == 1
        assert (roots(report)[0]["rule"], roots(report)[0]["subject"]) == ("ENV-VAR-CHANGED", variable)
        assert var["severity"] == "error"
