"""Remedies are safe to paste: every value a remedy takes from a manifest (a name, a version, an index URL,
a wheel URL, a requirement, PYTHONPATH) reaches the command as one literal word, for the shell the remedy
is written for. Remedies made from hostile manifests are pasted into a real bash, whose ``pip`` is a
function that records its arguments: no command substitution, backtick, parameter expansion or early
newline may run, and pip receives the hostile bytes as they were (control characters shown as escapes).
A Windows target's remedies are PowerShell: every manifest value is in single quotes with each quote
doubled, so no ``$(…)`` or ``$env:X`` outside them comes from the manifest."""

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
from envcheck.diff.policy import Policy
from envcheck.manifest.model import Manifest
from envcheck.manifest.provenance import _drop_from_pythonpath
from envcheck.manifest.remedy import pip_install, pip_requirement, shell_word

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


def hostile_index(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        d["env"]["PIP_INDEX_URL"] = f"https://mirror.example/{payload.strip()}/cpu".replace(" ", "%20")

    return edit


def hostile_wheel(payload: str) -> Edit:
    def edit(d: dict[str, Any]) -> None:
        url = f"https://h.example/{payload.strip()}/torch-2.13.0+cpu-cp311-cp311-linux_x86_64.whl"
        dist_entry(d, "torch")["direct_url"] = {"url": url.replace(" ", "%20"), "archive_info": {}}

    return edit


def torch_files_only(payload: str) -> Edit:
    """torch without its .dist-info (ENV-TORCH-NO-METADATA), its version.py saying ``payload``."""

    def edit(d: dict[str, Any]) -> None:
        d["packages"] = [p for p in d["packages"] if p["name"] != "torch"]
        d["torch"]["static"]["version"] = f"2.13.0+cpu{payload}"

    return edit


def windows(d: dict[str, Any]) -> None:
    d["platform"]["system"] = "Windows"


def remedies(payload: str, *, on_windows: bool = False) -> list[Finding]:
    """Findings of diffs whose remedies carry ``payload``: a version and a name, an index URL and a wheel
    URL the base recorded, torch's version.py beside no torch metadata."""
    target_edits: tuple[Edit, ...] = (windows,) if on_windows else ()
    pairs: list[tuple[Manifest, Manifest]] = [
        (manifest("dev-cpu", hostile_version(payload)), manifest("dev-cpu", *target_edits)),
        (manifest("dev-cpu"), manifest("dev-cpu", hostile_name(payload), *target_edits)),
        (
            manifest("dev-cpu", hostile_index(payload)),
            manifest("dev-cpu", torch_at("2.12.0+cpu"), *target_edits),
        ),
        (
            manifest("dev-cpu", hostile_wheel(payload)),
            manifest("dev-cpu", torch_at("2.12.0+cpu"), *target_edits),
        ),
        (manifest("dev-cpu"), manifest("dev-cpu", torch_files_only(payload), *target_edits)),
    ]
    out: list[Finding] = []
    for base, target in pairs:
        out.extend(flows.diff("base", base, [("target", target)], Policy(disabled=True)).findings)
    return out


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


def commands(findings: list[Finding], *, powershell: bool = False) -> list[str]:
    return [
        c
        for f in findings
        for c in code_spans(f.remedy, powershell=powershell)
        if c.startswith(("pip ", "export ", "$env:"))
    ]


def paste(command: str, folder: Path) -> list[str]:
    """Run ``command`` in bash as a pasted line (``pip`` a function that prints its arguments); the
    arguments pip got."""
    script = 'pip() { printf "%s\\0" "$@"; }\n' + command + "\n"
    done = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", script],
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
@pytest.mark.parametrize("payload", PAYLOADS)
def test_remedies_from_hostile_manifests_run_nothing_in_bash(payload: str, tmp_path: Path) -> None:
    found = remedies(payload)
    pasted = commands(found)
    hostile = [c for c in pasted if "touch" in c]
    assert len(hostile) >= 4, pasted  # the version, the name, the index or wheel URL, torch's version.py
    for command in pasted:
        argv = paste(command, tmp_path)
        assert list(tmp_path.iterdir()) == [], (command, list(tmp_path.iterdir()))
        if "touch" in command and command.startswith("pip "):
            assert any("pwned" in arg for arg in argv), (command, argv)  # passed through as data
    # An index or wheel URL taken from the manifest is said to be so, next to the command.
    recorded = [f.remedy for f in found if "mirror.example" in f.remedy or "h.example" in f.remedy]
    assert recorded and all("as the manifest" in r and "check that you trust it" in r for r in recorded)


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
}


def powershell_words(command: str) -> list[str]:
    """``command`` split as PowerShell reads it; fails when a quote is left open."""
    words = _PS_TOKEN.findall(command)
    assert _PS_TOKEN.sub("", command).strip() == "", command
    return words


@pytest.mark.slow
@pytest.mark.parametrize("payload", PAYLOADS)
def test_windows_remedies_quote_every_manifest_value_for_powershell(payload: str) -> None:
    pasted = commands(remedies(payload, on_windows=True), powershell=True)
    assert len([c for c in pasted if "touch" in c]) >= 4, pasted
    for command in pasted:
        for word in powershell_words(command):
            if word in _OURS:
                continue
            assert word.startswith("'") and word.endswith("'"), (command, word)
            assert '"' not in word or "touch" in word, (command, word)


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

    (command,) = code_spans(_drop_from_pythonpath(manifest("dev-cpu", pythonpath(":")), "/srv/extra"))
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
        _drop_from_pythonpath(win, "/srv/extra")
        == "`$env:PYTHONPATH = '/opt/$(touch pwned)/`touch pwned2`/it''s'`"
    )
