"""One CLI vocabulary: -h everywhere, -q on every command that takes seconds, values named one way in
every --help, one whole sentence per command in the top-level help, ``-o``'s suffix picking the report
format; and the files given in the wrong place (a venv, an interpreter, a requirements lock where a
manifest goes, a manifest where a requirements lock goes) named, with the right command or option."""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest
from clirun import run

from envcheck.cli import COMMANDS, SHORT_HELP
from envcheck.manifest import load
from envcheck.report.summary import summary

DATA = Path(__file__).parent / "data" / "manifests"
DEV = DATA / "dev-cpu.json"
AGAIN = DATA / "dev-cpu-again.json"
LOCK_TEXT = "numpy==2.4.6\n    # via -r requirements.in\ntorch==2.13.0+cpu\n    # via -r requirements.in\n"


@pytest.mark.parametrize("command", list(COMMANDS))
def test_dash_h_is_help_on_every_command(command: str) -> None:
    code, out, _ = run(command, "-h")
    assert code == 0
    assert out.startswith(f"Usage: envcheck {command} ")
    assert "-h, --help" in out


def test_dash_h_at_the_top_and_one_whole_sentence_per_command() -> None:
    code, out, _ = run("-h")
    assert code == 0
    listed = out.split("Commands:\n", 1)[1].splitlines()
    # One line per command, none cut: each is the command's whole short help, ending a sentence.
    assert [line.split()[0] for line in listed if line.strip()] == list(COMMANDS)
    for line in listed:
        if line.strip():
            name, text = line.split(None, 1)
            assert text == SHORT_HELP[name]
            assert text.endswith(".") and not text.endswith("...")


@pytest.mark.parametrize("command", list(COMMANDS))
def test_values_are_named_one_way_in_every_help(command: str) -> None:
    _, out, _ = run(command, "--help")
    # typer's own spellings ({manifest}, <str>, <float range>) are gone: capitals, or a choice's values.
    assert not re.search(r"[{<]", out.split("\n\n", 1)[0]), out.splitlines()[0]
    options = [line for line in out.splitlines() if line.startswith("  -")]
    assert not [line for line in options if re.search(r"<\w|\{\w", line)]
    usage = out.splitlines()[0]
    assert not re.search(r"\b[a-z_]+\b$", usage.split("[OPTIONS]")[1].strip() or "X"), usage


def test_the_file_kinds_have_distinct_names() -> None:
    _, lock_help, _ = run("lock", "--help")
    assert "Usage: envcheck lock [OPTIONS] MANIFEST|LOCK" in lock_help
    assert "requirements lock" in lock_help
    for command in ("snapshot", "gate", "diff"):
        _, out, _ = run(command, "--help")
        assert "lockfile manifest" not in out and "lock file" not in out, command


@pytest.mark.parametrize("command", ["lock", "cluster"])
def test_quiet_is_accepted_by_lock_and_cluster(command: str) -> None:
    _, out, _ = run(command, "--help")
    assert "-q, --quiet" in out
    # cluster outside torchrun: refused as before (exit 2), -q understood
    args = ["lock", "-q", str(DEV), "--hashes", "--python", "x"] if command == "lock" else ["cluster", "-q"]
    code, _, err = run(*args)
    assert code == 2
    assert "No such option" not in err


@pytest.mark.parametrize(
    ("suffix", "check"),
    [
        (".json", lambda text: json.loads(text)["findings"] is not None),
        (".md", lambda text: text.startswith("#")),
        (".html", lambda text: text.lstrip().lower().startswith("<!doctype html")),
        (".xml", lambda text: text.startswith("<?xml")),
    ],
)
def test_output_suffix_picks_the_format(tmp_path: Path, suffix: str, check) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / f"report{suffix}"
    code, _, err = run("diff", str(DEV), str(AGAIN), "-o", str(out))
    assert code in (0, 1), err
    assert check(out.read_text())


