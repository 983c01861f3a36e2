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
    outcome_findings,
    outcomes,
    skip_remedy,
    speed_threshold,
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


# ------------------------------------------------------------------------------------- speed: noise


def speed(gflops: float, one: float, total: float, *, spread: float = 0.05, threads: int = 8) -> CheckResult:
    """The speed check's result as the suite records it: best and spread of each measurement."""
    metrics = {
        "gflops": gflops,
        "gflops_spread": spread,
        "gflops_1thread": one,
        "gflops_1thread_spread": spread,
        "sum_1thread": total,
        "sum_1thread_spread": spread,
    }
    return result("speed_matmul", metrics=metrics, info={"threads": threads})


def _speed_findings(golden: CheckResult, current: CheckResult) -> list[tuple[str, str]]:
    found = compare(VerifySection(results=[golden]), VerifySection(results=[current]))
    return [(f.severity, f.subject) for f in found if f.rule == "VERIFY-SPEED"]


def test_speed_within_the_golden_noise_is_silent() -> None:
    golden = speed(200.0, 90.0, 18.0)
    assert _speed_findings(golden, speed(150.0, 60.0, 12.0)) == []
    # A noisy golden (its median sample at 40 % of its best) tolerates more.
    noisy = speed(200.0, 90.0, 18.0, spread=0.6)
    assert _speed_findings(noisy, speed(100.0, 40.0, 8.0)) == []


def test_a_busy_machine_collapses_only_the_all_threads_number_and_that_is_an_info() -> None:
    # What a CPU hog beside the suite does: OpenMP barriers stall the all-threads run, one thread keeps pace.
    assert _speed_findings(speed(200.0, 90.0, 18.0), speed(4.8, 80.0, 17.0)) == [
        ("info", "speed_matmul.gflops")
    ]


def test_a_real_slowdown_is_a_warning_even_against_a_noisy_golden() -> None:
    capability_down = speed(200.0, 90.0, 4.1)  # ATEN_CPU_CAPABILITY=default: torch's own kernels 4.5x slower
    assert _speed_findings(speed(200.0, 90.0, 18.0), capability_down) == [
        ("warning", "speed_matmul.sum_1thread")
    ]
    ten_times = speed(20.0, 9.0, 1.8)
    assert ("warning", "speed_matmul.gflops_1thread") in _speed_findings(
        speed(200.0, 90.0, 18.0, spread=0.95), ten_times
    )


def test_fewer_threads_than_the_golden_is_named_as_the_cause() -> None:
    golden = speed(200.0, 25.0, 18.0, threads=8)
    one_thread = speed(25.0, 25.0, 18.0, threads=1)
    found = compare(VerifySection(results=[golden]), VerifySection(results=[one_thread]))
    (finding,) = [f for f in found if f.rule == "VERIFY-SPEED"]
    assert finding.severity == "warning"
    assert "with 1 thread," in finding.message and "with 8 threads" in finding.message
    assert "fewer threads" in finding.message


def test_speed_threshold_follows_the_golden_spread_within_bounds() -> None:
    assert speed_threshold(100.0, None) == 50.0
    assert speed_threshold(100.0, 0.1) == 50.0
    assert speed_threshold(100.0, 0.7) == pytest.approx(30.0)
    assert speed_threshold(100.0, 0.99) == 20.0


# ------------------------------------------------------------------------------------ floating point


def fp(flush: bool, **kw: object) -> dict[str, object]:
    return {"flush_to_zero": flush, "denormals_are_zero": flush, "method": "arithmetic", **kw}


def _denormal_run(values: list[float], mode: dict[str, object] | None) -> VerifySection:
    info = {"fp_control": mode} if mode is not None else {}
    return VerifySection(results=[result("import_torch", info=info), result("denormals", values)])


