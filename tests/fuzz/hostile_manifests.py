"""Mutating real manifests into hostile ones, and checking that an output is safe for its medium.

A mutation replaces one node of a real manifest's JSON tree (found by its path) with something hostile:
strings that drive terminals, inject HTML or break XML, lone surrogates, huge strings; numbers that
overflow, are not JSON, or are negative; a dropped key, a value of the wrong type, or a deep nesting. Some
replacements are raw JSON tokens (``1e400``, ``NaN``) that no Python value dumps to: they are written as
placeholders and spliced into the text, which then goes through the real loader like a file would.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
import types
import typing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Union, get_args, get_origin

from hypothesis import strategies as st
from junitparser import JUnitXml
from markdown_it import MarkdownIt

from envcheck.manifest.model import Manifest

ROOT = Path(__file__).resolve().parents[2]
REAL_MANIFESTS = sorted(
    [*(ROOT / "tests/data/manifests").glob("*.json"), *(ROOT / "manifests/examples").glob("*.json")]
)
SMALL = [p for p in REAL_MANIFESTS if p.stat().st_size < 100_000]
LARGE = [p for p in REAL_MANIFESTS if p.stat().st_size >= 100_000]

# Pieces of hostile strings: terminal control (OSC title, clear screen, OSC 8 hyperlink, a C1 CSI, BEL),
# HTML that would hide or run in a PR comment, characters XML 1.0 forbids, lone surrogates as PEP 383
# makes them (a high one never directly before a low one: JSON would merge the pair), bidi overrides,
# rich console markup, Markdown link/table syntax, and plain text.
FRAGMENTS = (
    "\x1b]0;pwned\x07",
    "\x1b[2J\x1b[H",
    "\x1b]8;;http://evil.example/\x1b\\link\x1b]8;;\x1b\\",
    "\x9b31m",
    "\x07",
    "<script>alert(1)</script>",
    "</details>",
    "<!--",
    "<img src=x onerror=alert(1)>",
    "&lt;b&gt;",
    "\x00",
    "\x0b\x0c",
    "\r",
    "\ufffe",
    "\udcff",
    "\udc80",
    "\ud800!",
    "\u202e",
    "\u2066",
    "[bold red]",
    "[/]",
    "[link=http://evil.example]x[/link]",
    "| --- |",
    "`",
    "\\",
    "![t](http://t.example/p.png)",
    "\n",
    "\t",
    "torch",
    "2.13.0+cpu",
    "/usr/lib/libgomp.so.1",
    "",
)

hostile_text = st.lists(st.sampled_from(FRAGMENTS) | st.text(max_size=12), min_size=1, max_size=6).map(
    "".join
)
huge_text = st.builds(lambda piece, n: piece * n, st.sampled_from(FRAGMENTS[:8]), st.integers(500, 2_000))

# Raw JSON number tokens, an integer past Python's 4300-digit conversion limit among them.
RAW_NUMBERS = (
    "9" * 5000,
    "1e400",
    "-1e400",
    "NaN",
    "Infinity",
    "-Infinity",
    "1" + "0" * 400,
    "-1",
    "-9223372036854775809",
)
PLAIN_NUMBERS = (0, -1, -(2**63), 2**64, 10**30, 1.5e308, -0.0, 5e-324)


@dataclass(frozen=True)
class Raw:
    """A raw JSON token to splice in where this placeholder lands."""

    token: str


def deep(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = [value]
    return value


_DROP = object()

# Replacements that keep the JSON type (the manifest still loads, so the value reaches the reports) ...
numbers = st.sampled_from(RAW_NUMBERS).map(Raw) | st.sampled_from(PLAIN_NUMBERS)
# ... and ones that change the shape (the loader must refuse them with a located ManifestError).
structural = st.one_of(
    st.sampled_from([None, True, [], {}, "", [1, "x"], {"k": "\x1b[2J"}, 7, _DROP]),
    st.integers(2, 400).map(deep),
    # Deeper than json.loads can go (RecursionError): rare, it only exercises the loader's refusal.
    st.integers(0, 9).map(lambda n: Raw("[" * 100_000 + "]" * 100_000) if n == 0 else _DROP),
)


@functools.cache
def raw_tree(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


def _walk(node: Any, here: tuple[Any, ...], out: list[tuple[Any, ...]]) -> None:
    out.append(here)
    if isinstance(node, dict):
        for k, v in node.items():
            _walk(v, (*here, k), out)
    elif isinstance(node, list):
        for i, v in enumerate(node):
            _walk(v, (*here, i), out)


# Sections a report prints from; the rest (sha256 and native-tree minutiae) is sampled at a lower rate.
_HOT = ("meta", "python", "platform", "torch", "gpu", "env", "runtimes", "verify", "schema_version")

Path_ = tuple[Any, ...]


@dataclass(frozen=True)
class Nodes:
    """The paths of a manifest's nodes, by what they hold."""

    hot_strings: tuple[Path_, ...]
    strings: tuple[Path_, ...]
    numbers: tuple[Path_, ...]
    everything: tuple[Path_, ...]


def _hot(where: Path_) -> bool:
    return where[0] in _HOT or (where[0] == "packages" and len(where) == 3)


def _annotation_at(where: Path_) -> Any:
    """The manifest model's annotation for the node at ``where`` (``Any`` inside untyped JSON)."""
    tp: Any = Manifest
    for key in where:
        tp = _non_null(tp)
        if isinstance(tp, type) and dataclasses.is_dataclass(tp):
            tp = _hints(tp)[key]
        elif get_origin(tp) is dict:
            tp = get_args(tp)[1]
        elif get_origin(tp) in (list, tuple):
            tp = get_args(tp)[0]
        else:
            return Any
    return tp


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _non_null(tp: Any) -> Any:
    """``T`` for ``T | None``; other annotations as they are."""
    if get_origin(tp) in (Union, types.UnionType):
        options = [a for a in get_args(tp) if a is not type(None)]
        return options[0] if len(options) == 1 else tp
    return tp


