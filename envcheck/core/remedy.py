"""Remedies as data: the actions a finding's remedy takes, checked before they are written, and written
for the shell of the machine they are for (POSIX ``sh`` or PowerShell).

A remedy's values come from manifests, RECORDs and environments, which are untrusted: a distribution
named ``-rhttp://x/reqs.txt#`` must reach pip as a name, never as an option. So every action checks its
values when it is made (``UnsafeValue``: a PEP 508 name, a PEP 440 version, an ``http(s)``/``file`` URL,
an absolute path, a variable name), ``make`` turns a value that fails into a manual step that says why
(never an argument), and a renderer first builds the argument list, marks the arguments envcheck wrote
itself (``pip``, ``install``, ``--no-deps``), and refuses any other that starts with ``-``. Then each
argument is quoted as one literal word (``envcheck.core.escape.shell_word``); for PowerShell, where
Windows PowerShell 5.1 re-quotes a native command's arguments (splitting one that holds ``"`` or ends in
a backslash with a space, dropping an empty one), such an argument is refused.

docs/reference.md ("Remedies") describes the actions and the script ``--remedies`` writes.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field, fields
from typing import Literal
from urllib.parse import urlsplit

from envcheck.core.escape import one_line, shell_word

Shell = Literal["posix", "powershell"]


class UnsafeValue(ValueError):
    """A value an action will not write as an argument (it fails its check, or would read as an option)."""


# PEP 508's name: letters and digits, with ``.``, ``_`` and ``-`` only inside.
_NAME = re.compile(r"[A-Za-z0-9]([A-Za-z0-9._-]*[A-Za-z0-9])?")
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Characters no value of an argument may hold: controls (a newline ends a pasted command), line and paragraph
# separators, and what the renderer's quoting shows as an escape (``escape.one_line``: lone surrogates from
# undecodable file names, bidirectional overrides), which would reach the command as other text.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def checked_name(name: str) -> str:
    """``name`` when it is a PEP 508 distribution name, else ``UnsafeValue``."""
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UnsafeValue(f"{name!r} is not a distribution name (PEP 508)")
    return name


def checked_version(version: str) -> str:
    """``version`` when it is a PEP 440 version (a local label allowed), written without spaces."""
    from packaging.version import InvalidVersion, Version

    if not isinstance(version, str) or not version or version != version.strip() or " " in version:
        raise UnsafeValue(f"{version!r} is not a version (PEP 440)")
    try:
        Version(version)
    except InvalidVersion:
        raise UnsafeValue(f"{version!r} is not a version (PEP 440)") from None
    return version


def checked_requirement(requirement: str) -> str:
    """``requirement`` when it is a PEP 508 name with a version specifier (``pillow!=8.3.*,>=5.3.0``):
    no URL, no marker, no extras (those are not what a remedy installs)."""
    from packaging.requirements import InvalidRequirement, Requirement

    if not isinstance(requirement, str) or _CONTROL.search(requirement) or '"' in requirement:
        raise UnsafeValue(f"{requirement!r} is not a requirement (PEP 508)")
    try:
        parsed = Requirement(requirement)
    except InvalidRequirement:
        raise UnsafeValue(f"{requirement!r} is not a requirement (PEP 508)") from None
    if parsed.url or parsed.marker or parsed.extras or not _NAME.fullmatch(parsed.name):
        raise UnsafeValue(f"{requirement!r} is not a name with a version range")
    return f"{parsed.name}{parsed.specifier}"


def checked_url(url: str) -> str:
    """``url`` when it is an ``https``, ``http`` or ``file`` URL with no space, quote or control."""
    if not isinstance(url, str) or _CONTROL.search(url) or any(c in url for c in " \"'`<>"):
        raise UnsafeValue(f"{url!r} is not a URL envcheck writes into a command")
    try:
        parts = urlsplit(url)
    except ValueError:
        raise UnsafeValue(f"{url!r} is not a URL") from None
    if parts.scheme not in ("https", "http", "file") or (parts.scheme != "file" and not parts.netloc):
        raise UnsafeValue(f"{url!r} is not an https, http or file URL")
    return url


def checked_path(path: str) -> str:
    """``path`` when it is absolute (POSIX ``/…`` or Windows ``C:\\…``) and holds no control character or
    ``"`` (which Windows' paths cannot hold and PowerShell 5.1 splits on)."""
    if not isinstance(path, str) or _CONTROL.search(path) or '"' in path:
        raise UnsafeValue(f"{path!r} is not a path envcheck writes into a command")
    if not (path.startswith("/") or re.match(r"[A-Za-z]:[\\/]", path)):
        raise UnsafeValue(f"{path!r} is not an absolute path")
    return path


