"""Reusable typer options for every command that reports findings (diff, doctor, gate, verify)::

    from envcheck.report.options import FailOnOption, FormatOption, JunitOption, OutputOption, PolicyOption

    def gate(..., fmt: FormatOption = ReportFormatChoice.text, output: OutputOption = None,
             fail_on: FailOnOption = SeverityChoice.error, policy: PolicyOption = None,
             junit: JunitOption = None, verbose: VerboseOption = False,
             quiet: QuietOption = False) -> None: ...

``use_color(fmt, output)`` decides colour the one way: text to a terminal, ``NO_COLOR`` unset.
"""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import Annotated

import typer

from envcheck.findings import Severity
from envcheck.report.formats import FormatName

# ``--format`` takes the one enum of formats; the alias keeps the name the commands use.
ReportFormatChoice = FormatName


class SeverityChoice(str, enum.Enum):
    """``--fail-on`` values: the lowest severity that fails (exit 1)."""

    error = "error"
    warning = "warning"
    info = "info"

    @property
    def severity(self) -> Severity:
        return _SEVERITIES[self.value]


_SEVERITIES: dict[str, Severity] = {"error": "error", "warning": "warning", "info": "info"}


FormatOption = Annotated[
    ReportFormatChoice,
    typer.Option("--format", "-f", help="Report format.", envvar="ENVCHECK_FORMAT", case_sensitive=False),
]
OutputOption = Annotated[
    str | None,
    typer.Option(
        "--output", "-o", help="Write the report to this file (default: stdout).", show_default=False
    ),
]
FailOnOption = Annotated[
    SeverityChoice,
    typer.Option(
        "--fail-on",
        help="Exit 1 when a finding at or above this severity exists (intended ones never fail).",
        envvar="ENVCHECK_FAIL_ON",
        case_sensitive=False,
    ),
]
PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy TOML (ignore / severity / intended). Default: [tool.envcheck] in ./pyproject.toml.",
        envvar="ENVCHECK_POLICY",
        show_default=False,
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show every finding in full (the text report otherwise fits about one screen: root causes "
        "first, a few of their consequences each).",
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress line on stderr (it shows only on a terminal anyway)."),
]
JunitOption = Annotated[
    Path | None,
    typer.Option("--junit", help="Also write a JUnit XML report to this file.", show_default=False),
]


def use_color(fmt: ReportFormatChoice, output: str | None) -> bool:
    """Colour only for a text report on a terminal, and never with NO_COLOR set (no-color.org)."""
    if fmt is not ReportFormatChoice.text or output not in (None, "-"):
        return False
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()