def test_a_flushing_mode_is_the_named_cause_of_the_denormal_difference() -> None:
    golden = _denormal_run([1.0e-39, 4.5e-40], fp(False))
    lib = "/opt/x/libfastmath.so"
    here = _denormal_run(
        [0.0, 0.0],
        fp(True, set_when="start-up", fast_math_libraries=[lib], preloaded=[lib]),
    )
    found = compare(golden, here)
    (cause,) = [f for f in found if f.rule == "VERIFY-FP-MODE"]
    assert cause.severity == "error" and cause.caused_by is None
    assert lib in cause.message and "LD_PRELOAD" in cause.message and "-ffast-math" in cause.message
    assert "LD_PRELOAD" in cause.remedy
    (numeric,) = [f for f in found if f.rule == "VERIFY-NUMERICS"]
    assert numeric.subject == "denormals.y"
    assert numeric.caused_by == cause.key == "VERIFY-FP-MODE:import_torch.fp_control"
    assert [f for f in found if f.rule == "VERIFY-INFO"] == []


def test_the_fp_mode_claims_only_differences_in_the_subnormal_range() -> None:
    golden = VerifySection(
        results=[result("import_torch", info={"fp_control": fp(False)}), result("matmul_fp32", [1.0, 2.0])]
    )
    here = VerifySection(
        results=[result("import_torch", info={"fp_control": fp(True)}), result("matmul_fp32", [1.0, 2.5])]
    )
    found = compare(golden, here)
    (cause,) = [f for f in found if f.rule == "VERIFY-FP-MODE"]
    assert cause.severity == "warning"  # it explains nothing here
    (numeric,) = [f for f in found if f.rule == "VERIFY-NUMERICS"]
    assert numeric.caused_by is None


def test_the_same_fp_mode_on_both_sides_or_unrecorded_says_nothing() -> None:
    same = _denormal_run([0.0, 0.0], fp(True))
    assert [f for f in compare(same, same) if f.rule == "VERIFY-FP-MODE"] == []
    plain = _denormal_run([1.0e-39, 4.5e-40], None)
    assert [f for f in compare(plain, plain) if f.rule == "VERIFY-FP-MODE"] == []
    hostile = _denormal_run([1.0e-39, 4.5e-40], {"flush_to_zero": "yes"})
    assert [f for f in outcomes(hostile) if f.rule == "VERIFY-FP-MODE"] == []


def test_a_flushing_mode_is_reported_without_goldens_too() -> None:
    (finding,) = outcomes(_denormal_run([0.0, 0.0], fp(True, set_when="import torch")))
    assert (finding.rule, finding.severity) == ("VERIFY-FP-MODE", "warning")
    assert "while importing torch" in finding.message


# ---------------------------------------------------------------------------------------- skip words


def test_skip_remedies_say_what_the_skip_needs() -> None:
    opt_in = outcome_findings(
        result("torch_compile", status="skipped", reason="opt-in: pass --compile (slow)")
    )[0]
    assert "--compile" in opt_in.remedy and "Install" not in opt_in.remedy
    onnx = outcome_findings(
        result("onnx_export", status="skipped", reason="onnx is not installed in the target")
    )[0]
    assert onnx.remedy.startswith("Install onnx in the target environment")
    assert "VERIFY-SKIPPED:onnx_export" in onnx.remedy
    cpu_build = skip_remedy("torch 2.13.0+cpu is built without CUDA", "cuda/conv2d")
    assert "CUDA build of torch" in cpu_build
    assert "Install what it needs" not in skip_remedy("something new", "x")


def test_the_count_of_checks_covers_the_checks_the_report_speaks_of() -> None:
    from envcheck.api._verify import tally_line

    golden = VerifySection(results=[result(n, [1.0]) for n in ("import_torch", "a", "b", "c")])
    # import torch failed here: the other checks never ran, one VERIFY-SKIPPED caused by the failure.
    here = VerifySection(
        results=[
            result("import_torch", status="error", error="ImportError: libc10.so"),
            result("torch_compile", status="skipped", reason="opt-in: pass --compile"),
        ]
    )
    line = tally_line(here, golden)
    assert line.startswith("5 checks: 1 error, 1 skipped, 3 not run here")
    findings = compare(golden, here)
    assert len(findings) == 3
    (not_run,) = [f for f in findings if f.subject == "checks not run"]
    assert (not_run.base, not_run.caused_by) == ("3 checks ran", "VERIFY-ERROR:import_torch")
    assert "(a, b, c)" in not_run.message
