"""Text report for people: findings grouped by severity, one block per finding.

Plain text unless ``color`` is set (the CLI sets it for a terminal without ``NO_COLOR``); only then is rich
imported, so piping a report stays fast and free of escape codes.

Every string from a finding or the title is escaped (``escape.terminal`` / ``one_line``) before it is
laid out: a manifest's escape sequences print as ``\\x1b…`` and never reach the terminal. The rich path
hands rich only ``Text`` objects, so ``[bold]`` in a label is shown, never parsed as console markup.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence

from envcheck.diff.finding import Finding, Severity
from envcheck.escape import one_line, terminal
from envcheck.report.interface import (
    PLURAL,
    ReportContext,
    ReportFormat,
    Summary,
    by_machine,
    by_severity,
    machines_by_rule,
    summarize,
)

WIDTH = 100
_STYLE: dict[Severity, str] = {"error": "bold red", "warning": "yellow", "info": "cyan"}


def _wrap(label: str, text: str) -> list[str]:
    """``text`` (already escaped) wrapped under ``label``; textwrap turns tabs and newlines into spaces."""
    return textwrap.wrap(
        text,
        width=WIDTH,
        initial_indent=f"    {label:<9}",
        subsequent_indent=" " * 13,
        break_long_words=False,
        break_on_hyphens=False,
    ) or [f"    {label}"]


def _short(value: str | None, limit: int = 96) -> str:
    """A base/target value for a table cell, escaped: long lists are cut (the why column repeats them)."""
    if value is None:
        return "-"
    value = one_line(value)
    return value if len(value) <= limit else value[: limit - 1] + "…"


def _heading(f: Finding) -> str:
    where = f"  [{one_line(f.machine)}]" if f.machine else ""
    return f"  {one_line(f.rule)}  {one_line(f.subject)}{where}"


def _block(f: Finding) -> list[str]:
    lines = [_heading(f)]
    if f.base is not None or f.target is not None:
        lines += _wrap("base", terminal(f.base) if f.base is not None else "-")
        lines += _wrap("target", terminal(f.target) if f.target is not None else "-")
    lines += _wrap("why", terminal(f.message))
    lines += _wrap("remedy", terminal(f.remedy))
    if f.intended:
        lines += _wrap("intended", terminal(f.intended))
    return lines


class TextFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        if context.color:
            return self._rich(findings, context, summary)
        lines = [one_line(context.title)]
        if context.policy is not None:
            lines.append(one_line(context.policy))
        lines.append(summary.line(context.fail_on))
        lines += [f"  {one_line(line)}" for line in by_machine(findings, context.fail_on)]
        drift = [(one_line(rule), one_line(", ".join(ms))) for rule, ms in machines_by_rule(findings)]
        if drift:
            width = max(len(rule) for rule, _ in drift)
            lines += ["", "DRIFT BY RULE", *(f"  {rule:<{width}}  {ms}" for rule, ms in drift)]
        if not findings:
            lines += ["", "No differences that matter."]
        for severity, group in by_severity(findings):
            lines += ["", f"{PLURAL[severity].upper()} ({len(group)})"]
            for f in group:
                lines += _block(f)
        return "\n".join(lines) + "\n"

    @staticmethod
    def _rich(findings: Sequence[Finding], context: ReportContext, summary: Summary) -> str:
        import io

        from rich.console import Console
        from rich.table import Table
        from rich.text import Text

        buffer = io.StringIO()
        console = Console(file=buffer, force_terminal=True, color_system="standard", width=WIDTH + 20)
        console.print(Text(one_line(context.title), style="bold"))
        if context.policy is not None:
            console.print(Text(one_line(context.policy)))
        console.print(
            Text(summary.line(context.fail_on), style="bold green" if summary.passed else "bold red")
        )
        for line in by_machine(findings, context.fail_on):
            console.print(Text(f"  {one_line(line)}"))
        if not findings:
            console.print("No differences that matter.")
        for severity, group in by_severity(findings):
            table = Table(
                title=f"{PLURAL[severity].upper()} ({len(group)})",
                title_style=_STYLE[severity],
                title_justify="left",
                show_lines=True,
                expand=True,
            )
            table.add_column("rule", style=_STYLE[severity], no_wrap=True)
            table.add_column("subject", max_width=28, overflow="fold")
            table.add_column("base → target", max_width=32, overflow="fold")
            table.add_column("why / remedy", min_width=40, ratio=1)
            for f in group:
                # Text, never str: rich parses a str cell as console markup ("[bold]" in a label).
                change = Text(f"{_short(f.base)}\n→ {_short(f.target)}")
                detail = Text(terminal(f.message))
                detail.append("\nremedy: ", style="bold")
                detail.append(terminal(f.remedy))
                if f.intended:
                    detail.append("\nintended: ", style="bold green")
                    detail.append(terminal(f.intended))
                subject = Text(one_line(f.subject) + (f"\n[{one_line(f.machine)}]" if f.machine else ""))
                table.add_row(Text(one_line(f.rule)), subject, change, detail)
            console.print(table)
        return buffer.getvalue()
