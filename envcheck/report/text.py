"""Text report for people: root causes first, each with the findings it causes folded under it.

By default the report fits about one screen (``MAX_LINES``): every root cause is shown in full while there
is room, with its first few consequences on one line each; past the room, roots are shown on one line; past
that, a last line counts what was left out, by severity, so nothing at or above ``--fail-on`` disappears
without being counted (roots are ranked errors first, so infos and warnings go before errors).
``--verbose`` (``ReportContext.verbose``) shows every finding in full.

Plain text unless ``color`` is set (the CLI sets it for a terminal without ``NO_COLOR``); only then is rich
imported, so piping a report stays fast and free of escape codes. Both share one layout: the coloured
report is the same lines, styled.

Every string from a finding or the title is escaped (``escape.terminal`` / ``one_line``) before it is
laid out: a manifest's escape sequences print as ``\\x1b…`` and never reach the terminal. The rich path
hands rich only ``Text`` objects, so ``[bold]`` in a label is shown, never parsed as console markup.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from envcheck.escape import one_line, terminal
from envcheck.findings import Finding, Severity
from envcheck.report.interface import (
    PLURAL,
    Group,
    ReportContext,
    ReportFormat,
    by_machine,
    by_severity,
    fleet_line,
    group_counts,
    groups,
    labels,
    machines_by_rule,
    plural,
    severity_counts,
    shortened,
    summarize,
)

WIDTH = 100
# One screen: the default report of a diff stays within this many lines (--verbose: no limit).
MAX_LINES = 60
# Consequences shown under a root cause by default, one line each; the rest are counted.
SHOWN_CONSEQUENCES = 3
# Fleet reports: machines and drifting rules listed by default.
FLEET_LINES = 10
# Fleet reports: members of a machine group named by default (--verbose: all of them).
FLEET_MEMBERS = 6
LABEL_WIDTH = 10
_STYLE: dict[Severity, str] = {"error": "bold red", "warning": "yellow", "info": "cyan"}

# A line of the report and its style in a coloured report (None: plain).
Line = tuple[str, str | None]


def _wrap(label: str, text: str, indent: int) -> list[str]:
    """``text`` (already escaped) wrapped under ``label``; textwrap turns tabs and newlines into spaces."""
    pad = " " * indent
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=f"{pad}{label:<{LABEL_WIDTH}}",
        subsequent_indent=" " * (indent + LABEL_WIDTH),
        break_long_words=False,
        break_on_hyphens=False,
    ) or [f"{pad}{label}"]


def _cut(text: str, limit: int = WIDTH) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _where(f: Finding) -> str:
    return f"  [{one_line(f.machine)}]" if f.machine else ""


def _values(f: Finding) -> str:
    """The finding's values on one line: ``base → target``, or ``found X`` for one environment."""
    names = labels(f)
    if names.first == "base":
        if f.base is None and f.target is None:
            return ""
        return f"{one_line(f.base) if f.base is not None else '-'} → {one_line(f.target or '-')}"
    return f"found {one_line(f.target)}" if f.target is not None else ""


def _block(f: Finding, indent: int, heading: str, style: str | None) -> list[Line]:
    """A finding in full: its heading, its two values (labelled for a difference or one environment),
    why, remedy and the policy's reason when intended."""
    names = labels(f)
    lines = [heading]
    if names.first == "base" and (f.base is not None or f.target is not None):
        lines += _wrap(names.first, terminal(f.base) if f.base is not None else "-", indent)
        lines += _wrap(names.second, terminal(f.target) if f.target is not None else "-", indent)
    elif names.first != "base":  # one environment: only what it has (no second machine to mark "-")
        lines += [] if f.base is None else _wrap(names.first, terminal(f.base), indent)
        lines += [] if f.target is None else _wrap(names.second, terminal(f.target), indent)
    lines += _wrap("why", terminal(f.message), indent)
    lines += _wrap("remedy", terminal(f.remedy), indent)
    if f.intended:
        lines += _wrap("intended", terminal(f.intended), indent)
    return [(lines[0], style), *((line, None) for line in lines[1:])]


