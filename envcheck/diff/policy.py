"""The policy: which rules to ignore, which severities to change, which differences are intended.

A TOML file given with ``--policy PATH``, or the ``[tool.envcheck]`` table of the project's
``pyproject.toml``; ``--no-policy`` applies none. Keys (the same at the top of a policy file or under
``[tool.envcheck]``)::

    ignore = ["ENV-PKG-ADDED", "ENV-VAR-CHANGED:PIP_*"]      # RULE or RULE:SUBJECT, globs allowed
    # or tables: [[ignore]] rule = "ENV-GPU-CHANGED", machine = "staging-*"

    [severity]                                               # [tool.envcheck.severity] in pyproject
    "ENV-NUMERICS-SWITCH" = "error"

    [[intended]]                                             # [[tool.envcheck.intended]]
    rule = "ENV-TORCH-VARIANT"
    subject = "torch"          # optional glob
    machine = "prod-*"         # optional glob (fleet reports)
    reason = "prod is CPU-only by design"

    imports = ["myapp.main"]          # the application's entry modules: verify and gate import them
    not_imported = ["somepkg"]        # installed modules verify and gate must not import

An intended finding stays in every report, marked with its reason, and never fails the gate.

A policy is untrusted input (docs/guarantees.md): a ``pyproject.toml`` in the current folder applies itself
without being asked for, so it is read with the same care as a manifest. Only a regular file is opened
(never a FIFO or a device), at most ``MAX_POLICY_BYTES`` are read, nesting is bounded before the TOML
parser sees the text, every rule id must exist, and what a policy did is counted so that every report can
say it (``PolicyOutcome``, ``policy_line``): a policy that ignores everything is allowed, never silent.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from envcheck.core.errors import UsageError
from envcheck.core.files import NotOpened, read_capped
from envcheck.core.findings import SEVERITY_RANK, Finding, Severity, registered_ids

MAX_POLICY_BYTES = 1024 * 1024
# A policy needs three levels ([tool.envcheck.severity]) and a pyproject.toml rarely more than six; deeper
# nesting is an attack on the parser: tomllib recurses per bracket (RecursionError), and a dotted key of
# n parts costs it O(n^2) memory (a 300 KB `a.b.b.b…` key exhausts gigabytes). Both are refused first.
MAX_POLICY_DEPTH = 64
# Findings counted per rule id never reach this; a bound keeps every message short whatever the input.
_SHOWN_PROBLEMS = 8


@dataclass(frozen=True, kw_only=True, slots=True)
class Selector:
    """Which findings an entry applies to: rule id, subject and machine globs (case-sensitive ids)."""

    rule: str
    subject: str = "*"
    machine: str = "*"

    def matches(self, finding: Finding) -> bool:
        return (
            fnmatchcase(finding.rule, self.rule)
            and fnmatchcase(finding.subject, self.subject)
            and fnmatchcase(finding.machine or "", self.machine)
        )

    def matches_every_finding_of(self, rule_id: str) -> bool:
        """True when every finding of ``rule_id`` matches, whatever its subject and machine."""
        return fnmatchcase(rule_id, self.rule) and _matches_anything(self.subject, self.machine)


def _matches_anything(*globs: str) -> bool:
    # `*` (or `**`) matches every string, the empty one included; any other glob leaves something out.
    return all(glob and set(glob) == {"*"} for glob in globs)


@dataclass(frozen=True, kw_only=True, slots=True)
class Intended:
    selector: Selector
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class PolicyOutcome:
    """What applying a policy did: the findings that remain and how many of each kind of change.

    ``downgraded`` / ``upgraded`` count findings whose severity the policy lowered / raised; ``intended``
    counts findings marked intended (they stay in the report and never fail the gate).
    """

    findings: tuple[Finding, ...]
    ignored: int = 0
    downgraded: int = 0
    upgraded: int = 0
    intended: int = 0


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """A loaded policy. ``source`` names where it came from (``None``: no policy was found);
    ``disabled`` is set by ``--no-policy``. The empty policy changes nothing."""

    source: str | None = None
    disabled: bool = False
    ignore: tuple[Selector, ...] = ()
    severity: tuple[tuple[Selector, Severity], ...] = ()
    intended: tuple[Intended, ...] = field(default=())
    # The application's entry modules (``imports``) and installed modules never to import
    # (``not_imported``): what verify and gate import in the target (``envcheck.verify.imports``).
    imports: tuple[str, ...] = ()
    not_imported: tuple[str, ...] = ()

    def apply(self, findings: Iterable[Finding]) -> list[Finding]:
        """Drop ignored findings, re-grade (first matching entry wins), mark intended ones with the reason."""
        return list(self.apply_counted(findings).findings)

    def apply_counted(self, findings: Iterable[Finding]) -> PolicyOutcome:
        """``apply``, counting what it changed. Exact duplicates are counted (and kept) once."""
        kept: dict[Finding, None] = {}
        ignored = downgraded = upgraded = intended = 0
        for finding in dict.fromkeys(findings):
            if any(s.matches(finding) for s in self.ignore):
                ignored += 1
                continue
            result = finding
            for selector, severity in self.severity:
                if selector.matches(result):
                    result = replace(result, severity=severity)
                    break
            change = SEVERITY_RANK[result.severity] - SEVERITY_RANK[finding.severity]
            downgraded += change > 0
            upgraded += change < 0
            for entry in self.intended:
                if entry.selector.matches(result):
                    result = replace(result, intended=entry.reason)
                    intended += 1
                    break
            kept[result] = None
        return PolicyOutcome(
            findings=tuple(kept),
            ignored=ignored,
            downgraded=downgraded,
            upgraded=upgraded,
            intended=intended,
        )

    def sweeping(self, rule_ids: Sequence[str]) -> list[str]:
        """What this policy does to *every* rule of ``rule_ids``: ``ignores every rule``, ``grades every
        rule info`` (empty when it is selective). Such a policy is allowed, and the report says so."""
        notes: list[str] = []
        if rule_ids and all(any(s.matches_every_finding_of(r) for s in self.ignore) for r in rule_ids):
            notes.append("ignores every rule")
        for severity in ("warning", "info"):
            graded = [s for s, sev in self.severity if sev == severity]
            if rule_ids and all(any(s.matches_every_finding_of(r) for s in graded) for r in rule_ids):
                notes.append(f"grades every rule {severity}")
        return notes


def policy_line(policy: Policy, outcome: PolicyOutcome | None = None, *, rule_ids: Sequence[str] = ()) -> str:
    """The one line every report shows about the policy::

        policy: none
        policy: none (--no-policy)
        policy: ./pyproject.toml [tool.envcheck]: 3 ignored, 1 downgraded
        policy: p.toml (ignores every rule): 12 ignored, 0 downgraded

    ``rule_ids``: the ids the command checked, to name a policy that sweeps them all.
    """
    if policy.disabled:
        return "policy: none (--no-policy)"
    if policy.source is None:
        return "policy: none"
    notes = policy.sweeping(rule_ids)
    head = f"policy: {policy.source}" + (f" ({', '.join(notes)})" if notes else "")
    if outcome is None:
        return head
    counts = [f"{outcome.ignored} ignored", f"{outcome.downgraded} downgraded"]
    counts += [f"{outcome.upgraded} upgraded"] if outcome.upgraded else []
    counts += [f"{outcome.intended} intended"] if outcome.intended else []
    return f"{head}: {', '.join(counts)}"


def load_policy(
    path: Path | None,
    project_dir: Path,
    *,
    disabled: bool = False,
    known_rules: Sequence[str] | None = None,
) -> Policy:
    """The policy at ``path``; without one, ``[tool.envcheck]`` of ``project_dir/pyproject.toml``; without
    that, the empty policy. ``disabled`` (``--no-policy``) reads nothing and returns a policy that says so.
    ``known_rules``: the ids a policy may name (``envcheck.app.catalog.rule_ids()``: every id a finding
    can carry); ``None`` takes the rules registered so far (``envcheck.core.findings.registered_ids``).

    Raises ``UsageError`` (naming the file and, where it applies, the line:column or the key) when the
    file cannot be read, is not a regular file, is larger than ``MAX_POLICY_BYTES``, is not UTF-8 TOML,
    nests deeper than ``MAX_POLICY_DEPTH``, or holds a wrong or unknown entry; and when ``path`` is given
    together with ``disabled``.
    """
    if disabled:
        if path is not None:
            raise UsageError("--policy and --no-policy contradict each other", tip="Pass one of them.")
        return Policy(disabled=True)
    if path is not None:
        data = _read_toml(path, shown=str(path))
        tool = data.get("tool")
        if tool is not None and not isinstance(tool, dict):
            raise UsageError(f"policy {path}: tool: expected a table, got {_kind(tool)}")
        table = tool.get("envcheck") if isinstance(tool, dict) else None
        if table is None:
            return parse_policy(data, source=str(path), known_rules=known_rules)
        if not isinstance(table, dict):
            raise UsageError(f"policy {path}: tool.envcheck: expected a table, got {_kind(table)}")
        return parse_policy(table, source=f"{path} [tool.envcheck]", known_rules=known_rules)
    pyproject = project_dir / "pyproject.toml"
    if not os.path.lexists(pyproject):
        return Policy()
    data = _read_toml(pyproject, shown=str(pyproject))
    tool = data.get("tool")
    table = tool.get("envcheck") if isinstance(tool, dict) else None
    if table is None:
        return Policy()
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.envcheck] must be a table, got {_kind(table)}")
    return parse_policy(table, source=f"{pyproject} [tool.envcheck]", known_rules=known_rules)


def _read_toml(path: Path, *, shown: str) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    raw = _read_capped(path, shown)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise UsageError(f"policy {shown}: byte {e.start}: not UTF-8 text") from e
    _check_depth(text, shown)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as e:
        line, column, message = _toml_position(e, text)
        raise UsageError(f"policy {shown}:{line}:{column}: not valid TOML: {message}") from e
    except RecursionError as e:  # a shape _check_depth does not foresee: still an input error
        raise UsageError(f"policy {shown}: nested too deeply for a policy") from e


def _read_capped(path: Path, shown: str) -> bytes:
    """At most ``MAX_POLICY_BYTES`` of a regular file (``envcheck.core.files``: a FIFO is never waited on, and
    the type is checked on the open descriptor). Raises ``UsageError``."""
    try:
        raw = read_capped(str(path), MAX_POLICY_BYTES)
    except NotOpened as e:
        raise UsageError(f"cannot read policy {shown}: it {e.reason.removesuffix(': not opened')}") from e
    except OSError as e:
        raise UsageError(f"cannot read policy {shown}: {e.strerror or e}") from e
    if len(raw) > MAX_POLICY_BYTES:
        raise UsageError(f"policy {shown} is larger than {MAX_POLICY_BYTES} bytes")
    return raw


_TOML_AT = re.compile(r"\s*\(at line (\d+), column (\d+)\)$")


def _toml_position(error: Exception, text: str) -> tuple[int, int, str]:
    """Line, column (1-based) and message of a TOML error. tomllib gives ``lineno`` / ``colno`` from
    Python 3.14; before, only its message says ``(at line L, column C)`` or ``(at end of document)``."""
    message = str(error)
    found = _TOML_AT.search(message)
    line = getattr(error, "lineno", None) or (int(found.group(1)) if found else None)
    column = getattr(error, "colno", None) or (int(found.group(2)) if found else None)
    message = _TOML_AT.sub("", message).replace(" (at end of document)", "")
    if line is None or column is None:  # at the end of the document
        lines = text.split("\n")
        line, column = len(lines), len(lines[-1]) + 1
    return int(line), int(column), message


def _check_depth(text: str, shown: str) -> None:
    """Refuse nesting deeper than ``MAX_POLICY_DEPTH`` before the TOML parser sees it, with line:column.

    A linear scan that skips strings and comments (TOML 1.0: basic, literal and their multi-line forms)
    and counts open brackets / braces, and the dots of one dotted key (a float or a date has at most one).
    It only bounds; the parser still judges the syntax.
    """
    depth = dots = 0
    line, line_start, i, n = 1, 0, 0, len(text)
    while i < n:
        c = text[i]
        if c == "\n":
            line, line_start, dots = line + 1, i + 1, 0
        elif c == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        elif c in "\"'":
            i = _skip_string(text, i)
            continue
        elif c in "[{":
            depth, dots = depth + 1, 0
            if depth > MAX_POLICY_DEPTH:
                raise UsageError(
                    f"policy {shown}:{line}:{i - line_start + 1}: nested more than "
                    f"{MAX_POLICY_DEPTH} levels deep"
                )
        elif c in "]}":
            depth, dots = max(0, depth - 1), 0
        elif c in "=,":
            dots = 0
        elif c == ".":
            dots += 1
            if dots > MAX_POLICY_DEPTH:
                raise UsageError(
                    f"policy {shown}:{line}:{i - line_start + 1}: a dotted key of more than "
                    f"{MAX_POLICY_DEPTH} parts"
                )
        i += 1


def _skip_string(text: str, start: int) -> int:
    """The index just past the string that starts at ``start`` (the end of the text if unterminated)."""
    quote = text[start]
    if text.startswith(quote * 3, start):
        end = text.find(quote * 3, start + 3)
        while quote == '"' and end > 0 and _escaped(text, end):
            end = text.find(quote * 3, end + 1)
        if end < 0:
            return len(text)
        end += 3
        # Up to two more quotes belong to the content: `"""a""""` is `a"` (TOML 1.0, multi-line strings).
        for _ in range(2):
            if end < len(text) and text[end] == quote:
                end += 1
        return end
    i = start + 1
    while i < len(text) and text[i] not in (quote, "\n"):
        i += 2 if quote == '"' and text[i] == "\\" else 1
    return i + 1 if i < len(text) and text[i] == quote else i


def _escaped(text: str, index: int) -> bool:
    backslashes = 0
    while index - backslashes - 1 >= 0 and text[index - backslashes - 1] == "\\":
        backslashes += 1
    return backslashes % 2 == 1


def _kind(value: object) -> str:
    """A bounded description of a TOML value for messages (never its full repr: it may be huge)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return repr(shown)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list):
        return f"an array of {len(value)}"
    if isinstance(value, dict):
        return "a table"
    return f"a {type(value).__name__}"


