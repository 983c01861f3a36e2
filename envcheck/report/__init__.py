"""Formatters: each returns a ``str``; only the CLI writes.

``render(findings, fmt, title=..., fail_on=...)`` is the one entry point shared by diff, doctor, verify and
gate. The format modules (and rich, for coloured text) are imported only when a report is rendered.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    from envcheck.diff.finding import Finding, Severity

FormatName = Literal["text", "json", "markdown", "junit"]
FORMATS: tuple[FormatName, ...] = ("text", "json", "markdown", "junit")


def render(
    findings: Sequence[Finding],
    fmt: FormatName,
    *,
    title: str,
    fail_on: Severity,
    color: bool = False,
    rules: Sequence[str] | None = None,
    policy: str | None = None,
) -> str:
    """The report in ``fmt``, findings in ``Finding.sort_key`` order (the same input gives the same bytes).

    ``rules`` are the rule ids that were checked: JUnit writes one test case for each (passing when it
    produced nothing at or above ``fail_on``). ``None`` means envcheck's diff/doctor catalog plus every rule
    that has a finding; a producer with its own ids (``VERIFY-…``) passes them. ``color`` only affects text.
    ``policy`` is one line naming the policy applied (``policy: none``): every format shows it (text and
    Markdown as a line, JSON as ``"policy"``, JUnit as a test-suite property); ``None`` leaves it out.

    Every string that came from a manifest or a finding (title included) is escaped for the format:
    nothing in a report can drive a terminal, inject HTML or make the XML ill-formed, and every report
    encodes as UTF-8 (lone surrogates are shown as ``\\uXXXX``). Raises ``ValueError`` for an unknown
    format, nothing else.
    """
    from envcheck.report.interface import ReportContext, format_for

    ordered = sorted(findings, key=lambda f: f.sort_key())
    if rules is None:
        from envcheck.diff.catalog import rule_ids

        rules = rule_ids()
    context = ReportContext(title=title, fail_on=fail_on, color=color, rules=tuple(rules), policy=policy)
    return format_for(fmt).render(ordered, context)


__all__ = ["FORMATS", "FormatName", "render"]