def checked_variable(name: str) -> str:
    """``name`` when it is a portable environment variable name (``[A-Za-z_][A-Za-z0-9_]*``)."""
    if not isinstance(name, str) or not _VARIABLE.fullmatch(name):
        raise UnsafeValue(f"{name!r} is not a variable name")
    return name


def checked_value(value: str) -> str:
    """A variable's value: any text on one line (quoted as one word by the renderer)."""
    if not isinstance(value, str) or _CONTROL.search(value):
        raise UnsafeValue(f"{value!r} holds a control character")
    return value


# ---- the actions ----------------------------------------------------------------------------------------


@dataclass(frozen=True, kw_only=True, slots=True)
class Install:
    """Install exact builds: ``pins`` (``(name, version)``) or version ranges (``requirements``) from the
    default index, ``index_url`` when one is named (a labelled torch build: PyTorch's index for it), or a
    wheel's ``wheel_url`` (one pin). ``force`` reinstalls what is there; ``no_deps`` leaves the rest."""

    pins: tuple[tuple[str, str], ...] = ()
    requirements: tuple[str, ...] = ()
    index_url: str | None = None
    wheel_url: str | None = None
    force: bool = False
    no_deps: bool = False

    kind = "install"

    def __post_init__(self) -> None:
        for name, version in self.pins:
            checked_name(name), checked_version(version)
        for requirement in self.requirements:
            checked_requirement(requirement)
        if not self.pins and not self.requirements:
            raise UnsafeValue("nothing to install")
        if self.index_url is not None:
            checked_url(self.index_url)
        if self.wheel_url is not None:
            checked_url(self.wheel_url)
            if len(self.pins) != 1 or self.requirements:
                raise UnsafeValue("a wheel URL installs one pin")


@dataclass(frozen=True, kw_only=True, slots=True)
class Uninstall:
    """Uninstall distributions by name (``pip uninstall -y``: every file their RECORD lists)."""

    names: tuple[str, ...]
    kind = "uninstall"

    def __post_init__(self) -> None:
        if not self.names:
            raise UnsafeValue("nothing to uninstall")
        for name in self.names:
            checked_name(name)


@dataclass(frozen=True, kw_only=True, slots=True)
class RemoveFiles:
    """Delete named files and folders (absolute paths: orphans, stashes, a second dist-info)."""

    paths: tuple[str, ...]
    kind = "remove"

    def __post_init__(self) -> None:
        if not self.paths:
            raise UnsafeValue("nothing to remove")
        for path in self.paths:
            checked_path(path)


@dataclass(frozen=True, kw_only=True, slots=True)
class SetVariable:
    """Set (``value``) or unset (``None``) an environment variable where the application runs."""

    name: str
    value: str | None = None
    kind = "variable"

    def __post_init__(self) -> None:
        checked_variable(self.name)
        if self.value is not None:
            checked_value(self.value)


@dataclass(frozen=True, kw_only=True, slots=True)
class EditFile:
    """Edit a named file: delete the line ``remove_line`` (run by the environment's own Python, so the
    same in both shells), or, without one, a manual ``change`` to make there."""

    path: str
    change: str
    remove_line: str | None = None
    kind = "edit"

    def __post_init__(self) -> None:
        checked_path(self.path)
        if self.remove_line is not None:
            checked_value(self.remove_line)


@dataclass(frozen=True, kw_only=True, slots=True)
class Rebuild:
    """Build ``name`` again from source, with ``variables`` set for the build (``("_GLIBCXX_USE_CXX11_ABI",
    "1")``, ``("TORCH_CUDA_ARCH_LIST", "8.0")``): never a reinstall of the same build. ``source`` is where
    its source is (an absolute folder, a URL); without one, pip builds ``name==version`` from the index's
    source distribution (``--no-binary``)."""

    name: str
    version: str | None = None
    source: str | None = None
    variables: tuple[tuple[str, str], ...] = ()
    kind = "rebuild"

    def __post_init__(self) -> None:
        checked_name(self.name)
        if self.version is not None:
            checked_version(self.version)
        if self.source is not None:
            if "://" in self.source:
                checked_url(self.source)
            else:
                checked_path(self.source)
        elif self.version is None:
            raise UnsafeValue("a rebuild names its source or its version")
        for var, value in self.variables:
            checked_variable(var), checked_value(value)


