"""JUnit XML: one test case per rule checked, failing when the rule has a finding at or above --fail-on.

CI systems show each rule as a test: rules with nothing to say pass; warnings and intended findings below
the threshold are attached to the test case's ``system-out`` so they stay visible.

Every string from a finding or the title goes through ``escape.xml`` before ElementTree sees it: a character
XML 1.0 forbids (a NUL, an ESC, a lone surrogate) would make a file CI refuses to parse, and CI prints
failure texts in its log, so terminal controls are shown as ``\\xNN`` too. ElementTree escapes the rest.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from envcheck.diff.finding import Finding, at_or_above
from envcheck.escape import xml
from envcheck.report.interface import ReportContext, ReportFormat, summarize


def _describe(f: Finding) -> str:
    """A finding as the text of a ``failure`` or ``system-out`` (unescaped: the caller escapes it once)."""
    lines = [f"[{f.severity}] {f.subject}" + (f" on {f.machine}" if f.machine else "")]
    if f.base is not None or f.target is not None:
        lines.append(f"  base: {f.base if f.base is not None else '-'}")
        lines.append(f"  target: {f.target if f.target is not None else '-'}")
    lines.append(f"  why: {f.message}")
    lines.append(f"  remedy: {f.remedy}")
    if f.intended:
        lines.append(f"  intended: {f.intended}")
    return "\n".join(lines)


def _classname(rule: str) -> str:
    return xml(f"envcheck.{rule.split('-', 1)[0]}")


class JunitFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        by_rule: dict[str, list[Finding]] = {}
        for f in findings:
            by_rule.setdefault(f.rule, []).append(f)
        rule_ids = sorted(set(context.rules) | set(by_rule))
        summary = summarize(findings, context.fail_on)
        failed_rules = [
            r for r in rule_ids if any(at_or_above(f, context.fail_on) for f in by_rule.get(r, []))
        ]
        title = xml(context.title)
        suites = ET.Element(
            "testsuites", name=title, tests=str(len(rule_ids)), failures=str(len(failed_rules))
        )
        suite = ET.SubElement(
            suites,
            "testsuite",
            name=title,
            tests=str(len(rule_ids)),
            failures=str(len(failed_rules)),
            errors="0",
            skipped="0",
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="fail_on", value=context.fail_on)
        ET.SubElement(props, "property", name="summary", value=summary.line(context.fail_on))
        if context.policy is not None:
            ET.SubElement(props, "property", name="policy", value=xml(context.policy))
        for rule in rule_ids:
            case = ET.SubElement(suite, "testcase", classname=_classname(rule), name=xml(rule))
            own = by_rule.get(rule, [])
            failing = [f for f in own if at_or_above(f, context.fail_on)]
            others = [f for f in own if not at_or_above(f, context.fail_on)]
            if failing:
                worst = failing[0]
                failure = ET.SubElement(
                    case,
                    "failure",
                    type=worst.severity,
                    message=xml(f"{len(failing)} finding(s): {worst.subject}: {worst.message}"[:500]),
                )
                failure.text = xml("\n\n".join(_describe(f) for f in failing))
            if others:
                out = ET.SubElement(case, "system-out")
                out.text = xml("\n\n".join(_describe(f) for f in others))
        ET.indent(suites, space="  ")
        body = ET.tostring(suites, encoding="unicode")
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
