"""The text report laid out for the terminal it is printed on: golden files of a drifted gate and a passing
one at 80 and 120 columns, the first and the last screen of each, lines within the width and never broken
inside a word, notes alike folded, the width the CLI picks (terminal, COLUMNS, a pipe).

The findings are those a real gate gave (a venv with h5py 3.10.0, built against NumPy 1, beside NumPy
2.4.6, gated against a snapshot of the test environment; and the test environment against its own
snapshot), copied here word for word so that the golden files do not depend on the machine.
Regenerate the golden files after an intended layout change with ``ENVCHECK_UPDATE_GOLDEN=1``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from envcheck.core.findings import Finding
from envcheck.report import render
from envcheck.report.options import MAX_WIDTH, MIN_WIDTH, report_width
from envcheck.report.text import _cut, cells, wrap

GOLDEN = Path(__file__).parent / "golden"
SCREEN = 24  # lines of a terminal's screen
TIMES = "\N{MULTIPLICATION SIGN}"
CUDA = "torch 2.13.0+cpu is built without CUDA"
NO_CUDA_REMEDY = (
    "This torch build has no CUDA: if this machine should use its GPU, install a CUDA build of torch; if it "
    "is CPU-only by design, declare it in the policy."
)
CUDA_CHECKS = [
    "cuda/autocast_fp16_gradscaler",
    "cuda/conv2d",
    "cuda/cuda_init",
    "cuda/matmul_bf16",
    "cuda/matmul_fp16",
    "cuda/matmul_fp32",
    "cuda/nccl",
    "cuda/tf32_probe",
]
NOTES = [
    *(
        Finding(
            rule="VERIFY-SKIPPED",
            severity="info",
            subject=c,
            message=f"skipped: {CUDA}",
            remedy=NO_CUDA_REMEDY,
        )
        for c in CUDA_CHECKS
    ),
    Finding(
        rule="VERIFY-SKIPPED",
        severity="info",
        subject="onnx_export",
        message="skipped: onnx is not installed in the target",
        remedy="Install onnx in the target environment if the application uses it, or accept the skip in a "
        'policy (`ignore = ["VERIFY-SKIPPED:onnx_export"]`).',
    ),
    Finding(
        rule="VERIFY-SKIPPED",
        severity="info",
        subject="torch_compile",
        message="skipped: opt-in: pass --compile (torch.compile takes 15-35 s on 2 cores, beyond the suite's "
        "budget)",
        remedy="An opt-in check: pass --compile to `envcheck verify` or `envcheck gate` to run it.",
    ),
]
H5PY_REMEDY = (
    "Either `pip install 'numpy<2'`, or `pip install --upgrade 'h5py'` "
    "(a release of h5py built for NumPy 2.x)."
)
DRIFTED = [
    Finding(
        rule="VERIFY-IMPORT",
        severity="error",
        subject="import h5py",
        base=None,
        target="2.4.6",
        message="`import h5py` (h5py 3.10.0) fails: a NumPy ABI break: it was compiled against NumPy 1.x and "
        "NumPy 2.4.6 is installed here (ValueError: numpy.dtype size changed, may indicate binary "
        "incompatibility. Expected 96 from C header, got 88 from PyObject)",
        remedy=H5PY_REMEDY,
    ),
    Finding(
        rule="ENV-PKG-MISSING",
        severity="warning",
        subject="envcheck",
        base="0.1.0",
        target="missing",
        message="envcheck 0.1.0 is installed on the base but not on the target: code that imports it fails.",
        remedy="If the application uses it, on the target: `pip install 'envcheck==0.1.0'`.",
    ),
    Finding(
        rule="ENV-PKG-ADDED",
        severity="info",
        subject="h5py",
        base="missing",
        target="3.10.0",
        message="h5py 3.10.0 is installed on the target only.",
        remedy="Remove it if the application does not need it (`pip uninstall h5py`), "
        "or add it to the base's lock file.",
    ),
    *NOTES,
]
PASSING = [
    *NOTES,
    Finding(
        rule="VERIFY-SPEED",
        severity="info",
        subject="speed_matmul.gflops",
        base="226.488",
        target="2.784",
        message="fp32 matmul with all 2 threads ran at 2.784 GFLOP/s, 1% of the golden's best "
        "226.488 GFLOP/s, while one thread ran at 97% of the golden's: as when other work keeps the cores "
        "busy, or a CPU quota is below 2 threads",
        remedy="Nothing to do for a shared machine; in a container with a CPU quota, "
        "set OMP_NUM_THREADS to the quota.",
    ),
]
TITLE = "envcheck gate: this machine (/srv/app/.venv/bin/python) against /srv/app/lock.json"
REPORTS = {"drifted": DRIFTED, "passing": PASSING}


def _render(name: str, width: int | None, **kw: object) -> str:
    return render(
        REPORTS[name],
        "text",
        title=TITLE,
        fail_on="error",
        policy="policy: none",
        width=width,
        nothing_found="No differences that matter, and no problems found.",
        **kw,  # type: ignore[arg-type]
    )


# Words a narrow layout may add where a wide one had room: "cuda/conv2d and 6 more" for a list in full.
LAYOUT_WORDS = {"and", "more"}


def _words(text: str) -> set[str]:
    """``text``'s words, less the punctuation a list puts around them."""
    return {word.strip(",;:()") for word in text.split()}