def test_output_suffix_against_format_is_refused_before_any_work(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, _, err = run("diff", str(DEV), str(AGAIN), "-f", "text", "-o", str(out))
    assert code == 2
    assert "--format text contradicts -o" in err and "Tip:" in err
    assert not out.exists()
    # The same format, or a suffix without a format of its own, is written as asked.
    assert run("diff", str(DEV), str(AGAIN), "-f", "json", "-o", str(out))[0] in (0, 1)
    json.loads(out.read_text())
    plain = tmp_path / "report.txt"
    assert run("diff", str(DEV), str(AGAIN), "-f", "markdown", "-o", str(plain))[0] in (0, 1)
    assert plain.read_text().startswith("#")


def test_output_suffix_wins_over_the_environments_format(tmp_path: Path) -> None:
    out = tmp_path / "report.json"
    code, _, err = run("diff", str(DEV), str(AGAIN), "-o", str(out), env={"ENVCHECK_FORMAT": "markdown"})
    assert code in (0, 1), err
    json.loads(out.read_text())


def test_openmp_is_named_once_in_the_summary() -> None:
    text = summary(load(DEV), short=True)
    assert "openmp openmp" not in text
    assert re.search(r"^openmp +/\S+libgomp", text, re.M), text


# -- a file of another kind where a manifest or a requirements lock is expected ------------------------


def _one_error(err: str) -> tuple[str, str]:
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert lines[0].startswith("error: ") and lines[1].startswith("Tip: ")
    assert "Traceback" not in err
    return lines[0], lines[1]


def _venv_like(tmp_path: Path) -> Path:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n")
    return venv


@pytest.mark.parametrize("command", [["show"], ["gate"], ["export"], ["diff", str(DEV)], ["doctor"]])
def test_a_venv_folder_as_manifest_points_to_python(tmp_path: Path, command: list[str]) -> None:
    venv = _venv_like(tmp_path)
    code, _, err = run(*command, str(venv))
    assert code == 2
    error, tip = _one_error(err)
    assert "Python environment's folder" in error
    assert f"--python {venv}/bin/python" in tip


def test_an_interpreter_as_manifest_points_to_python() -> None:
    code, _, err = run("gate", sys.executable)
    assert code == 2
    error, tip = _one_error(err)
    assert "an executable (an interpreter?), not a manifest" in error
    assert f"--python {sys.executable}" in tip


def test_a_python_script_as_manifest_points_to_python(tmp_path: Path) -> None:
    script = tmp_path / "python3"
    script.write_text("#!/usr/bin/env python3\nimport sys\n")
    code, _, err = run("show", str(script))
    assert code == 2
    error, tip = _one_error(err)
    assert "a Python script or interpreter launcher" in error and "--python" in tip


def test_a_requirements_lock_as_manifest_points_to_lock_check(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(LOCK_TEXT)
    for command in (["show"], ["lock"], ["diff", str(DEV)], ["gate"]):
        code, _, err = run(*command, str(lock))
        assert code == 2, command
        error, tip = _one_error(err)
        assert "a requirements lock (pip-tools), not a manifest" in error
        assert f"envcheck lock --check {lock}" in tip


def test_a_manifest_as_requirements_lock_points_the_other_way() -> None:
    code, _, err = run("lock", "--check", str(DEV))
    assert code == 2
    error, tip = _one_error(err)
    assert "an envcheck manifest (JSON), not a requirements lock" in error
    assert f"`envcheck lock {DEV}`" in tip and "--python" in tip


def test_a_venv_or_interpreter_as_requirements_lock(tmp_path: Path) -> None:
    venv = _venv_like(tmp_path)
    error, tip = _one_error(run("lock", "--check", str(venv))[2])
    assert "Python environment's folder, not a requirements lock" in error
    assert f"--python {venv}/bin/python" in tip
    error, tip = _one_error(run("lock", "--check", sys.executable)[2])
    assert "an executable" in error and "--python" in tip


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x00\x01\xff garbage", "not UTF-8 text"),  # no hint where none fits
        (b"", "file is empty"),
        (b"  [1, 2]", "expected a JSON object"),
        (b"hello world\n", "not valid JSON"),
        (b"torch==2.13.0+cpu\nthis is prose, not a pin\n", "not valid JSON"),  # half a lock: no guess
        (b"MZ\x90\x00" + b"\x00" * 60 + b"PE\x00\x00", "an executable"),  # a PE file
        (b"MZ-tools==1.0\n", "a requirements lock"),  # MZ alone is no executable
        (b"#!/bin/sh\necho hi\n", "not valid JSON"),  # a shell script is no python
    ],
)
def test_hostile_and_plain_non_manifests(tmp_path: Path, content: bytes, expected: str) -> None:
    path = tmp_path / "m.json"
    path.write_bytes(content)
    code, _, err = run("show", str(path))
    assert code == 2
    assert expected in err and "Traceback" not in err
    assert err.count("\n") <= 2


