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

import dataclasses
import math
import re
import struct
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import envcheck.verify.rules  # noqa: F401 - registers the VERIFY-* rules
from envcheck.core.errors import ManifestError
from envcheck.core.findings import Finding, Severity, registered_ids
from envcheck.manifest.codec import decode
from envcheck.manifest.model import FpControl
from envcheck.manifest.verify import CheckResult, Number, OutputSummary, VerifySection
from envcheck.verify.fp_mode import describe_fp_mode, fp_setter


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
# Every VERIFY-* id a finding can carry (``envcheck.verify.rules``, imported above, registers them).
VERIFY_RULES = registered_ids("verify")
# A throughput below this fraction of the golden's best is a warning (never an error: machines are shared),
# and only when it is also below the golden's own median sample (``speed_threshold``); below SPEED_FLOOR
# it is a warning whatever noise the golden showed.
SPEED_DROP = 0.5
SPEED_FLOOR = 0.2

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
                    skip_remedy(result.reason, subject),
                )
            ]
    return []


# A skip reason (written by the suite's own checks and the runner) -> what to do about it. A reason no
# pattern knows gets the general advice, never a wrong one.
_SKIP_REMEDIES: tuple[tuple[re.Pattern[str], str], ...] = (
    (
        re.compile(r"^opt-in: pass (--[\w-]+)"),
        "An opt-in check: pass {0} to `envcheck verify` or `envcheck gate` to run it.",
    ),
    (
        re.compile(r"^([\w.-]+) is not installed in the target"),
        "Install {0} in the target environment if the application uses it, or accept the skip in a policy "
        '(`ignore = ["VERIFY-SKIPPED:{subject}"]`).',
    ),
    (
        re.compile(r"^torch \S+ is built without CUDA"),
        "This torch build has no CUDA: if this machine should use its GPU, install a CUDA build of torch; if "
        "it is CPU-only by design, declare it in the policy.",
    ),
    (
        re.compile(r"^no CUDA device visible"),
        "Make the GPU visible to this process (driver loaded, CUDA_VISIBLE_DEVICES, the container's device "
        "access), or declare the machine CPU-only in the policy.",
    ),
    (
        re.compile(r"is not available in (?:torch \S+|this (?:torch )?build)"),
        "This torch build or version lacks it: use the torch build the golden machine used if the "
        "application needs it, or accept the skip in a policy.",
    ),
)


def skip_remedy(reason: str | None, subject: str) -> str:
    """What to do about ``subject`` skipped for ``reason``: specific where the reason is one the suite
    writes, general otherwise."""
    for pattern, remedy in _SKIP_REMEDIES:
        found = pattern.search(reason or "")
        if found is not None:
            return remedy.format(*found.groups(), subject=subject)
    return (
        "Provide what the skip reason names, or accept the skip in a policy if this machine lacks it by "
        "design."
    )


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
    """Findings from one run alone (``envcheck verify`` without ``--against``), with ``VERIFY-FP-MODE``
    when flush-to-zero or denormals-are-zero is on."""
    found = [f for r in current.results for f in outcome_findings(r)]
    return _with_fp_mode(found, None, fp_mode(current.result("import_torch")), alone=True)


# ------------------------------------------------------------------------------ floating-point mode

FP_MODE_SUBJECT = "import_torch.fp_control"
FP_MODE_KEY = f"VERIFY-FP-MODE:{FP_MODE_SUBJECT}"
# The smallest normal magnitude per dtype: a value below it (and not zero) is subnormal, what FTZ/DAZ
# turn into zero.
_MIN_NORMAL = {"float32": 2.0**-126, "bfloat16": 2.0**-126, "float64": 2.0**-1022, "float16": 2.0**-14}


def fp_mode(result: CheckResult | None) -> FpControl | None:
    """The floating-point mode the suite recorded in its ``import_torch`` check, or None (not recorded:
    an older envcheck, or import failed; malformed: a hand-edited manifest, read as not recorded)."""
    raw = result.info.get("fp_control") if result is not None else None
    if not isinstance(raw, dict):
        return None
    try:
        return decode(FpControl, raw, source="verify", location="import_torch.info.fp_control")
    except ManifestError:
        return None


