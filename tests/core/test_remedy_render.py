"""Remedies render into exactly the arguments their actions name, for both shells, by hypothesis.

Distribution names, versions, requirements, URLs, paths and variable values are drawn from what a manifest
may hold: well-formed ones, and ones built to break out (quotes of every kind, ``$(…)``, backticks,
newlines, an option's leading ``-``, bidirectional overrides, lone surrogates). For every action that
constructs, the POSIX line parsed by ``shlex.split`` and the PowerShell line parsed by ``powershell_tokens``
(PowerShell's documented rules) give back exactly ``argv(...)``'s values, and no value reaches pip as an
option envcheck did not write. A value that fails its check raises ``UnsafeValue`` when the action is made,
and ``make`` turns it into a manual step with no backtick and no line break. A sample is run in a real bash
whose ``pip`` prints its arguments; PowerShell's rendering runs for real where ``pwsh`` is installed.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shlex
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from packaging.requirements import InvalidRequirement, Requirement
from packaging.version import InvalidVersion, Version
from powershell import Token, powershell_command, powershell_statements, powershell_tokens

from envcheck.core.remedy import (
    Action,
    EditFile,
    Install,
    Manual,
    Rebuild,
    RemoveFiles,
    SetVariable,
    Shell,
    Target,
    Uninstall,
    UnsafeValue,
    argv,
    checked_name,
    checked_path,
    checked_url,
    checked_value,
    checked_version,
    inline,
    make,
    render,
    script,
)
from envcheck.manifest.remedy import install_action, pip_install, remedy_text

BASH = shutil.which("bash")
PWSH = shutil.which("pwsh")
needs_bash = pytest.mark.skipif(BASH is None, reason="bash is not installed")
SHELLS: tuple[Shell, ...] = ("posix", "powershell")

PROPERTY = settings(
    deadline=None,
    derandomize=True,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    print_blob=True,
)

# The options envcheck itself writes (and PowerShell's cmdlet parameters): the only arguments that may
# start with "-".
OWN_OPTIONS = frozenset(
    {
        "-m",
        "-c",
        "-y",
        "-rf",
        "--",
        "--force-reinstall",
        "--no-deps",
        "--no-build-isolation",
        "--no-binary",
        "--index-url",
        "-LiteralPath",
        "-Recurse",
        "-Force",
    }
)

# The two attacks: a distribution name pip reads as "install from this requirements file", and a
# value that Windows PowerShell 5.1 re-splits at its double quote when it holds a space.
OPTION_NAME = "-rhttp://x/reqs.txt#"
SPLIT_VALUE = 'C:\\data "x y" --index-url http://evil/'


def test_the_powershell_tokenizer_follows_the_quoting_rules() -> None:
    assert powershell_tokens("& 'a''b' c") == [Token("call", "&"), Token("string", "a'b"), Token("bare", "c")]
    # Typographic quotes are single quotes: each one doubled is one of it.
    assert powershell_tokens("'x\u2019\u2019y\u2018\u2018z'") == [Token("string", "x\u2019y\u2018z")]
    assert powershell_tokens("'a\u2019 b") == [Token("string", "a"), Token("bare", "b")]
    assert powershell_tokens("$env:X = '$(y)'; pip") == [
        Token("variable", "$env:X"),
        Token("assign", "="),
        Token("string", "$(y)"),
        Token("end", ";"),
        Token("bare", "pip"),
    ]
    for broken in ("'open", "a$(b)", "a`b", '"x"', "'a'b", "pip --% x", "x \u201cy\u201d"):
        with pytest.raises(ValueError):
            powershell_tokens(broken)


# ---- what a manifest may hold ---------------------------------------------------------------------------

# Characters built to break out of a word, a quote, a line or an option.
HOSTILE = (
    "aZ09 -_.+=:/\\@$`'\"!#%&*;|<>(){}[]~^?,\t\n\r\x00\x1b\x85\u00e9\u2013"
    "\u2018\u2019\u201a\u201b\u201c\u201d\u201e\u2028\u202e\ud800\udcff"
)
hostile = st.text(alphabet=HOSTILE, max_size=16)
ATTACKS = (
    OPTION_NAME,
    SPLIT_VALUE,
    "$(touch pwned)",
    "`touch pwned`",
    "'; touch pwned; '",
    "\ntouch pwned\n",
    "\u2019; touch pwned; \u2019",
    "--index-url=http://evil/",
    "-e.",
    "",
)
attacks = st.sampled_from(ATTACKS)


def mostly(valid: st.SearchStrategy[str], *others: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """``valid`` three times in four, else one of ``others``: most actions construct and render, and the
    rest are refused."""
    return st.sampled_from((1, 2, 3, 0)).flatmap(lambda i: valid if i else st.one_of(*others))


valid_names = st.from_regex(r"[A-Za-z0-9]([A-Za-z0-9._-]{0,12}[A-Za-z0-9])?", fullmatch=True)
names = mostly(valid_names, hostile, attacks, st.tuples(valid_names, hostile).map("".join))


@st.composite
def pep440(draw: st.DrawFn) -> str:
    epoch = draw(st.sampled_from(["", "1!", "v"]))
    release = ".".join(str(draw(st.integers(0, 120))) for _ in range(draw(st.integers(1, 4))))
    pre = draw(st.sampled_from(["", "a1", "b2", "rc3", ".dev4", ".post5", "-1", "_a"]))
    local = draw(st.sampled_from(["", "+cpu", "+cu130", "+rocm6.4", "+local.1_2", "+xpu"]))
    return f"{epoch}{release}{pre}{local}"


versions = mostly(pep440(), hostile, attacks, st.tuples(pep440(), hostile).map("".join))

specifiers = st.sampled_from(["", ">=1.0", "==2.13.0+cpu", "!=8.3.*,>=5.3.0", "~=1.4", "===$(touch x)", "<2"])
requirements = mostly(
    st.tuples(valid_names, specifiers).map("".join),
    st.tuples(valid_names, hostile).map("".join),
    st.sampled_from(["x>=1; os_name == 'nt'", "x[extra]>=1", "x @ https://h/x.whl", 'x===a"b', "x===a'b"]),
    attacks,
)

URL_CHARS = "aZ09-._~!$&()*+,;=:@%/?#{}|^\\\u2019\u201c\u00e9"
url_tails = st.text(alphabet=URL_CHARS, max_size=20)
urls = mostly(
    st.one_of(
        st.builds(
            lambda scheme, host, tail: f"{scheme}://{host}/{tail}",
            st.sampled_from(["https", "http"]),
            st.from_regex(r"[a-z0-9.-]{1,10}", fullmatch=True),
            url_tails,
        ),
        url_tails.map(lambda tail: "file:///" + tail),
    ),
    hostile.map(lambda tail: "https://h.example/" + tail),
    hostile,
    attacks,
)

PATH_CHARS = "aZ09 -_.'$`()!;&|<>*?{}[]~#%@\\\u2018\u2019\u201a\u201b\u201c\u00e9"
path_tails = st.text(alphabet=PATH_CHARS, max_size=20)
paths = mostly(
    st.one_of(path_tails.map(lambda tail: "/" + tail), path_tails.map(lambda tail: "C:\\" + tail)),
    hostile.map(lambda tail: "/" + tail),
    hostile,
    attacks,
)
variables = mostly(st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,8}", fullmatch=True), hostile)
values = mostly(st.one_of(path_tails, st.text(max_size=10)), hostile, attacks)
# The environment's interpreter: none (``pip``), or an absolute path, hostile characters included.
pythons = st.one_of(st.none(), path_tails.map(lambda tail: f"/{tail}/bin/python"))


@dataclass(frozen=True)
class Made:
    """A way to make one action from drawn values, and what a remedy would call it."""

    build: Callable[[], Action]
    what: str

    def __repr__(self) -> str:
        try:
            return f"Made({self.build()!r})"
        except UnsafeValue as e:
            return f"Made(refused: {e})"


@st.composite
def actions(draw: st.DrawFn) -> Made:
    """An action of any kind, from drawn values: some construct, some are refused."""
    kind = draw(st.sampled_from(("install", "wheel", "uninstall", "remove", "variable", "edit", "rebuild")))
    if kind == "install":
        pins = tuple(draw(st.lists(st.tuples(names, versions), max_size=2)))
        reqs = tuple(draw(st.lists(requirements, max_size=1)))
        index = draw(st.none() | urls)
        force, no_deps = draw(st.booleans()), draw(st.booleans())
        return Made(
            lambda: Install(pins=pins, requirements=reqs, index_url=index, force=force, no_deps=no_deps),
            f"install {pins} {reqs}",
        )
    if kind == "wheel":
        pin, url = draw(st.tuples(names, versions)), draw(urls)
        return Made(lambda: Install(pins=(pin,), wheel_url=url), f"install {pin[0]} from {url}")
    if kind == "uninstall":
        some = tuple(draw(st.lists(names, min_size=1, max_size=2)))
        return Made(lambda: Uninstall(names=some), f"uninstall {' '.join(some)}")
    if kind == "remove":
        some = tuple(draw(st.lists(paths, min_size=1, max_size=2)))
        return Made(lambda: RemoveFiles(paths=some), f"remove {' '.join(some)}")
    if kind == "variable":
        name, value = draw(variables), draw(st.none() | values)
        return Made(lambda: SetVariable(name=name, value=value), f"set {name}")
    if kind == "edit":
        path, line = draw(paths), draw(values)
        return Made(lambda: EditFile(path=path, change="drop a line", remove_line=line), f"edit {path}")
    name, version = draw(names), draw(versions | st.none())
    source = draw(st.none() | paths | urls)
    settings_ = tuple(draw(st.lists(st.tuples(variables, values), max_size=2)))
    return Made(
        lambda: Rebuild(name=name, version=version, source=source, variables=settings_), f"rebuild {name}"
    )


# ---- the rendered line, parsed back ---------------------------------------------------------------------


def expected(action: Action, python: str | None) -> list[str]:
    """What the command line of ``action`` must parse into: its program and arguments (POSIX form)."""
    if isinstance(action, SetVariable):
        return ["unset", action.name] if action.value is None else ["export", f"{action.name}={action.value}"]
    if isinstance(action, RemoveFiles):
        return ["rm", "-rf", "--", *action.paths]
    args = argv(action, python)
    assert args is not None
    settings_ = [f"{k}={v}" for k, v in action.variables] if isinstance(action, Rebuild) else []
    return [*settings_, *(a.text for a in args)]


def posix_words(action: Action, python: str | None) -> list[str]:
    line = render(action, "posix", python)
    assert line is not None and "\n" not in line and "\r" not in line, line
    return shlex.split(line)


def powershell_words(action: Action, python: str | None) -> list[str]:
    """The PowerShell line of ``action``, parsed, in the same form as ``expected``."""
    line = render(action, "powershell", python)
    assert line is not None and "\n" not in line and "\r" not in line, line
    statements = powershell_statements(line)
    if isinstance(action, SetVariable):
        (statement,) = statements
        if action.value is None:
            assert [t.kind for t in statement] == ["bare", "bare"], statement
            assert statement[0].text == "Remove-Item" and statement[1].text.startswith("Env:"), statement
            return ["unset", statement[1].text.removeprefix("Env:")]
        assert [t.kind for t in statement] == ["variable", "assign", "string"], statement
        return ["export", f"{statement[0].text.removeprefix('$env:')}={statement[2].text}"]
    if isinstance(action, RemoveFiles):
        (statement,) = statements
        head, listed, tail = statement[:2], statement[2:-2], statement[-2:]
        assert [t.text for t in head + tail] == ["Remove-Item", "-LiteralPath", "-Recurse", "-Force"]
        # The paths: one array of literals, comma-separated.
        assert [t.kind for t in listed[1::2]] == ["comma"] * (len(listed) // 2), statement
        assert all(t.kind == "string" for t in listed[::2]), statement
        return ["rm", "-rf", "--", *(t.text for t in listed[::2])]
    out = []
    for statement in statements[:-1]:  # a rebuild's variables, each set before the command
        assert [t.kind for t in statement] == ["variable", "assign", "string"], statement
        out.append(f"{statement[0].text.removeprefix('$env:')}={statement[2].text}")
    command = powershell_command(statements[-1])
    if python is not None:
        assert statements[-1][0].kind == "call", line  # a quoted path runs only through "&"
    return [*out, *command]


PARSERS: dict[Shell, Callable[[Action, str | None], list[str]]] = {
    "posix": posix_words,
    "powershell": powershell_words,
}


def refusal(action: Action, python: str | None, shell: Shell) -> str | None:
    """Why ``render`` must refuse ``action`` for ``shell`` although it was made: an argument from outside
    that starts with "-", or, for a PowerShell native command, one Windows PowerShell would split."""
    args = argv(action, python)
    if args is None:
        return None
    theirs = [a.text for a in args if not a.ours]
    if any(t.startswith("-") for t in theirs):
        return "option"
    if shell == "powershell":
        for text in theirs:
            if '"' in text or not text or (text.endswith("\\") and any(c.isspace() for c in text)):
                return "split"
    return None


def assert_no_foreign_option(words: list[str], action: Action) -> None:
    """Every argument that starts with "-" is one envcheck wrote; for pip, in particular."""
    foreign = [w for w in words if w.startswith("-") and w not in OWN_OPTIONS]
    assert not foreign, (action, words)
    if "pip" in words:
        after = words[words.index("pip") + 1 :]
        assert all(w in OWN_OPTIONS for w in after if w.startswith("-")), (action, words)


def assert_inert(step: Action) -> Manual:
    """A manual step made from a refused value: one line of prose, nothing that opens a command span."""
    assert isinstance(step, Manual), step
    assert "`" not in step.text, step.text
    assert len(step.text.splitlines()) == 1 and "\n" not in step.text and "\r" not in step.text, step.text
    assert "by hand" in step.text, step.text
    return step


@PROPERTY
@given(made=actions(), python=pythons)
@example(made=Made(lambda: Uninstall(names=(OPTION_NAME,)), f"uninstall {OPTION_NAME}"), python=None)
@example(made=Made(lambda: Install(pins=((OPTION_NAME, "1.0"),)), f"install {OPTION_NAME}"), python=None)
@example(made=Made(lambda: SetVariable(name="X", value=SPLIT_VALUE), "set X"), python=None)
@example(
    made=Made(lambda: EditFile(path="C:\\a b\\x.pth", change="-", remove_line=SPLIT_VALUE), "edit"),
    python="C:\\Program Files\\Python311\\python.exe",
)
def test_every_action_renders_into_exactly_its_arguments(made: Made, python: str | None) -> None:
    step = make(made.build, made.what)
    try:
        made.build()
    except UnsafeValue:
        manual = assert_inert(step)  # (c): refused when made, a manual step instead
        assert inline([manual], "posix") == manual.text == inline([manual], "powershell")
        return
    assert not isinstance(step, Manual)
    want = expected(step, python)
    for shell in SHELLS:
        if refusal(step, python, shell) is not None:
            with pytest.raises(UnsafeValue):
                render(step, shell, python)
            # Refused when rendered: said in prose, never a half-written command.
            text = inline([step], shell, python=python)
            assert text.startswith("(a ") and "`" not in text and "\n" not in text, text
            continue
        words = PARSERS[shell](step, python)
        assert words == want, (shell, render(step, shell, python))
        assert_no_foreign_option(words, step)


# ---- (c) the checks, against independent oracles --------------------------------------------------------

_PEP508_NAME = re.compile(r"[A-Z0-9]|[A-Z0-9][A-Z0-9._-]*[A-Z0-9]", re.IGNORECASE | re.ASCII)
_UNWRITABLE = re.compile("[\x00-\x1f\x7f-\x9f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")


def refused(check: Callable[[str], str], value: str) -> bool:
    try:
        assert check(value) == value
    except UnsafeValue:
        return True
    return False


@PROPERTY
@given(name=names)
@example(name=OPTION_NAME)
def test_a_name_is_written_only_when_pep_508_says_it_is_one(name: str) -> None:
    assert refused(checked_name, name) == (_PEP508_NAME.fullmatch(name) is None)
    if refused(checked_name, name):
        for build in (
            lambda: Install(pins=((name, "1.0"),)),
            lambda: Uninstall(names=(name,)),
            lambda: Rebuild(name=name, version="1.0"),
        ):
            with pytest.raises(UnsafeValue):
                build()
            assert_inert(make(build, f"install {name}"))
        assert_inert(install_action([(name, "1.0")]))
        # The remedy's text: the refused value as prose, no command.
        assert "`" not in remedy_text([install_action([(name, "2.13.0+cpu")])], None)


@PROPERTY
@given(version=versions)
def test_a_version_is_written_only_when_pep_440_says_it_is_one(version: str) -> None:
    try:
        Version(version)
        pep440_ok = version == version.strip() and " " not in version
    except InvalidVersion:
        pep440_ok = False
    assert refused(checked_version, version) == (not pep440_ok)
    if not pep440_ok:
        with pytest.raises(UnsafeValue):
            Install(pins=(("torch", version),))
        assert_inert(install_action([("torch", version)]))
        assert "`" not in pip_install([("torch", version)])


@PROPERTY
@given(requirement=requirements)
def test_a_requirement_is_written_only_as_a_name_and_a_version_range(requirement: str) -> None:
    try:
        parsed = Requirement(requirement)
        ok = not (parsed.url or parsed.marker or parsed.extras) and not _UNWRITABLE.search(requirement)
        # packaging reads a name like ``0_``; PEP 508's grammar ends a name with a letter or digit.
        ok = ok and '"' not in requirement and _PEP508_NAME.fullmatch(parsed.name) is not None
    except InvalidRequirement:
        ok = False
    try:
        action = Install(requirements=(requirement,))
    except UnsafeValue:
        assert not ok, requirement
        return
    assert ok, requirement
    (word,) = [a.text for a in (argv(action) or []) if not a.ours]
    assert Requirement(word).name == parsed.name and Requirement(word).specifier == parsed.specifier


@PROPERTY
@given(url=urls)
def test_a_url_is_written_only_when_it_is_http_or_file_and_one_word(url: str) -> None:
    if not url.startswith(("https://", "http://", "file:")):
        assert refused(checked_url, url), url
    if refused(checked_url, url):
        with pytest.raises(UnsafeValue):
            Install(pins=(("torch", "2.13.0+cpu"),), index_url=url)
        return
    assert url.startswith(("https://", "http://", "file:")), url
    assert urlsplit(url).netloc or url.startswith("file:"), url
    assert not _UNWRITABLE.search(url) and not any(c in url for c in " \"'`<>"), url


@PROPERTY
@given(path=paths, value=values)
def test_paths_and_values_are_written_only_when_absolute_and_on_one_line(path: str, value: str) -> None:
    path_ok = (path.startswith("/") or re.match(r"[A-Za-z]:[\\/]", path) is not None) and not (
        _UNWRITABLE.search(path) or '"' in path
    )
    assert refused(checked_path, path) == (not path_ok)
    assert refused(checked_value, value) == (_UNWRITABLE.search(value) is not None)
    if not path_ok:
        assert_inert(make(lambda: RemoveFiles(paths=(path,)), f"delete {path}"))
    if _UNWRITABLE.search(value):
        assert_inert(make(lambda: SetVariable(name="X", value=value), f"set X to {value}"))


# ---- (d) the two attacks, spelled out ----------------------------------------------------------


def test_a_name_that_reads_as_a_requirements_file_never_reaches_pip() -> None:
    for build in (
        lambda: Install(pins=((OPTION_NAME, "1.0"),)),
        lambda: Uninstall(names=(OPTION_NAME,)),
        lambda: Rebuild(name=OPTION_NAME, version="1.0"),
    ):
        with pytest.raises(UnsafeValue, match="not a distribution name"):
            build()
        step = assert_inert(make(build, f"uninstall {OPTION_NAME}"))
        assert OPTION_NAME in step.text  # said, as prose
    # Were a check ever bypassed, the renderer still refuses the value as an option.
    forged = Uninstall(names=("numpy",))
    object.__setattr__(forged, "names", (OPTION_NAME,))
    for shell in SHELLS:
        with pytest.raises(UnsafeValue, match="would read as an option"):
            render(forged, shell)
    text = remedy_text([install_action([(OPTION_NAME, "2.13.0+cpu")])], None)
    assert "`" not in text and "by hand" in text, text


def test_a_value_with_a_double_quote_and_spaces_is_never_a_powershell_native_argument() -> None:
    edit = EditFile(path="C:\\env\\x.pth", change="drop it", remove_line=SPLIT_VALUE)
    # POSIX: one word, as it is.
    assert shlex.split(render(edit, "posix") or "")[-1] == SPLIT_VALUE
    # PowerShell 5.1 would pass it to python as `"C:\data \"x y\" --index-url http://evil/"`, re-split at
    # its quotes: refused, and said so instead of a command.
    with pytest.raises(UnsafeValue, match="double quote"):
        render(edit, "powershell", "C:\\Python311\\python.exe")
    assert "`" not in inline([edit], "powershell")
    # A variable's value is an assignment, no program's argument: written, and read back exactly.
    variable = SetVariable(name="X", value=SPLIT_VALUE)
    assert powershell_words(variable, None) == ["export", f"X={SPLIT_VALUE}"]
    assert posix_words(variable, None) == ["export", f"X={SPLIT_VALUE}"]
    # In a requirement, a URL or a path, a double quote is refused when the action is made.
    for build in (
        lambda: Install(requirements=('x===a"b',)),
        lambda: Install(pins=(("x", "1"),), index_url='https://h/"a b"'),
        lambda: RemoveFiles(paths=('C:\\a "b"',)),
    ):
        with pytest.raises(UnsafeValue):
            build()


def test_a_script_names_what_powershell_could_not_be_given() -> None:
    edit = EditFile(path="C:\\env\\x.pth", change="drop it", remove_line=SPLIT_VALUE)
    target = Target(python="C:\\env\\python.exe", prefix="C:\\env", shell="powershell")
    text = script(target, [("RULE x (error): why", [edit])], title="t")
    assert "not written as a command" in text and "Still to do by hand" in text
    # The refused value is in comments, and in the last line's message as one literal: never run.
    (said,) = [line for line in text.splitlines() if "http://evil/" in line and not line.startswith("#")]
    assert [t.kind for t in powershell_tokens(said)] == ["bare", "string"] and said.startswith("Write-Output")


# ---- the script's comments ------------------------------------------------------------------------------


@PROPERTY
@given(comment=values, manual=values, title=values, made=actions())
def test_nothing_from_a_message_leaves_a_scripts_comments(
    comment: str, manual: str, title: str, made: Made
) -> None:
    action = make(made.build, made.what)
    for shell in SHELLS:
        target = Target(python="/env/bin/python", prefix="/env", shell=shell)
        raw = "$Python" if shell == "powershell" else '"$python"'
        text = script(target, [(comment, [Manual(text=manual), action])], title=title)
        try:
            command = render(action, shell, raw, raw_python=True)
        except UnsafeValue:
            command = None
        lines = [line for line in text.splitlines() if line.strip() and not line.startswith("#")]
        # The guard (interpreter, check, refusal, end), as in a script with no step and a plain title.
        guard = [line for line in script(target, [], title="t").splitlines() if not line.startswith("#")]
        assert lines[:5] == [line for line in guard if line.strip()]
        body = lines[5:]
        if command is not None and not isinstance(action, SetVariable):
            assert body[0] == command, (body, command)
            body = body[1:]
            if shell == "powershell" and not isinstance(action, RemoveFiles):
                assert body[0] == "if ($LASTEXITCODE -ne 0) { exit $LASTEXITCODE }"
                body = body[1:]
        # The rest: the one line that prints what is left to do by hand, its text one quoted word.
        (last,) = body
        if shell == "posix":
            assert shlex.split(last)[:2] == ["printf", "%s\\n"] and len(shlex.split(last)) == 3, last
        else:
            assert [t.kind for t in powershell_tokens(last)] == ["bare", "string"], last


# ---- for real: a sample in bash, and in PowerShell where it is installed --------------------------------

RECORDER = """\
for v in $vars; do printf '%s=%s\\0' "$v" "${!v}"; done
printf '%s\\0' "$@"
"""


def run_in_bash(line: str, folder: Path, python: Path, names: list[str]) -> list[str]:
    """Run ``line`` as a pasted command in bash, ``pip``, ``python`` and ``rm`` functions that print their
    arguments (and the values of ``names``' variables), NUL-separated; what they printed."""
    functions = "".join(f"{cmd}() {{\n{RECORDER}}}\n" for cmd in ("pip", "python", "rm"))
    # The recorders, checked before the line runs: no real rm ever sees a drawn path.
    guard = '[ "$(type -t rm)$(type -t pip)" = functionfunction ] || exit 99\n'
    body = f"{functions}{guard}export vars={shlex.quote(' '.join(names))}\n{line}\n"
    if line.startswith(("export ", "unset ")):
        name = line.split()[1].split("=", 1)[0]
        body += f'printf "%s\\0" "{name}=${{{name}-<unset>}}"\n'
        if line.startswith("unset "):
            body = f"export {name}=was-set\n" + body
    done = subprocess.run(
        [BASH or "bash", "--norc", "--noprofile", "-c", body],
        cwd=folder,
        capture_output=True,
        timeout=60,
        check=False,
        env={"PATH": "/usr/bin:/bin", "HOME": str(folder)},
    )
    assert done.returncode == 0, (line, done.stderr)
    return done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]


