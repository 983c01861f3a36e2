"""The HTML report: one self-contained file, inert on hostile manifests, rendered by a real headless
Chromium (Debian's ``chromium``) for a single diff and a fleet diff: the screenshot is a real picture and
the DOM after the page's own script ran holds the findings."""

from __future__ import annotations

import copy
import json
import shutil
import struct
import subprocess
import zlib
from collections import Counter
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from clirun import run

from envcheck.core.findings import Finding, MachineGroup
from envcheck.report import render
from envcheck.report.html import CONTENT_SECURITY_POLICY

MANIFESTS = Path(__file__).resolve().parents[1] / "data" / "manifests"
SCRIPT = "<script>alert(1)</script>"
EVIL_PACKAGE = f"evil{SCRIPT}"
EVIL_LABEL = 'prod"><img src=x onerror=alert(2)><script>alert(3)</script>'
TAGS = {
    "html", "head", "meta", "title", "style", "body", "header", "h1", "h2", "p", "input", "output", "main",
    "section", "details", "summary", "span", "div", "dl", "dt", "dd", "pre", "code", "table", "thead",
    "tbody", "tr", "th", "td", "script",
}  # fmt: skip


class Tags(HTMLParser):
    """Every start tag with its attributes, and the text of each <script>."""

    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.scripts: list[str] = []
        self._in_script = False

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))
        self._in_script = tag == "script"
        if self._in_script:
            self.scripts.append("")

    def handle_endtag(self, tag: str) -> None:
        self._in_script = False

    def handle_data(self, data: str) -> None:
        if self._in_script:
            self.scripts[-1] += data


def parsed(text: str) -> Tags:
    parser = Tags()
    parser.feed(text)
    parser.close()
    return parser


def edited(name: str, label: str, *, hostile: bool = False) -> dict[str, Any]:
    """A real manifest of tests/data/manifests, relabelled; ``hostile``: plus a package whose name is a
    script (its ENV-PKG-ADDED finding quotes it in the subject and in the remedy)."""
    data: dict[str, Any] = copy.deepcopy(json.loads((MANIFESTS / f"{name}.json").read_text(encoding="utf-8")))
    data["meta"]["label"] = label
    if hostile:
        extra = copy.deepcopy(next(p for p in data["packages"] if p["name"] == "filelock"))
        extra.update(name=EVIL_PACKAGE, native_files=[])
        data["packages"].append(extra)
    return data


