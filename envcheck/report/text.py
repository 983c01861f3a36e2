"""Text report for people: root causes first, each with the findings it causes folded under it.

Laid out for the terminal it is printed on: ``ReportContext.width`` columns (the CLI passes its
terminal's, ``envcheck.report.options.report_width``; a pipe or a file gets a stable 100), every line
broken between words, never inside one (a single word wider than the line, a long path, is broken after
a ``/`` where it can be), so the terminal never wraps a line a second time.

The order is the order of reading: the verdict; the root causes with their remedies, each with its first
few consequences; then the notes (info), one line each, notes alike (same rule, same message but for the
subject, same remedy: eight CUDA checks skipped for one reason) folded into one entry with one remedy;
last a short summary that repeats the verdict and names the error and warning root causes with the
remedy of the first ones, so the last screen says what is wrong and what to do.

By default the report fits about one screen (``MAX_LINES``): every root cause is shown in full while there
is room; past the room, roots are shown on one line; past that, a line counts what was left out, by
severity, so nothing at or above ``--fail-on`` disappears without being counted (roots are ranked errors
first, so infos and warnings go before errors). ``--verbose`` (``ReportContext.verbose``) shows every
finding in full, notes included, none folded.

Plain text unless ``color`` is set (the CLI sets it for a terminal without ``NO_COLOR``); only then is rich
imported, so piping a report stays fast and free of escape codes. Both share one layout: the coloured
report is the same lines, styled.

Every string from a finding or the title is escaped (``escape.terminal`` / ``one_line``) before it is
laid out: a manifest's escape sequences print as ``\\x1b…`` and never reach the terminal. The rich path
hands rich only ``Text`` objects, so ``[bold]`` in a label is shown, never parsed as console markup.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from envcheck.core.escape import one_line, terminal
from envcheck.core.findings import Finding, Severity
from envcheck.report.interface import (
    DEFAULT_WIDTH,
    PLURAL,
    Group,
    ReportContext,
    ReportFormat,
    by_machine,
    by_severity,
    fleet_line,
    group_counts,
    groups,
    labels,
    machines_by_rule,
    plural,
    severity_counts,
    shortened,
    summarize,
)

# The width of a report that is not on a terminal (``ReportContext.width`` says the real one).
WIDTH = DEFAULT_WIDTH
# Narrower than this, a label and its text no longer fit side by side: the report is laid out this wide.
MIN_WIDTH = 40
# One screen: the default report of a diff stays within this many lines (--verbose: no limit).
MAX_LINES = 60
# Consequences shown under a root cause by default, one line each; the rest are counted.
SHOWN_CONSEQUENCES = 3
# Fleet reports: machines and drifting rules listed by default.
FLEET_LINES = 10
# Fleet reports: members of a machine group named by default (--verbose: all of them).
FLEET_MEMBERS = 6
LABEL_WIDTH = 10
# The closing summary names this many error and warning root causes, the first SUMMARY_REMEDIES of them
# with its remedy (what to do first); it counts the rest.
SUMMARY_ROOTS = 5
SUMMARY_REMEDIES = 1
_STYLE: dict[Severity, str] = {"error": "bold red", "warning": "yellow", "info": "cyan"}
# Where a word wider than a whole line is best broken: after one of these (a path's ``/``, a URL's ``&``).
_BREAK_AFTER = frozenset("/\\,;:=&?-_.+")

_TIMES = "\N{MULTIPLICATION SIGN}"
# A word, or a command in backticks with what is glued to it (``(`pip install x`).``).
_TOKEN = re.compile(r"[^\s`]*`[^`]*`\S*|\S+")

# A line of the report and its style in a coloured report (None: plain).
Line = tuple[str, str | None]


def cells(text: str) -> int:
    """The columns ``text`` takes on a terminal: East Asian wide and full-width characters take two,
    combining marks none (escaped text holds no control character)."""
    if text.isascii():
        return len(text)
    return sum(
        0 if unicodedata.combining(c) else 2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text
    )


def _head(word: str, room: int) -> tuple[str, str]:
    """``word`` split so that its head fits ``room`` columns (one character at least), after a separator
    (``/``, ``=``, ``,``...) in its second half when there is one."""
    used, cut, best = 0, 0, 0
    for i, c in enumerate(word):
        used += cells(c)
        if used > room and i > 0:
            break
        cut = i + 1
        if c in _BREAK_AFTER and cut < len(word):
            best = cut
    if best * 2 >= cut:
        cut = best
    return word[:cut], word[cut:]


def _tokens(text: str) -> list[str]:
    """``text``'s words, a command in backticks (`` `pip install 'torch==2.13.0+cpu'` ``) kept as one,
    its whitespace made single spaces, so that a remedy's command stays on one line to be pasted."""
    return [" ".join(token.split()) for token in _TOKEN.findall(text)]


