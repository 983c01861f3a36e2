"""Remedies are safe to paste: a remedy made from a hostile manifest runs nothing in bash. A distribution
name or version that fails PEP 508/440 is never written as an argument (a manual step says why instead);
a value envcheck does write (an index or wheel URL, a path, a variable's value) reaches the command as one
literal word, for the shell the remedy is written for. Remedies are pasted into a real bash whose ``pip``,
``python`` and ``rm`` are functions that record their arguments: no command substitution, backtick,
parameter expansion or early newline may run, and pip receives a hostile URL as it was. A Windows target's
remedies are PowerShell: every value from the manifest is in single quotes with each quote doubled, so no
``$(…)`` or ``$env:X`` outside them comes from the manifest.

Some rules still write their commands by hand (``shell_word``); such a command may hold a hostile name,
quoted: it must be as safe (nothing runs, pip receives the name as one argument)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from diffdata import Edit, dist_entry, manifest

from envcheck.app import flows
from envcheck.core.findings import Finding
from envcheck.core.remedy import Manual, Shell, UnsafeValue, checked_url, render
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest
from envcheck.manifest.provenance import _pythonpath_action
from envcheck.manifest.remedy import pip_install, pip_requirement, remedy_text, shell_word

BASH = shutil.which("bash")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")

# Each payload creates a file named after it when a shell expands it.
PAYLOADS = (
    "$(touch pwned-subst)",
    "`touch pwned-backtick`",
    "${X:-$(touch pwned-param)}",
    "'; touch pwned-quote; '",
    '"; touch pwned-dquote; "',
    "\ntouch pwned-newline\n",
    "$(touch pwned-ps)'$(touch pwned-ps2)'\u2019$(touch pwned-ps3)",
)


def hostile_version(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, "filelock")["version"] = f"3.0{payload}"

    return edit


def hostile_name(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        added = dict(dist_entry(d, "filelock"), name=f"evil{payload}", version="1.0")
        d["packages"].append(added)

    return edit


def torch_at(version: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, "torch")["version"] = version
        d["torch"]["static"]["version"] = version
        d["torch"]["runtime"]["version"] = version

    return edit


def index_url(payload: str) -> str:
    return f"https://mirror.example/{payload.strip()}/cpu".replace(" ", "%20")


def wheel_url(payload: str) -> str:
    url = f"https://h.example/{payload.strip()}/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
    return url.replace(" ", "%20")


def hostile_index(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["env"]["PIP_INDEX_URL"] = index_url(payload)

    return edit


def hostile_wheel(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        dist_entry(d, "torch")["direct_url"] = {"url": wheel_url(payload), "archive_info": {}}

    return edit


def torch_files_only(payload: str) -> Edit:
    """torch without its .dist-info (ENV-TORCH-NO-METADATA), its version.py saying ``payload``."""

    def edit(d: dict[str, Any]) -> None:
        d["packages"] = [p for p in d["packages"] if p["name"] != "torch"]
        d["torch"]["static"]["version"] = f"2.13.0+cpu{payload}"

    return edit


def windows(d: dict[str, Any]) -> None:
    d["platform"]["system"] = "Windows"


def remedies(payload: str, *, on_windows: bool = False) -> dict[str, list[Finding]]:
    """Findings of diffs whose remedies carry ``payload``, by where it is: a version the base recorded, a
    name the target has, an index URL and a wheel URL the base recorded, torch's version.py beside no
    torch metadata."""
    target_edits: tuple[Edit, ...] = (windows,) if on_windows else ()
    pairs: dict[str, tuple[Manifest, Manifest]] = {
        "version": (manifest("dev-cpu", hostile_version(payload)), manifest("dev-cpu", *target_edits)),
        "name": (manifest("dev-cpu"), manifest("dev-cpu", hostile_name(payload), *target_edits)),
        "index": (
            manifest("dev-cpu", hostile_index(payload)),
            manifest("dev-cpu", torch_at("2.12.0+cpu"), *target_edits),
        ),
        "wheel": (
            manifest("dev-cpu", hostile_wheel(payload)),
            manifest("dev-cpu", torch_at("2.12.0+cpu"), *target_edits),
        ),
        "files": (manifest("dev-cpu"), manifest("dev-cpu", torch_files_only(payload), *target_edits)),
    }
    return {
        case: list(flows.diff("base", base, ("target", target), Policy(disabled=True)).findings)
        for case, (base, target) in pairs.items()
    }


_QUOTES = "'\u2018\u2019\u201a\u201b"


def code_spans(text: str, *, powershell: bool = False) -> list[str]:
    """The backticked commands of a remedy, read as the shell would: a backtick inside a quoted word is
    that word's, not the end of the command."""
    out, i = [], 0
    while (start := text.find("`", i)) >= 0:
        j = start + 1
        while j < len(text) and text[j] != "`":
            if powershell and text[j] in _QUOTES:
                j += 1
                while j < len(text) and not (
                    text[j] in _QUOTES and text[j + 1 : j + 2] not in tuple(_QUOTES)
                ):
                    j += 2 if text[j] in _QUOTES else 1
            elif not powershell and text[j] in "'\"":
                j = text.index(text[j], j + 1)
            j += 1
        out.append(text[start + 1 : j])
        i = j + 1
    return out