def test_a_plain_folder_is_no_venv(tmp_path: Path) -> None:
    code, _, err = run("show", str(tmp_path))
    assert code == 2
    assert "is a directory" in err and "--python" not in err


def test_every_option_and_argument_help_is_a_sentence() -> None:
    import typer.main

    from envcheck.cli import build

    for name, command in typer.main.get_command(build()).commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            text = (getattr(param, "help", None) or "").strip()
            assert text, (name, param.name)
            assert text[0].isupper() or text[0] in "-`", (name, param.name, text)
            assert text.endswith((".", ")")), (name, param.name, text)


def test_the_suffix_mapping_outside_a_command_line() -> None:
    """What cluster's rank 0 and the pytest plugin get: the suffix decides, nothing to contradict."""
    from envcheck.report.options import ReportFormatChoice as F
    from envcheck.report.options import resolve_format

    assert resolve_format(F.text, "report.json") is F.json
    assert resolve_format(F.text, "out/REPORT.XML") is F.junit
    assert resolve_format(F.html, "report.txt") is F.html
    assert resolve_format(F.markdown, None) is F.markdown
    assert resolve_format(F.json, "-") is F.json
    assert resolve_format("text", "r.md") is F.markdown  # type: ignore[arg-type]


# Options that name what each command writes or reads may word it per command: -o's file (a report, a
# lock, an SBOM) and --format's values (report formats, scan's, export's SBOM formats).
WORDED_PER_COMMAND = frozenset({"--output", "--format"})


def test_an_option_shared_by_several_commands_is_declared_once() -> None:
    import typer.main

    from envcheck.cli import build

    helps: dict[str, dict[str, list[str]]] = {}
    for name, command in typer.main.get_command(build()).commands.items():  # type: ignore[attr-defined]
        for param in command.params:
            for flag in getattr(param, "opts", ()):
                if flag.startswith("--") and not getattr(param, "hidden", False):
                    helps.setdefault(flag, {}).setdefault(param.help or "", []).append(name)
    shared = {flag: texts for flag, texts in helps.items() if sum(map(len, texts.values())) > 1}
    assert {"--timeout", "--no-policy", "--index-url", "--python", "--policy"} <= set(shared)
    worded_twice = {
        flag: {text[:70]: names for text, names in texts.items()}
        for flag, texts in shared.items()
        if len(texts) > 1 and flag not in WORDED_PER_COMMAND
    }
    assert not worded_twice, f"options with several help texts: {worded_twice}"
    # Declared in commands/options.py, never in a command module.
    from envcheck import commands

    folder = Path(commands.__file__).parent
    for path in sorted(folder.glob("*.py")):
        if path.name == "options.py":
            continue
        text = path.read_text(encoding="utf-8")
        redeclared = [flag for flag in shared if flag not in WORDED_PER_COMMAND and f'"{flag}"' in text]
        assert not redeclared, f"{path.name} declares shared options itself: {redeclared}"