def _fp_explains(finding: Finding, dtype: str | None) -> bool:
    """True when ``finding`` (a numeric difference whose worst element is ``base`` -> ``target``) lies
    wholly in the subnormal range of ``dtype``: what a change of the subnormal handling makes."""
    limit = _MIN_NORMAL.get(dtype or "")
    if limit is None or finding.base is None or finding.target is None:
        return False
    try:
        expected, got = float(finding.base), float(finding.target)
    except ValueError:  # the finding names two hashes, not two values
        return False
    return expected != got and abs(expected) < limit and abs(got) < limit


def _with_fp_mode(
    findings: list[Finding],
    golden: FpControl | None,
    current: FpControl | None,
    dtypes: Callable[[str], str | None] = lambda _: None,
    *,
    alone: bool = False,
) -> list[Finding]:
    """Add ``VERIFY-FP-MODE`` when the mode flushes here (``alone``, or the golden did not record it) or
    differs from the golden's, and link to it the numeric differences it explains (``dtypes``: the dtype
    of the output a finding's subject names). An error when it explains one, a warning otherwise."""
    if current is None:
        return findings
    changed = current.flushes if (alone or golden is None) else golden.flushes != current.flushes
    if not changed:
        return findings
    linked = [
        dataclasses.replace(
            f,
            caused_by=FP_MODE_KEY,
            remedy=(
                "Subnormal values became zero here" if current.flushes else "Subnormal values survive here"
            )
            + ": a consequence of the floating-point mode (VERIFY-FP-MODE); set the mode as on the golden "
            "machine and this difference goes with it.",
        )
        if f.rule == "VERIFY-NUMERICS" and f.caused_by is None and _fp_explains(f, dtypes(f.subject))
        else f
        for f in findings
    ]
    consequences = sum(1 for f in linked if f.caused_by == FP_MODE_KEY)
    here = describe_fp_mode(current)
    if current.flushes:
        who, remedy = fp_setter(current)
        both = current.flush_to_zero and current.denormals_are_zero
        message = f"{here} {'are' if both else 'is'} on in this process, {who}: subnormal floats become zero"
    else:
        assert golden is not None  # changed, and current does not flush: the golden did
        remedy = "Record the goldens again without the mode, or turn it on here as the application did there."
        message = f"subnormal floats survive here; the golden machine ran with {describe_fp_mode(golden)} on"
    if consequences:
        message += f"; it explains {consequences} numeric difference{'s' if consequences > 1 else ''}"
    cause = _f(
        "VERIFY-FP-MODE",
        "error" if consequences else "warning",
        FP_MODE_SUBJECT,
        message,
        remedy,
        describe_fp_mode(golden) if golden is not None else None,
        here,
    )
    return [cause, *linked]


def compare(golden: VerifySection, current: VerifySection) -> list[Finding]:
    """Every finding of ``current`` against the goldens in ``golden``; a numeric difference that the
    floating-point mode explains names the ``VERIFY-FP-MODE`` finding as its cause."""

    def dtype(subject: str) -> str | None:
        check, _, output = subject.rpartition(".")
        result = golden.result(check)
        summary = result.outputs.get(output) if result is not None else None
        return summary.dtype if summary is not None else None

    return _with_fp_mode(
        _compare(golden, current),
        fp_mode(golden.result("import_torch")),
        fp_mode(current.result("import_torch")),
        dtype,
    )


