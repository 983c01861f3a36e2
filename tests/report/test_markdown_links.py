"""A Markdown report posted as a pull-request comment pings nobody and links nothing from a manifest.

GitHub turns ``@name`` into a mention (a notification) and, by GFM's extended autolinks, bare
``https://`` / ``ftp://`` URLs, ``www.`` hosts and e-mail addresses into links. Manifest strings carry all
of them (a package's ``direct_url``, an index URL, a maintainer's address, a hostile name). The report is
parsed with markdown-it (CommonMark and tables, as tests/report does) and every text a reader sees (text
nodes and the text of envcheck's own ``<summary>``) is checked against the rule of what GitHub links.
Inside code spans GitHub links and pings nothing: a remedy's command is one, and copies exactly."""

from __future__ import annotations

import dataclasses
import re

import pytest
from markdown_it import MarkdownIt

from envcheck.core.escape import markdown, unlinked
from envcheck.core.findings import Finding
from envcheck.report import render

# GitHub's rule, as far as a comment's plain text goes: a mention is an @ that does not follow a word
# character, before a user or team name; GFM's extended autolinks are a scheme's :// before a host, a
# www. host at a word start, and an e-mail address (local part, @, a domain with a dot).
GITHUB_LINKS = re.compile(
    r"(?<![A-Za-z0-9`])@[A-Za-z0-9][A-Za-z0-9-]*"
    r"|\b[A-Za-z][A-Za-z0-9+.-]*://[A-Za-z0-9]"
    r"|(?<![A-Za-z0-9])www\.[A-Za-z0-9]"
    r"|[A-Za-z0-9._+-]+@[A-Za-z0-9_-]+\.[A-Za-z0-9]"
    r"|\b(?:mailto|xmpp):[A-Za-z0-9]",
    re.IGNORECASE,
)
LINKY = (
    "@octocat",
    "cc @org/security-team",
    "https://evil.example/login",
    "ftp://files.example/x",
    "www.evil.example",
    "WWW.Evil.Example",
    "maintainer@corp.example",
    "mailto:root@corp.example",
    "torch @ https://download.example/whl/torch-2.13.0.whl",
    "git+ssh://git@github.com/org/repo.git",
)
_PARSER = MarkdownIt("commonmark").enable("table")
_TAG = re.compile(r"<[^>]*>")


def seen_text(report: str, kind: str = "text") -> list[str]:
    """Every text of the rendered report a GitHub reader sees (``kind="text"``: text nodes, and the text of
    raw HTML blocks (``<summary>``) with their tags taken away), or its code spans (``"code_inline"``)."""
    out = []
    for token in _PARSER.parse(report):
        if token.type == "html_block" and kind == "text":
            out.append(_TAG.sub(" ", token.content))
        for child in token.children or []:
            assert child.type != "link_open", child
            if child.type == kind:
                out.append(child.content)
    return out


def linked(texts: list[str]) -> list[str]:
    return [m.group() for t in texts for m in GITHUB_LINKS.finditer(t)]


@pytest.mark.parametrize("value", LINKY)
def test_the_rule_sees_each_value_raw(value: str) -> None:
    assert linked([value]), value  # the rule would catch each one unescaped
    assert not linked([markdown(value)]) and not linked([unlinked(value)]), markdown(value)


def test_a_markdown_report_neither_pings_nor_links() -> None:
    root = Finding(
        rule="ENV-PKG-VERSION",
        severity="error",
        subject=" ".join(LINKY),
        base=LINKY[2],
        target=LINKY[6],
        message="from " + " ".join(LINKY),
        remedy="`pip install 'x @ " + LINKY[2] + "'` " + " ".join(LINKY),
        machine=LINKY[0],
    )
    consequence = Finding(
        rule="ENV-PKG-ADDED",
        severity="warning",
        subject="dep",
        message=" ".join(LINKY),
        remedy="r",
        caused_by=root.key,
    )
    for fleet in (False, True):
        findings = [root, consequence] if fleet else [dataclasses.replace(root, machine=None), consequence]
        report = render(findings, "markdown", title="diff " + LINKY[0], fail_on="error", policy=LINKY[1])
        texts = seen_text(report)
        assert any("octocat" in t for t in texts) and any("evil.example" in t for t in texts)
        assert linked(texts) == [], linked(texts)
        # The remedy's command is a code span, with no joiner: pasted, it is the command as written.
        assert "pip install 'x @ " + LINKY[2] + "'" in seen_text(report, "code_inline")


def test_ordinary_text_is_unchanged() -> None:
    for text in ("torch==2.13.0+cpu", "C:\\Program Files\\x", "a:b", "x @ y", "email me", "wwwx.example"):
        assert unlinked(text) == text