def assert_laid_out(text: str, width: int, *wide: str) -> None:
    """No line wider than ``width``; every word whole: each is a word of ``wide`` (the same report laid out
    without a width to keep to, verbose too), a count, or ends in ``…`` where a one-line entry was cut,
    after a prefix of a word."""
    lines = text.splitlines()
    assert all(cells(line) <= width for line in lines), [line for line in lines if cells(line) > width]
    words = set().union(*map(_words, wide)) | LAYOUT_WORDS
    for word in _words(text) - words:
        if word.isdigit():
            continue
        assert word.endswith("…") and any(w.startswith(word[:-1]) for w in words), word


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", ["drifted", "passing"])
def test_golden_layouts_at_80_and_120_columns(name: str, width: int) -> None:
    text = _render(name, width)
    path = GOLDEN / f"gate-{name}-{width}.txt"
    if os.environ.get("ENVCHECK_UPDATE_GOLDEN"):
        path.write_text(text, encoding="utf-8")
    assert text == path.read_text(encoding="utf-8")
    assert_laid_out(text, width, _render(name, MAX_WIDTH), _render(name, MAX_WIDTH, verbose=True))


@pytest.mark.parametrize("width", [80, 120])
def test_the_first_and_the_last_screen_of_a_drifted_gate_say_what_is_wrong_and_what_to_do(width: int) -> None:
    lines = _render("drifted", width).splitlines()
    verdict = "FAIL: 1 error, 1 warning, 11 info (fail on error)"
    for screen in (lines[:SCREEN], lines[-SCREEN:]):
        text = "\n".join(screen)
        assert verdict in screen
        assert re.search(r"^  VERIFY-IMPORT  import h5py", text, re.MULTILINE)
        # The remedy, its commands whole (a command in backticks is never broken across lines).
        remedy = " ".join(
            line[14:] for line in screen if line.startswith(("    remedy    Either", "              "))
        )
        assert "Either `pip install 'numpy<2'`, or `pip install --upgrade 'h5py'`" in remedy
    # The order of reading: verdict, the root cause with its remedy, the warning, the notes, the summary.
    text = "\n".join(lines)
    order = [
        "FAIL: 1 error",
        "ERRORS (1 root cause)",
        "remedy    Either",
        "WARNINGS (1 root cause)",
        "INFO (",
    ]
    at = [text.index(part) for part in order]
    assert at == sorted(at)