def _compare(golden: VerifySection, current: VerifySection) -> list[Finding]:
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
        capability = _changed(golden.result("import_torch"), current.result("import_torch"), "cpu_capability")
        findings.extend(_speed(base, result, capability))
    import_failure = import_failure_key(current)
    not_run: list[str] = []
    for base in golden.results:
        if base.name in current_names or base.status != "passed":
            continue
        # Ran on the golden machine (e.g. on cuda:0), absent here (no such device).
        twin = _twin(base.name, current.results)
        if import_failure is not None and (twin is None or not twin.reason):
            not_run.append(base.name)  # it never started: import torch failed first
            continue
        reason = twin.reason if twin is not None and twin.reason else "not run here"
        if base.family == "custom":
            remedy = (
                "Pass the same --checks file (or install the package whose envcheck.checks entry point "
                "adds it)."
            )
        elif twin is not None and twin.reason:
            remedy = skip_remedy(twin.reason, base.name)
        else:
            remedy = (
                "The suite did not reach it here: fix what its error, crash or timeout findings name (e.g. "
                "import_torch), or provide the device it needs."
            )
        findings.append(
            _f("VERIFY-SKIPPED", "warning", base.name, f"ran on the golden machine; here: {reason}", remedy)
        )
    if not_run and import_failure is not None:
        findings.append(not_run_finding(not_run, import_failure))
    return findings


# The subject of the one finding that stands for the checks an import failure kept from running.
NOT_RUN_SUBJECT = "checks not run"


def import_failure_key(current: VerifySection) -> str | None:
    """The key of the finding for the suite's ``import_torch`` when it errored, crashed or timed out (every
    later check of its group never started), or None when torch imported (or the check was skipped)."""
    result = current.result("import_torch")
    if result is None or result.status not in ("error", "crashed", "timeout"):
        return None
    (finding,) = outcome_findings(result)
    return finding.key


def not_run_finding(names: list[str], import_failure: str) -> Finding:
    """One ``VERIFY-SKIPPED`` for the golden's checks that could not run because import torch failed,
    caused by that failure: a report shows the failure once, not once per check it stopped."""
    count = len(names)
    return Finding(
        rule="VERIFY-SKIPPED",
        severity="warning",
        subject=NOT_RUN_SUBJECT,
        message=f"{count} check{'s' if count > 1 else ''} that ran on the golden machine could not run: "
        f"import torch failed ({', '.join(sorted(names))})",
        remedy="Fix the import failure this finding is folded under; the checks run again with it.",
        base=f"{count} check{'s' if count > 1 else ''} ran",
        target="not run: import torch failed",
        caused_by=import_failure,
    )


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


# Recorded settings another rule reports, with what they explain: not repeated as VERIFY-INFO.
_INFO_RULED = {("import_torch", "fp_control")}


def _info_changes(golden: CheckResult, current: CheckResult) -> list[Finding]:
    out = []
    # Keys the golden lacks were added by a newer envcheck: nothing to compare them with.
    for key in sorted(golden.info):
        g, c = golden.info.get(key), current.info.get(key)
        if g == c or (current.name, key) in _INFO_RULED:
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


def speed_threshold(best: float, spread: float | None) -> float:
    """Below this, a throughput is beyond the noise of a golden whose best is ``best`` and whose spread
    (``1 - median / best`` of its own samples) is ``spread``: below the golden's own median and at most
    ``SPEED_DROP`` of its best, but never lower than ``SPEED_FLOOR`` of it (a noisy golden still catches a
    5x slowdown). A golden of one sample (older envcheck) has no spread: ``SPEED_DROP`` alone."""
    noise = min(max(spread or 0.0, 0.0), 1.0)
    return best * max(SPEED_FLOOR, min(SPEED_DROP, 1.0 - noise))