# Values a bash sample can hold: any that render, with variable names of its own (a rebuild setting PATH
# or UID would change the recorder, not the remedy).
bash_variables = st.from_regex(r"[A-Za-z0-9_]{1,8}", fullmatch=True).map(lambda s: "EC_" + s)


@st.composite
def bash_actions(draw: st.DrawFn) -> Action:
    """A drawn action that renders for POSIX, its variables named ``EC_…`` and the paths it deletes under
    ``/gone`` (rebased into the test's folder before it runs)."""
    made = draw(actions())
    action = make(made.build, made.what)
    assume(not isinstance(action, Manual) and refusal(action, None, "posix") is None)
    if isinstance(action, SetVariable):
        return SetVariable(name=draw(bash_variables), value=action.value)
    if isinstance(action, Rebuild):
        renamed = tuple((draw(bash_variables), v) for _, v in action.variables)
        return dataclasses.replace(action, variables=renamed)
    if isinstance(action, RemoveFiles):
        return RemoveFiles(paths=tuple("/gone/" + p.lstrip("/") for p in action.paths))
    return action


@needs_bash
@pytest.mark.slow
@settings(PROPERTY, max_examples=30)
@given(action=bash_actions(), hostile_python=st.booleans())
def test_rendered_commands_give_bash_exactly_their_arguments(
    action: Action, hostile_python: bool, tmp_path_factory: pytest.TempPathFactory
) -> None:
    root = tmp_path_factory.mktemp("bash")
    if isinstance(action, RemoveFiles):
        action = RemoveFiles(paths=tuple(str(root) + p for p in action.paths))
    folder = root / "cwd"
    folder.mkdir()
    # The interpreter: a real program at a path a shell would expand, were it not quoted.
    bin_dir = root / ("bin $(touch pwned) `touch pwned2` it's \u2019" if hostile_python else "bin")
    bin_dir.mkdir()
    python = bin_dir / "python3"
    python.write_text(f"#!{BASH}\n{RECORDER}")
    python.chmod(0o755)
    use = str(python) if not isinstance(action, (SetVariable, RemoveFiles)) else None
    line = render(action, "posix", use)
    assert line is not None
    settings_ = [k for k, _ in action.variables] if isinstance(action, Rebuild) else []
    got = run_in_bash(line, folder, python, settings_)
    assert list(folder.iterdir()) == [] and {p.name for p in root.iterdir()} == {"cwd", bin_dir.name}
    want = expected(action, use)
    if isinstance(action, SetVariable):
        value = "<unset>" if action.value is None else action.value
        assert got == [f"{action.name}={value}"], (line, got)
    else:
        # The recorder prints the settings it sees, then the arguments after the program's name.
        program_at = len(settings_)
        assert got == want[:program_at] + want[program_at + 1 :], (line, got)


