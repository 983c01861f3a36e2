"""The policy: which rules to ignore, which severities to change, which differences are intended.

A TOML file given with ``--policy PATH``, or the ``[tool.envcheck]`` table of the project's
``pyproject.toml``. Keys (the same at the top of a policy file or under ``[tool.envcheck]``)::

    ignore = ["ENV-PKG-ADDED", "ENV-VAR-CHANGED:PIP_*"]      # RULE or RULE:SUBJECT, globs allowed
    # or tables: [[ignore]] rule = "ENV-GPU-CHANGED", machine = "staging-*"

    [severity]                                               # [tool.envcheck.severity] in pyproject
    "ENV-NUMERICS-SWITCH" = "error"

    [[intended]]                                             # [[tool.envcheck.intended]]
    rule = "ENV-TORCH-VARIANT"
    subject = "torch"          # optional glob
    machine = "prod-*"         # optional glob (fleet reports)
    reason = "prod is CPU-only by design"

An intended finding stays in every report, marked with its reason, and never fails the gate.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from envcheck.diff.finding import SEVERITY_RANK, Finding, Severity
from envcheck.errors import UsageError

_MAX_POLICY_BYTES = 1024 * 1024


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


@dataclass(frozen=True, kw_only=True, slots=True)
class Intended:
    selector: Selector
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class Policy:
    """A loaded policy. ``source`` names where it came from (for messages); empty policy = no changes."""

    source: str | None = None
    ignore: tuple[Selector, ...] = ()
    severity: tuple[tuple[Selector, Severity], ...] = ()
    intended: tuple[Intended, ...] = field(default=())

    def apply(self, findings: Iterable[Finding]) -> list[Finding]:
        """Drop ignored findings, re-grade (first matching entry wins), mark intended ones with the reason."""
        out: list[Finding] = []
        for finding in findings:
            if any(s.matches(finding) for s in self.ignore):
                continue
            result = finding
            for selector, severity in self.severity:
                if selector.matches(result):
                    result = replace(result, severity=severity)
                    break
            for entry in self.intended:
                if entry.selector.matches(result):
                    result = replace(result, intended=entry.reason)
                    break
            out.append(result)
        return out


def load_policy(path: Path | None, project_dir: Path) -> Policy:
    """The policy at ``path``; without one, ``[tool.envcheck]`` of ``project_dir/pyproject.toml``; without
    that, the empty policy. Raises ``UsageError`` (naming the file and key) on an unreadable file, bad TOML
    or a wrong entry."""
    if path is not None:
        data = _read_toml(path)
        table = data.get("tool", {}).get("envcheck") if isinstance(data.get("tool"), dict) else None
        return parse_policy(table if isinstance(table, dict) else data, source=str(path))
    pyproject = project_dir / "pyproject.toml"
    if not pyproject.is_file():
        return Policy()
    data = _read_toml(pyproject)
    tool = data.get("tool")
    table = tool.get("envcheck") if isinstance(tool, dict) else None
    if table is None:
        return Policy()
    if not isinstance(table, dict):
        raise UsageError(f"{pyproject}: [tool.envcheck] must be a table")
    return parse_policy(table, source=f"{pyproject} [tool.envcheck]")


def _read_toml(path: Path) -> dict[str, Any]:
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10
        import tomli as tomllib
    try:
        with path.open("rb") as f:
            raw = f.read(_MAX_POLICY_BYTES + 1)
    except OSError as e:
        raise UsageError(f"cannot read policy {path}: {e.strerror or e}") from e
    if len(raw) > _MAX_POLICY_BYTES:
        raise UsageError(f"policy {path} is larger than {_MAX_POLICY_BYTES} bytes")
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except UnicodeDecodeError as e:
        raise UsageError(f"policy {path}: byte {e.start}: not UTF-8 text") from e
    except tomllib.TOMLDecodeError as e:
        raise UsageError(f"policy {path}: not valid TOML: {e}") from e


def parse_policy(table: Mapping[str, Any], *, source: str) -> Policy:
    """Build a ``Policy`` from its TOML table. Raises ``UsageError`` listing every bad entry with its key."""
    from envcheck.diff.catalog import rule_ids

    known = set(rule_ids())
    problems: list[str] = []

    def selector(
        value: object, where: str, *, subject: object = "*", machine: object = "*"
    ) -> Selector | None:
        if not isinstance(value, str) or not value.strip():
            problems.append(f"{where}: expected a rule id, got {value!r:.60}")
            return None
        rule, _, inline_subject = value.strip().partition(":")
        if inline_subject:
            subject = inline_subject
        if not isinstance(subject, str) or not isinstance(machine, str):
            problems.append(f"{where}: subject and machine must be strings")
            return None
        wildcard = any(c in rule for c in "*?[")
        # Only envcheck's own ids are checked: other producers (VERIFY-…) share the report format.
        if rule.startswith("ENV-") and not wildcard and rule not in known:
            problems.append(f"{where}: unknown rule {rule!r} (see `envcheck rules`)")
            return None
        return Selector(rule=rule, subject=subject, machine=machine)

    for key in sorted(set(table) - {"ignore", "severity", "intended"}):
        problems.append(f"{key}: unknown key (expected ignore, severity, intended)")

    ignore: list[Selector] = []
    raw_ignore = table.get("ignore", [])
    if not isinstance(raw_ignore, list):
        problems.append("ignore: expected an array of rule ids")
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
            )
        else:
            sel = selector(item, f"ignore[{i}]")
        if sel:
            ignore.append(sel)

    severities: list[tuple[Selector, Severity]] = []
    raw_sev = table.get("severity", {})
    if not isinstance(raw_sev, dict):
        problems.append("severity: expected a table of RULE = 'error' | 'warning' | 'info'")
        raw_sev = {}
    for rule, value in raw_sev.items():
        sel = selector(rule, f"severity.{rule}")
        if value not in SEVERITY_RANK:
            problems.append(f"severity.{rule}: expected 'error', 'warning' or 'info', got {value!r:.40}")
        elif sel:
            severities.append((sel, value))

    intended: list[Intended] = []
    raw_int = table.get("intended", [])
    if not isinstance(raw_int, list):
        problems.append("intended: expected an array of tables ([[intended]])")
        raw_int = []
    for i, item in enumerate(raw_int):
        where = f"intended[{i}]"
        if not isinstance(item, dict):
            problems.append(f"{where}: expected a table with rule and reason")
            continue
        for key in sorted(set(item) - {"rule", "subject", "machine", "reason"}):
            problems.append(f"{where}.{key}: unknown key (expected rule, subject, machine, reason)")
        reason = item.get("reason")
        if not isinstance(reason, str) or not reason.strip():
            problems.append(f"{where}.reason: an intended difference needs a reason")
            continue
        sel = selector(
            item.get("rule"),
            f"{where}.rule",
            subject=item.get("subject", "*"),
            machine=item.get("machine", "*"),
        )
        if sel:
            intended.append(Intended(selector=sel, reason=reason.strip()))

    if problems:
        shown = "; ".join(problems[:8]) + (f" (and {len(problems) - 8} more)" if len(problems) > 8 else "")
        raise UsageError(f"policy {source}: {shown}", tip="See the policy format in `envcheck diff --help`.")
    return Policy(source=source, ignore=tuple(ignore), severity=tuple(severities), intended=tuple(intended))
