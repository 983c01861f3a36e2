"""Difference rules: a realistic edit of the target side of a real pair triggers exactly the rule meant."""

from __future__ import annotations

from typing import Any

import pytest
from diffdata import Edit, dist_entry, manifest

from envcheck.app.catalog import catalog
from envcheck.core.findings import Severity
from envcheck.diff.engine import diff


def set_path(path: str, value: object) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = d
        for key in parents:
            node = node[key]
        node[last] = value

    return edit


def package(name: str, version: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, name)["version"] = version

    return edit


def drop_package(name: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["packages"] = [p for p in d["packages"] if p["name"].lower() != name.lower()]

    return edit


def add_package(d: dict[str, Any]) -> None:
    d["packages"].append(dict(dist_entry(d, "filelock"), name="faiss-cpu", version="1.12.0", native_files=[]))


def editable(name: str) -> Edit:
    """``name`` installed with ``pip install -e`` from a local checkout (the direct_url.json pip writes)."""

    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, name)["direct_url"] = {"url": "file:///src/" + name, "dir_info": {"editable": True}}

    return edit


def without_isa(*flags: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        cpu = d["platform"]["cpu"]
        cpu["isa_flags"] = [f for f in cpu["isa_flags"] if f not in flags]

    return edit


def predicted(**section: Any) -> Edit:
    """The manifest marked as ``envcheck predict``'s for win_amd64 / CPython 3.11, with ``section``'s
    fields in its ``predicted`` section."""

    def edit(d: dict[str, Any]) -> None:
        d["meta"]["kind"] = "predicted"
        d["meta"]["absent"] = ["runtimes"]
        d["predicted"] = {
            "platform": "win_amd64",
            "python_version": "3.11",
            "implementation": "cp",
            **section,
        }

    return edit


def refused_member(d: dict[str, Any]) -> None:
    """A predicted wheel's member that the extraction refused (a zip bomb's, over the ratio cap)."""
    d["native"]["refused"] = [
        {
            "path": "torch/lib/bomb.dll",
            "owner": "torch",
            "kind": "member-cap",
            "reason": "inflates 1000:1, over the 100:1 ratio cap",
        }
    ]


def no_torch(d: dict[str, Any]) -> None:
    drop_package("torch")(d)
    d["torch"] = {"trees": [], "static": None, "runtime": None}
    d["runtimes"] = None


def gomp_from_system(d: dict[str, Any]) -> None:
    lib = next(x for x in d["runtimes"]["loaded"] if x["path"].endswith("torch/lib/libgomp.so.1"))
    lib["path"], lib["owner"] = "/usr/lib/x86_64-linux-gnu/libgomp.so.1", "system"


def rebuilt_node(d: dict[str, Any]) -> None:
    node = next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libtorch_python.so")
    node["identity"] = "sha256:" + "0" * 64


def gomp_resolves_to_system(d: dict[str, Any]) -> None:
    node = next(n for n in d["native"]["nodes"] if n["key"] == "torch:torch/lib/libtorch_cpu.so")
    dep = next(x for x in node["dependencies"] if x["name"] == "libgomp.so.1")
    dep.update(target="/usr/lib/x86_64-linux-gnu/libgomp.so.1", kind="os", how="ld-library-path")


def mkl_blas(d: dict[str, Any]) -> None:
    pool = next(p for p in d["runtimes"]["threadpools"] if p["user_api"] == "blas")
    pool["internal_api"] = "mkl"


def gpus(*capabilities: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["gpu"] = {
            "found": True,
            "source": "nvml",
            "reason": None,
            "driver_version": "580.65.06",
            "cuda_driver_version": 13000,
            "gpus": [
                {
                    "index": i,
                    "name": "NVIDIA GPU",
                    "uuid": None,
                    "memory_total": None,
                    "compute_capability": c,
                }
                for i, c in enumerate(capabilities)
            ],
        }

    return edit


# rule -> (base name, base edits, target name, target edits, severity, subject)
CASES: dict[str, tuple[str, tuple[Edit, ...], str, tuple[Edit, ...], Severity, str]] = {
    "ENV-PYTHON-VERSION": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("python.version", "3.12.3"),),
        "error",
        "python",
    ),
    "ENV-PLATFORM-OS": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("platform.system", "Windows"), set_path("platform.machine", "AMD64")),
        "error",
        "platform",
    ),
    "ENV-PLATFORM-LIBC": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("platform.libc.version", "2.31"),),
        "warning",
        "libc",
    ),
    "ENV-CPU-ISA": (
        "dev-cpu",
        (),
        "dev-cpu",
        (without_isa("avx512f", "avx512bw"),),
        "warning",
        "CPU instruction sets",
    ),
    "ENV-PKG-MISSING": ("dev-cpu", (), "dev-cpu", (drop_package("MarkupSafe"),), "error", "MarkupSafe"),
    "ENV-PKG-ADDED": ("dev-cpu", (), "dev-cpu", (add_package,), "info", "faiss-cpu"),
    "ENV-PKG-VERSION": ("dev-cpu", (), "dev-cpu", (package("filelock", "5.0.0"),), "warning", "filelock"),
    "ENV-PKG-SOURCE": ("cuda", (), "cuda", (editable("filelock"),), "error", "filelock"),
    "ENV-NUMPY-MAJOR": ("dev-cpu", (), "dev-cpu", (package("numpy", "1.26.4"),), "warning", "numpy"),
    "ENV-TORCH-MISSING": ("dev-cpu", (), "dev-cpu", (no_torch,), "error", "torch"),
    "ENV-TORCH-VERSION": ("dev-cpu", (), "cuda", (), "error", "torch"),
    "ENV-TORCH-VARIANT": ("cuda", (), "dev-cpu", (), "error", "torch"),
    "ENV-TORCH-LOAD-DEFAULT": (
        "dev-cpu",
        (package("torch", "2.5.1+cpu"), set_path("torch.static.version", "2.5.1+cpu")),
        "dev-cpu",
        (),
        "warning",
        "torch.load(weights_only)",
    ),
    "ENV-TORCH-BUILD": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.static.git_version", "0" * 40),),
        "warning",
        "torch.version.git_version",
    ),
    "ENV-TORCH-CXX11-ABI": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.cxx11_abi", False),),
        "error",
        "torch._C._GLIBCXX_USE_CXX11_ABI",
    ),
    "ENV-BACKEND-LOST": ("cuda", (), "dev-cpu", (), "warning", "torch.backends: NCCL"),
    "ENV-CUDA-VERSION": (
        "cuda",
        (),
        "cuda",
        (set_path("torch.static.cuda", "12.8"),),
        "error",
        "torch.version.cuda",
    ),
    "ENV-CUDA-LIBS": (
        "cuda",
        (),
        "cuda",
        (set_path("torch.runtime.cudnn_version", 91000),),
        "warning",
        "torch cuDNN",
    ),
    "ENV-GPU-CHANGED": (
        "cuda",
        (gpus("8.0", "8.0"),),
        "cuda",
        (gpus("8.6"),),
        "warning",
        "GPU compute capability",
    ),
    "ENV-NATIVE-LOADED-FROM": ("dev-cpu", (), "dev-cpu", (gomp_from_system,), "error", "libgomp.so.1"),
    "ENV-NATIVE-CHANGED": (
        "dev-cpu",
        (),
        "dev-cpu",
        (rebuilt_node,),
        "warning",
        "torch:torch/lib/libtorch_python.so",
    ),
    "ENV-NATIVE-RESOLVED-ELSEWHERE": (
        "dev-cpu",
        (),
        "dev-cpu",
        (gomp_resolves_to_system,),
        "error",
        "libgomp.so.1",
    ),
    "ENV-NATIVE-LOST": ("cuda", (), "dev-cpu", (), "warning", "libraries of packages missing on the target"),
    "ENV-NATIVE-ADDED": ("dev-cpu", (), "cuda", (), "info", "libraries of packages added on the target"),
    "ENV-BLAS-RUNTIME": ("dev-cpu", (), "dev-cpu", (mkl_blas,), "warning", "blas runtime"),
    "ENV-NATIVE-REQUIRES": ("dev-cpu", (), "cuda", (), "warning", "libcuda.so.1"),
    "ENV-MKL-ONEDNN-VERSION": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.onednn_version", "3.7.1"),),
        "warning",
        "torch oneDNN",
    ),
    "ENV-NUMERICS-SWITCH": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.numerics.allow_tf32_matmul", True),),
        "warning",
        "torch.backends.cuda.matmul.allow_tf32",
    ),
    "ENV-CPU-CAPABILITY": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.cpu_capability", "AVX2"),),
        "warning",
        "torch CPU capability",
    ),
    "ENV-QUANT-ENGINE": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.quantized_engine", "qnnpack"),),
        "warning",
        "torch.backends.quantized.engine",
    ),
    "ENV-VAR-CHANGED": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("env.OMP_NUM_THREADS", "1"),),
        "warning",
        "OMP_NUM_THREADS",
    ),
    "ENV-MP-START-METHOD": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("python.mp_start_method", "spawn"),),
        "warning",
        "multiprocessing start method",
    ),
    "ENV-THREADS-CHANGED": (
        "dev-cpu",
        (),
        "dev-cpu",
        (set_path("torch.runtime.num_threads", 8),),
        "info",
        "torch threads",
    ),
    "ENV-CONTAINER": ("dev-cpu", (), "dev-cpu", (set_path("platform.container", []),), "info", "container"),
    # Prediction rules run only against a predicted target (``envcheck predict``): the same venv marked
    # predicted for Windows, with the facts of ``predicted`` each rule reads.
    "ENV-PREDICT-NO-WHEEL": (
        "dev-cpu",
        (),
        "dev-cpu",
        (predicted(unavailable=[{"name": "triton", "version": "3.8.0", "root": True, "reason": "none"}]),),
        "error",
        "triton",
    ),
    "ENV-PREDICT-VARIANT": ("cuda", (), "dev-cpu", (predicted(),), "error", "torch"),
    "ENV-PREDICT-RUNTIME": (
        "dev-cpu",
        (),
        "dev-cpu",
        (
            predicted(
                needs=[
                    {"kind": "vc-runtime", "name": "VC++", "provided": "machine", "files": ["MSVCP140.dll"]}
                ]
            ),
        ),
        "warning",
        "VC++",
    ),
    "ENV-PREDICT-OPENMP-BLAS": (
        "dev-cpu",
        (),
        "dev-cpu",
        (predicted(needs=[{"kind": "openmp", "name": "Intel", "family": "intel", "provided": "bundled"}]),),
        "warning",
        "OpenMP",
    ),
    "ENV-PREDICT-PYTHON": (
        "dev-cpu",
        (),
        "dev-cpu",
        (predicted(python_version="3.12"),),
        "warning",
        "python",
    ),
    "ENV-PREDICT-LEFT-OUT": (
        "dev-cpu",
        (),
        "dev-cpu",
        (predicted(left_out=[{"name": "envcheck", "version": "0.1.0", "reason": "editable"}]),),
        "info",
        "envcheck",
    ),
    "ENV-PREDICT-NOT-INSTALLED": (
        "dev-cpu",
        (),
        "dev-cpu",
        (drop_package("ruff"), predicted()),
        "info",
        "1 distribution",
    ),
    "ENV-PREDICT-REFUSED": (
        "dev-cpu",
        (),
        "dev-cpu",
        (predicted(), refused_member),
        "warning",
        "1 refused file",
    ),
}


