"""compare.py on hand-made summaries: tolerances, ULPs, worst element, outcomes (no torch needed)."""

from __future__ import annotations

import hashlib
import struct

import pytest

from envcheck.manifest.verify import CheckResult, OutputSummary, VerifySection
from envcheck.verify.compare import (
    CROSS_DEVICE,
    SAME_DEVICE,
    Tol,
    compare,
    compare_output,
    outcomes,
    tolerance,
    ulp_distance,
)


def summary(values: list[float], dtype: str = "float32") -> OutputSummary:
    raw = b"".join(struct.pack("d", v) for v in values) + dtype.encode()
    return OutputSummary(
        dtype=dtype,
        shape=[len(values)],
        sha256=hashlib.sha256(raw).hexdigest(),
        sum=sum(values),
        abs_sum=sum(abs(v) for v in values),
        index=list(range(len(values))),
        values=list(values),
    )


def result(name: str, values: list[float] | None = None, **kw: object) -> CheckResult:
    outputs = {"y": summary(values)} if values is not None else {}
    fields: dict[str, object] = {"family": "cpu", "device": "cpu", "status": "passed", "outputs": outputs}
    fields.update(kw)
    return CheckResult(name=name, **fields)  # type: ignore[arg-type]


def test_ulp_distance_counts_representable_steps() -> None:
    one_up = struct.unpack("f", struct.pack("i", struct.unpack("i", struct.pack("f", 1.0))[0] + 3))[0]
    assert ulp_distance(1.0, one_up, "float32") == 3
    assert ulp_distance(1.0, 1.0 + 2**-52, "float64") == 1
    assert ulp_distance(1.0, 1.0078125, "bfloat16") == 1
    assert ulp_distance(-0.0, 0.0, "float32") == 0
    assert ulp_distance(1.0, float("nan"), "float32") is None


def test_identical_bytes_pass_and_within_tolerance_is_reported_apart() -> None:
    golden = summary([1.0, 2.0, 3.0])
    assert compare_output(golden, golden, SAME_DEVICE["float32"], exact=False).kind == "identical"
    near = summary([1.0, 2.0 + 2.4e-7, 3.0])
    verdict = compare_output(golden, near, SAME_DEVICE["float32"], exact=False)
    assert verdict.kind == "within"
    assert verdict.worst is not None and verdict.worst.index == 1


def test_beyond_tolerance_names_the_worst_element() -> None:
    verdict = compare_output(
        summary([1.0, 2.0, 3.0]), summary([1.0, 2.01, 3.0]), Tol(1.3e-6, 1e-5), exact=False
    )
    assert verdict.kind == "beyond"
    assert verdict.worst is not None
    assert (verdict.worst.index, verdict.worst.expected, verdict.worst.got) == (1, 2.0, 2.01)
    assert verdict.worst.rel_err == pytest.approx(0.005)
    assert verdict.worst.ulp is not None and verdict.worst.ulp > 1000


def test_worst_element_is_named_by_its_tensor_index() -> None:
    golden = OutputSummary(
        **{**{f: getattr(summary([0.0] * 6), f) for f in OutputSummary.__slots__}, "shape": [2, 3]}
    )
    moved = summary([0.0, 0.0, 0.0, 0.0, 0.5, 0.0])
    moved = OutputSummary(**{**{f: getattr(moved, f) for f in OutputSummary.__slots__}, "shape": [2, 3]})
    verdict = compare_output(golden, moved, Tol(1e-6, 1e-6), exact=False)
    assert verdict.worst is not None
    assert "worst element [1, 1]" in verdict.worst.describe()


def test_exact_checks_accept_no_difference() -> None:
    verdict = compare_output(summary([1.0, 2.0]), summary([1.0, 2.0 + 2.4e-7]), Tol(1, 1), exact=True)
    assert verdict.kind == "beyond"


def test_sum_catches_drift_outside_the_sample() -> None:
    golden = summary([1.0, 2.0, 3.0])
    moved = OutputSummary(**{**{f: getattr(golden, f) for f in golden.__slots__}, "sha256": "x", "sum": 6.5})
    verdict = compare_output(golden, moved, SAME_DEVICE["float32"], exact=False)
    assert verdict.kind == "beyond"
    assert "sum moved" in verdict.reason