def test_a_passing_gate_fits_about_fifteen_lines_with_the_cuda_notes_folded() -> None:
    text = _render("passing", None)
    lines = text.splitlines()
    assert len(lines) <= 15, text
    (folded,) = [line for line in lines if f"VERIFY-SKIPPED {TIMES}8" in line]
    assert folded == f"  VERIFY-SKIPPED {TIMES}8: skipped: {CUDA}"
    assert text.count("This torch build has no CUDA") == 1  # one remedy for the eight
    assert "cuda/autocast_fp16_gradscaler, cuda/conv2d" in text and "and 5 more" in text
    assert lines[2] == lines[-1] == "PASS: 0 errors, 0 warnings, 11 info (fail on error)"
    # --verbose: every note in full, none folded.
    verbose = _render("passing", None, verbose=True)
    assert f"{TIMES}8" not in verbose and verbose.count("This torch build has no CUDA") == len(CUDA_CHECKS)


def test_notes_fold_only_when_rule_message_and_remedy_agree() -> None:
    other = Finding(
        rule="VERIFY-SKIPPED",
        severity="info",
        subject="cuda/other",
        message=f"skipped: {CUDA}",
        remedy="Other.",
    )
    warning = Finding(
        rule="VERIFY-SKIPPED",
        severity="warning",
        subject="cuda/x",
        message=f"skipped: {CUDA}",
        remedy=NO_CUDA_REMEDY,
    )
    text = render([*NOTES, other, warning], "text", title="t", fail_on="error")
    assert f"VERIFY-SKIPPED {TIMES}8:" in text  # the eight alike, not the one with another remedy
    assert "  VERIFY-SKIPPED  cuda/other: skipped:" in text
    assert "WARNINGS (1 root cause)\n  VERIFY-SKIPPED  cuda/x\n" in text  # a warning is never folded
    # Messages that differ only by their subject fold, the subject shown as a placeholder: nothing false.
    added = [
        Finding(
            rule="ENV-PKG-ADDED",
            severity="info",
            subject=name,
            message=f"{name} is installed on the target only.",
            remedy="Remove what the application does not need.",
        )
        for name in ("alpha", "beta")
    ]
    folded = render(added, "text", title="t", fail_on="error")
    assert f"  ENV-PKG-ADDED {TIMES}2: <subject> is installed on the target only." in folded
    assert "subjects  alpha, beta" in folded


def test_wrap_breaks_between_words_keeps_commands_whole_and_breaks_a_path_after_a_slash() -> None:
    text = "Run `pip install 'torch==2.13.0+cpu' --index-url https://example.invalid/whl/cpu` now, then go."
    lines = wrap(text, 50, "    remedy    ", " " * 14)
    assert all(cells(line) <= 50 for line in lines)
    assert any("`pip install 'torch==2.13.0+cpu'" in line for line in lines)  # as much of it as fits
    path = "/opt/conda/envs/prod/lib/python3.11/site-packages/torch/lib/libtorch_cuda.so"
    broken = wrap(path, 40, "", "")
    assert "".join(broken) == path and all(line.endswith("/") for line in broken[:-1])
    assert all(cells(line) <= 40 for line in broken)
    # Wide characters take two columns; one that does not fit still moves on (no endless loop).
    assert all(cells(line) <= 10 for line in wrap("漢字" * 20, 10, "", ""))
    assert wrap("x", 1, "abc", "") == ["abc", "x"]
    assert wrap("漢字", 41, "x" * 40, "") == ["x" * 40, "漢字"]  # a wide character never sticks out by one
    assert wrap("", 80, "    why       ", "") == ["    why"]
    # A one-line entry is cut after a word, or inside a long word after a separator.
    assert _cut("one two three four five six", 20) == "one two three four …"
    assert _cut("name: " + path, 30) == "name: /opt/conda/envs/prod/…"


