"""Numerics switches: TF32, matmul precision, determinism, CPU dispatch level, quantized engine."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import difference_rule, single_rule
from envcheck.manifest.model import Manifest, Numerics

FAMILY = "numerics switches"

_SWITCHES = {
    "allow_tf32_matmul": "torch.backends.cuda.matmul.allow_tf32",
    "allow_tf32_cudnn": "torch.backends.cudnn.allow_tf32",
    "float32_matmul_precision": "torch.get_float32_matmul_precision()",
    "deterministic_algorithms": "torch.are_deterministic_algorithms_enabled()",
    "cudnn_enabled": "torch.backends.cudnn.enabled",
    "cudnn_benchmark": "torch.backends.cudnn.benchmark",
    "cudnn_deterministic": "torch.backends.cudnn.deterministic",
}


def _text(value: object) -> str:
    return str(value).lower() if isinstance(value, bool) else str(value)


@difference_rule(
    "ENV-NUMERICS-SWITCH",
    family=FAMILY,
    severity="warning",
    title="a numerics switch is flipped (TF32, matmul precision, determinism, cuDNN)",
    why=(
        "TF32 lowers float32 matmul/conv precision to ~1e-3 relative error on Ampere+; determinism and cuDNN "
        "benchmark change which kernels run. No version changes, the numbers do."
    ),
    fm=("FM-17", "FM-19"),
    evidence=("pytorch/pytorch#67384", "pytorch/pytorch#53635", "pytorch/pytorch#61890"),
)
def numerics_switch(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None:
        return
    for field in dataclasses.fields(Numerics):
        b, t = getattr(br.numerics, field.name), getattr(tr.numerics, field.name)
        if b is None or t is None or b == t:
            continue
        switch = _SWITCHES.get(field.name, field.name)
        yield rule.finding(
            switch,
            f"{switch} is {_text(b)} on the base and {_text(t)} on the target: float results differ "
            "beyond tight tolerances.",
            f"Set {switch} explicitly in the application (after importing the libraries that change it), "
            "the same on both sides.",
            base=_text(b),
            target=_text(t),
        )


@difference_rule(
    "ENV-CPU-CAPABILITY",
    family=FAMILY,
    severity="warning",
    title="torch's CPU dispatch level differs (AVX512 / AVX2 / DEFAULT)",
    why="Other vector kernels give other float results (and speed), even with deterministic algorithms.",
    fm=("FM-18", "FM-15"),
    evidence=("pytorch/pytorch#155423", "pytorch/pytorch#155552", "pytorch/pytorch#82881"),
)
def cpu_capability(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None or not br.cpu_capability or not tr.cpu_capability:
        return
    if br.cpu_capability != tr.cpu_capability:
        yield rule.finding(
            "torch CPU capability",
            f"torch dispatches {br.cpu_capability} kernels on the base and {tr.cpu_capability} on the "
            "target.",
            "Compare outputs with `envcheck verify`; ATEN_CPU_CAPABILITY steers only ATen's dispatch, not "
            "oneDNN or MKL.",
            base=br.cpu_capability,
            target=tr.cpu_capability,
            caused_by=_capability_cause(base, target, tr.cpu_capability),
        )


def _capability_cause(base: Manifest, target: Manifest, level: str) -> str | None:
    """ATEN_CPU_CAPABILITY, when the target sets it (differently from the base) to the level torch uses."""
    value = target.env.get("ATEN_CPU_CAPABILITY")
    if (
        value is None
        or value == base.env.get("ATEN_CPU_CAPABILITY")
        or value.strip().upper() != level.upper()
    ):
        return None
    return "ENV-VAR-CHANGED:ATEN_CPU_CAPABILITY"


@difference_rule(
    "ENV-QUANT-ENGINE",
    family=FAMILY,
    severity="warning",
    title="the quantized engine differs, or the base's engine is unsupported on the target",
    why=(
        "Weights are packed for the engine in use; a qconfig made for one engine gives wrong numbers with "
        "another, and a missing engine fails with 'NoQEngine'."
    ),
    fm=("FM-21",),
    evidence=("pytorch/pytorch#123507", "pytorch/pytorch#70512", "pytorch/pytorch#29327"),
)
def quant_engine(rule: Rule, base: Manifest, target: Manifest) -> Iterator[Finding]:
    br, tr = base.torch.runtime, target.torch.runtime
    if br is None or tr is None or not br.quantized_engine or not tr.quantized_engine:
        return
    b = br.quantized_engine
    if b != "none" and tr.quantized_engines and b not in tr.quantized_engines:
        yield rule.finding(
            "torch.backends.quantized.engine",
            f"The base quantizes with {b}; the target supports only {', '.join(tr.quantized_engines)}.",
            "Re-quantize the model for an engine the target supports (qnnpack on ARM/macOS) and verify it.",
            base=b,
            target=", ".join(tr.quantized_engines),
            severity="error",
        )
    elif b != tr.quantized_engine:
        yield rule.finding(
            "torch.backends.quantized.engine",
            f"The quantized engine is {b} on the base and {tr.quantized_engine} on the target.",
            "Set torch.backends.quantized.engine explicitly in the application, to the engine used at "
            "calibration.",
            base=b,
            target=tr.quantized_engine,
        )


@single_rule(
    "ENV-DETERMINISM-CUBLAS",
    family=FAMILY,
    severity="error",
    title="deterministic algorithms on CUDA without CUBLAS_WORKSPACE_CONFIG",
    why="cuBLAS raises 'Deterministic behavior was enabled … but this operation is not deterministic'.",
    fm=("FM-19",),
    evidence=("Lightning-AI/litgpt#2124", "espnet/espnet#6630"),
)
def determinism_cublas(rule: Rule, m: Manifest) -> Iterator[Finding]:
    rt = m.torch.runtime
    if rt is None or not rt.numerics.deterministic_algorithms or not rt.backends.cuda_available:
        return
    if m.env.get("CUBLAS_WORKSPACE_CONFIG"):
        return
    yield rule.finding(
        "CUBLAS_WORKSPACE_CONFIG",
        "Deterministic algorithms are enabled on a CUDA machine but CUBLAS_WORKSPACE_CONFIG is unset: the "
        "first cuBLAS matmul raises.",
        "Set CUBLAS_WORKSPACE_CONFIG=:4096:8 in the service environment before the process starts.",
        target="unset",
    )