def _consequence_line(f: Finding) -> Line:
    values = _values(f)
    intended = " (intended)" if f.intended else ""
    text = f"    ↳ {f.severity:<7}  {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}"
    return _cut(text + (f": {values}" if values else "") + intended), _STYLE[f.severity]


def _root_heading(g: Group, section: Severity) -> str:
    f = g.root
    own = f"  ({f.severity})" if f.severity != section else ""
    return f"  {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}{own}"


def _full(g: Group, section: Severity, verbose: bool) -> list[Line]:
    """A root cause in full, and its consequences: all in full when verbose, else the first few on one
    line each and a count of the rest."""
    lines = _block(g.root, 4, _root_heading(g, section), _STYLE[g.root.severity])
    if verbose:
        for f in g.consequences:
            heading = f"    ↳ {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}  ({f.severity})"
            lines += _block(f, 8, heading, _STYLE[f.severity])
        return lines
    lines += [_consequence_line(f) for f in g.consequences[:SHOWN_CONSEQUENCES]]
    rest = g.consequences[SHOWN_CONSEQUENCES:]
    if rest:
        lines.append((f"      … and {len(rest)} more ({severity_counts(rest)}): --verbose shows them", None))
    return lines


def _compact(g: Group, section: Severity) -> Line:
    """A root cause on one line, with the number of findings it causes."""
    values = _values(g.root)
    caused = f"  (+{plural(len(g.consequences), 'consequence')})" if g.consequences else ""
    text = _root_heading(g, section) + (f": {values}" if values else "")
    return _cut(text, WIDTH - len(caused)) + caused, _STYLE[g.root.severity]


def _capped(items: list[str], what: str, verbose: bool) -> list[str]:
    if verbose or len(items) <= FLEET_LINES:
        return items
    return [*items[:FLEET_LINES], f"  … and {plural(len(items) - FLEET_LINES, what)} (--verbose)"]


def _fleet(findings: Sequence[Finding], context: ReportContext) -> list[Line]:
    """The fleet's groups: a count line, then each group (capped unless verbose) with its first members."""
    lines: list[Line] = [("", None), (f"FLEET  {fleet_line(context.groups)}", "bold")]
    rows: list[str] = []
    listed = context.groups if context.verbose else context.groups[:FLEET_LINES]
    for group in listed:
        rows.append(f"  {one_line(group_counts(group, findings, context.fail_on))}")
        shown, more = shortened(group.members, len(group.members) if context.verbose else FLEET_MEMBERS)
        if len(group.members) > 1 or group.members[0] != group.name:
            text = ", ".join(one_line(m) for m in shown) + (f", … and {more} more" if more else "")
            rows += textwrap.wrap(text, width=WIDTH, initial_indent="    ", subsequent_indent="    ")
    if len(listed) < len(context.groups):
        rows.append(f"  … and {plural(len(context.groups) - len(listed), 'more group')} (--verbose)")
    if any(len(g.members) > FLEET_MEMBERS for g in listed) and not context.verbose:
        rows.append("  (--verbose or --format json lists every member)")
    return lines + [(row, None) for row in rows]


def layout(findings: Sequence[Finding], context: ReportContext) -> list[Line]:
    """The report's lines (with their styles), ``findings`` in ``Finding.sort_key`` order."""
    summary = summarize(findings, context.fail_on)
    found = groups(findings)
    lines: list[Line] = [(one_line(context.title), "bold")]
    if context.policy is not None:
        lines.append((one_line(context.policy), None))
    lines.append((summary.line(context.fail_on), "bold green" if summary.passed else "bold red"))
    if findings:
        roots = [g.root for g in found]
        consequences = [f for g in found for f in g.consequences]
        counts = f" ({severity_counts(consequences)})" if consequences else ""
        lines.append(
            (
                f"{plural(len(roots), 'root cause')} ({severity_counts(roots)}), "
                f"{plural(len(consequences), 'consequence')}{counts}",
                None,
            )
        )
    if context.groups:
        lines += _fleet(findings, context)
    else:
        machines = [f"  {one_line(line)}" for line in by_machine(findings, context.fail_on)]
        lines += [(line, None) for line in _capped(machines, "more machine", context.verbose)]
    drift = [(one_line(rule), one_line(", ".join(ms))) for rule, ms in machines_by_rule(findings)]
    if drift:
        width = max(len(rule) for rule, _ in drift)
        rows = [f"  {rule:<{width}}  {ms}" for rule, ms in drift]
        lines += [("", None), ("DRIFT BY RULE", "bold")]
        lines += [(row, None) for row in _capped(rows, "more rule", context.verbose)]
    if not findings:
        return [*lines, ("", None), (context.nothing_found, None)]
    # Two lines are kept for the closing count (a blank and the line itself).
    return lines + _body(found, context, budget=MAX_LINES - len(lines) - 2)


