"""The pytest plugin's gate: ``--envcheck=MANIFEST``'s items and the one gate run behind them, through
``envcheck.api`` only (as the command line), its findings worded for pytest: a tip names the plugin's own
options (``--envcheck-python``), never the command line's. The hooks are ``envcheck.pytest_plugin``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from envcheck import api
from envcheck.core.errors import EnvcheckError
from envcheck.core.escape import one_line, terminal
from envcheck.core.findings import Finding, Severity, at_or_above
from envcheck.core.redact import redact_text
from envcheck.report import Report, redacted
from envcheck.report.interface import groups, severity_counts
from envcheck.report.options import SEVERITIES

SUITE_ITEM = "smoke-suite"
# The plugin's own tip when the gated interpreter has no torch and the manifest has: its option, not the
# command line's --python.
TIP = (
    f"pass the environment's interpreter with --envcheck-python, e.g. --envcheck-python {api.EXAMPLE_PYTHON}"
)


def _usage_error(e: Exception) -> pytest.UsageError:
    """One line, as envcheck's CLI says it (redacted, escaped for the terminal)."""

    tip = f" ({e.tip})" if isinstance(e, EnvcheckError) and e.tip else ""
    return pytest.UsageError(one_line(redact_text(f"--envcheck: {e}{tip}")))


class GateCouldNotRun(Exception):
    """The gate did not get as far as a report (the interpreter could not be started, a bad --timeout...)."""


class ItemFailed(Exception):
    """An item's findings at or above ``--envcheck-fail-on``."""

    def __init__(self, findings: Sequence[Finding]) -> None:
        super().__init__(f"{len(findings)} finding(s)")
        self.findings = tuple(findings)


class Outcome:
    """The gate's findings, handed out to the items that own them; ``skipped``: check name -> why it did
    not run here. (Plain classes, not dataclasses: this module loads in every pytest run.)"""

    __slots__ = ("by_item", "report", "skipped")

    def __init__(self, report: Report, by_item: dict[str, list[Finding]], skipped: dict[str, str]) -> None:
        self.report = report
        self.by_item = by_item
        self.skipped = skipped