def test_shape_or_dtype_change_fails() -> None:
    assert compare_output(summary([1.0]), summary([1.0, 2.0]), Tol(1, 1), exact=False).kind == "beyond"
    assert compare_output(summary([1.0]), summary([1.0], "float64"), Tol(1, 1), exact=False).kind == "beyond"


def test_tolerances_are_looser_across_devices_and_for_long_chains() -> None:
    same = tolerance("matmul_fp32", "float32", cross_device=False)
    cross = tolerance("cuda:0/matmul_fp32", "float32", cross_device=True)
    assert same == SAME_DEVICE["float32"]
    assert cross == CROSS_DEVICE["float32"]
    assert cross.rtol > same.rtol
    assert tolerance("lstm", "float32", cross_device=False).rtol > same.rtol
    assert tolerance("denormals", "float32", cross_device=False).atol == 0.0
    assert tolerance("custom/x", "float32", cross_device=False, custom=Tol(0.1, 0.2)) == Tol(0.1, 0.2)


def test_cuda_result_is_compared_with_cpu_golden_under_cross_device_bands() -> None:
    golden = VerifySection(results=[result("matmul_fp32", [1.0, 2.0])])
    # TF32-sized error: beyond the same-device band, within the cross-device one.
    current = VerifySection(
        results=[result("cuda:0/matmul_fp32", [1.0, 2.0005], device="cuda:0", ref="matmul_fp32")]
    )
    (finding,) = [f for f in compare(golden, current) if f.subject.startswith("cuda:0/")]
    assert finding.rule == "VERIFY-WITHIN-TOLERANCE"
    assert "another device kind" in finding.message


def test_outcomes_become_findings() -> None:
    section = VerifySection(
        results=[
            result("a", status="crashed", signal="SIGSEGV", stderr_tail="Fatal Python error"),
            result("b", status="timeout", timeout_s=5.0),
            result("c", status="error", error="RuntimeError: boom"),
            result("d", status="skipped", reason="no GPU"),
            result("e", status="failed", error="round trip differs"),
            result("f", [1.0]),
        ]
    )
    found = outcomes(section)
    rules = {f.subject: (f.rule, f.severity) for f in found}
    assert rules == {
        "a": ("VERIFY-CRASH", "error"),
        "b": ("VERIFY-TIMEOUT", "error"),
        "c": ("VERIFY-ERROR", "error"),
        "d": ("VERIFY-SKIPPED", "info"),
        "e": ("VERIFY-FAILED", "error"),
    }


def test_golden_check_missing_here_is_a_warning_with_the_local_reason() -> None:
    golden = VerifySection(results=[result("cuda:0/conv2d", [1.0], device="cuda:0")])
    current = VerifySection(
        results=[result("cuda/conv2d", status="skipped", reason="no CUDA device", device="cuda")]
    )
    findings = {(f.rule, f.severity, f.subject) for f in compare(golden, current)}
    assert ("VERIFY-SKIPPED", "warning", "cuda:0/conv2d") in findings


def test_speed_drop_is_a_warning_never_an_error() -> None:
    golden = VerifySection(results=[result("speed_matmul", metrics={"gflops": 100.0}, info={"threads": 8})])
    current = VerifySection(results=[result("speed_matmul", metrics={"gflops": 20.0}, info={"threads": 8})])
    (finding,) = compare(golden, current)
    assert (finding.rule, finding.severity, finding.subject) == (
        "VERIFY-SPEED",
        "warning",
        "speed_matmul.gflops",
    )


def test_an_error_names_its_innermost_frame() -> None:
    tb = (
        "Traceback (most recent call last):\n"
        '  File "/x/suite.py", line 295, in _call\n    return fn()\n'
        '  File "/app/my_checks.py", line 16, in check_model\n    raise RuntimeError("x")\n'
        "RuntimeError: x"
    )
    (finding,) = outcomes(
        VerifySection(results=[result("m", status="error", error="RuntimeError: x", traceback=tb)])
    )
    assert finding.message == "raised RuntimeError: x (my_checks.py:16 in check_model)"


def test_a_hostile_golden_is_a_difference_not_a_traceback() -> None:
    good = summary([1.0, 2.0])
    fields = {f: getattr(good, f) for f in OutputSummary.__slots__}
    hostile = OutputSummary(**{**fields, "sha256": "0", "values": ["rm -rf", 2.0], "sum": "x"})
    assert compare_output(hostile, good, SAME_DEVICE["float32"], exact=False).kind == "beyond"
