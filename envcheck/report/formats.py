"""The one list of report formats: ``FormatName`` names them (``--format``) and maps each to its formatter.

The format modules import ``envcheck.report.interface``; this module imports them only inside
``FormatName.formatter``, and nothing imports this module back from them: no cycle, and a report format's
code (rich for coloured text, ElementTree for JUnit) is loaded only when that format is rendered.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, NoReturn

if TYPE_CHECKING:
    from envcheck.report.interface import ReportFormat


class FormatName(str, enum.Enum):
    """A report format: the values of ``--format`` (and ``ENVCHECK_FORMAT``)."""

    text = "text"
    json = "json"
    markdown = "markdown"
    junit = "junit"
    html = "html"

    def formatter(self) -> ReportFormat:
        """The implementation of this format: the one mapping, closed (mypy fails on a missing case)."""
        match self:
            case FormatName.text:
                # Lazy: a format's code (rich, ElementTree) loads only when that format is rendered.
                from envcheck.report.text import TextFormat

                return TextFormat()
            case FormatName.json:
                # Lazy: a format's code (rich, ElementTree) loads only when that format is rendered.
                from envcheck.report.json_format import JsonFormat

                return JsonFormat()
            case FormatName.markdown:
                # Lazy: a format's code (rich, ElementTree) loads only when that format is rendered.
                from envcheck.report.markdown import MarkdownFormat

                return MarkdownFormat()
            case FormatName.junit:
                # Lazy: a format's code (rich, ElementTree) loads only when that format is rendered.
                from envcheck.report.junit import JunitFormat

                return JunitFormat()
            case FormatName.html:
                # Lazy: a format's code (rich, ElementTree) loads only when that format is rendered.
                from envcheck.report.html import HtmlFormat

                return HtmlFormat()
            case _:
                return _unknown(self)

    @classmethod
    def parse(cls, name: str) -> FormatName:
        """``name`` as a format. Raises ``ValueError`` (``unknown report format 'yaml'``) otherwise."""
        try:
            return cls(name)
        except ValueError:
            raise ValueError(f"unknown report format {name!r}") from None


def _unknown(name: NoReturn) -> NoReturn:
    # typing.assert_never is 3.11+; this is the same exhaustiveness check on 3.10.
    raise ValueError(f"unknown report format {name!r}")


FORMATS: tuple[FormatName, ...] = tuple(FormatName)
