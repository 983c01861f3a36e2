"""Policies are untrusted input (docs/guarantees.md): a ``pyproject.toml`` in the current folder applies
itself. Every bad one is exit 2 with one clear line (the file, and line:column or the key), within the
hostile-input bounds, never a traceback, a hang or a memory blow-up."""

from __future__ import annotations

from pathlib import Path

import pytest
from hostile import assert_bounded, envcheck_argv, make_char_device, make_fifo, run_bounded
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.core.errors import UsageError
from envcheck.diff.policy import MAX_POLICY_BYTES, MAX_POLICY_DEPTH, Policy, load_policy

MANIFESTS = Path(__file__).parents[1] / "data" / "manifests"
TWIN_A, TWIN_B = str(MANIFESTS / "twin-a.json"), str(MANIFESTS / "twin-b.json")


def diff_with_policy(policy: Path, *, cwd: Path | None = None, timeout: float = 30) -> tuple[int, str]:
    """``envcheck diff`` of two equal manifests in a bounded child: exit code and stderr."""
    argv = envcheck_argv("diff", TWIN_A, TWIN_B, "--policy", str(policy))
    result = run_bounded(argv, timeout=timeout, cwd=cwd)
    assert_bounded(result, timeout=timeout)
    return result.returncode, result.stderr


def one_error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    assert lines and all(line.startswith(("error: ", "Tip: ")) for line in lines), stderr
    assert sum(line.startswith("error: ") for line in lines) == 1
    return lines[0]


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["fifo", "zero link", "zero device", "folder"])
def test_a_policy_that_is_not_a_regular_file_is_refused_at_once(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "policy.toml"
    if kind == "fifo":
        make_fifo(path)
    elif kind == "zero link":
        path.symlink_to("/dev/zero")
    elif kind == "zero device":
        make_char_device(path, 1, 5)
    else:
        path.mkdir()
    code, err = diff_with_policy(path)
    assert code == 2
    assert "not a regular file" in one_error_line(err)


@pytest.mark.slow
def test_a_pyproject_that_is_a_fifo_is_refused_not_waited_on(tmp_path: Path) -> None:
    make_fifo(tmp_path / "pyproject.toml")
    result = run_bounded(envcheck_argv("diff", TWIN_A, TWIN_B), timeout=30, cwd=tmp_path)
    assert_bounded(result, timeout=30)
    assert result.returncode == 2 and "pyproject.toml" in one_error_line(result.stderr)


@pytest.mark.slow
def test_a_policy_over_the_size_cap_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "huge.toml"
    with path.open("wb") as f:  # sparse: 2 GB on paper
        f.truncate(2 * 1024 * 1024 * 1024)
    code, err = diff_with_policy(path)
    assert code == 2 and f"larger than {MAX_POLICY_BYTES} bytes" in one_error_line(err)


NESTING_BOMBS = {
    "arrays": "ignore = " + "[" * 100_000 + "]" * 100_000 + "\n",
    "inline tables": "x = " + "{a = " * 100_000 + "1" + "}" * 100_000 + "\n",
    # tomllib keeps every prefix of a dotted key: O(n^2) memory, gigabytes for this 300 KB line.
    "dotted key": "a" + ".b" * 100_000 + " = 1\n",
    "table header": "[a" + ".b" * 100_000 + "]\nx = 1\n",
}


@pytest.mark.slow
@pytest.mark.parametrize("shape", sorted(NESTING_BOMBS))
def test_deep_nesting_is_refused_with_line_and_column(tmp_path: Path, shape: str) -> None:
    path = tmp_path / "deep.toml"
    path.write_text("# a comment with [[[ and ... inside\nignore = []\n" + NESTING_BOMBS[shape])
    code, err = diff_with_policy(path)
    assert code == 2
    line = one_error_line(err)
    assert line.startswith(f"error: policy {path}:3:") and str(MAX_POLICY_DEPTH) in line


def test_deep_nesting_in_the_current_folders_pyproject_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.envcheck]\n" + NESTING_BOMBS["dotted key"])
    result = run_bounded(envcheck_argv("diff", TWIN_A, TWIN_B), timeout=30, cwd=tmp_path)
    assert_bounded(result, timeout=30)
    assert result.returncode == 2 and "pyproject.toml:2:" in one_error_line(result.stderr)


def test_strings_and_comments_do_not_count_as_nesting(tmp_path: Path) -> None:
    deep = "[" * 200
    text = (
        f"# {deep}\n"
        f"ignore = ['ENV-PKG-ADDED:{deep}*']\n"
        "[[intended]]\n"
        "rule = 'ENV-TORCH-VARIANT'\n"
        f'reason = """{deep}\n{"." * 200}\\""" still inside """"\n'
        f"machine = '''{'.' * 200}'''''\n"
    )
    path = tmp_path / "p.toml"
    path.write_text(text)
    loaded = load_policy(path, tmp_path)
    assert loaded.intended[0].reason.startswith(deep) and loaded.intended[0].reason.endswith('inside "')
    assert loaded.intended[0].selector.machine == "." * 200 + "''"