def wrap(text: str, width: int, first: str, rest: str) -> list[str]:
    """``text`` (already escaped) in lines of at most ``width`` columns, the first after ``first``, the others
    after ``rest``; broken between words (any whitespace, tabs and newlines too, is one space), a command in
    backticks on one line where a line can hold it, a word wider than a whole line broken by ``_head``."""
    lines: list[str] = []
    line, empty = first, True
    queue = _tokens(text)
    queue.reverse()
    while queue:
        word = queue.pop()
        room = width - cells(line) - (0 if empty else 1)
        if cells(word) <= room:
            line, empty = (line + word if empty else f"{line} {word}"), False
        elif not empty:
            lines.append(line)
            line, empty = rest, True
            queue.append(word)
        elif cells(word[0]) > room and line != rest:  # the label leaves no room: start on the next line
            lines.append(line.rstrip())
            line = rest
            queue.append(word)
        elif " " in word:  # a command wider than a line: its words, like any others
            queue += reversed(word.split(" "))
        else:
            head, tail = _head(word, room)
            lines.append(line + head)
            line = rest
            if tail:
                queue.append(tail)
    if not empty or not lines:
        lines.append(line.rstrip() if empty else line)
    return lines


def _fit(text: str, width: int, rest: str) -> list[str]:
    """A heading as it is when it fits ``width`` (its alignment kept), else wrapped after its indent, the
    following lines after ``rest``."""
    if cells(text) <= width:
        return [text]
    stripped = text.lstrip(" ")
    return wrap(stripped, width, text[: len(text) - len(stripped)], rest)


def _wrap(label: str, text: str, indent: int, width: int) -> list[str]:
    """``text`` (already escaped) wrapped under ``label``."""
    pad = " " * indent
    return wrap(text, width, f"{pad}{label:<{LABEL_WIDTH}}", " " * (indent + LABEL_WIDTH))


def _cut(text: str, limit: int = WIDTH) -> str:
    """``text`` on one line of at most ``limit`` columns, ``…`` saying that it was cut: after a word when
    that keeps most of the line, else inside a long word (a path) after a separator where there is one."""
    if cells(text) <= limit:
        return text
    room = max(limit - 2, 1)
    kept, used = "", 0
    for c in text:
        used += cells(c)
        if used > room:
            break
        kept += c
    space = len(kept) if text[len(kept)] == " " else kept.rfind(" ")
    if space >= room * 3 // 4:
        return kept[:space].rstrip() + " …"
    start = space + 1
    head, _ = _head(kept[start:] + "\0", len(kept) - start)  # the word goes on past ``kept``
    return kept[:start] + head + "…"


def _where(f: Finding) -> str:
    return f"  [{one_line(f.machine)}]" if f.machine else ""


def _values(f: Finding) -> str:
    """The finding's values on one line: ``base → target``, or ``found X`` for one environment."""
    names = labels(f)
    if names.first == "base":
        if f.base is None and f.target is None:
            return ""
        return f"{one_line(f.base) if f.base is not None else '-'} → {one_line(f.target or '-')}"
    return f"found {one_line(f.target)}" if f.target is not None else ""


