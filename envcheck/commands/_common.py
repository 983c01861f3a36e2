"""What every command shares: the error chokepoint, output writing and the exit codes (the option types:
``envcheck.commands.options``)."""

from __future__ import annotations

import dataclasses
import functools
import os
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, ParamSpec, TypeVar

import typer

from envcheck import api
from envcheck.core.errors import EnvcheckError, UsageError
from envcheck.core.escape import one_line, terminal
from envcheck.core.findings import at_or_above
from envcheck.core.outputs import Destination, destination, write
from envcheck.core.redact import redact_text
from envcheck.report import write_report
from envcheck.report.options import ReportOptions

if TYPE_CHECKING:
    from envcheck.report import Report

P = ParamSpec("P")
R = TypeVar("R")

EXIT_OK = 0
EXIT_FINDINGS = 1
EXIT_USAGE = 2


def handles_errors(fn: Callable[P, R]) -> Callable[P, R]:
    """The one place where an error becomes its lines on stderr and exit 2 (``describe_error``: ``error:
    …`` + ``Tip: …`` for an ``EnvcheckError``, ``error: internal error …`` for anything else, a bug whose
    traceback shows only with ``ENVCHECK_DEBUG=1``). A traceback is never an exit code 1, which means
    "findings"."""

    @functools.wraps(fn)
    def wrapper(*args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(*args, **kwargs)
        except (typer.Exit, typer.Abort):
            raise
        except Exception as e:
            interrupt = _interrupt_within(e)
            if interrupt is not None:
                raise interrupt from None  # ``interrupted`` and exit 130 (``envcheck.cli.main``)
            if not isinstance(e, EnvcheckError) and os.environ.get("ENVCHECK_DEBUG"):
                raise
            for line in api.describe_error(e):
                typer.echo(line, err=True)
            raise typer.Exit(EXIT_USAGE) from e

    return wrapper


def _interrupt_within(error: BaseException) -> BaseException | None:
    """The interrupt ``error`` stands for, if it wraps one: Python turns what a class-creation hook raises
    into a ``RuntimeError`` (``__set_name__``, up to 3.11), so a Ctrl-C that lands while a module defines its
    dataclasses would otherwise read as an internal error. An interrupt is a ``BaseException`` that is not an
    ``Exception`` (envcheck's own ``Interrupted``, ``KeyboardInterrupt``), nor a generator's close or an
    exit: an error raised while a generator closes or while the interpreter exits is still that error."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if not isinstance(cause, Exception | GeneratorExit | SystemExit):
            return cause
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return None


def say(line: str, *, untrusted: bool = False) -> None:
    """One line on stderr; ``untrusted`` (it quotes a path or a manifest's value): redacted and escaped
    for the terminal first."""
    typer.echo(one_line(redact_text(line)) if untrusted else line, err=True)


# The command line's tip after the API's warning that the inspected interpreter has no torch where the
# reference has: the API words facts, each face its own options.
WRONG_INTERPRETER_TIP = (
    f"Tip: pass the environment's interpreter with --python, e.g. --python {api.EXAMPLE_PYTHON}"
)


def say_told(line: str) -> None:
    """A line a job told (``tell``) on stderr, redacted and escaped, and after the warning of a probably
    wrong interpreter, the command line's tip."""
    say(line, untrusted=True)
    if line.startswith("warning: ") and line.endswith("probably the wrong interpreter"):
        say(WRONG_INTERPRETER_TIP)


def write_output(text: str, output: str | Destination | None) -> None:
    """The report to stdout (``None`` or ``-``) or to ``output``, created only now that it exists; see
    ``envcheck.core.outputs`` for links, devices, FIFOs and failures (``OutputError``, exit 2)."""
    write(output if isinstance(output, Destination) else destination(output), text)


def report_findings(report: Report, options: ReportOptions, *, errors: Sequence[str] = ()) -> None:
    """Write ``report`` as ``options`` say (``envcheck.report.write_report``: the report and the JUnit
    file), say on stderr when the policy hid or softened something, and exit 1 when a finding fails the
    gate (at or above ``options.fail_on``). ``errors``: inputs left out of the report (a fleet's
    unreadable manifests), named on stderr after it, one line each; then the exit code is 2."""
    if report.wrong_interpreter:
        # The API says the fact; the command line words its own tip, naming its own option (``say_told``).
        report = dataclasses.replace(report, title=f"{report.title}: pass --python {api.EXAMPLE_PYTHON}")
    if report.policy_changed:
        typer.echo(terminal(report.policy_line), err=True)
    write_report(report, options)
    for error in errors:
        say(f"error: {error}", untrusted=True)
    if errors:
        raise typer.Exit(EXIT_USAGE)
    if any(at_or_above(f, options.fail_on) for f in report.findings):
        raise typer.Exit(EXIT_FINDINGS)


def image_only(image: object, **given: object) -> None:
    """Refuse, in one line, an option or argument that cannot go with ``--image`` (an image is read
    statically: nothing in it runs): ``given`` maps each one's parameter name (``import_``; ``targets``
    for a diff's TARGET) to its value."""
    for parameter, value in given.items():
        if value:
            flag = "TARGET" if parameter == "targets" else "--" + parameter.rstrip("_").replace("_", "-")
            raise UsageError(
                f"{flag} does not go with --image {image}: an image is read statically, nothing in it runs",
                tip="Drop it, or run envcheck inside the container instead of --image.",
            )