@pytest.mark.parametrize(
    ("text", "where"),
    [
        ("ignore = [\n  'ENV-PKG-ADDED',\n  = 3\n]\n", ":3:3: not valid TOML"),
        ("[severity\n", ":1:10: not valid TOML"),
        ("ignore = ['ENV-PKG-ADDED'", ":1:26: not valid TOML"),
        ("x = 'unterminated\n", ":2:1: not valid TOML"),
    ],
)
def test_toml_errors_name_line_and_column(tmp_path: Path, text: str, where: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text)
    with pytest.raises(UsageError) as info:
        load_policy(path, tmp_path)
    assert str(info.value).startswith(f"policy {path}{where}")


def test_not_utf8_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_bytes(b"ignore = ['\xff']\n")
    with pytest.raises(UsageError, match="byte 11: not UTF-8"):
        load_policy(path, tmp_path)


WRONG_TYPES = {
    "ignore = 3": "ignore: expected an array of rule ids, got 3",
    "ignore = [3]": "ignore[0]: expected a rule id, got 3",
    "ignore = [['ENV-PKG-ADDED']]": "ignore[0]: expected a rule id, got an array of 1",
    "[[ignore]]\nrule = 'ENV-PKG-ADDED'\nsubject = ['a']": "ignore[0].subject: expected a non-empty string",
    "[[ignore]]\nrule = 'ENV-PKG-ADDED'\nmachine = 1": "ignore[0].machine: expected a non-empty string",
    "[[ignore]]\nrule = {a = 1}": "ignore[0].rule: expected a rule id, got a table",
    "severity = ['ENV-PKG-ADDED']": "severity: expected a table",
    "[severity]\n'ENV-PKG-ADDED' = ['error']": "severity.ENV-PKG-ADDED: expected 'error', 'warning' or",
    "[severity]\n'ENV-PKG-ADDED' = {a = 'error'}": "severity.ENV-PKG-ADDED: expected 'error'",
    "[severity]\n'ENV-PKG-ADDED' = 1979-05-27": "severity.ENV-PKG-ADDED: expected 'error'",
    "intended = 'ENV-PKG-ADDED'": "intended: expected an array of tables",
    "intended = [1]": "intended[0]: expected a table with rule and reason, got 1",
    "[[intended]]\nrule = 'ENV-PKG-ADDED'\nreason = ['x']": "intended[0].reason: an intended difference",
    "[[intended]]\nrule = 'ENV-PKG-ADDED'\nreason = 'x'\nsubject = true": "intended[0].subject: expected",
    "tool = 3": "tool: expected a table, got 3",
    "[tool]\nenvcheck = [1]": "tool.envcheck: expected a table, got an array of 1",
}


@pytest.mark.slow
@pytest.mark.parametrize("text", sorted(WRONG_TYPES))
def test_wrong_types_anywhere_are_exit_2_naming_the_key(tmp_path: Path, text: str) -> None:
    path = tmp_path / "p.toml"
    path.write_text(text + "\n")
    result = CliRunner().invoke(app, ["diff", TWIN_A, TWIN_B, "--policy", str(path)])
    assert (result.exit_code, result.stdout) == (2, "")
    assert WRONG_TYPES[text] in one_error_line(result.stderr)


def test_a_pyproject_tool_envcheck_of_the_wrong_type_is_refused(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool]\nenvcheck = 'ignore everything'\n")
    with pytest.raises(UsageError, match=r"\[tool.envcheck\] must be a table, got 'ignore everything'"):
        load_policy(None, tmp_path)


def test_a_huge_value_is_not_echoed_in_full(tmp_path: Path) -> None:
    path = tmp_path / "p.toml"
    path.write_text("ignore = ['" + "X" * 500_000 + "']\n")
    with pytest.raises(UsageError) as info:
        load_policy(path, tmp_path)
    assert len(str(info.value)) < 1000


TOML_TOKENS = st.sampled_from(
    [
        "ignore",
        "severity",
        "intended",
        "tool",
        "envcheck",
        "rule",
        "reason",
        "subject",
        "machine",
        "=",
        "[",
        "]",
        "[[",
        "]]",
        "{",
        "}",
        ",",
        ".",
        "\n",
        " ",
        "'",
        '"',
        '"""',
        "'''",
        "#",
        "\\",
        "'ENV-PKG-ADDED'",
        "'*'",
        "'error'",
        "'info'",
        "1",
        "1.5",
        "true",
        "1979-05-27",
        "\x00",
        "é",
    ]
)


@pytest.mark.slow
@settings(max_examples=300, deadline=None)
@given(st.lists(TOML_TOKENS, max_size=40))
def test_any_text_is_a_policy_or_a_usage_error(
    tmp_path_factory: pytest.TempPathFactory, tokens: list[str]
) -> None:
    folder = tmp_path_factory.mktemp("fuzz")
    path = folder / "p.toml"
    path.write_text("".join(tokens), encoding="utf-8")
    try:
        policy = load_policy(path, folder)
    except UsageError as e:
        assert str(e).startswith(f"policy {path}") and "\n" not in str(e)
    else:
        assert isinstance(policy, Policy) and policy.source == str(path)
