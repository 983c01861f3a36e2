"""Escaping untrusted strings for the medium they are printed in.

Every string in a report comes from somewhere envcheck does not control: a manifest sent from a customer
machine, a file name inside a wheel, a binary's version resource, a target's stderr. Printed raw, such a
string can drive the reader's terminal (OSC title changes, clear-screen, hyperlinks: CVE-2003-0063 and its
many descendants), hide the rest of a Markdown pull-request comment (`<!--`, `</details>`), or make a JUnit
file that CI refuses to parse (XML 1.0 forbids most C0 controls). One function per medium; formatters call
them on every string that did not come from envcheck's own catalog.

Lone surrogates (``\\udcxx``) are data, not an error: PEP 383 turns an undecodable file name into them, so
envcheck's own snapshots can hold them. Every medium shows them as ``\\uXXXX``; none writes them raw, which
UTF-8 cannot encode (``print`` would raise ``UnicodeEncodeError``).
"""

from __future__ import annotations

import re
import shlex

# C0 controls except TAB and LF, DEL, C1 controls, lone surrogates (from undecodable file names: PEP 383),
# and the bidirectional overrides/isolates that reorder what a reader sees (CVE-2021-42574, "Trojan Source").
_UNSAFE_TERMINAL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
# XML 1.0 §2.2 Char: #x9 | #xA | #xD | [#x20-#xD7FF] | [#xE000-#xFFFD] | [#x10000-#x10FFFF]; plus what a
# terminal must not receive, because CI prints a JUnit file's failure texts in its log.
_UNSAFE_XML = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069\ufffe\uffff]")
# What ``json.dumps(..., ensure_ascii=False)`` leaves raw although a reader's terminal acts on it or UTF-8
# cannot encode it (it escapes only C0 controls, ``"`` and ``\\``).
_UNSAFE_JSON = re.compile("[\x7f-\x9f\ud800-\udfff\u202a-\u202e\u2066-\u2069]")
# Markdown: backslash first (so an escape we add cannot be cancelled by one in the data), then what starts
# raw HTML or an entity, what ends a table cell or a code span, and what opens a link or an image.
_MARKDOWN = {
    "\\": "\\\\",
    "&": "&amp;",
    "<": "&lt;",
    ">": "&gt;",
    "|": "\\|",
    "`": "\\`",
    "[": "\\[",
    "]": "\\]",
}
_MARKDOWN_SPECIAL = re.compile(r"[\\&<>|`\[\]]")


def _visible(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code <= 0xFF else f"\\u{code:04x}"


def _json_escape(match: re.Match[str]) -> str:
    return f"\\u{ord(match.group()):04x}"


def terminal(text: str) -> str:
    """``text`` with every control character shown as ``\\xNN`` / ``\\uNNNN``: it prints as data, and the
    terminal's state (title, colours, screen, cursor) stays as it was. Newlines and tabs are kept."""
    return _UNSAFE_TERMINAL.sub(_visible, text)


def one_line(text: str) -> str:
    """``terminal`` plus newlines and tabs shown as ``\\n`` / ``\\t``: for a value inside a single line."""
    return terminal(text).replace("\n", "\\n").replace("\t", "\\t")


# What GitHub turns into a link or a notification in a comment's text (GFM's extended autolinks, and
# mentions): an ``@`` before a name (``@user``, ``@org/team``, and the ``@`` of ``user@host.example``),
# a URL scheme's ``://`` (``https://``, ``ftp://``, any scheme), ``www.``, and ``mailto:`` / ``xmpp:``.
_AUTOLINK = re.compile(
    r"@(?=[A-Za-z0-9_-])|(?<=[A-Za-z0-9]):(?=//)|(?<![A-Za-z0-9])(?i:www|mailto|xmpp)(?=[.:])"
)
# U+2060 WORD JOINER: invisible and unbreakable, it is not a character a name, a host or a scheme may hold,
# so GitHub links and pings nothing across it.
_JOINER = "\u2060"


def unlinked(text: str) -> str:
    """``text`` with an invisible word joiner (U+2060) after each ``@`` that starts a name and inside each
    URL scheme's ``://``, ``www.``, ``mailto:`` and ``xmpp:``: GitHub neither pings ``@user`` nor links a
    bare URL or an e-mail address of a manifest. The text reads the same; a command copied from a rendered
    Markdown report carries the joiner (the text and JSON reports do not)."""
    return _AUTOLINK.sub(lambda m: m.group() + _JOINER, text)


def markdown(text: str) -> str:
    """Inline Markdown text: HTML is shown, never interpreted (``<script>``, ``<!--``, ``</details>``),
    table pipes and backticks cannot end a cell or a code span, brackets cannot make a link or an image,
    control characters and newlines are visible (``\\x1b``, ``\\n``), and ``@mentions``, bare URLs and
    e-mail addresses neither ping nor link on GitHub (``unlinked``)."""
    escaped = _MARKDOWN_SPECIAL.sub(lambda m: _MARKDOWN[m.group()], text)
    return unlinked(one_line(escaped))


def xml(text: str) -> str:
    """Text that XML 1.0 accepts and a terminal prints inertly (forbidden and control characters shown as
    ``\\xNN`` / ``\\uNNNN``; tab and newline kept); the XML writer still escapes ``<``, ``>`` and ``&``."""
    return _UNSAFE_XML.sub(_visible, text)


def json_text(dumped: str) -> str:
    """The output of ``json.dumps(..., ensure_ascii=False)`` with DEL, C1 controls, bidirectional overrides
    and lone surrogates written as ``\\uXXXX`` escapes: still the same JSON value (``json.loads`` gives the
    original strings back, lone surrogates included), now valid UTF-8 and inert on a terminal.

    Only for text ``json.dumps`` produced: those characters can only occur inside its string literals,
    where a ``\\uXXXX`` escape means the same character."""
    return _UNSAFE_JSON.sub(_json_escape, dumped)


# PowerShell treats the typographic single quotes as quote characters too (its tokenizer's IsSingleQuote):
# each one is doubled like ``'`` so that none can end the literal.
_POWERSHELL_QUOTES = re.compile("['\u2018\u2019\u201a\u201b]")


def shell_word(text: str, *, windows: bool) -> str:
    """``text`` as one literal word of a command line a person pastes: POSIX single quotes (always written;
    ``shlex.quote``'s form where ``text`` holds one) or, for a Windows machine, PowerShell single quotes with
    each quote character doubled. Neither shell
    expands anything inside (no ``$(…)``, backticks, ``$VAR`` or ``$env:X``), so a value taken from a
    manifest, a lock or a target reaches the command as the bytes it was. Control characters are shown as
    escapes first: a pasted remedy must not carry a newline that ends the command early."""
    text = one_line(text)
    if windows:
        return "'" + _POWERSHELL_QUOTES.sub(lambda m: m.group() * 2, text) + "'"
    return f"'{text}'" if "'" not in text else shlex.quote(text)