def _body(found: Sequence[Group], context: ReportContext, *, budget: int) -> list[Line]:
    """Sections of root causes by their group's worst severity. Unless verbose, within ``budget`` lines:
    as many roots as fit on one line each are shown (ranked, so errors before warnings before infos),
    then the first of them in full while the total still fits (the first always), and a last line counts
    what was left out."""
    sections = by_severity(found)
    order = [(severity, g) for severity, section in sections for g in section]
    full = [_full(g, severity, context.verbose) for severity, g in order]
    if context.verbose:
        return _sections(sections, order, full, len(order))
    compact = [[_compact(g, severity)] for severity, g in order]
    shown = 1
    while shown < len(order) and _size(sections, order, compact, shown + 1) <= budget:
        shown += 1
    blocks = compact[:shown]
    blocks[0] = full[0]
    while shown > 1 and _size(sections, order, blocks, shown) > budget:
        shown -= 1  # the first root in full did not leave room for every one-line root
    for i in range(1, shown):
        trial = [*blocks[:i], full[i], *blocks[i + 1 :]]
        if _size(sections, order, trial, shown) > budget:
            break
        blocks = trial
    body = _sections(sections, order, blocks, shown)
    hidden = [g for _, g in order[shown:]]
    if hidden:
        roots = [g.root for g in hidden]
        consequences = [f for g in hidden for f in g.consequences]
        line = (
            f"… {plural(len(roots), 'more root cause')} not shown ({severity_counts(roots)}), with "
            f"{plural(len(consequences), 'consequence')}: --verbose shows every finding in full."
        )
        body += [("", None), (line, "bold")]
    elif any(blocks[i] is not full[i] for i in range(shown)) or any(
        len(g.consequences) > SHOWN_CONSEQUENCES for _, g in order
    ):
        body += [("", None), ("--verbose shows every finding in full.", None)]
    return body


def _sections(
    sections: Sequence[tuple[Severity, Sequence[Group]]],
    order: Sequence[tuple[Severity, Group]],
    blocks: Sequence[list[Line]],
    shown: int,
) -> list[Line]:
    """The first ``shown`` roots' blocks under their section headings (a section's count is of all its
    roots, shown or not)."""
    total = {severity: len(section) for severity, section in sections}
    body: list[Line] = []
    current: Severity | None = None
    for (severity, _), block in zip(order[:shown], blocks, strict=False):
        if severity != current:
            heading = f"{PLURAL[severity].upper()} ({plural(total[severity], 'root cause')})"
            body += [("", None), (heading, _STYLE[severity])]
            current = severity
        body += block
    return body


def _size(
    sections: Sequence[tuple[Severity, Sequence[Group]]],
    order: Sequence[tuple[Severity, Group]],
    blocks: Sequence[list[Line]],
    shown: int,
) -> int:
    """Lines taken by the first ``shown`` roots (``blocks``) with their section headings."""
    return sum(len(b) for b in blocks[:shown]) + 2 * len({severity for severity, _ in order[:shown]})


class TextFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        lines = layout(findings, context)
        if context.color:
            return _rich(lines)
        return "\n".join(text for text, _ in lines) + "\n"


def _rich(lines: Sequence[Line]) -> str:
    import io

    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=WIDTH + 20)
    for text, style in lines:
        # Text, never str: rich parses a str as console markup ("[bold]" in a label).
        console.print(Text(text, style=style or ""), soft_wrap=True)
    return buffer.getvalue()
