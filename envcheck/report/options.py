"""How a report is written: ``ReportOptions``, the one value the report layer takes whole
(``envcheck.report.write_report``), and the decisions it is built from.

``use_color(fmt, output)`` decides colour the one way: text to a terminal, ``NO_COLOR`` unset;
``report_width(output)`` the text report's width: the terminal's (or ``COLUMNS``), else a stable 100;
``resolve_format(fmt, output)`` the format a ``-o FILE``'s suffix picks; ``decide(...)`` a
``ReportOptions`` from all three. The command line's option types live in ``envcheck.commands.options``,
whose ``report_options`` builds a ``ReportOptions`` from the parsed options.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from envcheck.core.errors import UsageError
from envcheck.core.findings import Severity
from envcheck.report.formats import FormatName
from envcheck.report.interface import DEFAULT_WIDTH, SEVERITIES

# ``--format`` takes the one enum of formats; the alias keeps the name the commands used.
ReportFormatChoice = FormatName

__all__ = ["SEVERITIES", "ReportFormatChoice", "ReportOptions", "decide", "report_width", "resolve_format"]


@dataclass(frozen=True, kw_only=True, slots=True)
class ReportOptions:
    """How one report is rendered and written: its format (already resolved against ``output``'s
    suffix), where it goes (``None`` or ``-``: stdout), the lowest severity that fails (exit 1), an extra
    JUnit file, every finding in full or one screen, what an empty report says (``None``: ``No
    differences that matter.``), and for text: colour and the columns (``None``: ``DEFAULT_WIDTH``)."""

    format: FormatName = FormatName.text
    output: str | None = None
    fail_on: Severity = "error"
    junit: Path | None = None
    verbose: bool = False
    nothing_found: str | None = None
    color: bool = False
    width: int | None = None
    remedies: Path | None = None


def use_color(fmt: FormatName, output: str | None) -> bool:
    """Colour only for a text report on a terminal, and never with NO_COLOR set (no-color.org)."""
    if fmt is not FormatName.text or output not in (None, "-"):
        return False
    if os.environ.get("NO_COLOR"):
        return False
    return sys.stdout.isatty()


# ``-o`` with one of these suffixes and no --format writes that format (``-o report.json``: JSON).
SUFFIX_FORMATS: dict[str, FormatName] = {
    ".json": FormatName.json,
    ".md": FormatName.markdown,
    ".html": FormatName.html,
    ".xml": FormatName.junit,
}


def resolve_format(fmt: FormatName | str, output: str | None, *, format_given: bool = False) -> FormatName:
    """The format a report is written in: ``-o FILE`` with a suffix of ``SUFFIX_FORMATS`` picks that format
    unless ``format_given`` (--format was on the command line), and then a suffix that names another one is
    refused (``UsageError``: a ``report.json`` holding a text report is a trap). Anything else: ``fmt``."""
    fmt = FormatName(fmt)  # the command line's raw value while the command's options are read
    if output in (None, "-"):
        return fmt
    suffix = Path(str(output)).suffix.lower()
    wanted = SUFFIX_FORMATS.get(suffix)
    if wanted is None or wanted is fmt:
        return fmt
    if format_given:
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


def decide(
    fmt: FormatName | str = FormatName.text,
    output: str | None = None,
    *,
    fail_on: Severity = "error",
    junit: Path | None = None,
    verbose: bool = False,
    nothing_found: str | None = None,
    format_given: bool = False,
    remedies: Path | None = None,
) -> ReportOptions:
    """``ReportOptions`` with the format resolved against ``output`` (``resolve_format``: raises
    ``UsageError`` for a contradiction) and, for text, colour and width decided from where it goes."""
    resolved = resolve_format(fmt, output, format_given=format_given)
    text = resolved is FormatName.text
    return ReportOptions(
        format=resolved,
        output=output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found=nothing_found,
        color=use_color(resolved, output),
        width=report_width(output) if text else None,
        remedies=remedies,
    )