def _block(f: Finding, indent: int, heading: str, style: str | None, width: int) -> list[Line]:
    """A finding in full: its heading, its two values (labelled for a difference or one environment),
    why, remedy and the policy's reason when intended."""
    names = labels(f)
    lines = _fit(heading, width, " " * (indent + 2))
    if names.first == "base" and (f.base is not None or f.target is not None):
        lines += _wrap(names.first, terminal(f.base) if f.base is not None else "-", indent, width)
        lines += _wrap(names.second, terminal(f.target) if f.target is not None else "-", indent, width)
    elif names.first != "base":  # one environment: only what it has (no second machine to mark "-")
        lines += [] if f.base is None else _wrap(names.first, terminal(f.base), indent, width)
        lines += [] if f.target is None else _wrap(names.second, terminal(f.target), indent, width)
    lines += _wrap("why", terminal(f.message), indent, width)
    lines += _wrap("remedy", terminal(f.remedy), indent, width)
    if f.intended:
        lines += _wrap("intended", terminal(f.intended), indent, width)
    head = len(_fit(heading, width, " " * (indent + 2)))
    return [*((line, style) for line in lines[:head]), *((line, None) for line in lines[head:])]


def _consequence_line(f: Finding, width: int) -> Line:
    values = _values(f)
    intended = " (intended)" if f.intended else ""
    text = f"    ↳ {f.severity:<7}  {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}"
    return _cut(text + (f": {values}" if values else "") + intended, width), _STYLE[f.severity]


def _root_heading(g: Group, section: Severity) -> str:
    f = g.root
    own = f"  ({f.severity})" if f.severity != section else ""
    return f"  {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}{own}"


def _full(g: Group, section: Severity, verbose: bool, width: int) -> list[Line]:
    """A root cause in full, and its consequences: all in full when verbose, else the first few on one
    line each and a count of the rest."""
    lines = _block(g.root, 4, _root_heading(g, section), _STYLE[g.root.severity], width)
    if verbose:
        for f in g.consequences:
            heading = f"    ↳ {one_line(f.rule)}  {one_line(f.subject)}{_where(f)}  ({f.severity})"
            lines += _block(f, 8, heading, _STYLE[f.severity], width)
        return lines
    lines += [_consequence_line(f, width) for f in g.consequences[:SHOWN_CONSEQUENCES]]
    rest = g.consequences[SHOWN_CONSEQUENCES:]
    if rest:
        more = f"      … and {len(rest)} more ({severity_counts(rest)}): --verbose shows them"
        lines += [(line, None) for line in _fit(more, width, "        ")]
    return lines


def _compact(g: Group, section: Severity, width: int) -> Line:
    """A root cause on one line, with the number of findings it causes: its values, or for a note (which
    has no remedy shown) its message."""
    f = g.root
    said = one_line(f.message) if section == "info" else _values(f)
    intended = " (intended)" if section == "info" and f.intended else ""
    caused = f"  (+{plural(len(g.consequences), 'consequence')})" if g.consequences else ""
    text = _root_heading(g, section) + (f": {said}" if said else "") + intended
    return _cut(text, width - cells(caused)) + caused, _STYLE[f.severity]


@dataclass(frozen=True, slots=True)
class _Entry:
    """What the body shows as one entry: a root cause with its consequences, or several notes alike (an
    info root without consequences each, same rule, machine, values, remedy and message but for the
    subject) folded into one."""

    groups: tuple[Group, ...]

    @property
    def first(self) -> Group:
        return self.groups[0]


def _alike(g: Group) -> tuple[object, ...] | None:
    """The key under which notes fold, or None for a group that is shown alone."""
    f = g.root
    if g.consequences or f.severity != "info":
        return None
    message = f.message.replace(f.subject, "\0") if f.subject else f.message
    return (f.rule, f.machine, message, f.remedy, f.base, f.target, f.intended)


