"""What every command shares: the error chokepoint, output writing, and reusable option types."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, ParamSpec, TypeVar

import typer

from envcheck.errors import EnvcheckError

if TYPE_CHECKING:
    from envcheck.diff.finding import Finding
    from envcheck.manifest.model import Manifest
    from envcheck.report.options import ReportFormatChoice, SeverityChoice

P = ParamSpec("P")
R = TypeVar("R")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """The one place where an ``EnvcheckError`` becomes ``error: …`` (+ ``Tip: …``) on stderr and exit 2."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except EnvcheckError as e:
            typer.echo(f"error: {e}", err=True)
            if e.tip:
                typer.echo(f"Tip: {e.tip}", err=True)
            raise typer.Exit(EXIT_USAGE) from e

    return wrapper


def write_output(text: str, output: str | None) -> None:
    """The report to stdout (``None`` or ``-``) or atomically to a file, created only now that it exists."""
    if output in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    from envcheck.manifest.io import write_atomic

    try:
        write_atomic(Path(output), text)
    except OSError as e:
        raise EnvcheckError(f"cannot write {output}: {e.strerror or e}") from e


PythonOption = Annotated[
    str | None,
    typer.Option(
        "--python",
        help="Interpreter to inspect (default: this one). envcheck need not be installed there.",
        envvar="ENVCHECK_PYTHON",
        show_default=False,
    ),
]
TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=1.0,
        help="Seconds the target may take before it counts as hung.",
        envvar="ENVCHECK_TIMEOUT",
    ),
]


def snapshot_this_machine(python: str | None, timeout: float) -> Manifest:
    """A fresh snapshot (no smoke suite) of ``python`` or this interpreter: what diff, doctor, gate check."""
    from envcheck.collect.launch import SnapshotOptions
    from envcheck.collect.snapshot import take_snapshot
    from envcheck.native import scan_for_snapshot

    return take_snapshot(SnapshotOptions(python=python, timeout=timeout), native=scan_for_snapshot)


def report_findings(
    findings: list[Finding],
    *,
    title: str,
    fmt: ReportFormatChoice,
    output: str | None,
    fail_on: SeverityChoice,
    junit: Path | None,
    rules: list[str] | None = None,
) -> None:
    """Render, write the report (and the JUnit file), and exit 1 when a finding fails the gate.

    ``rules``: the rule ids that were checked (one JUnit case each, with those that found something);
    None means the diff catalog.
    """
    from envcheck.diff.finding import at_or_above
    from envcheck.report import render
    from envcheck.report.options import use_color

    severity = fail_on.severity
    if rules is not None:
        rules = sorted(set(rules) | {f.rule for f in findings})
    color = use_color(fmt, output)
    text = render(findings, fmt.format_name, title=title, fail_on=severity, color=color, rules=rules)
    write_output(text, output)
    if junit is not None:
        write_output(render(findings, "junit", title=title, fail_on=severity, rules=rules), str(junit))
    if any(at_or_above(f, severity) for f in findings):
        raise typer.Exit(EXIT_FINDINGS)
