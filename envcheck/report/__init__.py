"""Formatters: each returns a ``str``; only the CLI writes.

``write_report(report, options)`` renders a command's ``Report`` as its ``ReportOptions`` say and writes
it (and the JUnit file); ``render_report`` gives the text, ``render(findings, fmt, title=..., fail_on=...)``
is the one renderer below both, shared by every command that reports findings. The formats are the
members of ``FormatName`` (``envcheck.report.formats``), which maps each to its formatter; the format
modules (and rich, for coloured text) are imported only when a report is rendered.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.core.findings import Finding, MachineGroup, Severity, at_or_above, registered_ids
from envcheck.core.outputs import destination, write
from envcheck.core.redact import redact_text
from envcheck.core.remedy import Action, Manual, Target, as_data
from envcheck.report.formats import FORMATS, FormatName
from envcheck.report.interface import DEFAULT_WIDTH, NO_DIFFERENCES, ReportContext
from envcheck.report.options import ReportOptions


@dataclass(frozen=True, kw_only=True, slots=True)
class Report:
    """What a command reports: findings (root causes first within each severity, consequences linked by
    ``caused_by``), the rule ids that were checked (one JUnit case each), the policy line, and whether the
    policy hid or softened anything (then the line goes to stderr too: a gate that passes because of a
    policy says so in the CI log even when the report is a file), and in a fleet report the machines behind
    each ``Finding.machine`` (``member``: what those are, ``machine``, ``platform`` or ``rank``)."""

    title: str
    findings: tuple[Finding, ...]
    rules: tuple[str, ...]
    policy_line: str
    policy_changed: bool
    groups: tuple[MachineGroup, ...] = ()
    member: str = "machine"
    target: Target | None = None
    wrong_interpreter: bool = False

    def failing(self, fail_on: Severity = "error") -> tuple[Finding, ...]:
        """The findings that fail a gate set to ``fail_on`` (at or above it, not intended)."""
        return tuple(f for f in self.findings if at_or_above(f, fail_on))

    def fails(self, fail_on: Severity = "error") -> bool:
        """The verdict: whether a finding is at or above ``fail_on`` (intended ones never count)."""
        return bool(self.failing(fail_on))

    def exit_code(self, fail_on: Severity = "error") -> int:
        """The exit code the command line gives this report: 1 when it fails at ``fail_on``, else 0."""
        return 1 if self.fails(fail_on) else 0


def render_report(report: Report, options: ReportOptions, fmt: FormatName | None = None) -> str:
    """``report`` rendered as ``options`` say, in ``fmt`` when given (the JUnit file beside another
    format: no colour, the default width), else in ``options.format``."""
    own = fmt is None or fmt is options.format
    return render(
        report.findings,
        options.format if fmt is None else fmt,
        title=report.title,
        fail_on=options.fail_on,
        color=options.color if own else False,
        rules=report.rules,
        policy=report.policy_line,
        verbose=options.verbose,
        nothing_found=options.nothing_found,
        groups=report.groups,
        width=options.width if own else None,
        member=report.member,
    )


def write_report(report: Report, options: ReportOptions) -> None:
    """``report`` to ``options.output`` (stdout: ``None`` or ``-``) and, with ``options.junit``, as JUnit
    XML to that file too; each file is created only now that its text exists (``envcheck.core.outputs``:
    links, devices, FIFOs, failures as ``OutputError``)."""
    write(destination(options.output), render_report(report, options))
    if options.junit is not None:
        write(destination(options.junit), render_report(report, options, FormatName.junit))
    if options.remedies is not None:
        # Lazy: the script's writer loads only for --remedies.
        from envcheck.report.remedies import remedy_script

        write(destination(options.remedies), remedy_script(report, options.remedies))


def render(
    findings: Sequence[Finding],
    fmt: FormatName | str,
    *,
    title: str,
    fail_on: Severity,
    color: bool = False,
    rules: Sequence[str] | None = None,
    policy: str | None = None,
    verbose: bool = False,
    nothing_found: str | None = None,
    groups: Sequence[MachineGroup] = (),
    width: int | None = None,
    member: str = "machine",
) -> str:
    """The report in ``fmt``, findings in ``Finding.sort_key`` order (the same input gives the same bytes).

    Root causes lead, each finding that names a present cause in ``caused_by`` folded under its root
    (text and Markdown nest them; JSON gives each finding's ``id`` and ``caused_by``; JUnit has one case
    per root cause). The text report fits about one screen unless ``verbose``; nothing at or above
    ``fail_on`` is left out without being counted.

    ``rules`` are the rule ids that were checked: JUnit writes a passing case for each that found nothing.
    ``None`` means the diff/doctor catalog (difference and single-environment rules). ``color`` only
    affects text. ``policy`` is one line naming the policy applied (``policy: none``): every format shows
    it (text and Markdown as a line, JSON as ``"policy"``, JUnit as a test-suite property); ``None`` leaves
    it out. ``nothing_found`` is what a report without findings says (default: ``No differences that
    matter.``). ``groups``: a fleet report's machine groups (``envcheck.core.findings.MachineGroup``).
    ``width``: the columns of the text report (``None``: ``DEFAULT_WIDTH``, 100, as for a pipe or a file;
    the CLI passes its terminal's, ``report_width``); lines are broken between words, never inside one.
    ``member``: what a fleet report's members are (``machine``, ``platform``, ``rank``).

    Every string that came from a manifest or a finding (title included) is escaped for the format:
    nothing in a report can drive a terminal, inject HTML or make the XML ill-formed, and every report
    encodes as UTF-8 (lone surrogates are shown as ``\\uXXXX``). Before that, every such string passes the
    credential redactor (``envcheck.core.redact``): a manifest envcheck did not write (an older release's, a
    hand-edited one, a cluster rank's payload) may hold a secret, and no format may carry it. Raises
    ``ValueError`` for an unknown format, nothing else.
    """
    formatter = (fmt if isinstance(fmt, FormatName) else FormatName.parse(fmt)).formatter()
    findings = redacted(findings)
    title = redact_text(title)
    policy = redact_text(policy) if policy is not None else None
    nothing_found = redact_text(nothing_found) if nothing_found is not None else None
    groups = [
        dataclasses.replace(g, name=redact_text(g.name), members=tuple(redact_text(m) for m in g.members))
        for g in groups
    ]
    ordered = sorted(findings, key=lambda f: f.sort_key())
    if rules is None:
        rules = registered_ids("difference", "single")
    context = ReportContext(
        title=title,
        fail_on=fail_on,
        color=color,
        rules=tuple(rules),
        policy=policy,
        verbose=verbose,
        nothing_found=nothing_found or NO_DIFFERENCES,
        groups=tuple(groups),
        width=DEFAULT_WIDTH if width is None else width,
        member=member,
    )
    return formatter.render(ordered, context)


_TEXT_FIELDS = ("subject", "message", "remedy", "base", "target", "intended", "machine")


def _redacted_actions(actions: tuple[Action, ...]) -> tuple[Action, ...] | None:
    """``actions`` with each one that holds a credential in any value replaced by a manual step that says
    so (a value with ``<redacted>`` in it is no longer one a command can take); ``None``: none held one."""
    out: list[Action] = []
    changed = False
    for action in actions:
        data = json.dumps(as_data(action), sort_keys=True)
        if redact_text(data) != data:
            changed = True
            out.append(
                Manual(
                    text=f"a {action.kind} step whose value holds a credential, which envcheck writes "
                    "nowhere: run it with that value from where it came"
                )
            )
        else:
            out.append(action)
    return tuple(out) if changed else None


def redacted(findings: Sequence[Finding]) -> list[Finding]:
    """``findings`` with every credential taken out of their strings (``envcheck.core.redact.redact_text``);
    a consequence's ``caused_by`` follows its root's key as redacted, so the report still folds it."""
    out: list[Finding] = []
    keys: dict[str, str] = {}
    for f in findings:
        changes = {
            name: clean
            for name in _TEXT_FIELDS
            if (value := getattr(f, name)) is not None and (clean := redact_text(value)) != value
        }
        actions = _redacted_actions(f.actions)
        if actions is not None:
            changes["actions"] = actions  # type: ignore[assignment]
        g = dataclasses.replace(f, **changes) if changes else f  # type: ignore[arg-type]
        keys[f.key] = g.key
        out.append(g)
    result = []
    for f in out:
        cause = f.caused_by
        if cause is not None and (fixed := keys.get(cause) or redact_text(cause)) != cause:
            result.append(dataclasses.replace(f, caused_by=fixed))
        else:
            result.append(f)
    return result


__all__ = [
    "FORMATS",
    "FormatName",
    "Report",
    "ReportOptions",
    "redacted",
    "render",
    "render_report",
    "write_report",
]