def _entries(section: Sequence[Group], fold: bool) -> list[_Entry]:
    """``section``'s groups as entries, notes alike folded into the first of them when ``fold``."""
    if not fold:
        return [_Entry((g,)) for g in section]
    folded: dict[object, list[Group]] = {}
    for i, g in enumerate(section):
        folded.setdefault(_alike(g) or i, []).append(g)
    return [_Entry(tuple(gs)) for gs in folded.values()]


def _folded(entry: _Entry, width: int) -> list[Line]:
    """Notes alike as one entry: the rule, how many, their message; the subjects on one line; one remedy."""
    f = entry.first.root
    messages = {g.root.message for g in entry.groups}
    message = f.message if len(messages) == 1 else f.message.replace(f.subject, "<subject>")
    heading = f"  {one_line(f.rule)} {_TIMES}{len(entry.groups)}{_where(f)}: {terminal(message)}"
    lines: list[Line] = [(line, _STYLE[f.severity]) for line in _fit(heading, width, "    ")]
    names = [one_line(g.root.subject) for g in entry.groups]
    shown = len(names)
    pad = " " * (4 + LABEL_WIDTH)
    while shown > 1:
        more = f" and {len(names) - shown} more" if shown < len(names) else ""
        if cells(pad + ", ".join(names[:shown]) + more) <= width:
            break
        shown -= 1
    more = f" and {len(names) - shown} more" if shown < len(names) else ""
    lines.append((_cut(f"    {'subjects':<{LABEL_WIDTH}}" + ", ".join(names[:shown]) + more, width), None))
    lines += [(line, None) for line in _wrap("remedy", terminal(f.remedy), 4, width)]
    if f.intended:
        lines += [(line, None) for line in _wrap("intended", terminal(f.intended), 4, width)]
    return lines


def _capped(items: list[str], what: str, verbose: bool) -> list[str]:
    if verbose or len(items) <= FLEET_LINES:
        return items
    return [*items[:FLEET_LINES], f"  … and {plural(len(items) - FLEET_LINES, what)} (--verbose)"]


def _fleet(findings: Sequence[Finding], context: ReportContext, width: int) -> list[Line]:
    """The fleet's groups: a count line, then each group (capped unless verbose) with its first members."""
    member = context.member
    head = f"FLEET  {fleet_line(context.groups, member)}"
    lines: list[Line] = [("", None), *((line, "bold") for line in _fit(head, width, "       "))]
    rows: list[str] = []
    listed = context.groups if context.verbose else context.groups[:FLEET_LINES]
    for group in listed:
        row = one_line(group_counts(group, findings, context.fail_on, member))
        rows += _fit(f"  {row}", width, "    ")
        shown, more = shortened(group.members, len(group.members) if context.verbose else FLEET_MEMBERS)
        if len(group.members) > 1 or group.members[0] != group.name:
            text = ", ".join(one_line(m) for m in shown) + (f", … and {more} more" if more else "")
            rows += wrap(text, width, "    ", "    ")
    if len(listed) < len(context.groups):
        rows.append(f"  … and {plural(len(context.groups) - len(listed), 'more group')} (--verbose)")
    if any(len(g.members) > FLEET_MEMBERS for g in listed) and not context.verbose:
        rows += wrap(f"(--verbose or --format json lists every {member})", width, "  ", "  ")
    return lines + [(row, None) for row in rows]


