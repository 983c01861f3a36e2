"""HTML report: one self-contained file to open in a browser, mail to a customer or attach to a ticket.

One file, nothing external: the stylesheet and a few lines of script are inline, and a
Content-Security-Policy forbids every load from anywhere (``default-src 'none'``); the inline style and
script run because the policy names their sha256, so any other script in the page would not run even if
it got in. The report reads the same without the script: root causes are ``<details>`` blocks, open for
errors and warnings, with their consequences nested inside; the script adds only the search box (a plain
substring filter over the findings, which ``report.html#q=words`` fills in) and opens every block before
printing. A print stylesheet drops the
search box and the colours' backgrounds.

A fleet report (findings with ``Finding.machine``) leads with a drift matrix: one row per machine (or
group of machines that share one environment, ``ReportContext.groups``), one column per rule, the worst
severity in each cell; then the members of each group.

Every string from a finding, the title or the policy is data from a manifest: ``escape.terminal`` shows
its control characters as ``\\xNN`` and ``html.escape(quote=True)`` makes ``<``, ``>``, ``&`` and quotes
entities, so nothing in a manifest can add markup, end an attribute or run script. A command in backticks
(in a remedy or a message) is shown as ``<code>``, its text escaped the same way.
"""

from __future__ import annotations

import base64
import hashlib
import html
from collections.abc import Sequence

from envcheck.core.escape import terminal
from envcheck.core.findings import SEVERITY_RANK, Finding, MachineGroup, Severity, at_or_above
from envcheck.report.interface import (
    Group,
    ReportContext,
    ReportFormat,
    by_severity,
    groups,
    is_fleet,
    labels,
    plural,
    severity_counts,
    summarize,
)

_HEADINGS: dict[Severity, str] = {"error": "Errors", "warning": "Warnings", "info": "Info"}

_STYLE = """
:root { --error: #b42318; --error-bg: #fef3f2; --warning: #93370d; --warning-bg: #fffaeb;
  --info: #175cd3; --info-bg: #eff8ff; --pass: #067647; --pass-bg: #ecfdf3; --line: #d0d5dd;
  --muted: #475467; --text: #101828; }
* { box-sizing: border-box; }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif;
  color: var(--text); background: #f9fafb; margin: 0; }
header { background: #fff; border-bottom: 1px solid var(--line); padding: 20px 32px 16px; }
main { padding: 16px 32px 40px; max-width: 1200px; }
h1 { font-size: 22px; margin: 0 0 6px; overflow-wrap: anywhere; }
h2 { font-size: 17px; margin: 24px 0 10px; }
.policy, .causes { color: var(--muted); margin: 2px 0; overflow-wrap: anywhere; }
.verdict { display: inline-block; font-weight: 700; padding: 4px 12px; border-radius: 6px;
  margin: 8px 0 4px; }
.verdict.fail { color: var(--error); background: var(--error-bg); border: 1px solid var(--error); }
.verdict.pass { color: var(--pass); background: var(--pass-bg); border: 1px solid var(--pass); }
.search { margin-top: 10px; display: flex; gap: 12px; align-items: center; }
.search input { font: inherit; padding: 6px 10px; width: min(420px, 100%); border: 1px solid var(--line);
  border-radius: 6px; }
.search output { color: var(--muted); }
.badge { display: inline-block; min-width: 64px; text-align: center; font-size: 12px; font-weight: 700;
  text-transform: uppercase; letter-spacing: .03em; padding: 1px 8px; border-radius: 999px;
  border: 1px solid currentColor; }
.badge.error { color: var(--error); background: var(--error-bg); }
.badge.warning { color: var(--warning); background: var(--warning-bg); }
.badge.info { color: var(--info); background: var(--info-bg); }
.badge.intended { color: var(--pass); background: var(--pass-bg); min-width: 0; }
details.finding { background: #fff; border: 1px solid var(--line); border-left: 4px solid var(--line);
  border-radius: 6px; margin: 8px 0; }
details.finding.error { border-left-color: var(--error); }
details.finding.warning { border-left-color: #dc6803; }
details.finding.info { border-left-color: var(--info); }
details.finding > summary { cursor: pointer; padding: 8px 12px; display: flex; flex-wrap: wrap; gap: 8px;
  align-items: baseline; }
.rule { font: 600 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.subject { font-weight: 600; overflow-wrap: anywhere; }
.machine { color: var(--muted); overflow-wrap: anywhere; }
.count { color: var(--muted); font-size: 13px; margin-left: auto; }
.body { padding: 0 12px 10px 16px; }
dl { display: grid; grid-template-columns: max-content 1fr; gap: 2px 14px; margin: 0 0 6px; }
dt { color: var(--muted); }
dd { margin: 0; white-space: pre-wrap; overflow-wrap: anywhere; }
code { font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; background: #f2f4f7;
  padding: 1px 4px; border-radius: 4px; }
pre { margin: 0; padding: 6px 8px; background: #f2f4f7; border-radius: 4px; white-space: pre-wrap;
  overflow-wrap: anywhere; font: 13px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.consequences { border-top: 1px dashed var(--line); padding-top: 6px; }
.consequences > p { margin: 4px 0; color: var(--muted); font-size: 13px; }
.consequences details.finding { margin-left: 8px; }
.empty { color: var(--pass); font-weight: 600; }
.table { overflow-x: auto; }
table { border-collapse: collapse; background: #fff; font-size: 13px; }
th, td { border: 1px solid var(--line); padding: 4px 8px; text-align: left; vertical-align: top; }
th { background: #f2f4f7; }
td.machine-name { font-weight: 600; overflow-wrap: anywhere; max-width: 280px; }
th.rule-name { font: 600 12px ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
td.cell { text-align: center; font-weight: 700; }
td.cell.error { color: var(--error); background: var(--error-bg); }
td.cell.warning { color: var(--warning); background: var(--warning-bg); }
td.cell.info { color: var(--info); background: var(--info-bg); }
td.cell.none { color: #98a2b3; font-weight: 400; }
.legend { color: var(--muted); font-size: 13px; }
[hidden] { display: none !important; }
@media print {
  body { background: #fff; font-size: 12px; }
  header { border: 0; padding: 0 0 8px; }
  main { padding: 0; max-width: none; }
  .search { display: none; }
  details.finding { break-inside: avoid; }
  details.finding > summary { list-style: none; }
  .table { overflow: visible; }
}
"""