@dataclass(frozen=True, kw_only=True, slots=True)
class Manual:
    """A step no command does: what to change, and where (``text``, a sentence)."""

    text: str
    kind = "manual"


Action = Install | Uninstall | RemoveFiles | SetVariable | EditFile | Rebuild | Manual
ACTION_KINDS = ("install", "uninstall", "remove", "variable", "edit", "rebuild", "manual")


def as_data(action: Action) -> dict[str, object]:
    """``action`` as plain JSON data: its ``kind`` and its fields (tuples as lists)."""

    def plain(value: object) -> object:
        return [plain(v) for v in value] if isinstance(value, tuple) else value

    return {"kind": action.kind, **{f.name: plain(getattr(action, f.name)) for f in fields(action)}}


def make(build: Callable[[], Action], what: str) -> Action:
    """``build()``, or, when a value fails its check, a manual step that says what was not written and
    why: a remedy never writes an unchecked value as an argument."""
    try:
        return build()
    except UnsafeValue as e:
        return Manual(text=_inert(f"{what} by hand: envcheck does not write it as a command ({e})"))


def _one_line(text: str) -> str:
    """``text`` on one line: controls, line and paragraph separators shown as escapes."""
    return one_line(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")


def _inert(text: str) -> str:
    """``text`` (a sentence holding a refused value) as inert prose: no backtick to open a command span, no
    control or line separator to end a line."""
    return _one_line(text).replace("`", "'")


def runnable(action: Action) -> bool:
    """Whether ``action`` renders as a command (a manual step and a free-form edit do not)."""
    return not isinstance(action, Manual) and not (
        isinstance(action, EditFile) and action.remove_line is None
    )


# ---- rendering -----------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Arg:
    """One argument of a command: ``ours`` when envcheck wrote it (``install``, ``--no-deps``), else a
    value from outside, which must never read as an option."""

    text: str
    ours: bool = False


def _ours(*words: str) -> list[Arg]:
    return [Arg(w, ours=True) for w in words]


def _interpreter(python: str | None, raw: bool) -> Arg:
    return Arg("python", ours=True) if python is None else Arg(python, ours=raw)


def _pip(python: str | None, raw: bool) -> list[Arg]:
    # ``python -m pip`` with the environment's interpreter: the pip of exactly that environment.
    return [_interpreter(python, raw), *_ours("-m", "pip")] if python is not None else _ours("pip")


def argv(action: Action, python: str | None = None, *, raw_python: bool = False) -> list[Arg] | None:
    """The command ``action`` runs, as arguments (``None`` for a step with no command). ``python``: the
    environment's interpreter (``python -m pip``), else ``pip``; ``raw_python``: ``python`` is written as
    it is (a script's own variable, ``"$python"``), not quoted as a value."""
    if isinstance(action, Install):
        args = [*_pip(python, raw_python), *_ours("install")]
        args += _ours("--force-reinstall") if action.force else []
        args += _ours("--no-deps") if action.no_deps else []
        if action.wheel_url is not None:
            return [*args, Arg(f"{action.pins[0][0]} @ {action.wheel_url}")]
        args += [Arg(f"{n}=={v}") for n, v in action.pins]
        args += [Arg(checked_requirement(r)) for r in action.requirements]
        if action.index_url is not None:
            args += [*_ours("--index-url"), Arg(action.index_url)]
        return args
    if isinstance(action, Uninstall):
        return [*_pip(python, raw_python), *_ours("uninstall", "-y"), *(Arg(n) for n in action.names)]
    if isinstance(action, EditFile) and action.remove_line is not None:
        # No quote and no backslash: one plain word in both shells.
        script = (
            "import sys,pathlib;p=pathlib.Path(sys.argv[1]);"
            "k=[l for l in p.read_text().splitlines(True) if l.strip()!=sys.argv[2]];"
            "p.write_text(str().join(k))"
        )
        return [
            _interpreter(python, raw_python),
            *_ours("-c", script),
            Arg(action.path),
            Arg(action.remove_line),
        ]
    if isinstance(action, Rebuild):
        args = [
            *_pip(python, raw_python),
            *_ours("install", "--force-reinstall", "--no-deps", "--no-build-isolation"),
        ]
        if action.source is not None:
            return [*args, Arg(action.source)]
        return [*args, *_ours("--no-binary"), Arg(action.name), Arg(f"{action.name}=={action.version}")]
    return None


# envcheck's own words that need no quoting in either shell; a script's own interpreter variable is written
# as it is.
_PLAIN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:=+-]*|--?[a-z][a-z-]*")
_RAW = ('"$python"', "$Python")