COMMANDS = ("pip ", "python ", "export ", "unset ", "rm ", "$env:", "Remove-Item ", "& ")


def commands(findings: list[Finding], *, powershell: bool = False) -> list[str]:
    """Every command of ``findings``' remedies: those in their text, and their actions rendered."""
    shell: Shell = "powershell" if powershell else "posix"
    out = [c for f in findings for c in code_spans(f.remedy, powershell=powershell) if c.startswith(COMMANDS)]
    return list(dict.fromkeys([*out, *rendered(findings, shell)]))


def rendered(findings: list[Finding], shell: Shell) -> list[str]:
    """The commands ``findings``' actions render into (those a renderer refuses excepted)."""
    out = []
    for f in findings:
        for action in f.actions:
            try:
                line = render(action, shell)
            except UnsafeValue:
                continue
            if line is not None:
                out.append(line)
    return out


def said(findings: list[Finding]) -> str:
    """Everything the findings' remedies say, in prose and in manual steps."""
    return "\n".join(
        [f.remedy for f in findings] + [a.text for f in findings for a in f.actions if isinstance(a, Manual)]
    )


RECORDER = 'printf "%s\\0" "$@"'


def paste(command: str, folder: Path) -> list[str]:
    """Run ``command`` in bash as a pasted line (``pip``, ``python`` and ``rm`` functions that print their
    arguments; after an ``export``, the variable's value); what they printed."""
    functions = "".join(f"{name}() {{ {RECORDER}; }}\n" for name in ("pip", "python", "rm"))
    guard = '[ "$(type -t pip)$(type -t rm)" = functionfunction ] || exit 99\n'
    after = ""
    if command.startswith("export "):
        name = command.split()[1].split("=", 1)[0]
        after = f'\nprintf "%s\\0" "${{{name}}}"'
    done = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", functions + guard + command + after + "\n"],
        cwd=folder,
        capture_output=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
    )
    assert done.returncode == 0, (command, done.stderr)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


@needs_bash
@pytest.mark.slow
def test_paste_records_what_pip_got(tmp_path: Path) -> None:
    # The recorder itself: were a payload expanded, it would show (and the file would exist).
    assert paste("pip install 'a b' $(echo c)", tmp_path) == ["install", "a b", "c"]
    assert paste("export X='$(y)'", tmp_path) == ["$(y)"]