@pytest.mark.slow
@pytest.mark.skipif(
    PWSH is None,
    reason="pwsh (PowerShell) is not installed; its rendering is checked by the tokenizer test above",
)
def test_rendered_commands_give_powershell_exactly_their_arguments(tmp_path: Path) -> None:
    recorder = tmp_path / "bin it's \u2019$(x)" / "python3"
    recorder.parent.mkdir()
    recorder.write_text(f"#!{BASH or '/bin/bash'}\n{RECORDER}")
    recorder.chmod(0o755)
    samples: list[Action] = [
        Install(pins=(("torch", "2.13.0+cpu"),), index_url="https://h/$(x)/\u2019b\u2018/cpu"),
        Install(pins=(("x", "1.0"),), wheel_url="file:///tmp/a$b/x-1.0-py3-none-any.whl", no_deps=True),
        Uninstall(names=("numpy", "Foo_Bar.baz")),
        EditFile(path="/srv/a b/it's \u2018x\u2019.pth", change="-", remove_line="import $(y); `z`"),
        Rebuild(name="ext", source="/src/a b/$(c)", variables=(("EC_ARCH", "8.0;9.0 'x' $(y)"),)),
    ]
    for action in samples:
        line = render(action, "powershell", str(recorder))
        assert line is not None
        names = [k for k, _ in action.variables] if isinstance(action, Rebuild) else []
        done = subprocess.run(
            [
                PWSH or "pwsh",
                "-NoProfile",
                "-NonInteractive",
                "-Command",
                f"$env:vars = '{' '.join(names)}'; {line}",
            ],
            cwd=tmp_path,
            capture_output=True,
            timeout=120,
            check=False,
            env={**os.environ, "HOME": str(tmp_path)},
        )
        assert done.returncode == 0, (line, done.stderr)
        assert list(tmp_path.iterdir()) == [recorder.parent], line
        want = expected(action, str(recorder))
        got = done.stdout.decode("utf-8", "surrogateescape").split("\0")[:-1]
        assert got == want[: len(names)] + want[len(names) + 1 :], (line, got)