def write(tmp_path: Path, name: str, data: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


# --- the file itself ----------------------------------------------------------------------------------


HOSTILE_FINDING = Finding(
    rule="ENV-PKG-ADDED",
    severity="error",
    subject=EVIL_PACKAGE,
    base=None,
    target=f"1.0{SCRIPT}",
    message=f"added \x1b]0;t\x07 {SCRIPT}",
    remedy=f"pip uninstall '{EVIL_PACKAGE}' </pre></details>{SCRIPT}",
    machine=EVIL_LABEL,
)
CONSEQUENCE = Finding(
    rule="ENV-NATIVE-ADDED",
    severity="info",
    subject=f"lib{SCRIPT}.so",
    message="m",
    remedy="r",
    machine=EVIL_LABEL,
    caused_by=HOSTILE_FINDING.key,
)


def test_hostile_strings_are_text_never_markup() -> None:
    text = render(
        [HOSTILE_FINDING, CONSEQUENCE],
        "html",
        title=f"envcheck diff: base → {EVIL_LABEL}",
        fail_on="error",
        policy=f"policy: {SCRIPT}",
        groups=[MachineGroup(name=EVIL_LABEL, members=(EVIL_LABEL, f"b{SCRIPT}"))],
    )
    page = parsed(text)
    assert {tag for tag, _ in page.tags} <= TAGS
    # One script, the report's own; no element carries an event handler, a link or a source.
    assert [tag for tag, _ in page.tags].count("script") == 1
    assert "alert" not in page.scripts[0]
    assert not [
        attrs for _, attrs in page.tags if any(k.startswith("on") or k in ("src", "href") for k in attrs)
    ]
    # The hostile strings are all there, as text.
    for raw in (EVIL_PACKAGE, EVIL_LABEL, HOSTILE_FINDING.remedy, f"policy: {SCRIPT}"):
        shown = raw.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
        assert shown.replace('"', "&quot;").replace("'", "&#x27;") in text
    assert "\x1b" not in text and "\\x1b]0;t\\x07" in text
    # The policy forbids every load; the page itself is the only source of style and script.
    assert "default-src 'none'" in CONTENT_SECURITY_POLICY and "unsafe-inline" not in CONTENT_SECURITY_POLICY
    metas = [a for t, a in page.tags if t == "meta" and a.get("http-equiv") == "Content-Security-Policy"]
    assert metas == [{"http-equiv": "Content-Security-Policy", "content": CONTENT_SECURITY_POLICY}]


def test_root_causes_fold_their_consequences_and_errors_start_open() -> None:
    text = render([HOSTILE_FINDING, CONSEQUENCE], "html", title="t", fail_on="error")
    page = parsed(text)
    details = [attrs for tag, attrs in page.tags if tag == "details"]
    assert [d["class"] for d in details] == ["finding error", "finding info"]
    assert "open" in details[0] and "open" not in details[1]  # readable without script: errors open
    # The consequence is inside its root's block.
    root_at = text.index('<details class="finding error"')
    assert root_at < text.index('<details class="finding info"') < text.rindex("</details>")
    assert "causes 1 finding (1 info)" in text


def test_an_empty_report_says_so() -> None:
    text = render(
        [], "html", title="envcheck doctor: dev", fail_on="error", nothing_found="No problems found."
    )
    assert '<p class="empty">No problems found.</p>' in text and "PASS: 0 errors" in text


def test_every_report_command_writes_html(tmp_path: Path) -> None:
    dev, cuda = str(MANIFESTS / "dev-cpu.json"), str(MANIFESTS / "cuda.json")
    code, out, _ = run("diff", dev, cuda, "--format", "html")
    assert code == 1 and out.startswith("<!DOCTYPE html>") and "ENV-TORCH-VARIANT" in out
    code, out, _ = run("doctor", str(MANIFESTS / "twin-a.json"), "--format", "HTML")  # a clean one
    assert code == 0 and out.startswith("<!DOCTYPE html>") and "No problems found." in out
    # The JUnit file beside an HTML report is still JUnit.
    junit = tmp_path / "r.xml"
    assert run("diff", dev, cuda, "-f", "html", "--junit", str(junit))[0] == 1
    assert junit.read_text(encoding="utf-8").startswith("<?xml")


def test_fleet_report_has_the_drift_matrix_and_the_groups() -> None:
    findings = [
        Finding(
            rule="ENV-TORCH-VARIANT", severity="error", subject="torch", message="m", remedy="r", machine="g1"
        ),
        Finding(
            rule="ENV-PKG-VERSION", severity="info", subject="numpy", message="m", remedy="r", machine="g1"
        ),
        Finding(
            rule="ENV-PKG-VERSION", severity="warning", subject="six", message="m", remedy="r", machine="g2"
        ),
    ]
    groups = [
        MachineGroup(name="g1", members=("node-1", "node-7")),
        MachineGroup(name="g2", members=("node-2",)),
        MachineGroup(name="g3", members=("node-3", "node-4"), identical_to_base=True),
    ]
    text = render(findings, "html", title="fleet", fail_on="error", groups=groups)
    matrix = text[text.index('<table id="matrix">') : text.index("</table>")]
    rows = matrix.split("<tr>")[2:]
    assert [r.split("</td>")[0].split(">")[1].split(" <")[0] for r in rows] == ["g1", "g2", "g3"]
    header = matrix.split("</tr>")[0]
    assert header.index("ENV-TORCH-VARIANT") < header.index("ENV-PKG-VERSION")  # the worst rule first
    g1, g2, g3 = rows
    assert '"cell error"' in g1 and '"cell info"' in g1 and "(2 machines)" in g1
    assert '"cell warning"' in g2 and '"cell error"' not in g2
    assert g3.count('"cell none"') == 2 and "no drift" in g3
    members = text[text.index('<table id="groups">') :]
    assert "node-1, node-7" in members and "node-3, node-4" in members and "identical to the base" in members


# --- a real browser ------------------------------------------------------------------------------------


def _chromium() -> str:
    for name in ("chromium", "chromium-browser"):
        if found := shutil.which(name):
            return found
    pytest.skip("no chromium binary (Debian: apt-get install chromium): the HTML report is not rendered")


def _browse(page: Path, tmp_path: Path, *mode: str, url: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            _chromium(),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--hide-scrollbars",
            f"--user-data-dir={tmp_path / 'profile'}",
            "--window-size=1200,900",
            *mode,
            url or page.as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def png_pixels(data: bytes) -> tuple[int, int, list[bytes]]:
    """Width, height and the RGB(A) pixels of an 8-bit PNG, decoded with zlib and the PNG row filters."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8 and colour in (2, 6), (depth, colour)
    bpp = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * bpp
    previous = bytearray(stride)
    pixels: list[bytes] = []
    for y in range(height):
        kind, row = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        for x in range(stride):
            a = row[x - bpp] if x >= bpp else 0
            b = previous[x]
            c = previous[x - bpp] if x >= bpp else 0
            if kind == 1:
                row[x] = (row[x] + a) & 0xFF
            elif kind == 2:
                row[x] = (row[x] + b) & 0xFF
            elif kind == 3:
                row[x] = (row[x] + (a + b) // 2) & 0xFF
            elif kind == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                row[x] = (row[x] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xFF
        pixels += [bytes(row[i : i + 3]) for i in range(0, stride, bpp)]
        previous = row
    return width, height, pixels


def screenshot_and_dom(page: Path, tmp_path: Path) -> tuple[list[bytes], str]:
    shot = tmp_path / f"{page.stem}.png"
    result = _browse(page, tmp_path, f"--screenshot={shot}")
    assert result.returncode == 0 and shot.is_file(), result.stderr[-2000:]
    assert shot.stat().st_size > 20_000, "a near-empty screenshot"
    width, height, pixels = png_pixels(shot.read_bytes())
    assert (width, height) == (1200, 900)
    colours = Counter(pixels)
    assert len(colours) > 50, "not a rendered page: too few colours"
    assert colours.most_common(1)[0][1] < 0.9 * len(pixels), "one flat colour"
    assert any(r > 150 and g < 80 and b < 80 for r, g, b in colours), "no error red on screen"
    dom = _browse(page, tmp_path, "--dump-dom")
    assert dom.returncode == 0, dom.stderr[-2000:]
    return pixels, dom.stdout


@pytest.mark.slow  # a real browser renders the page: seconds, not the fast tier's milliseconds
def test_single_diff_in_chromium(tmp_path: Path) -> None:
    base = str(MANIFESTS / "dev-cpu.json")
    target = write(tmp_path, "prod", edited("cuda", EVIL_LABEL, hostile=True))
    page = tmp_path / "single.html"
    code, _, err = run("diff", base, target, "--format", "html", "-o", str(page))
    assert code == 1, err
    _, dom = screenshot_and_dom(page, tmp_path)
    for text in ("ENV-TORCH-VARIANT", "torch", "ENV-PKG-ADDED", "FAIL: 2 errors"):
        assert text in dom
    # The hostile name and label are text in the live DOM: no element came from them.
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;" in dom
    assert dom.count("<script") == 1 and "<img" not in dom
    # The page's own script ran (the policy allowed it by hash): it showed the search box.
    assert 'class="search" hidden' not in dom and 'id="search"' in dom
    # The search filters: #q=libcuda leaves the torch variant (whose consequence needs libcuda.so.1) and
    # the libcuda finding itself; every other finding is hidden.
    filtered = _browse(page, tmp_path, "--dump-dom", url=page.as_uri() + "#q=libcuda.so")
    assert filtered.returncode == 0, filtered.stderr[-2000:]
    shown = [
        block
        for block in filtered.stdout.split('<details class="finding')[1:]
        if not block.split(">")[0].endswith(" hidden") and " hidden=" not in block.split(">")[0]
    ]
    assert shown and len(shown) < dom.count('<details class="finding')
    assert all("libcuda" in block or "ENV-TORCH-VARIANT" in block for block in shown)
    assert "findings match" in filtered.stdout
    assert '<section class="findings warning" hidden="">' in filtered.stdout  # no warning root matches


@pytest.mark.slow
def test_fleet_diff_in_chromium(tmp_path: Path) -> None:
    base = str(MANIFESTS / "dev-cpu.json")
    t1 = write(tmp_path, "t1", edited("cuda", "t1"))
    t2 = write(tmp_path, "t2", edited("dev-cpu-again", "t2"))
    t3 = write(tmp_path, "t3", edited("dev-cpu", "t3", hostile=True))
    page = tmp_path / "fleet.html"
    code, _, err = run("diff", base, t1, t2, t3, "--format", "html", "-o", str(page))
    assert code == 1, err
    _, dom = screenshot_and_dom(page, tmp_path)
    assert 'id="matrix"' in dom
    matrix = dom[dom.index('id="matrix"') : dom.index("</table>", dom.index('id="matrix"'))]
    for machine in ("t1", "t2", "t3"):
        assert f'<td class="machine-name">{machine}' in matrix
    assert "ENV-TORCH-VARIANT" in matrix and "ENV-PKG-ADDED" in matrix
    assert "evil&lt;script&gt;alert(1)&lt;/script&gt;" in dom and dom.count("<script") == 1


def test_commands_in_backticks_are_code_escaped_like_the_rest() -> None:
    finding = Finding(
        rule="ENV-PKG-VERSION",
        severity="error",
        subject="numpy",
        message="`import h5py` fails",
        remedy="On the target: `pip install 'numpy<2' </code><script>x</script>`, then rerun; "
        "a lone ` stays.",
    )
    text = render([finding], "html", title="t", fail_on="error")
    assert "<dd><code>import h5py</code> fails</dd>" in text
    assert (
        '<dd class="remedy">On the target: <code>pip install &#x27;numpy&lt;2&#x27; '
        "&lt;/code&gt;&lt;script&gt;x&lt;/script&gt;</code>, then rerun; a lone ` stays.</dd>"
    ) in text
    assert "`pip" not in text  # no literal backticks around a command


def test_a_fleet_machine_is_never_both_without_drift_and_different() -> None:
    quiet = MachineGroup(name="g4", members=("node-5",))  # differs, but nothing that matters was found
    same = MachineGroup(name="g3", members=("node-3",), identical_to_base=True)
    text = render([], "html", title="fleet", fail_on="error", groups=[quiet, same])
    rows = text[text.index('<table id="matrix">') : text.index("</table>")].split("<tr>")[2:]
    assert "no drift that matters" in rows[1] and "no drift that matters" not in rows[0]
    members = text[text.index('<table id="groups">') :]
    assert "differs from the base in nothing that matters" in members and "identical to the base" in members
    # predict's platforms and a job's ranks are called so.
    platforms = render([], "html", title="p", fail_on="error", groups=[quiet], member="platform")
    assert "<th>Platform</th>" in platforms and "<h2>Platform groups</h2>" in platforms
    assert "Machine" not in platforms