@needs_bash
@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS)
def test_remedies_from_hostile_manifests_run_nothing_in_bash(payload: str, tmp_path: Path) -> None:
    found = remedies(payload)
    everything = [f for findings in found.values() for f in findings]
    from_actions = set(rendered(everything, "posix"))
    ran: dict[str, list[str]] = {}
    for command in commands(everything):
        ran[command] = paste(command, tmp_path)
        assert list(tmp_path.iterdir()) == [], (command, list(tmp_path.iterdir()))

    # A version that fails PEP 440 is in no command; a manual step says why.
    for case in ("version", "files"):
        assert not [c for c in commands(found[case]) if "pwned" in c], (case, commands(found[case]))
        assert "is not a version (PEP 440)" in said(found[case]) and "by hand" in said(found[case]), case

    # A name that fails PEP 508: in no command an action made; a manual step says why. A command a rule
    # still writes by hand may hold it, quoted: pip then receives it as one argument, and nothing runs.
    named = commands(found["name"])
    assert not [c for c in named if "pwned" in c and c in from_actions], named
    by_hand = [c for c in named if "pwned" in c]
    assert by_hand or "is not a distribution name (PEP 508)" in said(found["name"]), said(found["name"])
    for command in by_hand:
        assert command.startswith("pip uninstall "), command
        assert len([a for a in ran[command] if "evil" in a and "pwned" in a]) == 1, ran[command]

    # A URL is written when it passes its check: one literal word, as the manifest recorded it (and said
    # to be so); else a manual step says why, and no command holds it.
    for case, url, word in (
        ("index", index_url(payload), index_url(payload)),
        ("wheel", wheel_url(payload), f"torch @ {wheel_url(payload)}"),
    ):
        pip_lines = [c for c in commands(found[case]) if c.startswith("pip ") and "pwned" in c]
        try:
            checked_url(url)
        except UnsafeValue:
            assert pip_lines == [], (case, pip_lines)
            assert "is not a URL envcheck writes into a command" in said(found[case]), case
            continue
        assert pip_lines, (case, commands(found[case]))
        for command in pip_lines:
            assert word in ran[command], (command, ran[command])
            assert [a for a in ran[command] if "pwned" in a] == [word], (command, ran[command])
        told = [f.remedy for f in found[case] if "as the manifest" in f.remedy]
        assert told and all("check that you trust it" in r for r in told), case
    # A variable's value (the base's PIP_INDEX_URL, to set on the target) is set as it was.
    for command in commands(found["index"]):
        if command.startswith("export ") and "pwned" in command:
            assert ran[command] == [index_url(payload)], (command, ran[command])


# PowerShell: a single-quoted string ends only at a lone quote character (', or a typographic single quote);
# outside quotes, a manifest value could start an expansion ($ and `) or a new statement.
_PS_TOKEN = re.compile(
    r"'(?:[^'\u2018\u2019\u201a\u201b]|['\u2018\u2019\u201a\u201b]{2})*'|[^\s'\u2018\u2019]+"
)
_OURS = {
    "pip",
    "install",
    "uninstall",
    "check",
    "-y",
    "--index-url",
    "--force-reinstall",
    "--no-deps",
    "=",
}


def powershell_words(command: str) -> list[str]:
    """``command`` split as PowerShell reads it; fails when a quote is left open."""
    words = _PS_TOKEN.findall(command)
    assert _PS_TOKEN.sub("", command).strip() == "", command
    return words


def powershell_value(word: str) -> str:
    """A single-quoted PowerShell word's value: each doubled quote character is one (the second)."""
    assert word[0] in _QUOTES and word[-1] in _QUOTES, word
    return re.sub("[" + _QUOTES + "]([" + _QUOTES + "])", r"\1", word[1:-1])


