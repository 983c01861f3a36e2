"""JUnit XML: one test case per root cause, failing when the root cause or a finding it causes is at or
above --fail-on, with those consequences listed in the failure text.

CI systems show each case as a test. A root cause below the threshold (a warning under ``--fail-on
error``, an intended difference) is a passing case whose ``system-out`` holds it, so it stays visible.
Every checked rule that found nothing at all is a passing case named by its id, so CI lists what was
checked; a rule whose findings are all consequences of another has no case of its own (it is not "passing":
its findings are in its root cause's case). A root cause's case is named by its id (``RULE:subject``,
``@machine`` in a fleet), its class by the rule's family prefix (``envcheck.ENV``, ``envcheck.VERIFY``).
A fleet report adds a ``fleet`` property (``N machines identical to the base; M machines in K groups``) and
a ``group NAME`` property per machine group naming its machines (the first ``FLEET_MEMBERS``).

Every string from a finding or the title goes through ``escape.xml`` before ElementTree sees it: a character
XML 1.0 forbids (a NUL, an ESC, a lone surrogate) would make a file CI refuses to parse, and CI prints
failure texts in its log, so terminal controls are shown as ``\\xNN`` too. ElementTree escapes the rest.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Sequence

from envcheck.core.escape import xml
from envcheck.core.findings import SEVERITY_RANK, Finding
from envcheck.report.interface import (
    Group,
    ReportContext,
    ReportFormat,
    fleet_line,
    groups,
    labels,
    plural,
    shortened,
    summarize,
)

# Fleet reports: members of a machine group named in its property (JSON lists them all).
FLEET_MEMBERS = 50


def _describe(f: Finding, indent: str = "") -> str:
    """A finding as text for a ``failure`` or ``system-out`` (unescaped: the caller escapes it once)."""
    names = labels(f)
    lines = [f"[{f.severity}] {f.rule}: {f.subject}" + (f" on {f.machine}" if f.machine else "")]
    if f.base is not None or f.target is not None:
        lines.append(f"  {names.first}: {f.base if f.base is not None else '-'}")
        lines.append(f"  {names.second}: {f.target if f.target is not None else '-'}")
    lines.append(f"  why: {f.message}")
    lines.append(f"  remedy: {f.remedy}")
    if f.intended:
        lines.append(f"  intended: {f.intended}")
    return "\n".join(indent + line for line in lines)


def _group_text(g: Group) -> str:
    text = _describe(g.root)
    if g.consequences:
        text += f"\n\nIt causes {plural(len(g.consequences), 'finding')}:\n\n"
        text += "\n\n".join(_describe(f, "    ") for f in g.consequences)
    return text


def _classname(rule: str) -> str:
    return xml(f"envcheck.{rule.split('-', 1)[0]}")


class JunitFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        found = groups(findings)
        with_findings = {f.rule for f in findings}
        quiet_rules = sorted(set(context.rules) - with_findings)
        summary = summarize(findings, context.fail_on)
        failed = [g for g in found if g.failing(context.fail_on)]
        tests = str(len(found) + len(quiet_rules))
        title = xml(context.title)
        suites = ET.Element("testsuites", name=title, tests=tests, failures=str(len(failed)))
        suite = ET.SubElement(
            suites, "testsuite", name=title, tests=tests, failures=str(len(failed)), errors="0", skipped="0"
        )
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="fail_on", value=context.fail_on)
        line = f"{summary.line(context.fail_on)}; {summary.causes_line()}"
        ET.SubElement(props, "property", name="summary", value=line)
        if context.policy is not None:
            ET.SubElement(props, "property", name="policy", value=xml(context.policy))
        if context.groups:
            ET.SubElement(props, "property", name="fleet", value=fleet_line(context.groups, context.member))
        for group in context.groups:  # the machines behind each case's @group
            shown, more = shortened(group.members, FLEET_MEMBERS)
            value = ", ".join(shown) + (f", … and {more} more" if more else "")
            ET.SubElement(props, "property", name=xml(f"group {group.name}"), value=xml(value))
        for g in found:
            case = ET.SubElement(suite, "testcase", classname=_classname(g.root.rule), name=xml(g.root.key))
            failing = g.failing(context.fail_on)
            if failing:
                worst = min(failing, key=lambda f: SEVERITY_RANK[f.severity])
                caused = f" (+{plural(len(g.consequences), 'consequence')})" if g.consequences else ""
                failure = ET.SubElement(
                    case,
                    "failure",
                    type=worst.severity,
                    message=xml(f"{g.root.subject}: {g.root.message}"[:480] + caused),
                )
                failure.text = xml(_group_text(g))
            else:
                out = ET.SubElement(case, "system-out")
                out.text = xml(_group_text(g))
        for rule in quiet_rules:
            ET.SubElement(suite, "testcase", classname=_classname(rule), name=xml(rule))
        ET.indent(suites, space="  ")
        body = ET.tostring(suites, encoding="unicode")
        return '<?xml version="1.0" encoding="UTF-8"?>\n' + body + "\n"
