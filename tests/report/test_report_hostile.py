"""Reports print manifest data inertly: no terminal control, no HTML, well-formed XML, valid UTF-8.

One hostile finding carries every kind of attack in every string it has; each format is checked for the
property its medium needs, by the tool that reader uses (a Markdown parser, junitparser, ``json.loads``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from junitparser import JUnitXml
from markdown_it import MarkdownIt

from envcheck.core.escape import json_text, markdown, one_line, terminal, xml
from envcheck.core.findings import Finding
from envcheck.report import FORMATS, FormatName, render

OSC_TITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J\x1b[H"
HYPERLINK = "\x1b]8;;http://evil.example/\x1b\\click\x1b]8;;\x1b\\"
C1_CSI = "\x9b31m"
HTML = "<script>alert(1)</script></details><!-- hide"
HOSTILE = f"{OSC_TITLE}{CLEAR}{HYPERLINK}{C1_CSI}{HTML}[bold]x[/bold]\x00\ud800-\udcff\u202e\ufffe|`\\"

FINDING = Finding(
    rule="ENV-PKG-VERSION",
    severity="error",
    subject=f"pkg{HOSTILE}",
    base=f"1.0{HOSTILE}",
    target=f"2.0\n{HOSTILE}",
    message=f"why {HOSTILE}",
    remedy=f"pip install 'pkg{HOSTILE}'",
    machine=f"node{HOSTILE}",
)
# A consequence folded under FINDING: nesting must keep every guarantee (Markdown's <summary> quotes the
# root's subject as raw HTML, JUnit's failure text lists the consequence).
CONSEQUENCE = Finding(
    rule=f"ENV-NATIVE-LOST{HOSTILE}",
    severity="error",
    subject=f"dep{HOSTILE}",
    base=f"lib{HOSTILE}",
    target="not loaded",
    message=f"lost {HOSTILE}",
    remedy=f"reinstall {HOSTILE}",
    machine=FINDING.machine,
    caused_by=FINDING.key,
)
INTENDED = Finding(
    rule="ENV-VAR-CHANGED",
    severity="warning",
    subject="OMP_NUM_THREADS",
    message="m",
    remedy="r",
    intended=f"because {HOSTILE}",
)
TITLE = f"envcheck diff: {HOSTILE}.json → prod"
POLICY = f"policy: ./{HOSTILE}/pyproject.toml [tool.envcheck]: 3 ignored, 1 downgraded"

# What a terminal acts on: C0 controls but TAB/LF, DEL, C1, bidi overrides; and what UTF-8 cannot encode.
UNSAFE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# rich's own colour codes (SGR), the only escape sequences a coloured report may hold.
SGR = re.compile("\x1b\\[[0-9;]*m")


def assert_inert(text: str) -> None:
    text.encode("utf-8")  # lone surrogates would raise here, as they do in print()
    assert not UNSAFE.findall(text)


def rendered(fmt: FormatName, *, color: bool = False) -> str:
    return render(
        [FINDING, CONSEQUENCE, INTENDED], fmt, title=TITLE, fail_on="error", color=color, policy=POLICY
    )


@pytest.mark.parametrize("fmt", FORMATS)
def test_every_format_is_inert_utf8(fmt: FormatName) -> None:
    assert_inert(rendered(fmt))


def test_coloured_text_has_only_rich_colour_codes_and_no_markup() -> None:
    text = rendered("text", color=True)
    assert SGR.search(text), "the coloured report lost its colours"
    assert_inert(SGR.sub("", text))
    assert "[bold]x[/bold]" in SGR.sub("", text)  # shown, not parsed as console markup


def test_plain_text_shows_escapes_and_the_policy_line() -> None:
    lines = rendered("text").splitlines()
    # The title and the policy line, long words, are broken to the report's width (100), never cut.
    verdict = next(i for i, line in enumerate(lines) if line.startswith("FAIL"))
    head = "".join(line.strip() for line in lines[:verdict]).replace(" ", "")
    assert head == (one_line(TITLE) + one_line(POLICY)).replace(" ", "")
    assert all(len(line) <= 100 for line in lines)
    assert "\\x1b]0;pwned\\x07" in "\n".join(lines)
    assert "\\ud800-\\udcff" in "\n".join(lines)


def _html_tokens(text: str) -> list[str]:
    md = MarkdownIt("commonmark").enable("table")
    found: list[str] = []
    for token in md.parse(text):
        if token.type == "html_block":
            found.append(token.content.strip())
        for child in token.children or []:
            if child.type == "html_inline":
                found.append(child.content)
    return found


def test_markdown_carries_only_its_own_html() -> None:
    text = rendered("markdown")
    html = _html_tokens(text)
    # envcheck's own tags only: line breaks, and details blocks whose summary quotes data escaped (the
    # root cause's subject, in the block that folds its consequences).
    own = re.compile(r"<br>|</details>|<details>(\n<summary>[^<>]*</summary>)?")
    assert html and all(own.fullmatch(token) for token in html), html
    assert any("<summary>1. ENV-PKG-VERSION pkg" in token for token in html)
    assert "<script" not in text and "<!--" not in text
    assert f"\n{markdown(POLICY)}\n" in text
    # Each finding is one table row: the hostile pipes and newlines did not add cells or rows.
    rows = [line for line in text.splitlines() if line.startswith("| `ENV-PKG-VERSION` | node")]
    assert len(rows) == 2  # the fleet's drift-by-rule table, and the finding's own row
    cells = [re.findall(r"(?<!\\)\|", row) for row in rows]
    assert [len(c) for c in cells] == [3, 8]  # 2 and 7 columns (fleet: with Machine): no cell was added


def test_junit_parses_and_keeps_the_policy(tmp_path: Path) -> None:
    path = tmp_path / "report.xml"
    path.write_text(rendered("junit"), encoding="utf-8")
    (suite,) = list(JUnitXml.fromfile(str(path)))
    assert suite.name == xml(TITLE)
    # junitparser ships no annotations for properties().
    properties = {p.name: p.value for p in suite.properties()}  # type: ignore[no-untyped-call]
    assert properties["policy"] == xml(POLICY)
    cases = {case.name: case for case in suite}
    failure = cases[xml(FINDING.key)].result[0].text
    assert "\\x1b]0;pwned\\x07" in failure
    assert f"lost {xml(HOSTILE)}" in failure  # the consequence, listed under its root


def test_json_gives_back_the_exact_strings() -> None:
    data = json.loads(rendered("json"))
    assert data["title"] == TITLE and data["policy"] == POLICY
    by_id = {f["id"]: f for f in data["findings"]}
    first, consequence, second = (by_id[f.key] for f in (FINDING, CONSEQUENCE, INTENDED))
    assert (first["subject"], first["target"], first["machine"]) == (
        FINDING.subject,
        FINDING.target,
        FINDING.machine,
    )
    assert (first["id"], consequence["caused_by"]) == (FINDING.key, FINDING.key)
    assert second["intended"] == INTENDED.intended


def test_policy_is_absent_unless_given() -> None:
    for fmt in FORMATS:
        text = render([FINDING], fmt, title="t", fail_on="error")
        if fmt is FormatName.html:  # its head holds a Content-Security-Policy: the report is the body
            text = text.partition("</head>")[2]
        assert "policy" not in text


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("a\\|b", "a\\\\\\|b"),  # a backslash in the data cannot cancel the pipe's escape
        ("[x](javascript:alert(1))", "\\[x\\](javascript:alert(1))"),
        ("![t](http://t.example/p.png)", "!\\[t\\](http:\u2060//t.example/p.png)"),  # not linked either
        ("&lt;b&gt;", "&amp;lt;b&amp;gt;"),
        ("a\nb", "a\\nb"),
    ],
)
def test_markdown_escape(raw: str, shown: str) -> None:
    assert markdown(raw) == shown


def test_escapers_keep_ordinary_text() -> None:
    plain = "torch 2.13.0+cpu — Grüße, 東京 ✓"
    assert terminal(plain) == one_line(plain) == xml(plain) == markdown(plain) == plain
    assert terminal("a\tb\nc") == "a\tb\nc"
    assert json_text(json.dumps(plain, ensure_ascii=False)) == json.dumps(plain, ensure_ascii=False)
    assert json.loads(json_text(json.dumps("\ud800\x9b\u202e", ensure_ascii=False))) == "\ud800\x9b\u202e"
