"""Markdown report, sized for a pull-request comment: errors and warnings as tables, info folded away.

A pull-request comment renders HTML: every string from a finding or the title goes through
``escape.markdown``, so ``<script>``, ``<!--`` or ``</details>`` in a manifest are shown as text and cannot
hide the rest of the comment. The only HTML in the report is envcheck's own (``<details>``, ``<summary>``,
``<br>``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from envcheck.diff.finding import Finding, Severity
from envcheck.escape import markdown
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


# A catalog rule id (``ENV-TORCH-VARIANT``) is shown as code; anything else is escaped like data.
_RULE_ID = re.compile(r"[A-Z0-9][A-Z0-9-]*")


def cell(text: str | None) -> str:
    """A table cell or inline text: escaped (``escape.markdown``), line breaks as <br>, empty as an em
    dash."""
    if not text:
        return "—"
    return "<br>".join(markdown(line) for line in text.replace("\r\n", "\n").split("\n"))


def rule_code(rule: str) -> str:
    """A rule id as inline code when it has the catalog's shape (nothing in it can end the code span)."""
    return f"`{rule}`" if _RULE_ID.fullmatch(rule) else cell(rule)


class MarkdownFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        lines = [f"## {cell(context.title)}", ""]
        if context.policy is not None:
            lines += [cell(context.policy), ""]
        lines += [f"**{summary.line(context.fail_on)}**", ""]
        machines = by_machine(findings, context.fail_on)
        if machines:
            lines += [f"- {cell(line)}" for line in machines] + [""]
            lines += ["| Rule | Machines |", "|---|---|"]
            lines += [
                f"| {rule_code(rule)} | {cell(', '.join(ms))} |" for rule, ms in machines_by_rule(findings)
            ]
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
                rule_code(f.rule),
                *([cell(f.machine)] if fleet else []),
                cell(f.subject),
                cell(f.base),
                cell(f.target),
                cell(f.message) + (f"<br>**Intended:** {cell(f.intended)}" if f.intended else ""),
                cell(f.remedy),
            ]
            rows.append("| " + " | ".join(values) + " |")
        return rows
