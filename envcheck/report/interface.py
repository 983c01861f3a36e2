"""The report-format interface: one ``ReportFormat`` per output format, and what they share."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, NoReturn

from envcheck.diff.finding import SEVERITY_RANK, Finding, Severity, at_or_above

if TYPE_CHECKING:
    from envcheck.report import FormatName

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
PLURAL = {"error": "errors", "warning": "warnings", "info": "info"}


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportContext:
    """What every format needs besides the findings.

    ``title`` may carry manifest data (labels, paths): formats escape it like any finding string.
    ``policy`` is one line saying which policy shaped the findings (``policy: ./pyproject.toml
    [tool.envcheck]: 3 ignored, 1 downgraded`` or ``policy: none``); ``None`` shows nothing.
    """

    title: str
    fail_on: Severity
    color: bool
    rules: tuple[str, ...]
    policy: str | None = None


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """Counts by severity; ``failing`` = findings at or above ``fail_on`` that are not intended."""

    total: int
    error: int
    warning: int
    info: int
    intended: int
    failing: int

    @property
    def passed(self) -> bool:
        return self.failing == 0

    def count(self, severity: Severity) -> int:
        return {"error": self.error, "warning": self.warning, "info": self.info}[severity]

    def counts(self) -> str:
        """``FAIL: 2 errors, 1 warning, 0 info``."""
        parts = ", ".join(
            f"{n} {PLURAL[s] if n != 1 or s == 'info' else s}" for s in SEVERITIES for n in [self.count(s)]
        )
        return f"{'PASS' if self.passed else 'FAIL'}: {parts}"

    def line(self, fail_on: Severity) -> str:
        """``FAIL: 2 errors, 1 warning, 0 info (fail on error; 1 intended)``."""
        extra = f"; {self.intended} intended" if self.intended else ""
        return f"{self.counts()} (fail on {fail_on}{extra})"


def summarize(findings: Sequence[Finding], fail_on: Severity) -> Summary:
    return Summary(
        total=len(findings),
        error=sum(f.severity == "error" for f in findings),
        warning=sum(f.severity == "warning" for f in findings),
        info=sum(f.severity == "info" for f in findings),
        intended=sum(f.intended is not None for f in findings),
        failing=sum(at_or_above(f, fail_on) for f in findings),
    )


def by_severity(findings: Sequence[Finding]) -> list[tuple[Severity, list[Finding]]]:
    """Non-empty groups, errors first."""
    groups = [
        (s, [f for f in findings if f.severity == s])
        for s in sorted(SEVERITIES, key=SEVERITY_RANK.__getitem__)
    ]
    return [(s, fs) for s, fs in groups if fs]


def is_fleet(findings: Sequence[Finding]) -> bool:
    return any(f.machine for f in findings)


class ReportFormat(ABC):
    """Turns sorted findings into the text of one report. Never prints, never raises on valid findings."""

    @abstractmethod
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str: ...


def format_for(name: FormatName) -> ReportFormat:
    """The implementation of a format name (the one mapping; unknown names raise ``ValueError``)."""
    if name == "text":
        from envcheck.report.text import TextFormat

        return TextFormat()
    if name == "json":
        from envcheck.report.json_format import JsonFormat

        return JsonFormat()
    if name == "markdown":
        from envcheck.report.markdown import MarkdownFormat

        return MarkdownFormat()
    if name == "junit":
        from envcheck.report.junit import JunitFormat

        return JunitFormat()
    return _unknown(name)


def _unknown(name: NoReturn) -> NoReturn:
    # typing.assert_never is 3.11+; this is the same exhaustiveness check on 3.10.
    raise ValueError(f"unknown report format {name!r}")


def by_machine(findings: Sequence[Finding], fail_on: Severity) -> list[str]:
    """Fleet reports: one line per machine with findings (``prod-2: FAIL: 1 error, ...``), sorted."""
    machines = sorted({f.machine for f in findings if f.machine})
    return [f"{m}: {summarize([f for f in findings if f.machine == m], fail_on).counts()}" for m in machines]


def machines_by_rule(findings: Sequence[Finding]) -> list[tuple[str, list[str]]]:
    """Fleet reports: which machines drift on each rule (rules ranked like findings)."""
    out: dict[str, set[str]] = {}
    for f in findings:  # already sorted: errors first
        if f.machine:
            out.setdefault(f.rule, set()).add(f.machine)
    return [(rule, sorted(machines)) for rule, machines in out.items()]
