"""``envcheck scan``: the static native tree of a wheel, an unpacked tree or a site-packages folder."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import EXIT_FINDINGS, EXIT_OK, handles_errors, write_output
from envcheck.commands.options import TimeoutOption


class ScanFormat(str, Enum):
    text = "text"
    json = "json"


@handles_errors
def scan(
    path: Annotated[str, typer.Argument(help="A .whl file, an unpacked tree or a site-packages folder.")],
    output_format: Annotated[ScanFormat, typer.Option("--format", help="Report format.")] = ScanFormat.text,
    output: Annotated[str | None, typer.Option("-o", "--output", help="Write the report to a file.")] = None,
    timeout: TimeoutOption = 120.0,
) -> None:
    """Resolve the native libraries of a wheel or folder (any platform) the way its loader would.

    Prints the tree, what the target machine must provide (OS libraries, redistributable runtimes), what is
    missing inside the tree, and what was never opened (devices, links out of the tree, RECORD entries
    leaving it, wheel members over a cap). Exit 1 when something that should be inside the tree is missing
    or was refused.
    """
    # One deadline for the whole scan: extracting the wheel, listing the tree, reading every header. Past it
    # the scan stops with one line naming the step and what it had done (exit 2).
    scanned = api.scan(path, timeout=timeout)
    # File names and paths of a tree can hold a credential's shape: the report passes the redactor.
    write_output(scanned.as_json() if output_format is ScanFormat.json else scanned.as_text(), output)
    # Exit 1 for what should be inside the tree and is not: a MISSING library of the tree's own (not the OS
    # or a runtime the machine provides), one of its files that cannot be read, or one that was refused.
    raise typer.Exit(EXIT_FINDINGS if scanned.broken else EXIT_OK)