# The search box: a finding shows when its own text or a consequence's contains every word typed; a
# ``#q=words`` fragment in the page's address fills it in.
_SCRIPT = """
(function () {
  var box = document.getElementById("search");
  var shown = document.getElementById("shown");
  var all = Array.prototype.slice.call(document.querySelectorAll("details.finding"));
  var sections = Array.prototype.slice.call(document.querySelectorAll("main > section.findings"));
  box.hidden = false;
  box.parentNode.hidden = false;
  function own(el) {
    var s = el.querySelector(":scope > summary").textContent;
    var b = el.querySelector(":scope > .body > dl");
    return (s + " " + (b ? b.textContent : "")).toLowerCase();
  }
  var text = all.map(own);
  function filter() {
    var words = box.value.toLowerCase().split(/\\s+/).filter(Boolean);
    var hit = all.map(function (el, i) {
      return words.every(function (w) { return text[i].indexOf(w) >= 0; });
    });
    var count = 0;
    for (var i = all.length - 1; i >= 0; i--) {
      var el = all[i];
      var visible = hit[i] || Array.prototype.some.call(
        el.querySelectorAll("details.finding"), function (c) { return !c.hidden; });
      el.hidden = !visible;
      if (visible && words.length) { el.open = true; }
      if (hit[i]) { count++; }
    }
    sections.forEach(function (s) {
      s.hidden = !s.querySelector(":scope > details.finding:not([hidden])");
    });
    shown.textContent = words.length ? count + " of " + all.length + " findings match" : "";
  }
  box.addEventListener("input", filter);
  // report.html#q=libgomp opens the report filtered (a link in a ticket can point at one finding).
  var m = /^#q=(.*)$/.exec(location.hash);
  if (m) {
    try { box.value = decodeURIComponent(m[1]); } catch (e) { box.value = m[1]; }
    filter();
  }
  window.addEventListener("beforeprint", function () {
    all.forEach(function (el) { el.open = true; });
  });
})();
"""


def _csp_hash(source: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(source.encode("utf-8")).digest()).decode() + "'"


# Nothing may be loaded from anywhere: no image, font, frame, connection or form target; only the two
# inline blocks above, named by their hashes.
CONTENT_SECURITY_POLICY = (
    f"default-src 'none'; style-src {_csp_hash(_STYLE)}; script-src {_csp_hash(_SCRIPT)}; "
    "img-src 'none'; base-uri 'none'; form-action 'none'"
)


