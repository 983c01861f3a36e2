"""Markdown report, sized for a pull-request comment: errors and warnings as tables, info folded away."""

from __future__ import annotations

from collections.abc import Sequence

from envcheck.diff.finding import Finding, Severity
from envcheck.report.interface import (
    ReportContext,
    ReportFormat,
    by_machine,
    by_severity,
    is_fleet,
    machines_by_rule,
    summarize,
)

INFO_ROWS = 50
_HEADINGS: dict[Severity, str] = {"error": "Errors", "warning": "Warnings", "info": "Info"}


def cell(text: str | None) -> str:
    """A table cell: pipes escaped, newlines as <br>, empty as an em dash."""
    if not text:
        return "—"
    return text.replace("\\", "\\\\").replace("|", "\\|").replace("\r", "").replace("\n", "<br>")


class MarkdownFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        lines = [f"## {cell(context.title)}", "", f"**{summary.line(context.fail_on)}**", ""]
        machines = by_machine(findings, context.fail_on)
        if machines:
            lines += [f"- {cell(line)}" for line in machines] + [""]
            lines += ["| Rule | Machines |", "|---|---|"]
            lines += [f"| `{rule}` | {cell(', '.join(ms))} |" for rule, ms in machines_by_rule(findings)]
            lines.append("")
        if not findings:
            lines += ["No differences that matter.", ""]
        fleet = is_fleet(findings)
        for severity, group in by_severity(findings):
            heading = f"{_HEADINGS[severity]} ({len(group)})"
            if severity == "info":
                # GitHub refuses comments over 65,536 characters: info is cut short, never the failures.
                table = self._table(group[:INFO_ROWS], fleet)
                if len(group) > INFO_ROWS:
                    table.append(f"\n… and {len(group) - INFO_ROWS} more (see `--format json`).")
                lines += ["<details>", f"<summary>{heading}</summary>", "", *table, "", "</details>", ""]
            else:
                lines += [f"### {heading}", "", *self._table(group, fleet), ""]
        return "\n".join(lines).rstrip("\n") + "\n"

    @staticmethod
    def _table(group: Sequence[Finding], fleet: bool) -> list[str]:
        head = ["Rule", *(["Machine"] if fleet else []), "Subject", "Base", "Target", "Why", "Remedy"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for f in group:
            values = [
                f"`{f.rule}`",
                *([cell(f.machine)] if fleet else []),
                cell(f.subject),
                cell(f.base),
                cell(f.target),
                cell(f.message) + (f"<br>**Intended:** {cell(f.intended)}" if f.intended else ""),
                cell(f.remedy),
            ]
            rows.append("| " + " | ".join(values) + " |")
        return rows
