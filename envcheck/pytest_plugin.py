"""The pytest plugin: ``pytest --envcheck=MANIFEST`` adds the deployment gate's checks to a test run.

Registered as the ``envcheck`` entry point of the ``pytest11`` group, so every pytest run in an environment
with envcheck installed loads it (``-p no:envcheck`` keeps it out). Without ``--envcheck`` it adds options
and nothing else: this module imports only pytest at load time, and envcheck's own modules only once the
option is given.

With ``--envcheck=MANIFEST`` the run gets, in front of its own tests:

- ``envcheck::family::<name>``, one item per rule family of the catalog (packages, torch, native, ...): it
  fails when a finding of that family is at or above ``--envcheck-fail-on``, showing each finding's message
  and remedy;
- ``envcheck::check::<name>``, one item per smoke check the manifest holds a golden for: it fails like a
  family item, and is skipped, with the reason, when the check was skipped here;
- ``envcheck::smoke-suite``: what belongs to no single check (a manifest without goldens, a check that has
  no golden), so that every finding of the gate lands in exactly one item.

The gate runs once, when the first of these items runs (``--collect-only`` runs nothing): the same flow as
``envcheck gate MANIFEST --python PY`` (a live snapshot and the smoke suite, side by side, then
``envcheck.app.flows.gate``). A manifest or policy that cannot be read is a usage error before any test runs.
Under pytest-xdist each worker runs the gate once for the items it receives.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from envcheck.core.findings import Finding, Severity
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest
    from envcheck.report import Report

FAIL_ON = ("error", "warning", "info")
SUITE_ITEM = "smoke-suite"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("envcheck", "envcheck deployment gate")
    group.addoption(
        "--envcheck",
        metavar="MANIFEST",
        default=None,
        help="Add the deployment gate's checks (envcheck gate MANIFEST) as test items: one per rule family "
        "and one per smoke check.",
    )
    group.addoption(
        "--envcheck-python",
        metavar="PY",
        default=None,
        help="The interpreter whose environment is gated (default: the one running pytest).",
    )
    group.addoption(
        "--envcheck-fail-on",
        metavar="SEVERITY",
        choices=FAIL_ON,
        default="error",
        help="The lowest severity of a finding that fails its item: error (default), warning or info.",
    )
    group.addoption(
        "--envcheck-policy",
        metavar="FILE",
        default=None,
        help="A policy file (TOML) as for `envcheck gate --policy` (default: [tool.envcheck] of "
        "./pyproject.toml, if any).",
    )
    group.addoption(
        "--envcheck-timeout",
        metavar="SECONDS",
        type=float,
        default=120.0,
        help="A hard deadline for all work in the gated interpreter, as `envcheck gate --timeout`.",
    )


_GATE = pytest.StashKey["Gate"]()


def pytest_configure(config: pytest.Config) -> None:
    manifest = config.getoption("envcheck")
    if manifest is None:
        return
    config.stash[_GATE] = Gate.prepare(
        Path(manifest),
        python=config.getoption("envcheck_python"),
        fail_on=config.getoption("envcheck_fail_on"),
        policy=config.getoption("envcheck_policy"),
        timeout=config.getoption("envcheck_timeout"),
    )


@pytest.hookimpl(tryfirst=True)  # before -k / -m / --deselect filter the items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None:
        items[:0] = gate.items(session)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None and gate.summary is not None:
        terminalreporter.write_line(gate.summary)


def _usage_error(e: Exception) -> pytest.UsageError:
    """One line, as envcheck's CLI says it (redacted, escaped for the terminal)."""
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.errors import EnvcheckError

    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.escape import one_line

    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.redact import redact_text

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
        base: Manifest,
        policy: Policy,
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
        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck import api

        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.app import flows

        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.app.catalog import catalog

        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.core.errors import EnvcheckError

        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.manifest.io import load

        if timeout < 1:
            raise pytest.UsageError(f"--envcheck-timeout must be at least 1 second, got {timeout:g}")
        if python is not None and shutil.which(python) is None:
            raise _usage_error(FileNotFoundError(f"--envcheck-python: interpreter not found: {python}"))
        try:
            base = load(manifest)
            rules_policy = api.load_policy(policy)
        except EnvcheckError as e:
            raise _usage_error(e) from e
        names = sorted({r.family for r in catalog() if r.kind in ("difference", "single")})
        golden = flows.goldens(base)
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
                # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
                from envcheck.api import error_message

                # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
                from envcheck.core.escape import one_line

                # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
                from envcheck.core.redact import redact_text

                self.error = one_line(redact_text(f"envcheck gate could not run: {error_message(e)}"))
                raise GateCouldNotRun(self.error) from e
        return self.outcome_

    def _run(self) -> Outcome:
        # Lazy: pytest loads this plugin in every session; the gate's engines load when its first item runs.
        from envcheck import api

        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.core.findings import at_or_above

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
        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.app.catalog import get_rule

        rule = get_rule(finding.rule)
        if rule is not None and rule.kind != "verify":
            slug = next((s for s, name in self.families.items() if name == rule.family), None)
            if slug is not None:
                return f"family::{slug}"
        check = _check_of(finding.subject, self.checks) if finding.rule.startswith("VERIFY-") else None
        return f"check::{check}" if check is not None else SUITE_ITEM


def _summary_line(report: Report, failing: int, fail_on: Severity) -> str:
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.escape import one_line

    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.report.interface import severity_counts

    # "1 error, 3 warnings, 2 info": worst first, each word in the plural its number takes.
    shown = severity_counts(report.findings) if report.findings else "no findings"
    verdict = f"{failing} at or above {fail_on}: the gate fails" if failing else "the gate passes"
    return one_line(f"{report.title}: {shown}; {verdict}. {report.policy_line}".strip())


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
        # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
        from envcheck.core.findings import at_or_above

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
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.escape import terminal

    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.report import redacted

    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.report.interface import groups

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
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.escape import one_line

    return one_line(text)


def _slugs(families: Sequence[str]) -> dict[str, str]:
    """A short, stable node name per family: its first word (``torch``, ``cuda``, ``native``), or the whole
    name hyphenated where two families would share a first word."""
    import re

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
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.core.escape import one_line

    return one_line(check).replace("::", "__").replace("[", "(").replace("]", ")")


def _severity(value: str) -> Severity:
    """``--envcheck-fail-on``'s value as a ``Severity``; ``ValueError`` for anything else."""
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.report.options import SEVERITIES

    for severity in SEVERITIES:
        if severity == value:
            return severity
    raise ValueError(f"{value!r} is not one of {', '.join(SEVERITIES)}")
