"""The report-format interface: one ``ReportFormat`` per output format, and what they share: the context,
the counts, and the grouping of findings into root causes with their consequences.

This module imports no format: the mapping from a format's name to its class is ``FormatName.formatter``
(``envcheck.report.formats``), so the formats can import this module without a cycle.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.core.findings import (
    REGISTRY,
    SEVERITY_RANK,
    Finding,
    MachineGroup,
    RuleKind,
    Severity,
    at_or_above,
)

SEVERITIES: tuple[Severity, ...] = ("error", "warning", "info")
PLURAL = {"error": "errors", "warning": "warnings", "info": "info"}
# What a report says when it has no finding, unless its command says something truer.
NO_DIFFERENCES = "No differences that matter."
# The text report's width when it is not printed on a terminal (a pipe, a file, a CI log): stable, so that
# logs and saved reports read the same wherever they were made.
DEFAULT_WIDTH = 100


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportContext:
    """What every format needs besides the findings.

    ``title`` may carry manifest data (labels, paths): formats escape it like any finding string.
    ``policy`` is one line saying which policy shaped the findings (``policy: ./pyproject.toml
    [tool.envcheck]: 3 ignored, 1 downgraded`` or ``policy: none``); ``None`` shows nothing.
    ``verbose``: every finding in full (the text report otherwise fits about one screen).
    ``nothing_found``: the sentence for a report without findings (``No problems found.`` for doctor).
    ``groups``: in a fleet report, the machines behind each ``Finding.machine`` (empty otherwise).
    ``width``: the columns the text report is laid out in (the terminal's, or ``DEFAULT_WIDTH`` when the
    report goes to a pipe or a file); other formats ignore it.
    ``member``: what a ``Finding.machine`` names: ``machine`` (a fleet), ``platform`` (predict) or
    ``rank`` (a cluster job), in every count and heading of a fleet report.
    """

    title: str
    fail_on: Severity
    color: bool
    rules: tuple[str, ...]
    policy: str | None = None
    verbose: bool = False
    nothing_found: str = NO_DIFFERENCES
    groups: tuple[MachineGroup, ...] = ()
    width: int = DEFAULT_WIDTH
    member: str = "machine"


def plural(n: int, word: str) -> str:
    """``1 root cause``, ``2 root causes``; severities keep ``info`` (``3 info``)."""
    if word in PLURAL:
        return f"{n} {PLURAL[word] if n != 1 or word == 'info' else word}"
    return f"{n} {word}{'' if n == 1 else 's'}"


def severity_counts(findings: Sequence[Finding]) -> str:
    """``2 errors, 1 warning`` (severities that occur, worst first); ``none`` for no finding."""
    parts = [plural(n, s) for s in SEVERITIES if (n := sum(f.severity == s for f in findings))]
    return ", ".join(parts) or "none"


@dataclass(frozen=True, kw_only=True, slots=True)
class Summary:
    """Counts by severity; ``failing`` = findings at or above ``fail_on`` that are not intended; ``roots``
    and ``consequences`` split ``total`` into root causes and the findings folded under them."""

    total: int
    error: int
    warning: int
    info: int
    intended: int
    failing: int
    roots: int = 0
    consequences: int = 0

    @property
    def passed(self) -> bool:
        return self.failing == 0

    def count(self, severity: Severity) -> int:
        return {"error": self.error, "warning": self.warning, "info": self.info}[severity]

    def counts(self) -> str:
        """``FAIL: 2 errors, 1 warning, 0 info``."""
        parts = ", ".join(plural(self.count(s), s) for s in SEVERITIES)
        return f"{'PASS' if self.passed else 'FAIL'}: {parts}"

    def line(self, fail_on: Severity) -> str:
        """``FAIL: 2 errors, 1 warning, 0 info (fail on error; 1 intended)``."""
        extra = f"; {self.intended} intended" if self.intended else ""
        return f"{self.counts()} (fail on {fail_on}{extra})"

    def causes_line(self) -> str:
        """``2 root causes, 13 consequences``."""
        return f"{plural(self.roots, 'root cause')}, {plural(self.consequences, 'consequence')}"


def summarize(findings: Sequence[Finding], fail_on: Severity) -> Summary:
    roots = len(groups(findings))
    return Summary(
        total=len(findings),
        error=sum(f.severity == "error" for f in findings),
        warning=sum(f.severity == "warning" for f in findings),
        info=sum(f.severity == "info" for f in findings),
        intended=sum(f.intended is not None for f in findings),
        failing=sum(at_or_above(f, fail_on) for f in findings),
        roots=roots,
        consequences=len(findings) - roots,
    )


@dataclass(frozen=True, kw_only=True, slots=True)
class Group:
    """A root cause and the findings it causes: every finding whose ``caused_by`` chain leads to ``root``,
    errors first (``Finding.sort_key``)."""

    root: Finding
    consequences: tuple[Finding, ...]

    @property
    def members(self) -> tuple[Finding, ...]:
        return (self.root, *self.consequences)

    @property
    def severity(self) -> Severity:
        """The worst severity in the group: a warning that causes an error ranks with the errors."""
        return min((f.severity for f in self.members), key=SEVERITY_RANK.__getitem__)

    def failing(self, fail_on: Severity) -> list[Finding]:
        return [f for f in self.members if at_or_above(f, fail_on)]


def groups(findings: Sequence[Finding]) -> list[Group]:
    """``findings`` as root causes with their consequences, worst group first (then by the root's
    ``sort_key``). Every finding is in exactly one group. A root is a finding without ``caused_by`` or whose
    cause is absent; a consequence goes under the root its ``caused_by`` chain ends at (through
    consequences of consequences). A chain that loops (which ``envcheck.diff.causes.link`` never makes)
    leaves its findings as roots: nothing is hidden under a finding the report does not show."""
    first: dict[str, int] = {}
    for i, f in enumerate(findings):
        first.setdefault(f.key, i)

    def root_of(i: int) -> int:
        seen = {i}
        while (cause := findings[i].caused_by) is not None and cause in first:
            i = first[cause]
            if i in seen:
                return -1  # a loop: no root explains it
            seen.add(i)
        return i

    under: dict[int, list[Finding]] = {}
    roots: list[int] = []
    for i in range(len(findings)):
        r = root_of(i)
        if r in (i, -1):
            roots.append(i)
        else:
            under.setdefault(r, []).append(findings[i])
    out = [
        Group(root=findings[i], consequences=tuple(sorted(under.get(i, ()), key=Finding.sort_key)))
        for i in roots
    ]
    return sorted(out, key=lambda g: (SEVERITY_RANK[g.severity], g.root.sort_key()))


def by_severity(found: Sequence[Group]) -> list[tuple[Severity, list[Group]]]:
    """Non-empty sections of groups by their worst severity, errors first."""
    sections = [(s, [g for g in found if g.severity == s]) for s in SEVERITIES]
    return [(s, gs) for s, gs in sections if gs]


def rule_kind(rule_id: str) -> RuleKind | None:
    """The kind of a registered rule (``single`` for a finding about one environment), or None."""
    # The run that produced the findings imported the families of their rules, which registered them.
    rule = REGISTRY.get(rule_id)
    return rule.kind if rule is not None else None


@dataclass(frozen=True, kw_only=True, slots=True)
class Values:
    """How a finding's two values are labelled: ``base``/``target`` for a difference, ``reference``/
    ``found`` for a finding about one environment (doctor's, or the target's own in a diff), where
    ``base`` holds what the found value is checked against, never a second machine."""

    first: str
    second: str


DIFFERENCE = Values(first="base", second="target")
SINGLE = Values(first="reference", second="found")


def labels(finding: Finding) -> Values:
    return SINGLE if rule_kind(finding.rule) == "single" else DIFFERENCE


def is_fleet(findings: Sequence[Finding]) -> bool:
    return any(f.machine for f in findings)


class ReportFormat(ABC):
    """Turns sorted findings into the text of one report. Never prints, never raises on valid findings."""

    @abstractmethod
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str: ...


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


def fleet_line(machine_groups: Sequence[MachineGroup], member: str = "machine") -> str:
    """Fleet reports: ``900 machines identical to the base; 100 machines in 3 groups`` (``member``: what
    a group's members are: ``machine``, ``platform`` for predict, ``rank`` for a cluster job)."""
    same = sum(g.size for g in machine_groups if g.identical_to_base)
    drifting = [g for g in machine_groups if not g.identical_to_base]
    return (
        f"{plural(same, member)} identical to the base; "
        f"{plural(sum(g.size for g in drifting), member)} in {plural(len(drifting), 'group')}"
    )


def group_counts(
    group: MachineGroup, findings: Sequence[Finding], fail_on: Severity, member: str = "machine"
) -> str:
    """A machine group on one line: ``node-07 +41: 42 machines: FAIL: 1 error, 0 warnings, 0 info``
    (``identical to the base`` said when it is; ``member`` as in ``fleet_line``)."""
    same = ", identical to the base" if group.identical_to_base else ""
    counts = summarize([f for f in findings if f.machine == group.name], fail_on).counts()
    return f"{group.name}: {plural(group.size, member)}{same}: {counts}"


def shortened(members: Sequence[str], limit: int) -> tuple[list[str], int]:
    """The first ``limit`` members and how many more there are (JSON lists them all)."""
    return list(members[:limit]), max(0, len(members) - limit)
