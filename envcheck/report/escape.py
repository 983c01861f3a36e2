"""Escaping untrusted strings for the medium they are printed in.

Every string in a report comes from somewhere envcheck does not control: a manifest sent from a customer
machine, a file name inside a wheel, a binary's version resource, a target's stderr. Printed raw, such a
string can drive the reader's terminal (OSC title changes, clear-screen, hyperlinks: CVE-2003-0063 and its
many descendants), hide the rest of a Markdown pull-request comment (`<!--`, `</details>`), or make a JUnit
file that CI refuses to parse (XML 1.0 forbids most C0 controls). One function per medium; formatters call
them on every string that did not come from envcheck's own catalog.
"""

from __future__ import annotations

import re

# C0 controls except TAB and LF, DEL, C1 controls, lone surrogates (from undecodable file names: PEP 383),
# and the bidirectional overrides/isolates that reorder what a reader sees (CVE-2021-42574, "Trojan Source").
_UNSAFE_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
# XML 1.0 §2.2 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF].
_UNSAFE_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ud800-\udfff\ufffe\uffff]")
_MARKDOWN_HTML = {"&": "&amp;", "<": "&lt;", ">": "&gt;"}


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def terminal(text: str) -> str:
    """``text`` with every control character shown as ``\\xNN`` / ``\\uNNNN``: it prints as data, and the
    terminal's state (title, colours, screen, cursor) stays as it was. Newlines and tabs are kept."""
    return _UNSAFE_TERMINAL.sub(_visible, text)


def one_line(text: str) -> str:
    """``terminal`` plus newlines and tabs shown as ``\\n`` / ``\\t``: for a value inside a single line."""
    return terminal(text).replace("\n", "\\n").replace("\t", "\\t")


def markdown(text: str) -> str:
    """Inline Markdown text: HTML is shown, never interpreted (``<script>``, ``<!--``, ``</details>``),
    table pipes and backticks cannot end a cell or a code span, control characters are visible."""
    text = "".join(_MARKDOWN_HTML.get(c, c) for c in one_line(text))
    return text.replace("|", "\\|").replace("`", "\\`")


def xml(text: str) -> str:
    """Text that XML 1.0 accepts (the characters it forbids shown as ``\\xNN``); the XML writer still
    escapes ``<``, ``>`` and ``&`` itself."""
    return _UNSAFE_XML.sub(_visible, text)