def layout(findings: Sequence[Finding], context: ReportContext) -> list[Line]:
    """The report's lines (with their styles), ``findings`` in ``Finding.sort_key`` order, none wider than
    ``context.width`` columns (at least ``MIN_WIDTH``)."""
    width = max(context.width, MIN_WIDTH)
    summary = summarize(findings, context.fail_on)
    found = groups(findings)
    lines: list[Line] = [(line, "bold") for line in _fit(one_line(context.title), width, "  ")]
    if context.policy is not None:
        lines += [(line, None) for line in _fit(one_line(context.policy), width, "  ")]
    verdict = "bold green" if summary.passed else "bold red"
    lines += [(line, verdict) for line in _fit(summary.line(context.fail_on), width, "  ")]
    if findings:
        roots = [g.root for g in found]
        consequences = [f for g in found for f in g.consequences]
        counts = f" ({severity_counts(consequences)})" if consequences else ""
        text = (
            f"{plural(len(roots), 'root cause')} ({severity_counts(roots)}), "
            f"{plural(len(consequences), 'consequence')}{counts}"
        )
        lines += [(line, None) for line in _fit(text, width, "  ")]
    if context.groups:
        lines += _fleet(findings, context, width)
    else:
        machines = [_cut(f"  {one_line(line)}", width) for line in by_machine(findings, context.fail_on)]
        lines += [(line, None) for line in _capped(machines, f"more {context.member}", context.verbose)]
    drift = [(one_line(rule), one_line(", ".join(ms))) for rule, ms in machines_by_rule(findings)]
    if drift:
        rule_width = max(len(rule) for rule, _ in drift)
        rows = [_cut(f"  {rule:<{rule_width}}  {ms}", width) for rule, ms in drift]
        lines += [("", None), ("DRIFT BY RULE", "bold")]
        lines += [(row, None) for row in _capped(rows, "more rule", context.verbose)]
    if not findings:
        return [*lines, ("", None), *((line, None) for line in _fit(context.nothing_found, width, ""))]
    closing = _summary(found, summary.line(context.fail_on), verdict, width)
    # The closing summary keeps its lines, and three more are kept for the count of what was left out (a
    # blank and the count, which may take two lines).
    body = _body(found, context, width, budget=MAX_LINES - len(lines) - len(closing) - 3)
    return lines + body + closing


def _summary(found: Sequence[Group], verdict: str, style: str, width: int) -> list[Line]:
    """The last lines: the verdict again, then the error and warning root causes one line each (the first
    ``SUMMARY_REMEDIES`` with their remedy, intended ones last), so the last screen says what is wrong and
    what to do."""
    lines: list[Line] = [("", None), *((line, style) for line in _fit(verdict, width, "  "))]
    # What fails first (in the report's order), what the policy declared intended after it.
    roots = sorted((g for g in found if g.severity != "info"), key=lambda g: g.root.intended is not None)
    for i, g in enumerate(roots[:SUMMARY_ROOTS]):
        f = g.root
        severity = f"{f.severity}, intended" if f.intended else f.severity
        title = f"  {one_line(f.rule)}  {one_line(f.subject)}{_where(f)} ({severity}): {one_line(f.message)}"
        lines.append((_cut(title, width), _STYLE[g.severity]))
        if i < SUMMARY_REMEDIES:
            lines += [(line, None) for line in _wrap("remedy", terminal(f.remedy), 4, width)]
    if len(roots) > SUMMARY_ROOTS:
        rest = roots[SUMMARY_ROOTS:]
        counts = severity_counts([g.root for g in rest])
        more = f"  … and {plural(len(rest), 'more root cause')} ({counts})"
        lines += [(line, None) for line in _fit(more, width, "    ")]
    return lines


