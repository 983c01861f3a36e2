"""JSON report: a documented, stable structure for machines.

::

    {
      "report": "envcheck", "version": 1,
      "title": "...", "fail_on": "error", "result": "pass" | "fail",
      "policy": "policy: none",            (only when the caller says which policy applied)
      "summary": {"total": 0, "error": 0, "warning": 0, "info": 0, "intended": 0, "failing": 0},
      "findings": [
        {"rule": "ENV-TORCH-VARIANT", "severity": "error", "subject": "torch",
         "base": "cu130", "target": "cpu", "message": "...", "remedy": "...",
         "intended": null | "reason", "machine": null | "prod-1", "fails": true}
      ]
    }

Keys never disappear (absent values are ``null``); new keys may be added within ``version`` 1.

Strings keep their exact value; the characters a terminal acts on (DEL, C1 controls, bidirectional
overrides) and lone surrogates (undecodable file names, PEP 383) are written as ``\\uXXXX`` escapes, so the
report is valid UTF-8, ``json.loads`` gives back what the manifest held, and ``cat report.json`` is inert.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from envcheck.diff.finding import Finding, at_or_above
from envcheck.escape import json_text
from envcheck.report.interface import ReportContext, ReportFormat, summarize

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
            },
            "findings": [
                {
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
                }
                for f in findings
            ],
        }
        return json_text(json.dumps(data, indent=2, ensure_ascii=False)) + "\n"