def parse_policy(
    table: Mapping[str, Any], *, source: str, known_rules: Sequence[str] | None = None
) -> Policy:
    """Build a ``Policy`` from its TOML table. Raises ``UsageError`` listing every bad entry with its key;
    an unknown rule id (or a glob that matches none) comes with the closest known id. ``known_rules`` as
    for ``load_policy``."""
    known = registered_ids() if known_rules is None else tuple(known_rules)
    problems: list[str] = []

    def glob(value: object, where: str) -> str | None:
        if isinstance(value, str) and value:
            return value
        problems.append(f"{where}: expected a non-empty string glob, got {_kind(value)}")
        return None

    def selector(
        value: object, where: str, *, subject: object = "*", machine: object = "*", table: str = ""
    ) -> Selector | None:
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: expected a rule id, got {_kind(value)}")
            return None
        rule, _, inline_subject = value.strip().partition(":")
        subject_glob = glob(inline_subject or subject, f"{table}subject" if table else where)
        machine_glob = glob(machine, f"{table}machine" if table else where)
        unknown = _unknown_rule(rule, known)
        if unknown:
            problems.append(f"{where}: {unknown}")
            return None
        if subject_glob is None or machine_glob is None:
            return None
        return Selector(rule=rule, subject=subject_glob, machine=machine_glob)

    for key in sorted(set(table) - {"ignore", "severity", "intended", "imports", "not_imported"}):
        problems.append(f"{key}: unknown key (expected ignore, severity, intended, imports, not_imported)")

    modules: dict[str, tuple[str, ...]] = {}
    for key in ("imports", "not_imported"):
        if key not in table:
            continue
        raw_modules = table[key]
        if not isinstance(raw_modules, list):
            problems.append(f"{key}: expected an array of module names, got {_kind(raw_modules)}")
            continue
        # Lazy: the app-import check (and the target runner it uses) loads only for a policy naming modules.
        from envcheck.verify.imports import check_module_names

        found = check_module_names(raw_modules, key)
        problems += found
        if not found:
            modules[key] = tuple(raw_modules)

    ignore: list[Selector] = []
    raw_ignore = table.get("ignore", [])
    if not isinstance(raw_ignore, list):
        problems.append(f"ignore: expected an array of rule ids, got {_kind(raw_ignore)}")
        raw_ignore = []
    for i, item in enumerate(raw_ignore):
        if isinstance(item, dict):  # [[ignore]] rule = "...", subject = "...", machine = "..."
            for key in sorted(set(item) - {"rule", "subject", "machine"}):
                problems.append(f"ignore[{i}].{key}: unknown key (expected rule, subject, machine)")
            sel = selector(
                item.get("rule"),
                f"ignore[{i}].rule",
                subject=item.get("subject", "*"),
                machine=item.get("machine", "*"),
                table=f"ignore[{i}].",
            )
        else:
            sel = selector(item, f"ignore[{i}]")
        if sel:
            ignore.append(sel)

    severities: list[tuple[Selector, Severity]] = []
    raw_sev = table.get("severity", {})
    if not isinstance(raw_sev, dict):
        problems.append(
            f"severity: expected a table of RULE = 'error' | 'warning' | 'info', got {_kind(raw_sev)}"
        )
        raw_sev = {}
    for rule, value in raw_sev.items():
        sel = selector(rule, f"severity.{rule}")
        # The membership test needs a str first: a list or table value is unhashable.
        if not isinstance(value, str) or value not in SEVERITY_RANK:
            problems.append(f"severity.{rule}: expected 'error', 'warning' or 'info', got {_kind(value)}")
        elif sel:
            severities.append((sel, _severity(value)))

    intended: list[Intended] = []
    raw_int = table.get("intended", [])
    if not isinstance(raw_int, list):
        problems.append(f"intended: expected an array of tables ([[intended]]), got {_kind(raw_int)}")
        raw_int = []
    for i, item in enumerate(raw_int):
        where = f"intended[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected a table with rule and reason, got {_kind(item)}")
            continue
        for key in sorted(set(item) - {"rule", "subject", "machine", "reason"}):
            problems.append(f"{where}.{key}: unknown key (expected rule, subject, machine, reason)")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}.reason: an intended difference needs a reason, got {_kind(reason)}")
            continue
        sel = selector(
            item.get("rule"),
            f"{where}.rule",
            subject=item.get("subject", "*"),
            machine=item.get("machine", "*"),
            table=f"{where}.",
        )
        if sel:
            intended.append(Intended(selector=sel, reason=reason.strip()))

    if problems:
        shown = "; ".join(problems[:_SHOWN_PROBLEMS])
        more = f" (and {len(problems) - _SHOWN_PROBLEMS} more)" if len(problems) > _SHOWN_PROBLEMS else ""
        tip = "`envcheck rules` lists every rule id; the policy format is in `envcheck diff --help`."
        raise UsageError(f"policy {source}: {shown}{more}", tip=tip)
    return Policy(
        source=source,
        ignore=tuple(ignore),
        severity=tuple(severities),
        intended=tuple(intended),
        imports=modules.get("imports", ()),
        not_imported=modules.get("not_imported", ()),
    )


def _severity(value: str) -> Severity:
    for severity in SEVERITY_RANK:
        if severity == value:
            return severity
    raise AssertionError(value)  # pragma: no cover - checked by the caller


def _unknown_rule(rule: str, known: Sequence[str]) -> str | None:
    """Why ``rule`` names no known rule (with the closest id, by ``difflib``), or None when it does.

    A glob must match at least one id: `ENV-PKG-ADED*` is as much a typo as `ENV-PKG-ADED`.
    """
    import difflib

    if any(c in rule for c in "*?["):
        if any(fnmatchcase(r, rule) for r in known):
            return None
        what = f"no rule matches {_kind(rule)}"
    elif rule in known:
        return None
    else:
        what = f"unknown rule {_kind(rule)}"
    candidates = {r.upper(): r for r in known}
    close = difflib.get_close_matches(rule.upper(), list(candidates), n=1, cutoff=0.6)
    return what + (f" (did you mean {candidates[close[0]]!r}?)" if close else " (see `envcheck rules`)")
