"""The manifest's ``verify`` section: smoke-suite results, kept as goldens (filled by ``envcheck.verify``).

Outputs are stored compactly (``OutputSummary``): shape, dtype, a sha256 of the raw bytes, the sum and
absolute sum, and a deterministic sample of at most 32 elements (first 8, last 8, 16 strided), so the
whole suite stays far below 200 KB. Timings and speeds are volatile: two snapshots of the same environment
differ only there.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from envcheck.manifest.codec import JsonValue, omitted_when_default, volatile

CheckStatus = Literal["passed", "failed", "error", "crashed", "timeout", "skipped"]

# A JSON-safe float: non-finite values are the strings "nan", "inf" and "-inf".
Number = float | str


@dataclass(frozen=True, kw_only=True, slots=True)
class OutputSummary:
    """One output tensor of a check, summarised. ``index`` are flat indices of the sampled ``values``."""

    dtype: str
    shape: list[int]
    sha256: str
    sum: Number
    abs_sum: Number
    index: list[int] = field(default_factory=list)
    values: list[Number] = field(default_factory=list)

    @property
    def numel(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n


@dataclass(frozen=True, kw_only=True, slots=True)
class Tolerance:
    """A custom check's own tolerance (``fn.tolerance = {"rtol": …, "atol": …}``) overriding the table."""

    rtol: float
    atol: float


@dataclass(frozen=True, kw_only=True, slots=True)
class CheckResult:
    """The outcome of one check on one device.

    ``status`` as run: ``passed`` (ran; a self-check held), ``failed`` (a self-check broke: ``error``
    says where), ``error`` (raised: ``error`` holds the exception, ``traceback`` its tail), ``crashed``
    (``signal`` / ``exit_code``, ``stderr_tail``), ``timeout`` (``timeout_s``), ``skipped`` (``reason``).
    ``exact``: outputs must match bit for bit. ``ref``: the CPU check with the same inputs (for a CUDA check).
    """

    name: str
    family: str
    device: str
    status: CheckStatus
    exact: bool = False
    ref: str | None = None
    reason: str | None = None
    error: str | None = None
    signal: str | None = None
    exit_code: int | None = None
    stderr_tail: str | None = None
    traceback: str | None = None
    timeout_s: float | None = None
    tolerance: Tolerance | None = None
    outputs: dict[str, OutputSummary] = field(default_factory=dict)
    info: dict[str, JsonValue] = field(default_factory=dict)
    # volatile() is dataclasses.field() with metadata: a fresh dict per instance, not a shared default.
    metrics: dict[str, float] = volatile(default_factory=dict)  # noqa: RUF009
    duration_s: float | None = volatile(None)


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifySection:
    """Outcomes and golden outputs of the import-and-verify smoke suite on this machine.

    ``skipped`` says why the suite did not run (``--no-verify``); ``results`` are in suite order.
    ``options`` records what changes the check list (``compile``, ``checks_file``), ``wall_s`` the time.
    ``imports``: the application's entry modules (``snapshot --import``) that verify and gate import after
    the installed modules with native code (None: none recorded).
    """

    skipped: str | None = None
    torch_version: str | None = None
    results: list[CheckResult] = field(default_factory=list)
    options: dict[str, JsonValue] = field(default_factory=dict)
    wall_s: float | None = volatile(None)
    # Written only when set: every manifest from before round-trips byte for byte.
    imports: list[str] | None = omitted_when_default(None)  # noqa: RUF009

    def result(self, name: str) -> CheckResult | None:
        """The result named ``name``, or None."""
        for r in self.results:
            if r.name == name:
                return r
        return None