class Gate:
    """One ``--envcheck`` run: what was given, the items' names (``families``: slug -> the catalog's family
    name; ``checks``: the smoke checks the manifest holds goldens for, in suite order) and, once the first
    item ran, the outcome or why the gate could not run."""

    __slots__ = (
        "base",
        "checks",
        "error",
        "fail_on",
        "families",
        "manifest_path",
        "outcome_",
        "policy",
        "python",
        "summary",
        "timeout",
    )

    def __init__(
        self,
        *,
        manifest_path: Path,
        base: api.Manifest,
        policy: api.Policy,
        python: str | None,
        fail_on: Severity,
        timeout: float,
        families: dict[str, str],
        checks: tuple[str, ...],
    ) -> None:
        self.manifest_path = manifest_path
        self.base = base
        self.policy = policy
        self.python = python
        self.fail_on: Severity = fail_on
        self.timeout = timeout
        self.families = families
        self.checks = checks
        self.outcome_: Outcome | None = None
        self.error: str | None = None
        self.summary: str | None = None

    @classmethod
    def prepare(
        cls, manifest: Path, *, python: str | None, fail_on: str, policy: str | None, timeout: float
    ) -> Gate:
        """The manifest and the policy read, the items' names known. Raises ``pytest.UsageError``."""

        if timeout < 1:
            raise pytest.UsageError(f"--envcheck-timeout must be at least 1 second, got {timeout:g}")
        if python is not None and shutil.which(python) is None:
            raise _usage_error(FileNotFoundError(f"--envcheck-python: interpreter not found: {python}"))
        try:
            base = api.load_manifest(manifest)
            rules_policy = api.load_policy(policy)
        except EnvcheckError as e:
            raise _usage_error(e) from e
        names = sorted({r.family for r in api.rules() if r.kind in ("difference", "single")})
        golden = base.verify if base.verify is not None and base.verify.skipped is None else None
        return cls(
            manifest_path=manifest,
            base=base,
            policy=rules_policy,
            python=python,
            fail_on=_severity(fail_on),
            timeout=timeout,
            families=_slugs(names),
            checks=tuple(dict.fromkeys(r.name for r in golden.results)) if golden is not None else (),
        )

    def items(self, session: pytest.Session) -> list[EnvcheckItem]:
        root = EnvcheckCollector.from_parent(session, name="envcheck", nodeid="envcheck")
        made = [
            EnvcheckItem.from_parent(root, name=f"family::{slug}", gate=self, owner=f"family::{slug}")
            for slug in sorted(self.families)
        ]
        made += [
            EnvcheckItem.from_parent(root, name=f"check::{_node_name(c)}", gate=self, owner=f"check::{c}")
            for c in self.checks
        ]
        made.append(EnvcheckItem.from_parent(root, name=SUITE_ITEM, gate=self, owner=SUITE_ITEM))
        return made

    def outcome(self) -> Outcome:
        """The gate's outcome, computed on the first call. Raises ``GateCouldNotRun`` (every call)."""
        if self.error is not None:
            raise GateCouldNotRun(self.error)
        if self.outcome_ is None:
            try:
                self.outcome_ = self._run()
            except Exception as e:
                if os.environ.get("ENVCHECK_DEBUG"):  # as the CLI: the traceback, for a bug report
                    raise

                self.error = one_line(redact_text(f"envcheck gate could not run: {api.error_message(e)}"))
                raise GateCouldNotRun(self.error) from e
        return self.outcome_

    def _run(self) -> Outcome:

        options = api.SuiteOptions(python=self.python, timeout=self.timeout)
        run = api.run_gate(self.manifest_path, base=self.base, options=options, policy=self.policy)
        report, current = run.report, run.suite
        by_item: dict[str, list[Finding]] = {}
        for finding in report.findings:
            by_item.setdefault(self._owner(finding), []).append(finding)
        skipped = {
            r.name: f"skipped here: {r.reason or 'no reason given'}"
            for r in current.results
            if r.status == "skipped"
        }
        failing = sum(1 for f in report.findings if at_or_above(f, self.fail_on))
        self.summary = _summary_line(report, failing, self.fail_on)
        return Outcome(report, by_item, skipped)

    def _owner(self, finding: Finding) -> str:
        """The item a finding belongs to: its rule's family, else its smoke check, else the suite item."""

        rule = api.get_rule(finding.rule)
        if rule is not None and rule.kind != "verify":
            slug = next((s for s, name in self.families.items() if name == rule.family), None)
            if slug is not None:
                return f"family::{slug}"
        check = _check_of(finding.subject, self.checks) if finding.rule.startswith("VERIFY-") else None
        return f"check::{check}" if check is not None else SUITE_ITEM


def _summary_line(report: Report, failing: int, fail_on: Severity) -> str:
    # "1 error, 3 warnings, 2 info": worst first, each word in the plural its number takes.
    shown = severity_counts(report.findings) if report.findings else "no findings"
    verdict = f"{failing} at or above {fail_on}: the gate fails" if failing else "the gate passes"
    tip = f" Tip: {TIP}." if report.wrong_interpreter else ""
    return one_line(f"{report.title}: {shown}; {verdict}. {report.policy_line}{tip}".strip())


class EnvcheckCollector(pytest.Collector):
    """The ``envcheck`` node the items hang from (their node ids start with ``envcheck::``)."""

    def collect(self) -> list[pytest.Item]:
        return []  # the items are added by pytest_collection_modifyitems, not collected from files