def _free_text(where: Path_) -> bool:
    """A string field any text is valid for (not a ``Literal`` the loader would refuse other values of)."""
    return get_origin(_non_null(_annotation_at(where))) is not Literal


@functools.cache
def nodes(path: Path) -> Nodes:
    out: list[Path_] = []
    tree = raw_tree(path)
    _walk(tree, (), out)
    everything = tuple(p for p in out if p)
    kinds = {p: type(_get(tree, p)) for p in everything}
    strings = tuple(p for p in everything if kinds[p] is str and _free_text(p))
    return Nodes(
        hot_strings=tuple(p for p in strings if _hot(p)),
        strings=strings,
        numbers=tuple(p for p in everything if kinds[p] in (int, float)),
        everything=everything,
    )


def _get(node: Any, where: Path_) -> Any:
    for key in where:
        node = node[key]
    return node


Change = tuple[Path_, Any]


def mutations(path: Path, max_strings: int = 6) -> st.SearchStrategy[list[Change]]:
    """Hostile strings at string nodes (mostly ones reports print), sometimes a number and a shape change."""
    found = nodes(path)
    text = st.one_of(hostile_text, hostile_text, hostile_text, huge_text)
    string_changes = st.lists(
        st.tuples(st.sampled_from(found.hot_strings) | st.sampled_from(found.strings), text),
        min_size=1,
        max_size=max_strings,
    )
    number_change = st.tuples(st.sampled_from(found.numbers), numbers)
    shape_change = st.tuples(st.sampled_from(found.everything), structural)
    # Two in three manifests keep their shape (they load, and the hostile strings reach the reports); the
    # third also gets a hostile number or a shape change, which the loader must refuse with a location.
    return st.one_of(
        string_changes,
        string_changes,
        st.builds(lambda a, b: [*a, b], string_changes, number_change | shape_change),
    )


def _set(node: Any, where: tuple[Any, ...], value: Any) -> Any:
    """A copy of ``node`` with the value at ``where`` replaced (copies only along the path)."""
    if not where:
        return value
    key, rest = where[0], where[1:]
    if isinstance(node, dict) and key in node:
        copy = dict(node)
        inner = _set(node[key], rest, value)
        if inner is _DROP:
            del copy[key]
        else:
            copy[key] = inner
        return copy
    if isinstance(node, list) and isinstance(key, int) and key < len(node):
        items = list(node)
        inner = _set(node[key], rest, value)
        if inner is _DROP:
            del items[key]
        else:
            items[key] = inner
        return items
    return node  # an earlier mutation changed the shape above this path


def manifest_text(path: Path, changes: list[tuple[tuple[Any, ...], Any]]) -> str:
    """The real manifest at ``path`` with ``changes`` applied, as the text of a file."""
    tree = raw_tree(path)
    raws: list[str] = []
    for where, value in changes:
        placed = value
        if isinstance(value, Raw):
            raws.append(value.token)
            placed = f"@@RAW{len(raws) - 1}@@"
        tree = _set(tree, where, placed)
    text = json.dumps(tree, indent=2, ensure_ascii=False)
    for i, token in enumerate(raws):
        text = text.replace(f'"@@RAW{i}@@"', token)
    return text


# ---- What a safe output is -------------------------------------------------------------------------

# C0 controls but TAB and LF, DEL, C1, bidi overrides and isolates, and lone surrogates (UTF-8 cannot
# encode them: print() would raise).
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
SGR = re.compile("\x1b\\[[0-9;]*m")
_OWN_HTML = re.compile(r"</?details>|<summary>[^<]*</summary>|<br>")
_MARKDOWN = MarkdownIt("commonmark").enable("table")


def assert_printable(text: str, *, coloured: bool = False) -> None:
    """No byte of ``text`` changes a terminal's state, and it encodes as UTF-8."""
    if coloured:
        text = SGR.sub("", text)
    text.encode("utf-8")
    bad = UNSAFE.search(text)
    assert bad is None, (
        f"raw {bad.group()!r} at {bad.start()}: {text[max(0, bad.start() - 40) : bad.end() + 40]!r}"
    )


# A code span as envcheck writes one: backticks that no backslash escapes, on one line, nothing between
# them that is a backtick.
_CODE_SPAN = re.compile(r"(?<!\\)`[^`\n]*`")


def assert_no_raw_html(text: str) -> None:
    """The only HTML a Markdown report holds is its own (``<details>``, ``<summary>``, ``<br>``), both as
    text and as a CommonMark parser sees it. A remedy's command is a code span, where ``<`` is literal
    (``pip install 'numpy<2'``): the parser's view says whether any of it became HTML."""
    prose = _CODE_SPAN.sub("", text)
    assert "<" not in _OWN_HTML.sub("", prose), "an unescaped '<' in the Markdown report"
    for token in _MARKDOWN.parse(text):
        html = [token.content] if token.type == "html_block" else []
        html += [c.content for c in token.children or [] if c.type == "html_inline"]
        for fragment in html:
            assert _OWN_HTML.sub("", fragment).strip() == "", f"raw HTML in the Markdown report: {fragment!r}"


def assert_junit_parses(text: str) -> None:
    xml = JUnitXml.fromstring(text)
    assert len(list(xml)) == 1, "one test suite"