def _words(args: Sequence[Arg], shell: Shell, *, native: bool = True) -> list[str]:
    """``args`` quoted for ``shell``. ``native``: the arguments of a program (not of a PowerShell cmdlet),
    which Windows PowerShell 5.1 joins into one command line, wrapping one that holds a space in ``"``
    and dropping an empty one: a ``"``, or a backslash before that closing ``"``, would end the argument
    elsewhere."""
    words = []
    for arg in args:
        if not arg.ours and arg.text.startswith("-"):
            raise UnsafeValue(f"{arg.text!r} would read as an option")
        if shell == "powershell" and native and not arg.ours:
            if '"' in arg.text:
                raise UnsafeValue(f"{arg.text!r} holds a double quote, which Windows PowerShell splits on")
            if not arg.text:
                raise UnsafeValue("an empty argument, which Windows PowerShell drops")
            if arg.text.endswith("\\") and any(c.isspace() for c in arg.text):
                raise UnsafeValue(
                    f"{arg.text!r} ends in a backslash and holds a space: Windows PowerShell would end "
                    "the argument elsewhere"
                )
        plain = arg.ours and _PLAIN.fullmatch(arg.text)
        words.append(
            arg.text if plain or arg.text in _RAW else shell_word(arg.text, windows=shell == "powershell")
        )
    return words


def render(
    action: Action, shell: Shell, python: str | None = None, *, raw_python: bool = False
) -> str | None:
    """``action`` as one command line for ``shell`` (``None`` for a step with no command). A first
    argument that is a path runs through PowerShell's call operator ``&``. Raises ``UnsafeValue`` when an
    argument would not reach the command as one literal value."""
    if isinstance(action, SetVariable):
        name = checked_variable(action.name)
        if action.value is None:
            return f"Remove-Item Env:{name}" if shell == "powershell" else f"unset {name}"
        word = shell_word(checked_value(action.value), windows=shell == "powershell")
        return f"$env:{name} = {word}" if shell == "powershell" else f"export {name}={word}"
    if isinstance(action, RemoveFiles):
        if shell == "powershell":
            paths = ", ".join(_words([Arg(p) for p in action.paths], shell, native=False))
            return f"Remove-Item -LiteralPath {paths} -Recurse -Force"
        return " ".join(["rm", "-rf", "--", *_words([Arg(p) for p in action.paths], shell)])
    args = argv(action, python, raw_python=raw_python)
    if args is None:
        return None
    words = _words(args, shell)
    if shell == "powershell" and (python is not None):
        words.insert(0, "&")
    line = " ".join(words)
    if isinstance(action, Rebuild) and action.variables:
        settings = [render(SetVariable(name=k, value=v), shell) for k, v in action.variables]
        if shell == "powershell":
            return "; ".join([*(s for s in settings if s), line])
        return " ".join(f"{k}={shell_word(v, windows=False)}" for k, v in action.variables) + " " + line
    return line


def describe(action: Action) -> str:
    """A manual step's sentence, or a short name of what a command does (for a script's comments)."""
    if isinstance(action, Manual):
        return action.text
    if isinstance(action, EditFile):
        return f"edit {action.path}: {action.change}"
    return action.kind


@dataclass(frozen=True, kw_only=True, slots=True)
class Remedy:
    """A finding's remedy as data: its ``actions`` in the order that works, and ``note``, what the
    commands do not say (why, what to check first)."""

    actions: tuple[Action, ...] = ()
    note: str = ""

    def text(self, shell: Shell) -> str:
        """The remedy as a sentence a person pastes from: each command in backticks, in order."""
        return inline(self.actions, shell, note=self.note)