def test_hostile_widths_and_text_stay_within_bounds() -> None:
    hostile = Finding(
        rule="ENV-VAR-CHANGED",
        severity="error",
        subject="X" * 500,
        base="\x1b]0;pwned\x07" * 20,
        target="漢" * 300,
        message="\t\n".join(["word"] * 200),
        remedy="`" + "a " * 300 + "`",
    )
    for width in (1, MIN_WIDTH, 80, 10**9):
        text = render([hostile, *NOTES], "text", title="t" * 300, fail_on="error", width=width)
        bound = min(max(width, MIN_WIDTH), 10**9)
        assert all(cells(line) <= bound for line in text.splitlines())
        assert "\x1b" not in text


def test_the_cli_width_is_the_terminals_or_columns_and_100_for_a_pipe(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import io
    import sys

    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    monkeypatch.delenv("COLUMNS", raising=False)
    monkeypatch.setattr(sys, "stdout", io.StringIO())
    assert report_width(None) == 100  # a pipe: stable for logs
    monkeypatch.setenv("COLUMNS", "87")
    assert report_width(None) == 87 and report_width("-") == 87
    assert report_width("report.txt") == 100  # a file is no terminal, whatever COLUMNS says
    for bad, expected in (("0", MIN_WIDTH), ("99999999", MAX_WIDTH), ("abc", 100), ("-5", 100), ("٣٣", 100)):
        monkeypatch.setenv("COLUMNS", bad)
        assert report_width(None) == expected, bad
    monkeypatch.delenv("COLUMNS")
    monkeypatch.setattr(sys, "stdout", Tty())
    monkeypatch.setenv("LINES", "24")
    # rich measures the terminal (a StringIO has no size: rich's default, 80); the number is the point.
    assert MIN_WIDTH <= report_width(None) <= MAX_WIDTH


def test_fleet_words_name_platforms_and_ranks() -> None:
    from envcheck.core.findings import MachineGroup

    finding = Finding(
        rule="ENV-PKG-VERSION",
        severity="warning",
        subject="numpy",
        message="m",
        remedy="r",
        machine="linux_aarch64",
    )
    group = MachineGroup(name="linux_aarch64", members=("linux_aarch64",))
    text = render([finding], "text", title="t", fail_on="error", groups=[group], member="platform")
    assert "0 platforms identical to the base; 1 platform in 1 group" in text
    assert "  linux_aarch64: 1 platform: PASS: 0 errors, 1 warning, 0 info" in text and "machine" not in text
    ranks = MachineGroup(name="env-1", members=("node-1:0-3",), machines=4)
    text = render([], "text", title="t", fail_on="error", groups=[ranks], member="rank")
    assert "4 ranks in 1 group" in text


def test_a_hostile_columns_never_breaks_a_diff() -> None:
    from typer.testing import CliRunner

    from envcheck.cli import app

    manifests = Path(__file__).resolve().parents[1] / "data" / "manifests"
    args = ["diff", str(manifests / "dev-cpu.json"), str(manifests / "cuda.json")]
    for columns, width in (("abc", 100), ("", 100), ("10", MIN_WIDTH), ("1" * 40, MAX_WIDTH), ("-3", 100)):
        result = CliRunner().invoke(app, args, env={"COLUMNS": columns})
        assert result.exit_code == 1, (columns, result.output)
        lines = result.stdout.splitlines()
        assert lines[0].startswith("envcheck diff:") and max(map(cells, lines)) <= width, columns


@settings(max_examples=200, deadline=None)
@given(
    text=st.text(alphabet=st.sampled_from(list("ab /-_`'\t\n漢é\u0301")), max_size=400),
    width=st.integers(min_value=MIN_WIDTH, max_value=130),
)
def test_wrap_keeps_every_character_and_the_width(text: str, width: int) -> None:
    lines = wrap(text, width, "    remedy    ", " " * 14)
    assert all(cells(line) <= width for line in lines)
    # Only whitespace is taken away or moved: every other character is kept, in order.
    assert "".join("".join(line.split()) for line in lines) == "remedy" + "".join(text.split())
