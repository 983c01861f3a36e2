"""``envcheck predict`` for real: pip resolves against the registry, real wheels are fetched into the user's
cache and scanned. Skips with the reason when the registry cannot be reached."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.diff import engine
from envcheck.diff.rules.base import STATIC_FACT_RULES
from envcheck.manifest.io import load

from .conftest import CPU, CUDA

pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("registry")]


def _predict(*args: str) -> tuple[int, dict[str, Any], str]:
    result = CliRunner().invoke(app, ["predict", *args, "--format", "json", "--quiet"])
    assert "Traceback" not in result.output, result.output
    return result.exit_code, json.loads(result.stdout), result.stderr


@pytest.fixture(scope="module")
def cpu_windows(tmp_path_factory: pytest.TempPathFactory) -> tuple[int, dict[str, Any], Path]:
    saved = tmp_path_factory.mktemp("predict") / "predicted.json"
    code, report, _ = _predict(
        str(CPU), "--platform", "win_amd64", "--python-version", "3.11", "--save", str(saved)
    )
    return code, report, saved


def _by_rule(report: dict[str, Any], rule: str) -> list[dict[str, Any]]:
    return [f for f in report["findings"] if f["rule"] == rule]


def test_cpu_to_windows_names_the_vc_runtime_with_its_redistributable(
    cpu_windows: tuple[int, dict[str, Any], Path],
) -> None:
    code, report, _ = cpu_windows
    assert code == 0, report
    [vc] = _by_rule(report, "ENV-PREDICT-RUNTIME")
    assert vc["severity"] == "warning"
    assert "MSVCP140.dll" in vc["message"] and "14.42" in vc["message"]
    # VCRUNTIME140.dll and VCRUNTIME140_1.dll ship beside python.exe: not what the machine lacks.
    assert "VCRUNTIME140.dll" not in vc["message"] and "VCRUNTIME140_1.dll" not in vc["message"]
    assert "Microsoft Visual C++ 2015-2022 Redistributable" in vc["subject"]
    assert "vc_redist" in vc["remedy"]


def test_cpu_to_windows_names_the_openmp_change_to_libiomp5md(
    cpu_windows: tuple[int, dict[str, Any], Path],
) -> None:
    _, report, _ = cpu_windows
    [omp] = _by_rule(report, "ENV-PREDICT-OPENMP-BLAS")
    assert "libgomp" in omp["message"] and "libiomp5md.dll" in omp["message"]
    assert (omp["base"], omp["target"]) == ("gnu", "intel")


def test_cpu_to_windows_leaves_path_installed_distributions_out_not_as_errors(
    cpu_windows: tuple[int, dict[str, Any], Path],
) -> None:
    _, report, _ = cpu_windows
    left = _by_rule(report, "ENV-PREDICT-LEFT-OUT")
    assert [f["subject"] for f in left] == ["envcheck"]
    assert left[0]["severity"] == "info"
    assert not [f for f in report["findings"] if f["severity"] == "error"]


def test_the_saved_prediction_is_a_manifest_with_its_live_facts_marked_absent(
    cpu_windows: tuple[int, dict[str, Any], Path],
) -> None:
    _, _, saved = cpu_windows
    predicted = load(saved)  # the same schema validates it
    assert predicted.meta.kind == "predicted"
    assert predicted.runtimes is None and predicted.gpu is None
    assert "runtimes" in (predicted.meta.absent or []) and "platform.cpu" in (predicted.meta.absent or [])
    assert predicted.platform is not None and predicted.platform.system == "Windows"
    torch = predicted.package("torch")
    assert torch is not None and torch.wheel_tags == ["cp311-cp311-win_amd64"]
    assert predicted.torch.static is not None and predicted.torch.static.variant == "cpu"
    assert predicted.native is not None and predicted.native.loader == "windows"
    assert any(n.key == "torch:torch/lib/libiomp5md.dll" for n in predicted.native.nodes or [])
    assert predicted.predicted is not None
    needs = {n.kind: n for n in predicted.predicted.needs}
    assert needs["vc-runtime"].provided == "machine"
    # The minimum is the newest MSVC toolset among the binaries that load the machine's runtime (torch's
    # DLLs), never a bundled copy's FileVersion; the evidence names the binary that sets it.
    vc = needs["vc-runtime"]
    assert vc.minimum is not None and "PE linker version" in (vc.evidence or "")
    assert (vc.evidence or "").startswith("torch:torch/") and "msvcp140-" not in (vc.evidence or "")
    assert needs["openmp"].family == "intel" and needs["openmp"].provided == "bundled"
    # Only rules that read facts a prediction holds run on it: nothing "lost" about live facts.
    rules = {f.rule for f in engine.diff(load(CPU), predicted) + engine.doctor(predicted)}
    assert rules <= STATIC_FACT_RULES
    assert not {"ENV-NATIVE-LOST", "ENV-BACKEND-LOST", "ENV-PLATFORM-OS", "ENV-THREADS-CHANGED"} & rules


def test_cuda_to_windows_exits_1_naming_the_torch_variant() -> None:
    code, report, _ = _predict(str(CUDA), "--platform", "win_amd64", "--python-version", "3.11")
    assert code == 1
    [variant] = _by_rule(report, "ENV-PREDICT-VARIANT")
    assert variant["severity"] == "error"
    assert "2.14.1+cu130" in variant["message"]
    assert (variant["base"], variant["target"]) == ("cu130", "cpu")
    assert "https://download.pytorch.org/whl/cu130" in variant["remedy"]
    # triton and the nvidia-* wheels are Linux-only requirements of torch: named, not resolved.
    [gone] = _by_rule(report, "ENV-PREDICT-NOT-INSTALLED")
    assert "triton 3.8.0" in gone["message"] and "nvidia-cublas" in gone["message"]


def test_macos_names_the_version_without_a_wheel_and_what_exists() -> None:
    code, report, _ = _predict(str(CPU), "--platform", "macosx_11_0_arm64", "--python-version", "3.11")
    assert code == 1
    [torch] = [f for f in _by_rule(report, "ENV-PREDICT-NO-WHEEL") if f["subject"] == "torch"]
    assert torch["base"] == "2.13.0" and torch["target"] == "no wheel"
    assert "versions with a wheel for macosx_11_0_arm64:" in torch["message"]
    assert "2.13.0 has wheels for" in torch["message"] and "macosx_14_0_arm64" in torch["message"]


def test_several_platforms_give_one_report_with_a_machine_per_target(tmp_path: Path) -> None:
    code, report, _ = _predict(
        str(CPU),
        "--platform",
        "win_amd64",
        "--platform",
        "manylinux_2_28_x86_64",
        "--python-version",
        "3.11",
        "--save",
        str(tmp_path / "predicted.json"),
    )
    # One predicted manifest per target, the platform in its name.
    saved = {p.name: load(p) for p in tmp_path.glob("predicted.*.json")}
    assert set(saved) == {"predicted.win_amd64.json", "predicted.manylinux_2_28_x86_64.json"}
    assert saved["predicted.manylinux_2_28_x86_64.json"].platform.system == "Linux"  # type: ignore[union-attr]
    assert code == 0, report
    machines = {f["machine"] for f in report["findings"]}
    assert machines == {"win_amd64", "manylinux_2_28_x86_64"}
    assert any(f["rule"] == "ENV-PREDICT-RUNTIME" and f["machine"] == "win_amd64" for f in report["findings"])
    assert not any(
        f["rule"] == "ENV-PREDICT-RUNTIME" and f["machine"] != "win_amd64" for f in report["findings"]
    )


def test_a_python_change_is_reported() -> None:
    # Windows: the registry's torch there is the CPU build for every Python, so only the Python changes.
    code, report, _ = _predict(str(CPU), "--platform", "win_amd64", "--python-version", "3.12")
    [python] = _by_rule(report, "ENV-PREDICT-PYTHON")
    assert (python["base"], python["target"]) == ("3.11", "3.12")
    # An error only when a compiled distribution lacks a wheel for the new ABI: every pin has a cp312 wheel.
    assert not _by_rule(report, "ENV-PREDICT-NO-WHEEL")
    assert python["severity"] == "warning" and code == 0
    assert "every compiled distribution resolved a wheel" in python["message"]


def test_macos_needs_name_the_minimum_release_and_the_bundled_openmp(tmp_path: Path) -> None:
    saved = tmp_path / "mac.json"
    code, report, _ = _predict(
        str(CPU), "--platform", "macosx_14_0_arm64", "--python-version", "3.11", "--save", str(saved)
    )
    assert code == 0, report
    predicted = load(saved).predicted
    assert predicted is not None
    needs = {n.kind: n for n in predicted.needs}
    assert needs["macos"].minimum is not None
    assert tuple(int(p) for p in needs["macos"].minimum.split(".")[:2]) >= (14, 0)
    assert needs["openmp"].family == "llvm" and needs["openmp"].provided == "bundled"
    # Accelerate is part of macOS: a BLAS family change, never a runtime to install.
    assert not [f for f in _by_rule(report, "ENV-PREDICT-RUNTIME") if "Accelerate" in f["subject"]]
    [blas] = [f for f in _by_rule(report, "ENV-PREDICT-OPENMP-BLAS") if f["subject"] == "BLAS"]
    assert (blas["base"], blas["target"]) == ("openblas", "accelerate")