def h(text: str | None) -> str:
    """Data as HTML text or attribute value: control characters visible, markup characters as entities."""
    return html.escape(terminal(text or ""), quote=True)


def code(text: str | None) -> str:
    """``h(text)`` with each `` `command` `` in backticks shown as ``<code>`` (its text escaped like the
    rest); a backtick without its pair is shown as it is."""
    parts = (text or "").split("`")
    if len(parts) % 2 == 0:  # an odd number of backticks: the last one opens nothing
        parts[-2:] = [parts[-2] + "`" + parts[-1]]
    return "".join(f"<code>{h(part)}</code>" if i % 2 else h(part) for i, part in enumerate(parts))


def _badge(severity: Severity) -> str:
    return f'<span class="badge {severity}">{severity}</span>'


class HtmlFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        summary = summarize(findings, context.fail_on)
        found = groups(findings)
        verdict = "pass" if summary.passed else "fail"
        out = [
            "<!DOCTYPE html>",
            '<html lang="en">',
            "<head>",
            '<meta charset="utf-8">',
            f'<meta http-equiv="Content-Security-Policy" content="{CONTENT_SECURITY_POLICY}">',
            '<meta name="viewport" content="width=device-width, initial-scale=1">',
            '<meta name="generator" content="envcheck">',
            f"<title>{h(context.title)}</title>",
            f"<style>{_STYLE}</style>",
            "</head>",
            "<body>",
            "<header>",
            f"<h1>{h(context.title)}</h1>",
        ]
        if context.policy is not None:
            out.append(f'<p class="policy">{h(context.policy)}</p>')
        out.append(f'<p class="verdict {verdict}" id="verdict">{h(summary.line(context.fail_on))}</p>')
        if findings:
            roots = [g.root for g in found]
            consequences = [f for g in found for f in g.consequences]
            counts = f" ({severity_counts(consequences)})" if consequences else ""
            out.append(
                f'<p class="causes">{plural(len(roots), "root cause")} ({severity_counts(roots)}), '
                f"{plural(len(consequences), 'consequence')}{counts}</p>"
            )
            # Hidden until the script runs: without it a search box would do nothing.
            out.append(
                '<p class="search" hidden><input type="search" id="search" hidden '
                'placeholder="Search findings: rule, package, library, machine…" '
                'aria-label="Search findings"><output id="shown"></output></p>'
            )
        out.append("</header>")
        out.append("<main>")
        if is_fleet(findings) or context.groups:
            out += self._fleet(findings, context)
        if not findings:
            out.append(f'<p class="empty">{h(context.nothing_found)}</p>')
        for severity, section in by_severity(found):
            out.append(f'<section class="findings {severity}">')
            out.append(f"<h2>{_HEADINGS[severity]} ({plural(len(section), 'root cause')})</h2>")
            for g in section:
                out += self._group(g, context)
            out.append("</section>")
        out += ["</main>", f"<script>{_SCRIPT}</script>", "</body>", "</html>"]
        return "\n".join(out) + "\n"

    def _group(self, g: Group, context: ReportContext) -> list[str]:
        """A root cause as a ``<details>`` block, its consequences nested in it."""
        extra = ""
        if g.consequences:
            extra = (
                f'<span class="count">causes {plural(len(g.consequences), "finding")} '
                f"({severity_counts(g.consequences)})</span>"
            )
        lines = self._open(g.root, g.severity, open_=g.severity != "info", extra=extra)
        if g.consequences:
            lines.append('<div class="consequences">')
            lines.append(f"<p>Consequences of {h(g.root.rule)} {h(g.root.subject)}:</p>")
            for f in g.consequences:
                lines += self._open(f, f.severity, open_=at_or_above(f, context.fail_on))
                lines.append("</div></details>")
            lines.append("</div>")
        lines.append("</div></details>")
        return lines

    @staticmethod
    def _open(f: Finding, severity: Severity, *, open_: bool, extra: str = "") -> list[str]:
        """A finding's ``<details>`` up to its open body (the caller closes ``</div></details>``)."""
        names = labels(f)
        machine = f' <span class="machine">on {h(f.machine)}</span>' if f.machine else ""
        intended = ' <span class="badge intended">intended</span>' if f.intended else ""
        summary = (
            f'<summary>{_badge(f.severity)}{intended} <span class="rule">{h(f.rule)}</span> '
            f'<span class="subject">{h(f.subject)}</span>{machine}{extra}</summary>'
        )
        rows = []
        if f.base is not None:
            rows.append(f"<dt>{names.first}</dt><dd>{h(f.base)}</dd>")
        if f.target is not None:
            rows.append(f"<dt>{names.second}</dt><dd>{h(f.target)}</dd>")
        rows.append(f"<dt>why</dt><dd>{code(f.message)}</dd>")
        if f.intended:
            rows.append(f"<dt>intended</dt><dd>{h(f.intended)}</dd>")
        if f.remedy:
            rows.append(f'<dt>remedy</dt><dd class="remedy">{code(f.remedy)}</dd>')
        return [
            f'<details class="finding {severity}"{" open" if open_ else ""}>',
            summary,
            '<div class="body">',
            f"<dl>{''.join(rows)}</dl>",
        ]

    @staticmethod
    def _fleet(findings: Sequence[Finding], context: ReportContext) -> list[str]:
        """The drift matrix (machines or groups by rules, worst severity per cell), each group's members."""
        worst: dict[tuple[str, str], Severity] = {}
        rules: list[str] = []
        for f in findings:  # sorted: errors first, then by rule
            if not f.machine:
                continue
            if f.rule not in rules:
                rules.append(f.rule)
            key = (f.machine, f.rule)
            if key not in worst or SEVERITY_RANK[f.severity] < SEVERITY_RANK[worst[key]]:
                worst[key] = f.severity
        machines = sorted({f.machine for f in findings if f.machine} | {g.name for g in context.groups})
        rules.sort(key=lambda r: (min(SEVERITY_RANK[s] for (_, rule), s in worst.items() if rule == r), r))
        members = {g.name: g for g in context.groups}
        member = context.member
        out = ['<section class="fleet">', "<h2>Drift matrix</h2>"]
        if rules:
            out.append(
                f'<p class="legend">One row per {h(member)} (or group of {h(member)}s that share one '
                "environment), one column per rule: the worst severity found there. E = error, W = warning, "
                "I = info.</p>"
            )
        out += ['<div class="table"><table id="matrix">', f"<thead><tr><th>{h(member.capitalize())}</th>"]
        out += [f'<th class="rule-name">{h(r)}</th>' for r in rules]
        out.append("<th>Result</th></tr></thead><tbody>")
        for m in machines:
            mine = [f for f in findings if f.machine == m]
            label = h(m)
            group = members.get(m)
            if group is not None and group.size > 1:
                label += f' <span class="machine">({h(plural(group.size, member))})</span>'
            cells = []
            for r in rules:
                s = worst.get((m, r))
                if s is None:
                    cells.append('<td class="cell none">·</td>')
                else:
                    cells.append(f'<td class="cell {s}" title="{s}">{s[0].upper()}</td>')
            result = summarize(mine, context.fail_on).counts() if mine else _no_finding(group)
            out.append(f'<tr><td class="machine-name">{label}</td>{"".join(cells)}<td>{h(result)}</td></tr>')
        out.append("</tbody></table></div>")
        if context.groups:
            out += [f"<h2>{h(member.capitalize())} groups</h2>", '<div class="table"><table id="groups">']
            out.append(
                f"<thead><tr><th>Group</th><th>{h(member.capitalize())}s</th><th>Environment</th></tr></thead>"
                "<tbody>"
            )
            for g in sorted(context.groups, key=lambda g: g.name):
                same = _environment(g, any(f.machine == g.name for f in findings))
                listed = ", ".join(g.members) or "—"
                out.append(
                    f'<tr><td class="machine-name">{h(g.name)}</td><td>{h(listed)}</td><td>{same}</td></tr>'
                )
            out.append("</tbody></table></div>")
        out.append("</section>")
        return out


def _no_finding(group: MachineGroup | None) -> str:
    """The result of a matrix row without a finding, in the words of the groups' table (one machine is
    never "no drift" there and "differs from the base" here)."""
    if group is not None and not group.identical_to_base:
        return "no drift that matters"
    return "no drift"


def _environment(group: MachineGroup, found: bool) -> str:
    """A group's environment beside the base, agreeing with its row of the matrix."""
    if group.identical_to_base:
        return "identical to the base"
    return "differs from the base" if found else "differs from the base in nothing that matters"
