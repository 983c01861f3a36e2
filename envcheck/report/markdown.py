"""Markdown report, sized for a pull-request comment: root causes as tables (errors, then warnings, info
folded away), each root's consequences folded under it in a ``<details>`` block.

A pull-request comment renders HTML: every string from a finding or the title goes through
``escape.markdown``, so ``<script>``, ``<!--`` or ``</details>`` in a manifest are shown as text and cannot
hide the rest of the comment. The only HTML in the report is envcheck's own (``<details>``, ``<summary>``,
``<br>``); a ``<summary>`` is raw HTML, so the finding strings it quotes (the root's rule and subject) are
HTML-escaped there, on one line.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence

from envcheck.core.escape import markdown, one_line, unlinked
from envcheck.core.findings import Finding, Severity
from envcheck.report.interface import (
    Group,
    ReportContext,
    ReportFormat,
    by_machine,
    by_severity,
    fleet_line,
    groups,
    is_fleet,
    labels,
    machines_by_rule,
    plural,
    severity_counts,
    shortened,
    summarize,
)

INFO_ROWS = 50
# Fleet reports: members of a machine group named in its row (JSON lists them all).
FLEET_MEMBERS = 20
_HEADINGS: dict[Severity, str] = {"error": "Errors", "warning": "Warnings", "info": "Info"}


# A catalog rule id (``ENV-TORCH-VARIANT``) is shown as code; anything else is escaped like data.
_RULE_ID = re.compile(r"[A-Z0-9][A-Z0-9-]*")


def cell(text: str | None) -> str:
    """A table cell or inline text: escaped (``escape.markdown``), line breaks as <br>, empty as an em
    dash."""
    if not text:
        return "—"
    return "<br>".join(markdown(line) for line in text.replace("\r\n", "\n").split("\n"))


def remedy_cell(text: str | None) -> str:
    """A remedy's cell: each command it quotes between backticks as a code span, so it copies exactly as
    written (GitHub pings and links nothing inside code, so it needs no invisible joiner there), and the
    prose around it as ``cell``. Inside the span only what could break it is changed: a ``|`` (GFM tables
    split cells before inline code) is ``\\|``, control characters and newlines are visible. A remedy whose
    backticks do not pair (a hostile value holding one) is all prose."""
    if not text:
        return "—"
    parts = text.split("`")
    if len(parts) % 2 == 0:
        return cell(text)
    shown = []
    for i, part in enumerate(parts):
        if i % 2 == 0:
            shown.append(cell(part) if part else "")
        elif part.strip():
            shown.append("`" + one_line(part).replace("|", "\\|") + "`")
    return "".join(shown)


def rule_code(rule: str) -> str:
    """A rule id as inline code when it has the catalog's shape (nothing in it can end the code span)."""
    return f"`{rule}`" if _RULE_ID.fullmatch(rule) else cell(rule)


def _html_text(text: str) -> str:
    """Finding text inside raw HTML (a ``<summary>``): on one line, ``<``, ``>`` and ``&`` as entities. No
    tag is added around it: a summary holds text only, which is all a reader needs to find the root."""
    return html.escape(unlinked(one_line(text)))


class MarkdownFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        found = groups(findings)
        lines = [f"## {cell(context.title)}", ""]
        if context.policy is not None:
            lines += [cell(context.policy), ""]
        lines += [f"**{summary.line(context.fail_on)}**", ""]
        if findings:
            roots = [g.root for g in found]
            consequences = [f for g in found for f in g.consequences]
            counts = f" ({severity_counts(consequences)})" if consequences else ""
            lines += [
                f"{plural(len(roots), 'root cause')} ({severity_counts(roots)}), "
                f"{plural(len(consequences), 'consequence')}{counts}",
                "",
            ]
        machines = by_machine(findings, context.fail_on)
        if context.groups:
            lines += self._fleet(findings, context)
        if machines:
            if not context.groups:  # a fleet's groups are listed above, with their counts
                lines += [f"- {cell(line)}" for line in machines] + [""]
            lines += [f"| Rule | {context.member.capitalize()}s |", "|---|---|"]
            lines += [
                f"| {rule_code(rule)} | {cell(', '.join(ms))} |" for rule, ms in machines_by_rule(findings)
            ]
            lines.append("")
        if not findings:
            lines += [context.nothing_found, ""]
        fleet = is_fleet(findings)
        for severity, section in by_severity(found):
            heading = f"{_HEADINGS[severity]} ({plural(len(section), 'root cause')})"
            if severity == "info":
                # GitHub refuses comments over 65,536 characters: info is cut short, never the failures.
                body = self._section(section[:INFO_ROWS], fleet, more=len(section) - INFO_ROWS)
                lines += ["<details>", f"<summary>{heading}</summary>", "", *body, "", "</details>", ""]
            else:
                lines += [f"### {heading}", "", *self._section(section, fleet), ""]
        return "\n".join(lines).rstrip("\n") + "\n"

    @staticmethod
    def _fleet(findings: Sequence[Finding], context: ReportContext) -> list[str]:
        """The fleet's groups as a table: each group's machines (the first ``FLEET_MEMBERS``) and counts."""
        member = context.member.capitalize()
        lines = [f"**Fleet:** {fleet_line(context.groups, context.member)}", ""]
        lines.append(f"| Group | {member}s | Result | Members |")
        lines.append("|---|---|---|---|")
        for group in context.groups:
            shown, more = shortened(group.members, FLEET_MEMBERS)
            members = ", ".join(cell(m) for m in shown) + (
                f", … and {more} more (see `--format json`)" if more else ""
            )
            same = " (identical to the base)" if group.identical_to_base else ""
            counts = summarize([f for f in findings if f.machine == group.name], context.fail_on).counts()
            lines.append(f"| {cell(group.name)} | {group.size}{same} | {counts} | {members} |")
        return [*lines, ""]

    def _section(self, section: Sequence[Group], fleet: bool, more: int = 0) -> list[str]:
        """The roots' table (``more``: how many roots were cut from it), then each root's consequences
        folded in a ``<details>`` block."""
        lines = self._table([g.root for g in section], fleet, section)
        if more > 0:
            lines.append(f"\n… and {more} more (see `--format json`).")
        for number, g in enumerate(section, 1):
            if g.consequences:
                lines += ["", *self._consequences(number, g, fleet)]
        return lines

    def _consequences(self, number: int, g: Group, fleet: bool) -> list[str]:
        infos = [f for f in g.consequences if f.severity == "info"]
        rows = [f for f in g.consequences if f.severity != "info"] + infos[:INFO_ROWS]
        summary = (
            f"<summary>{number}. {_html_text(g.root.rule)} {_html_text(g.root.subject)}: "
            f"{plural(len(g.consequences), 'consequence')} ({severity_counts(g.consequences)})</summary>"
        )
        table = self._table(rows, fleet)
        if len(infos) > INFO_ROWS:
            table.append(f"\n… and {len(infos) - INFO_ROWS} more info (see `--format json`).")
        return ["<details>", summary, "", *table, "", "</details>"]

    @staticmethod
    def _table(findings: Sequence[Finding], fleet: bool, section: Sequence[Group] = ()) -> list[str]:
        """One row per finding. A table of findings about one environment names its values Reference and
        Found; a mixed table keeps Base and Target and labels a single-environment finding's cells."""
        single = [labels(f).first == "reference" for f in findings]
        first, second = ("Reference", "Found") if all(single) else ("Base", "Target")
        head = ["Rule", *(["Machine"] if fleet else []), "Subject", first, second, "Why", "Remedy"]
        rows = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for i, f in enumerate(findings):
            mark = single[i] and not all(single)
            why = cell(f.message) + (f"<br>**Intended:** {cell(f.intended)}" if f.intended else "")
            if i < len(section) and section[i].consequences:
                why += f"<br>**Causes {plural(len(section[i].consequences), 'finding')}** (below: {i + 1}.)"
            values = [
                rule_code(f.rule),
                *([cell(f.machine)] if fleet else []),
                cell(f.subject),
                ("*reference:* " if mark and f.base else "") + cell(f.base),
                ("*found:* " if mark and f.target else "") + cell(f.target),
                why,
                remedy_cell(f.remedy),
            ]
            rows.append("| " + " | ".join(values) + " |")
        return rows
