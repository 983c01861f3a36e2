"""What every command shares: the error chokepoint, output writing, and reusable option types."""

from __future__ import annotations

import functools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, ParamSpec, TypeVar

import typer

from envcheck.errors import EnvcheckError

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