class EnvcheckItem(pytest.Item):
    """One family or smoke check of the gate: passes, fails with its findings, or is skipped."""

    def __init__(self, *, gate: Gate, owner: str, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.gate = gate
        self.owner = owner

    def runtest(self) -> None:

        outcome = self.gate.outcome()
        mine = outcome.by_item.get(self.owner, [])
        failing = [f for f in mine if at_or_above(f, self.gate.fail_on)]
        if failing:
            raise ItemFailed(failing)
        if self.owner.startswith("check::"):
            check = self.owner.removeprefix("check::")
            skip = next((f for f in mine if f.rule == "VERIFY-SKIPPED"), None)
            reason = skip.message if skip is not None else outcome.skipped.get(check)
            if reason is not None:
                # Reported at the item's location (the manifest), not at this line of the plugin.
                raise pytest.skip.Exception(_one_line(f"{check}: {reason}"), _use_item_location=True)
        if mine:  # below the threshold: shown with -rA / on failure of the run, never failing
            self.add_report_section("call", "envcheck", _describe(mine))

    def repr_failure(self, excinfo: pytest.ExceptionInfo[BaseException], style: Any = None) -> str:
        if isinstance(excinfo.value, ItemFailed):
            return _describe(excinfo.value.findings)
        if isinstance(excinfo.value, GateCouldNotRun):
            return str(excinfo.value)
        return str(super().repr_failure(excinfo, style=style))

    def reportinfo(self) -> tuple[Path, int, str]:
        """The manifest the item comes from (line 0: pytest shows ``MANIFEST:1``) and the node id."""
        return self.gate.manifest_path.resolve(), 0, self.nodeid


def _describe(findings: Sequence[Finding]) -> str:
    """Each finding as the text report says it, redacted: severity, rule, subject, message, remedy, cause; a
    root cause before the findings it causes (``envcheck.report.interface.groups``), never after them."""

    blocks = []
    for f in (member for group in groups(redacted(findings)) for member in group.members):
        lines = [f"{f.severity.upper()} {f.rule} {f.subject}", f"  {f.message}"]
        if f.base is not None or f.target is not None:
            lines.append(f"  base: {f.base}  target: {f.target}")
        if f.remedy:
            lines.append(f"  remedy: {f.remedy}")
        if f.caused_by:
            lines.append(f"  caused by: {f.caused_by}")
        if f.intended:
            lines.append(f"  intended by the policy: {f.intended}")
        blocks.append(terminal("\n".join(lines)))
    return "\n".join(blocks)


def _one_line(text: str) -> str:

    return one_line(text)


def _slugs(families: Sequence[str]) -> dict[str, str]:
    """A short, stable node name per family: its first word (``torch``, ``cuda``, ``native``), or the whole
    name hyphenated where two families would share a first word."""

    def slug(text: str) -> str:
        return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")

    firsts = [slug(f.split()[0]) for f in families]
    return {
        (first if firsts.count(first) == 1 else slug(name)): name
        for first, name in zip(firsts, families, strict=True)
    }


def _check_of(subject: str, checks: Sequence[str]) -> str | None:
    """The smoke check a VERIFY finding's subject names: ``conv2d``, ``conv2d.out`` (an output),
    ``conv2d (cuda:0)`` (a device), the longest check name that fits."""
    fits = [c for c in checks if subject == c or subject.startswith((f"{c}.", f"{c} ("))]
    return max(fits, key=len) if fits else None


def _node_name(check: str) -> str:
    """A check name (from the manifest: untrusted) inside a node id, which pytest prints raw: control
    characters shown as ``\\xNN``; ``::`` separates nodes, and ``[`` starts a parameter id."""

    return one_line(check).replace("::", "__").replace("[", "(").replace("]", ")")


def _severity(value: str) -> Severity:
    """``--envcheck-fail-on``'s value as a ``Severity``; ``ValueError`` for anything else."""

    for severity in SEVERITIES:
        if severity == value:
            return severity
    raise ValueError(f"{value!r} is not one of {', '.join(SEVERITIES)}")
