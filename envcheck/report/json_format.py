"""JSON report: a documented, stable structure for machines.

::

    {
      "report": "envcheck", "version": 1,
      "title": "...", "fail_on": "error", "result": "pass" | "fail",
      "policy": "policy: none",            (only when the caller says which policy applied)
      "summary": {"total": 0, "error": 0, "warning": 0, "info": 0, "intended": 0, "failing": 0,
                  "roots": 0, "consequences": 0},
      "findings": [
        {"id": "ENV-TORCH-VARIANT:torch", "rule": "ENV-TORCH-VARIANT", "severity": "error",
         "subject": "torch", "base": "cu130", "target": "cpu", "message": "...", "remedy": "...",
         "intended": null | "reason", "machine": null | "prod-1", "fails": true,
         "caused_by": null | "ENV-VAR-CHANGED:LD_LIBRARY_PATH",
         "kind": "difference" | "single" | "verify" | "lock" | "cluster" | null,
         "reference": null | "...", "found": null | "...",
         "actions": [{"kind": "install", "pins": [["torch", "2.13.0+cpu"]], "index_url": "...", ...}]}
      ]
    }

A fleet report (several targets) adds ``"fleet": {"machines", "identical_to_base", "drifting",
"drift_groups", "line"}`` and ``"groups": [{"name", "identical_to_base", "machines", "findings", "result",
"members": [every machine]}]``: machines that share an environment are one group, and each of its
findings names the group in ``machine``.

Findings are in ``Finding.sort_key`` order, flat: a consequence names its root cause's ``id`` in
``caused_by`` (``null`` for a root cause; the id is ``RULE:subject``, ``@machine`` in a fleet).
``summary.roots`` + ``summary.consequences`` = ``summary.total``. For a finding about one environment
(``kind`` ``single``: doctor's, or the target's own in a diff) ``found`` is what was found there and
``reference`` what it was checked against; ``base`` and ``target`` keep the same two values, as before.
``actions`` is the remedy as data (``envcheck.core.remedy``: each action's ``kind`` and its fields; empty
where the remedy is advice, and for a consequence, whose root's remedy fixes it).

Keys never disappear (absent values are ``null``); new keys may be added within ``version`` 1.

Strings keep their exact value; the characters a terminal acts on (DEL, C1 controls, bidirectional
overrides) and lone surrogates (undecodable file names, PEP 383) are written as ``\\uXXXX`` escapes, so the
report is valid UTF-8, ``json.loads`` gives back what the manifest held, and ``cat report.json`` is inert.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from envcheck.core.escape import json_text
from envcheck.core.findings import Finding, at_or_above
from envcheck.core.remedy import as_data
from envcheck.report.interface import ReportContext, ReportFormat, fleet_line, rule_kind, summarize

REPORT_VERSION = 1


class JsonFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        data: dict[str, object] = {
            "report": "envcheck",
            "version": REPORT_VERSION,
            "title": context.title,
            "fail_on": context.fail_on,
            "result": "pass" if summary.passed else "fail",
        }
        if context.policy is not None:
            data["policy"] = context.policy
        data |= {
            "summary": {
                "total": summary.total,
                "error": summary.error,
                "warning": summary.warning,
                "info": summary.info,
                "intended": summary.intended,
                "failing": summary.failing,
                "roots": summary.roots,
                "consequences": summary.consequences,
            },
            "findings": [_finding(f, context) for f in findings],
        }
        if context.groups:
            data |= _fleet(findings, context)
        return json_text(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"


def _fleet(findings: Sequence[Finding], context: ReportContext) -> dict[str, object]:
    """A fleet report's ``fleet`` counts and ``groups``, every member listed."""
    drifting = [g for g in context.groups if not g.identical_to_base]
    return {
        "fleet": {
            "machines": sum(g.size for g in context.groups),
            "identical_to_base": sum(g.size for g in context.groups if g.identical_to_base),
            "drifting": sum(g.size for g in drifting),
            "drift_groups": len(drifting),
            "line": fleet_line(context.groups, context.member),
        },
        "groups": [
            {
                "name": g.name,
                "identical_to_base": g.identical_to_base,
                "machines": len(g.members),
                "findings": sum(f.machine == g.name for f in findings),
                "result": "fail"
                if any(f.machine == g.name and at_or_above(f, context.fail_on) for f in findings)
                else "pass",
                "members": list(g.members),
            }
            for g in context.groups
        ],
    }


def _finding(f: Finding, context: ReportContext) -> dict[str, object]:
    kind = rule_kind(f.rule)
    single = kind == "single"
    return {
        "id": f.key,
        "rule": f.rule,
        "severity": f.severity,
        "subject": f.subject,
        "base": f.base,
        "target": f.target,
        "message": f.message,
        "remedy": f.remedy,
        "intended": f.intended,
        "machine": f.machine,
        "fails": at_or_above(f, context.fail_on),
        "caused_by": f.caused_by,
        "kind": kind,
        "reference": f.base if single else None,
        "found": f.target if single else None,
        "actions": [as_data(a) for a in f.actions],
    }