@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS)
def test_windows_remedies_quote_every_manifest_value_for_powershell(payload: str) -> None:
    found = remedies(payload, on_windows=True)
    everything = [f for findings in found.values() for f in findings]
    from_actions = set(rendered(everything, "powershell"))
    pasted = commands(everything, powershell=True)
    assert pasted, said(everything)
    for command in pasted:
        for word in powershell_words(command):
            if word in _OURS or re.fullmatch(r"\$env:[A-Za-z_][A-Za-z0-9_]*", word):
                continue
            assert word[0] in _QUOTES and word[-1] in _QUOTES, (command, word)
            if command in from_actions and not command.startswith("$env:"):
                # A program's argument with a double quote is split by Windows PowerShell: never written.
                assert '"' not in word, (command, word)
            else:
                assert '"' not in word or "touch" in word, (command, word)
    # No name or version that fails its check is in a command an action made.
    for case in ("version", "name", "files"):
        hostile = [c for c in commands(found[case], powershell=True) if "pwned" in c]
        assert not [c for c in hostile if c in from_actions], (case, hostile)
        assert all(c.startswith("pip uninstall ") for c in hostile), (case, hostile)  # by hand, quoted
    # A URL that passes its check is one literal word, the URL as it was.
    for case, url in (("index", index_url(payload)), ("wheel", wheel_url(payload))):
        words = [
            powershell_value(w)
            for c in commands(found[case], powershell=True)
            if c.startswith(("pip ", "& "))
            for w in powershell_words(c)
            if "pwned" in w
        ]
        try:
            checked_url(url)
        except UnsafeValue:
            assert words == [], (case, words)
            continue
        assert words and all(w in (url, f"torch @ {url}") for w in words), (case, words)


def test_shell_word_for_each_shell() -> None:
    assert shell_word("a'b$(x)", None) == "'a'\"'\"'b$(x)'"
    win = manifest("dev-cpu", windows)
    assert shell_word("a'b$(x)`y", win) == "'a''b$(x)`y'"
    assert shell_word("a\u2019b", win) == "'a\u2019\u2019b'"
    assert shell_word("a\nb", None) == "'a\\nb'"  # a newline cannot end the pasted command


@needs_bash
def test_pip_helpers_and_pythonpath_in_bash(tmp_path: Path) -> None:
    hostile = "$(touch pwned)`touch pwned2`'\"\n;touch pwned3"
    m = manifest("dev-cpu")
    for text in (
        pip_install([(f"x{hostile}", f"1.0{hostile}")], on=m),
        pip_requirement(f"x>=1; os_name == '{hostile}'", on=m),
    ):
        # A name or requirement that fails its check is never written as an argument: a manual step that
        # says why (envcheck.core.remedy.make).
        assert code_spans(text) == [], text
        assert "by hand" in text and "does not write it as a command" in text, text
    (command,) = code_spans(pip_install([("torch", "2.13.0+cpu")], on=m))
    argv = paste(command, tmp_path)
    assert list(tmp_path.iterdir()) == [], command
    assert argv[:2] == ["install", "torch==2.13.0+cpu"], argv


def test_pythonpath_remedy_keeps_hostile_folders_literal(tmp_path: Path) -> None:
    hostile = "/opt/$(touch pwned)/`touch pwned2`/it's"

    def pythonpath(separator: str) -> Edit:
        def edit(d: dict[str, Any]) -> None:
            d["env"]["PYTHONPATH"] = f"{hostile}{separator}/srv/extra"

        return edit

    posix = manifest("dev-cpu", pythonpath(":"))
    (command,) = code_spans(remedy_text([_pythonpath_action(posix, "/srv/extra")], posix))
    if BASH is not None:
        done = subprocess.run(
            [BASH, "--norc", "--noprofile", "-c", command + '\nprintf "%s" "$PYTHONPATH"'],
            cwd=tmp_path,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert (done.stdout, list(tmp_path.iterdir())) == (hostile, []), (command, done.stderr)
    win = manifest("dev-cpu", pythonpath(";"), windows)
    assert (
        remedy_text([_pythonpath_action(win, "/srv/extra")], win)
        == "`$env:PYTHONPATH = '/opt/$(touch pwned)/`touch pwned2`/it''s'`"
    )
