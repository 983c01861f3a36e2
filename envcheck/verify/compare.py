"""Compare smoke-suite results with goldens; every tolerance lives here, in one table.

Criterion (as ``torch.testing.assert_close``): an element passes when
``|got - expected| <= atol + rtol * |expected|``. Outputs are stored as summaries (``OutputSummary``), so
the comparison uses the sampled elements *and* the sums: if every element were within tolerance, the sum
could move by at most ``n * atol + rtol * abs_sum``; a larger move proves some element outside it even when
the sample missed it. Identical bytes (sha256) pass without arithmetic; ``exact`` checks (the random
stream, NumPy interop, DataLoader order, Gloo) and integer outputs must be identical.

Findings: ``VERIFY-NUMERICS`` (error: beyond tolerance), ``VERIFY-WITHIN-TOLERANCE`` (info: differs, but
within tolerance — expected drift), ``VERIFY-FAILED`` (a self-check broke), ``VERIFY-ERROR``,
``VERIFY-CRASH``, ``VERIFY-TIMEOUT`` (errors), ``VERIFY-SKIPPED`` (warning when the golden ran it, info
otherwise), ``VERIFY-NO-GOLDEN`` (info), ``VERIFY-INFO`` (info: a recorded setting changed, e.g. the CPU
capability or the quantized engine), ``VERIFY-SPEED`` (warning, never an error).
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable
from dataclasses import dataclass

import envcheck.verify.rules  # noqa: F401 - registers the VERIFY-* rules
from envcheck.findings import Finding, Severity, rule_ids
from envcheck.manifest.verify import CheckResult, Number, OutputSummary, VerifySection


@dataclass(frozen=True, slots=True)
class Tol:
    rtol: float
    atol: float

    def scaled(self, factor: float) -> Tol:
        return Tol(self.rtol * factor, self.atol * factor)


# Same device kind (CPU golden, CPU run; CUDA golden, CUDA run): torch.testing.assert_close's documented
# defaults per dtype (https://pytorch.org/docs/stable/testing.html#torch.testing.assert_close). Two runs of
# one environment are bit-identical (seeded inputs, fixed thread count), so anything beyond these is drift.
SAME_DEVICE: dict[str, Tol] = {
    "float16": Tol(1e-3, 1e-5),
    "bfloat16": Tol(1.6e-2, 1e-5),
    "float32": Tol(1.3e-6, 1e-5),
    "float64": Tol(1e-7, 1e-7),
    "complex64": Tol(1.3e-6, 1e-5),
    "complex128": Tol(1e-7, 1e-7),
}
# A CUDA result against a CPU golden (or the reverse): cuBLAS/cuDNN may run fp32 in TF32 (inputs rounded to
# a 10-bit mantissa, 2**-11 relative, FM-17) and reduce in another order; half types round differently.
CROSS_DEVICE: dict[str, Tol] = {
    "float16": Tol(1e-2, 1e-2),
    "bfloat16": Tol(5e-2, 5e-2),
    "float32": Tol(1e-2, 1e-2),
    "float64": Tol(1e-7, 1e-7),
    "complex64": Tol(1e-2, 1e-2),
    "complex128": Tol(1e-7, 1e-7),
}
# Checks whose outputs pass through long chains of rounding (recurrences, softmax over masks, optimizer
# steps that divide by sqrt of second moments, reductions over 300 000 elements) get a wider band.
CHECK_SCALE: dict[str, float] = {
    "lstm": 10.0,
    "attention": 10.0,
    "reductions": 10.0,
    "optim_adamw": 10.0,
    "optim_sgd": 4.0,
    "grad_accumulation": 4.0,
    "clip_grad_norm": 4.0,
    "autocast_cpu_bf16": 2.0,
}
# Checks with their own band, whatever the dtype of their outputs.
CHECK_TOLERANCE: dict[str, Tol] = {
    # Outputs are sub-normal by design: an absolute band would accept flush-to-zero.
    "denormals": Tol(1.3e-6, 0.0),
    # Dynamic int8 quantisation: a different rounding of one activation scale moves a whole step.
    "quant_dynamic": Tol(1e-2, 1e-2),
}
DEFAULT_TOL = Tol(1.3e-6, 1e-5)
# Every VERIFY-* id a finding can carry, from the one catalog (``envcheck.verify.rules`` registers them).
VERIFY_RULES = rule_ids("verify")
# matmul GFLOP/s below this fraction of the golden's is a warning (never an error: machines are shared).
SPEED_DROP = 0.5

_EXACT_DTYPES_PREFIX = ("int", "uint", "bool", "qint", "quint")
_ULP_FORMATS = {"float32": ("f", "i"), "float64": ("d", "q"), "float16": ("e", "h")}


def tolerance(check: str, dtype: str, *, cross_device: bool, custom: Tol | None = None) -> Tol:
    """The band for an output of ``check`` in ``dtype`` (the one place tolerances are decided)."""
    if custom is not None:
        return custom
    base_name = check.rsplit("/", maxsplit=1)[-1]
    if base_name in CHECK_TOLERANCE and not cross_device:
        return CHECK_TOLERANCE[base_name]
    table = CROSS_DEVICE if cross_device else SAME_DEVICE
    tol = table.get(dtype, DEFAULT_TOL)
    return tol.scaled(CHECK_SCALE.get(base_name, 1.0))


def ulp_distance(expected: float, got: float, dtype: str) -> int | None:
    """Units in the last place between two values of ``dtype`` (None for non-float types or non-finite)."""
    if not (math.isfinite(expected) and math.isfinite(got)):
        return None
    if dtype == "bfloat16":
        return abs(_ordered(expected, "f", "i") - _ordered(got, "f", "i")) >> 16
    fmt = _ULP_FORMATS.get(dtype)
    if fmt is None:
        return None
    try:
        return abs(_ordered(expected, *fmt) - _ordered(got, *fmt))
    except (OverflowError, struct.error):
        return None


def _ordered(value: float, float_fmt: str, int_fmt: str) -> int:
    """Map a float's bits onto integers whose order and spacing follow the float's (sign-magnitude)."""
    bits: int = struct.unpack(int_fmt, struct.pack(float_fmt, value))[0]
    width = struct.calcsize(int_fmt) * 8
    return bits if bits >= 0 else -(bits + (1 << (width - 1)))


def _float(v: Number) -> float:
    """A stored value: a number, or "nan" / "inf" / "-inf". Anything else (a hand-edited or hostile
    manifest) reads as NaN, which compares as a difference, never as a traceback."""
    try:
        return float(v)
    except (TypeError, ValueError):
        return math.nan


def unravel(index: int, shape: list[int]) -> tuple[int, ...]:
    """The multi-dimensional index of flat (row-major) ``index`` in ``shape``."""
    out = []
    for dim in reversed(shape):
        out.append(index % dim if dim else 0)
        index = index // dim if dim else 0
    return tuple(reversed(out))


@dataclass(frozen=True, slots=True)
class Worst:
    index: int
    expected: float
    got: float
    abs_err: float
    rel_err: float
    ulp: int | None
    shape: tuple[int, ...] = ()

    def describe(self) -> str:
        ulp = f", {self.ulp} ULP" if self.ulp is not None else ""
        where = ", ".join(map(str, unravel(self.index, list(self.shape)))) if self.shape else str(self.index)
        return (
            f"worst element [{where}]: expected {self.expected!r}, got {self.got!r} "
            f"(abs {self.abs_err:.3g}, rel {self.rel_err:.3g}{ulp})"
        )


@dataclass(frozen=True, slots=True)
class OutputVerdict:
    """How one output compares: ``identical``, ``within`` tolerance, or ``beyond`` it (with why)."""

    kind: str
    worst: Worst | None = None
    reason: str = ""


def compare_output(golden: OutputSummary, current: OutputSummary, tol: Tol, *, exact: bool) -> OutputVerdict:
    """Compare one output summary with its golden under ``tol`` (or bit for bit when ``exact``)."""
    if golden.dtype != current.dtype or golden.shape != current.shape:
        return OutputVerdict(
            "beyond", reason=f"expected {golden.dtype}{golden.shape}, got {current.dtype}{current.shape}"
        )
    if golden.sha256 == current.sha256:
        return OutputVerdict("identical")
    exact = exact or golden.dtype.startswith(_EXACT_DTYPES_PREFIX)
    if exact:
        tol = Tol(0.0, 0.0)
    worst: Worst | None = None
    worst_ratio = -1.0
    beyond = False
    if golden.index == current.index:
        for i, ev, gv in zip(golden.index, golden.values, current.values, strict=False):
            e, g = _float(ev), _float(gv)
            if math.isnan(e) and math.isnan(g):
                continue
            err = abs(e - g) if not (math.isinf(e) and e == g) else 0.0
            if math.isnan(err):
                err = math.inf
            allowed = tol.atol + tol.rtol * abs(e)
            ratio = err / allowed if allowed > 0 else (math.inf if err > 0 else 0.0)
            if ratio > worst_ratio:
                worst_ratio = ratio
                rel = err / abs(e) if e != 0 else (math.inf if err else 0.0)
                worst = Worst(i, e, g, err, rel, ulp_distance(e, g, golden.dtype), tuple(golden.shape))
            beyond = beyond or err > allowed
    reason = ""
    if not beyond:
        # The sampled elements agree; the sums bound what the unsampled ones can have done.
        n = golden.numel
        for label, gs, cs in (("sum", golden.sum, current.sum), ("abs-sum", golden.abs_sum, current.abs_sum)):
            e, g = _float(gs), _float(cs)
            if math.isnan(e) and math.isnan(g):
                continue
            allowed = n * tol.atol + tol.rtol * abs(_float(golden.abs_sum)) + 1e-12 * abs(e)
            err = abs(e - g) if e != g else 0.0
            if math.isnan(err) or err > allowed:
                beyond = True
                reason = f"{label} moved from {e!r} to {g!r} (more than every element's tolerance allows)"
                break
    if exact and not beyond:
        beyond, reason = True, "bytes differ outside the sampled elements"
    if beyond:
        return OutputVerdict("beyond", worst, reason)
    return OutputVerdict("within", worst)


def _kind(device: str) -> str:
    return device.split(":", maxsplit=1)[0]


def _custom_tol(result: CheckResult) -> Tol | None:
    return Tol(result.tolerance.rtol, result.tolerance.atol) if result.tolerance is not None else None


def compare_check(golden: CheckResult, current: CheckResult) -> list[Finding]:
    """Numerical findings for one check that ran on both sides."""
    cross = _kind(golden.device) != _kind(current.device)
    findings: list[Finding] = []
    where = " against a golden from another device kind" if cross else ""
    for name, g in sorted(golden.outputs.items()):
        c = current.outputs.get(name)
        subject = f"{current.name}.{name}"
        if c is None:
            findings.append(
                _f(
                    "VERIFY-NUMERICS",
                    "error",
                    subject,
                    "the output is missing here",
                    "Look at the check's error and the recorded settings.",
                )
            )
            continue
        tol = tolerance(current.name, g.dtype, cross_device=cross, custom=_custom_tol(current))
        verdict = compare_output(g, c, tol, exact=current.exact and not cross)
        band = "bit-exact" if current.exact and not cross else f"rtol {tol.rtol:g}, atol {tol.atol:g}"
        detail = "; ".join(
            x for x in (verdict.worst.describe() if verdict.worst else "", verdict.reason) if x
        )
        base, target = (
            (repr(verdict.worst.expected), repr(verdict.worst.got))
            if verdict.worst
            else (g.sha256[:12], c.sha256[:12])
        )
        if verdict.kind == "beyond":
            findings.append(
                _f(
                    "VERIFY-NUMERICS",
                    "error",
                    subject,
                    f"{g.dtype} output on {current.device} differs beyond tolerance ({band})"
                    f"{where}: {detail}",
                    "The backend computes differently from the golden machine: compare the VERIFY-INFO "
                    "settings (CPU capability, TF32, oneDNN, engine) and the native-library diff.",
                    base,
                    target,
                )
            )
        elif verdict.kind == "within":
            findings.append(
                _f(
                    "VERIFY-WITHIN-TOLERANCE",
                    "info",
                    subject,
                    f"{g.dtype} output on {current.device} differs from the golden within tolerance ({band})"
                    f"{where}: {detail}",
                    "Expected drift (another CPU path, library or thread count); nothing to do.",
                    base,
                    target,
                )
            )
    return findings


def outcome_findings(result: CheckResult, *, golden: CheckResult | None = None) -> list[Finding]:
    """Findings for a check that did not pass (error, crash, timeout, self-check failure, skip)."""
    subject = (
        result.name
        if result.device in ("cpu", "") or "/" in result.name
        else f"{result.name} ({result.device})"
    )
    tail = f"\n{result.stderr_tail}" if result.stderr_tail else ""
    match result.status:
        case "passed":
            return []
        case "failed":
            return [
                _f(
                    "VERIFY-FAILED",
                    "error",
                    subject,
                    f"self-check failed: {result.error}",
                    "The operation no longer behaves as torch documents here: see the message.",
                )
            ]
        case "error":
            where = _last_frame(result.traceback)
            return [
                _f(
                    "VERIFY-ERROR",
                    "error",
                    subject,
                    f"raised {result.error}" + (f" ({where})" if where else ""),
                    "Fix what the exception names, at the innermost frame shown; the manifest keeps the "
                    "traceback's tail (verify.results[].traceback).",
                )
            ]
        case "crashed":
            how = result.signal or f"exit code {result.exit_code}"
            return [
                _f(
                    "VERIFY-CRASH",
                    "error",
                    subject,
                    f"the process died ({how}) while running this check{tail}",
                    "A native library crashed: look at the stderr tail and the native-library diff; "
                    "the other checks ran in a fresh process.",
                )
            ]
        case "timeout":
            return [
                _f(
                    "VERIFY-TIMEOUT",
                    "error",
                    subject,
                    f"no result after {result.timeout_s:g} s: killed{tail}"
                    if result.timeout_s
                    else "timed out",
                    "A deadlock (OpenMP after fork, a DataLoader worker, a collective) or a very slow "
                    "machine: raise --timeout to tell them apart.",
                )
            ]
        case "skipped":
            ran = golden is not None and golden.status == "passed"
            return [
                _f(
                    "VERIFY-SKIPPED",
                    "warning" if ran else "info",
                    subject,
                    f"skipped: {result.reason}" + (" (it ran on the golden machine)" if ran else ""),
                    "Install what it needs, or accept it in the policy if this machine lacks it by design.",
                )
            ]
    return []


def _last_frame(traceback: str | None) -> str | None:
    """``file:line in function`` of the innermost frame of a Python traceback, or None."""
    if not traceback:
        return None
    frames = [line.strip() for line in traceback.splitlines() if line.strip().startswith('File "')]
    if not frames:
        return None
    # 'File "/path/x.py", line 12, in check_y' -> 'x.py:12 in check_y'
    parts = frames[-1].split('"')
    if len(parts) < 3:
        return None
    rest = parts[2].strip(", ").replace("line ", "").replace(", in ", " in ")
    return f"{parts[1].replace(chr(92), '/').rsplit('/', 1)[-1]}:{rest}"


def outcomes(current: VerifySection) -> list[Finding]:
    """Findings from one run alone (``envcheck verify`` without ``--against``)."""
    return [f for r in current.results for f in outcome_findings(r)]


def compare(golden: VerifySection, current: VerifySection) -> list[Finding]:
    """Every finding of ``current`` against the goldens in ``golden``."""
    findings: list[Finding] = []
    golden_by_name = {r.name: r for r in golden.results}
    current_names = {r.name for r in current.results}
    for result in current.results:
        base = golden_by_name.get(result.name)
        if base is None and result.ref is not None:
            base = golden_by_name.get(result.ref)  # a CUDA run against a CPU golden: cross-device bands
        if result.status != "passed":
            findings.extend(outcome_findings(result, golden=base))
            continue
        if base is None:
            findings.append(
                _f(
                    "VERIFY-NO-GOLDEN",
                    "info",
                    result.name,
                    "no golden recorded for this check",
                    "Record goldens with `envcheck snapshot` on the reference machine.",
                )
            )
            continue
        if base.status != "passed":
            findings.append(
                _f(
                    "VERIFY-NO-GOLDEN",
                    "info",
                    result.name,
                    f"the golden run of this check did not pass ({base.status}): nothing to compare",
                    "Re-record the goldens on a machine where it passes.",
                )
            )
            continue
        findings.extend(compare_check(base, result))
        findings.extend(_info_changes(base, result))
        findings.extend(_speed(base, result))
    for base in golden.results:
        if base.name in current_names or base.status != "passed":
            continue
        # Ran on the golden machine (e.g. on cuda:0), absent here (no such device).
        twin = _twin(base.name, current.results)
        reason = twin.reason if twin is not None and twin.reason else "not run here"
        remedy = (
            "Pass the same --checks file (or install the package whose envcheck.checks entry point adds it)."
            if base.family == "custom"
            else "Provide the device or package it needs, or declare the difference in the policy."
        )
        findings.append(
            _f("VERIFY-SKIPPED", "warning", base.name, f"ran on the golden machine; here: {reason}", remedy)
        )
    return findings


def output_counts(
    golden: VerifySection, current: VerifySection, findings: Iterable[Finding]
) -> dict[str, int]:
    """How the outputs compared: ``compared``, ``identical``, ``within`` and ``beyond`` tolerance."""
    golden_by_name = {r.name: r for r in golden.results}
    compared = 0
    for result in current.results:
        base = golden_by_name.get(result.name) or (golden_by_name.get(result.ref) if result.ref else None)
        if result.status == "passed" and base is not None and base.status == "passed":
            compared += len(base.outputs)
    rules = [f.rule for f in findings]
    within, beyond = rules.count("VERIFY-WITHIN-TOLERANCE"), rules.count("VERIFY-NUMERICS")
    return {"compared": compared, "identical": compared - within - beyond, "within": within, "beyond": beyond}


def _twin(name: str, results: Iterable[CheckResult]) -> CheckResult | None:
    head, _, tail = name.partition("/")
    if not tail:
        return None
    kind = head.split(":")[0]
    return next((r for r in results if r.name == f"{kind}/{tail}"), None)


def _info_changes(golden: CheckResult, current: CheckResult) -> list[Finding]:
    out = []
    # Keys the golden lacks were added by a newer envcheck: nothing to compare them with.
    for key in sorted(golden.info):
        g, c = golden.info.get(key), current.info.get(key)
        if g == c:
            continue
        if isinstance(g, list) and isinstance(c, list):
            gone = sorted(set(map(str, g)) - set(map(str, c)))
            new = sorted(set(map(str, c)) - set(map(str, g)))
            text = "; ".join(
                x
                for x in (
                    f"added {', '.join(new)}" if new else "",
                    f"removed {', '.join(gone)}" if gone else "",
                )
                if x
            )
            out.append(
                _f(
                    "VERIFY-INFO",
                    "info",
                    f"{current.name}.{key}",
                    f"{key} changed: {text}",
                    "Context for the numeric findings.",
                    None,
                    None,
                )
            )
            continue
        out.append(
            _f(
                "VERIFY-INFO",
                "info",
                f"{current.name}.{key}",
                f"{key} changed",
                "Context for the numeric findings.",
                _short(g),
                _short(c),
            )
        )
    return out


def _speed(golden: CheckResult, current: CheckResult) -> list[Finding]:
    out = []
    for key, what in (("gflops", f"{current.info.get('threads')} threads"), ("gflops_1thread", "1 thread")):
        g, c = golden.metrics.get(key), current.metrics.get(key)
        if not g or c is None or c >= SPEED_DROP * g:
            continue
        out.append(
            _f(
                "VERIFY-SPEED",
                "warning",
                f"{current.name}.{key}",
                f"fp32 matmul ran at {c:g} GFLOP/s with {what}, {c / g:.0%} of the golden {g:g} GFLOP/s "
                f"(golden threads: {golden.info.get('threads')})",
                "Check the thread count (OMP_NUM_THREADS, cgroup CPU limits), the BLAS in use and the CPU "
                "capability; other work on the machine also shows here, most in the all-threads number.",
                f"{g:g}",
                f"{c:g}",
            )
        )
    return out


def _short(value: object) -> str | None:
    return None if value is None else str(value)[:200]


def _f(
    rule: str,
    severity: Severity,
    subject: str,
    message: str,
    remedy: str,
    base: str | None = None,
    target: str | None = None,
) -> Finding:
    return Finding(
        rule=rule,
        severity=severity,
        subject=subject,
        message=message,
        remedy=remedy,
        base=base,
        target=target,
    )
