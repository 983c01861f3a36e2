"""Reusable typer options for every command that reports findings (diff, doctor, gate, verify)::

    from envcheck.report.options import FailOnOption, FormatOption, JunitOption, OutputOption, PolicyOption

    def gate(..., fmt: FormatOption = ReportFormatChoice.text, output: OutputOption = None,
             fail_on: FailOnOption = SeverityChoice.error, policy: PolicyOption = None,
             junit: JunitOption = None, verbose: VerboseOption = False,
             quiet: QuietOption = False) -> None: ...

``use_color(fmt, output)`` decides colour the one way: text to a terminal, ``NO_COLOR`` unset;
``report_width(output)`` the text report's width: the terminal's (or ``COLUMNS``), else a stable 100.
"""

from __future__ import annotations

import enum
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from envcheck.core.findings import Severity
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
        "--output",
        "-o",
        help="Write the report to this file (default: stdout). Without --format, a .json, .md, .html or "
        ".xml (JUnit) suffix picks the format.",
        show_default=False,
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


# ``-o`` with one of these suffixes and no --format writes that format (``-o report.json``: JSON).
SUFFIX_FORMATS: dict[str, ReportFormatChoice] = {
    ".json": ReportFormatChoice.json,
    ".md": ReportFormatChoice.markdown,
    ".html": ReportFormatChoice.html,
    ".xml": ReportFormatChoice.junit,
}


def current_context() -> Any:
    """The click context of the command running now (``params``, ``get_parameter_source``), or None
    (called outside a command line)."""
    try:  # typer 0.22+ carries its own copy of click
        from typer._click.globals import get_current_context
    except ImportError:  # pragma: no cover - older typer: click itself
        from click import get_current_context  # type: ignore[no-redef]
    return get_current_context(silent=True)


def _format_given() -> bool:
    """Whether --format / -f was on the command line of the command running now (not its default, not
    ``ENVCHECK_FORMAT``: a CI job's default that the file's suffix overrides)."""
    ctx = current_context()
    if ctx is None or "fmt" not in ctx.params:
        return False
    source = ctx.get_parameter_source("fmt")
    return source is not None and source.name == "COMMANDLINE"


def resolve_format(fmt: ReportFormatChoice, output: str | None) -> ReportFormatChoice:
    """The format a report is written in: ``-o FILE`` with a suffix of ``SUFFIX_FORMATS`` and no
    --format picks that format; --format given with a suffix that names another one is refused
    (``UsageError``: a ``report.json`` holding a text report is a trap). Anything else: ``fmt``."""
    fmt = ReportFormatChoice(fmt)  # the command line's raw value while the command's options are read
    if output in (None, "-"):
        return fmt
    suffix = Path(str(output)).suffix.lower()
    wanted = SUFFIX_FORMATS.get(suffix)
    if wanted is None or wanted is fmt:
        return fmt
    if _format_given():
        from envcheck.core.errors import UsageError

        raise UsageError(
            f"--format {fmt.value} contradicts -o {output} (a {suffix} file is {wanted.value})",
            tip=f"Drop --format (the suffix picks {wanted.value}), or name the file for {fmt.value}.",
        )
    return wanted


# The text report's width is kept within these columns whatever the terminal or COLUMNS says: below the
# lower bound a label and its text no longer fit side by side, and a huge COLUMNS is a typo.
MIN_WIDTH = 40
MAX_WIDTH = 400


def report_width(output: str | None) -> int:
    """The columns the text report is laid out in: for stdout, ``COLUMNS`` when it is set to a number, else
    the terminal's width as rich measures it when stdout is a terminal; a pipe, a file (``-o``) or a
    terminal that gives no width gets a stable ``DEFAULT_WIDTH`` (100), so logs read the same everywhere.
    Always within ``MIN_WIDTH``..``MAX_WIDTH``."""
    from envcheck.report.interface import DEFAULT_WIDTH

    if output not in (None, "-"):
        return DEFAULT_WIDTH
    columns = os.environ.get("COLUMNS", "").strip()
    if columns.isascii() and columns.isdigit():
        return min(max(int(columns), MIN_WIDTH), MAX_WIDTH)
    try:
        on_terminal = sys.stdout.isatty()
    except (AttributeError, ValueError):  # no stdout, or a closed one
        on_terminal = False
    if not on_terminal:
        return DEFAULT_WIDTH
    from rich.console import Console

    width = Console(file=sys.stdout).width
    return min(max(width, MIN_WIDTH), MAX_WIDTH) if width > 0 else DEFAULT_WIDTH