def test_every_difference_rule_has_a_case() -> None:
    assert {r.id for r in catalog() if r.kind == "difference"} == set(CASES)


@pytest.mark.slow
@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_difference_rule_triggers(rule_id: str) -> None:
    base_name, base_edits, target_name, target_edits, severity, subject = CASES[rule_id]
    found = [
        f
        for f in diff(manifest(base_name, *base_edits), manifest(target_name, *target_edits))
        if f.rule == rule_id
    ]
    assert (severity, subject) in [(f.severity, f.subject) for f in found]
    assert all(f.message and f.remedy for f in found)


@pytest.mark.slow
@pytest.mark.parametrize("rule_id", sorted(CASES))
def test_difference_rule_is_silent_without_the_difference(rule_id: str) -> None:
    base_name, base_edits, *_ = CASES[rule_id]
    assert [
        f
        for f in diff(manifest(base_name, *base_edits), manifest(base_name, *base_edits))
        if f.rule == rule_id
    ] == []


def test_lost_baseline_instructions_are_an_error() -> None:
    found = diff(manifest("dev-cpu"), manifest("dev-cpu", without_isa("avx2", "avx512f", "fma")))
    (f,) = [f for f in found if f.rule == "ENV-CPU-ISA"]
    assert f.severity == "error" and "Illegal instruction" in f.message


def test_quantized_engine_unsupported_on_target_is_an_error() -> None:
    target = manifest("dev-cpu", set_path("torch.runtime.quantized_engines", ["qnnpack", "none"]))
    (f,) = [f for f in diff(manifest("dev-cpu"), target) if f.rule == "ENV-QUANT-ENGINE"]
    assert f.severity == "error"


def test_unimportant_variables_are_info_and_venv_location_never_matters() -> None:
    target = manifest("dev-cpu", set_path("env.PIP_DEFAULT_TIMEOUT", "5"), set_path("env.VIRTUAL_ENV", "/x"))
    found = [f for f in diff(manifest("dev-cpu"), target) if f.rule == "ENV-VAR-CHANGED"]
    assert [(f.subject, f.severity) for f in found] == [("PIP_DEFAULT_TIMEOUT", "info")]


def test_a_missing_package_nothing_needs_is_a_warning() -> None:
    found = [
        f
        for f in diff(manifest("dev-cpu"), manifest("dev-cpu", drop_package("ruff")))
        if f.rule == "ENV-PKG-MISSING"
    ]
    assert [(f.subject, f.severity) for f in found] == [("ruff", "warning")]