def _speed(golden: CheckResult, current: CheckResult, capability: str = "") -> list[Finding]:
    """VERIFY-SPEED: a warning for a one-thread throughput beyond the golden's noise (the CPU, its
    capability, the BLAS) or an all-threads one beyond it with fewer threads than the golden's; an info
    for an all-threads drop with one-thread numbers intact (other work on the cores, or a CPU quota).
    ``capability``: how the CPU capability torch dispatches to changed, or ``""``."""
    out: list[Finding] = []
    slow = {}
    for key in ("gflops_1thread", "sum_1thread", "gflops"):
        g, c = _metric(golden, key), _metric(current, key)
        if not g or c is None:
            continue
        limit = speed_threshold(g, _metric(golden, f"{key}_spread"))
        if c < limit:
            slow[key] = (g, c, limit)
    g_threads, c_threads = golden.info.get("threads"), current.info.get("threads")
    for key in ("gflops_1thread", "sum_1thread"):
        if key not in slow:
            continue
        g, c, limit = slow[key]
        what = _SPEED_WHAT[key]
        hint = (
            "torch's vectorised kernels follow the CPU capability"
            + (f", {capability}" if capability else " (ATEN_CPU_CAPABILITY)")
            if key == "sum_1thread"
            else "one thread measures the CPU and the BLAS, whatever else runs on the machine"
        )
        out.append(
            _f(
                "VERIFY-SPEED",
                "warning",
                f"{current.name}.{key}",
                f"{what} ran at {c:g} on 1 thread, {c / g:.0%} of the golden's best {g:g}, beyond the "
                f"golden's own noise (warned below {limit:.3g}): {hint}",
                "Compare the CPU, its capability (ATEN_CPU_CAPABILITY) and the BLAS in use with the golden "
                "machine's (`envcheck diff`).",
                f"{g:g}",
                f"{c:g}",
            )
        )
    if "gflops" in slow and not out:
        g, c, limit = slow["gflops"]
        fewer = isinstance(g_threads, int) and isinstance(c_threads, int) and c_threads < g_threads
        if fewer:
            out.append(
                _f(
                    "VERIFY-SPEED",
                    "warning",
                    f"{current.name}.gflops",
                    f"fp32 matmul ran at {c:g} GFLOP/s with {_threads(c_threads)}, {c / g:.0%} of the "
                    f"golden's best {g:g} GFLOP/s with {_threads(g_threads)}: torch uses fewer threads here",
                    "Check OMP_NUM_THREADS / MKL_NUM_THREADS, torch.set_num_threads calls and the CPU count "
                    "or cgroup limit of this machine.",
                    f"{g:g}",
                    f"{c:g}",
                )
            )
        elif (one := _metric(current, "gflops_1thread")) and (g_one := _metric(golden, "gflops_1thread")):
            # One thread kept its speed (it is not in ``slow``): the CPU and the BLAS are as fast as on the
            # golden machine, and only the all-threads run suffered.
            out.append(
                _f(
                    "VERIFY-SPEED",
                    "info",
                    f"{current.name}.gflops",
                    f"fp32 matmul with all {_threads(c_threads)} ran at {c:g} GFLOP/s, {c / g:.0%} of the "
                    f"golden's best {g:g} GFLOP/s, while one thread ran at {one / g_one:.0%} of the "
                    f"golden's: as when other work keeps the cores busy, or a CPU quota is below "
                    f"{c_threads} threads",
                    "Nothing to do for a shared machine; in a container with a CPU quota, set "
                    "OMP_NUM_THREADS to the quota.",
                    f"{g:g}",
                    f"{c:g}",
                )
            )
        else:
            out.append(
                _f(
                    "VERIFY-SPEED",
                    "warning",
                    f"{current.name}.gflops",
                    f"fp32 matmul ran at {c:g} GFLOP/s with {_threads(c_threads)}, {c / g:.0%} of the "
                    f"golden's best {g:g} GFLOP/s (golden: {_threads(g_threads)})",
                    "Check the thread count (OMP_NUM_THREADS, cgroup CPU limits), the BLAS in use and the "
                    "CPU capability; other work on the machine also shows here.",
                    f"{g:g}",
                    f"{c:g}",
                )
            )
    return out


def _threads(n: object) -> str:
    return "1 thread" if n == 1 else f"{n} threads"


_SPEED_WHAT = {"gflops_1thread": "fp32 matmul (GFLOP/s)", "sum_1thread": "a float32 sum (G elements/s)"}


def _metric(result: CheckResult, key: str) -> float | None:
    value = result.metrics.get(key)
    return float(value) if isinstance(value, int | float) and math.isfinite(value) else None


def _changed(golden: CheckResult | None, current: CheckResult | None, key: str) -> str:
    """``X here, Y on the golden machine`` for an info key the two results record differently, or ``""``."""
    if golden is None or current is None:
        return ""
    g, c = golden.info.get(key), current.info.get(key)
    return f"{c} here, {g} on the golden machine" if g is not None and c is not None and g != c else ""


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