def inline(actions: Iterable[Action], shell: Shell, *, note: str = "", python: str | None = None) -> str:
    """``actions`` as one line of prose: commands in backticks joined by "then", manual steps as
    sentences, ``note`` after them. A command that cannot be rendered safely becomes a manual step."""
    parts: list[str] = []
    for action in actions:
        try:
            line = render(action, shell, python)
        except UnsafeValue as e:
            parts.append(_inert(f"(a {action.kind} envcheck does not write as a command: {e})"))
            continue
        parts.append(f"`{line}`" if line is not None else describe(action))
    text = ", then ".join(parts)
    if note:
        text = f"{text} {note}".strip() if text else note
    return text


@dataclass(frozen=True, kw_only=True, slots=True)
class Target:
    """The environment a script of remedies is for: its interpreter, ``sys.prefix``, and its shell."""

    python: str
    prefix: str
    shell: Shell = field(default="posix")


def script(target: Target, steps: Sequence[tuple[str, Sequence[Action]]], *, title: str) -> str:
    """A script of ``steps`` (``(comment, actions)``, each a root cause's remedy, in the order that works)
    for ``target``: it opens with the environment it is for and refuses to run against another, runs every
    command with that environment's own interpreter, stops at the first that fails, and lists at the end
    what it cannot do (manual steps, variables of the application's own environment)."""
    python, prefix = checked_path(target.python), checked_path(target.prefix)
    ps = target.shell == "powershell"

    def q(text: str) -> str:
        return shell_word(text, windows=ps)

    out: list[str] = []
    by_hand: list[str] = []
    if ps:
        out += [
            _comment(title),
            f"# For the environment at {prefix} ({python}). envcheck never runs this script itself: read it,",
            "# then run it. It refuses to run against another environment.",
            "$ErrorActionPreference = 'Stop'",
            f"$Python = {q(python)}",
            f"if ((& $Python -c 'import sys; print(sys.prefix)') -ne {q(prefix)}) {{",
            f"    Write-Error {q(f'this script is for the environment at {prefix}')}; exit 1",
            "}",
        ]
    else:
        refusal = q(f"envcheck remedies: this script is for the environment at {prefix}")
        out += [
            "#!/bin/sh",
            _comment(title),
            f"# For the environment at {prefix} ({python}). envcheck never runs this script itself: read it,",
            "# then run it. It refuses to run against another environment.",
            "set -eu",
            f"python={q(python)}",
            f'if [ "$("$python" -c \'import sys; print(sys.prefix)\' 2>/dev/null)" != {q(prefix)} ]; then',
            f"    printf '%s\\n' {refusal} >&2; exit 1",
            "fi",
        ]
    for comment, actions in steps:
        out += ["", _comment(comment)]
        for action in actions:
            if isinstance(action, SetVariable):
                # A variable set here dies with the script: it belongs to the application's environment.
                line = render(action, target.shell)
                by_hand.append(f"where the application runs: {line}")
                out.append(f"# where the application runs: {line}")
                continue
            try:
                line = render(action, target.shell, "$Python" if ps else '"$python"', raw_python=True)
            except UnsafeValue as e:
                by_hand.append(_one_line(f"{action.kind}: {e}"))
                out.append(_comment(f"not written as a command: {e}"))
                continue
            if line is None:
                # One line each: a step's text may hold a manifest's value (a folder, a name).
                by_hand.append(_one_line(describe(action)))
                out.append(_comment(f"by hand: {by_hand[-1]}"))
                continue
            out.append(line)
            # A native command's failure does not stop PowerShell ($ErrorActionPreference is for cmdlets):
            # its exit code does (a rebuild's line starts with its variables, and still runs pip).
            if ps and not isinstance(action, RemoveFiles):
                out.append("if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }")
    if by_hand:
        out += ["", "# Still to do by hand:", *(_comment(one, "#   ") for one in by_hand)]
        echo = "Write-Output" if ps else "printf '%s\\n'"  # dash's echo reads backslashes
        out += [f"{echo} {q(_inert('envcheck remedies: done; still to do by hand: ' + '; '.join(by_hand)))}"]
    return "\n".join(out) + "\n"


def _comment(text: str, lead: str = "# ") -> str:
    """``text`` as one comment line of a script: a line break in it (a manifest's label, a finding's
    message, a manual step's sentence) is shown as ``\\n``, never the start of a command."""
    return lead + _one_line(text)