def _body(found: Sequence[Group], context: ReportContext, width: int, *, budget: int) -> list[Line]:
    """Sections of root causes by their group's worst severity. Unless verbose, within ``budget`` lines:
    as many entries as fit on one line each are shown (ranked, so errors before warnings before infos),
    then the first of them in full while the total still fits (the first always), and a line counts
    what was left out. A note in full is one line (notes alike folded: one line, their subjects, one
    remedy); verbose shows every finding in full."""
    sections = by_severity(found)
    verbose = context.verbose
    order = [
        (severity, entry)
        for severity, section in sections
        for entry in _entries(section, fold=severity == "info" and not verbose)
    ]
    if verbose:
        full = [_full(e.first, severity, True, width) for severity, e in order]
        return _sections(sections, order, full, len(order), verbose)
    full = [
        (_folded(e, width) if len(e.groups) > 1 else [_compact(e.first, severity, width)])
        if severity == "info"
        else _full(e.first, severity, False, width)
        for severity, e in order
    ]
    compact = [
        [_folded(e, width)[0] if len(e.groups) > 1 else _compact(e.first, severity, width)]
        for severity, e in order
    ]
    shown = 1
    while shown < len(order) and _size(sections, order, compact, shown + 1) <= budget:
        shown += 1
    blocks = compact[:shown]
    blocks[0] = full[0]
    while shown > 1 and _size(sections, order, blocks, shown) > budget:
        shown -= 1  # the first root in full did not leave room for every one-line root
    for i in range(1, shown):
        trial = [*blocks[:i], full[i], *blocks[i + 1 :]]
        if _size(sections, order, trial, shown) > budget:
            break
        blocks = trial
    body = _sections(sections, order, blocks, shown, verbose)
    hidden = [g for _, e in order[shown:] for g in e.groups]
    if hidden:
        roots = [g.root for g in hidden]
        consequences = [f for g in hidden for f in g.consequences]
        line = (
            f"… {plural(len(roots), 'more root cause')} not shown ({severity_counts(roots)}), with "
            f"{plural(len(consequences), 'consequence')}: --verbose shows every finding in full."
        )
        body += [("", None), *((text, "bold") for text in wrap(line, width, "", "  "))]
    elif any(blocks[i] is not full[i] for i in range(shown)) or any(
        len(g.consequences) > SHOWN_CONSEQUENCES for _, e in order for g in e.groups
    ):
        body += [("", None), ("--verbose shows every finding in full.", None)]
    return body


def _sections(
    sections: Sequence[tuple[Severity, Sequence[Group]]],
    order: Sequence[tuple[Severity, _Entry]],
    blocks: Sequence[list[Line]],
    shown: int,
    verbose: bool,
) -> list[Line]:
    """The first ``shown`` entries' blocks under their section headings (a section's count is of all its
    roots, shown or not; the notes' heading says that they are shortened unless verbose)."""
    total = {severity: len(section) for severity, section in sections}
    body: list[Line] = []
    current: Severity | None = None
    for (severity, _), block in zip(order[:shown], blocks, strict=False):
        if severity != current:
            notes = "" if verbose or severity != "info" else ": one line each, --verbose shows them in full"
            heading = f"{PLURAL[severity].upper()} ({plural(total[severity], 'root cause')}{notes})"
            body += [("", None), (heading, _STYLE[severity])]
            current = severity
        body += block
    return body


def _size(
    sections: Sequence[tuple[Severity, Sequence[Group]]],
    order: Sequence[tuple[Severity, _Entry]],
    blocks: Sequence[list[Line]],
    shown: int,
) -> int:
    """Lines taken by the first ``shown`` entries (``blocks``) with their section headings."""
    return sum(len(b) for b in blocks[:shown]) + 2 * len({severity for severity, _ in order[:shown]})


class TextFormat(ReportFormat):
    def render(self, findings: Sequence[Finding], context: ReportContext) -> str:
        lines = layout(findings, context)
        if context.color:
            return _rich(lines, max(context.width, MIN_WIDTH))
        return "\n".join(text for text, _ in lines) + "\n"


def _rich(lines: Sequence[Line], width: int) -> str:
    import io

    from rich.console import Console
    from rich.text import Text

    buffer = io.StringIO()
    # The lines are laid out already: rich only styles them (soft_wrap: it never breaks one again).
    console = Console(file=buffer, force_terminal=True, color_system="standard", width=width)
    for text, style in lines:
        # Text, never str: rich parses a str as console markup ("[bold]" in a label).
        console.print(Text(text, style=style or ""), soft_wrap=True)
    return buffer.getvalue()
