"""The pytest plugin (``pytest --envcheck=MANIFEST``), run in a sample project by pytester.

The runs that execute the gate are subprocesses (``runpytest_subprocess``): the plugin is loaded from its
``pytest11`` entry point, as in a user's project, and the gate snapshots and runs the smoke suite in the
named interpreter for real. The runs that only collect are in-process.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from envcheck.app.catalog import catalog

from .conftest import DRIFT_PACKAGE, DRIFT_REQUIRER, KitEnvs

pytest_plugins = ["pytester"]

SAMPLE = """
def test_the_model_loads():
    assert 2 + 2 == 4
"""


# Read once, at import: pytester's in-process runs drop the modules they imported, and the rule families
# register themselves on import (a second import would register them twice).
FAMILIES = len({r.family for r in catalog() if r.kind in ("difference", "single")})


def _families() -> int:
    return FAMILIES


@pytest.fixture
def sample(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makepyfile(test_sample=SAMPLE)
    return pytester


def _gate(sample: pytest.Pytester, manifest: Path, python: Path, *args: str) -> pytest.RunResult:
    return sample.runpytest_subprocess(
        # `--opt=VALUE`: a separate path argument would count in pytest's choice of rootdir.
        f"--envcheck={manifest}",
        f"--envcheck-python={python}",
        "-v",
        "-rfs",
        *args,
        timeout=600,
    )


@pytest.mark.slow
def test_matching_environment_passes_with_skips_that_say_why(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    result = _gate(sample, kit_envs.manifest, kit_envs.matching)
    assert result.ret == pytest.ExitCode.OK, result.stdout.str()
    out = result.stdout.str()
    outcomes = result.parseoutcomes()
    golden_checks = len(re.findall(r"^envcheck::check::\S+ (?:PASSED|SKIPPED)", out, re.M))
    assert golden_checks >= 30
    # families + checks + the suite item + the sample's own test
    assert outcomes["passed"] + outcomes.get("skipped", 0) == _families() + golden_checks + 2
    result.stdout.fnmatch_lines(
        [
            "envcheck::family::packages PASSED*",
            "envcheck::family::torch PASSED*",
            "envcheck::check::matmul_fp32 PASSED*",
            "envcheck::smoke-suite PASSED*",
            "test_sample.py::test_the_model_loads PASSED*",
        ],
        consecutive=False,
    )
    # A check skipped here is a skip with the suite's reason, reported at the item.
    skipped = [line for line in out.splitlines() if line.startswith("SKIPPED [")]
    assert skipped, out
    assert any(
        ": cuda/matmul_fp32: skipped: " in line and "built without CUDA" in line for line in skipped
    ), skipped
    assert re.search(r"^envcheck gate: this machine \(.+\) against .*the gate passes", out, re.M), out


@pytest.mark.slow
def test_drifting_environment_fails_showing_message_and_remedy(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    result = _gate(sample, kit_envs.manifest, kit_envs.drifting)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    result.stdout.fnmatch_lines(["envcheck::family::packages FAILED*"], consecutive=False)
    result.stdout.fnmatch_lines(["test_sample.py::test_the_model_loads PASSED*"], consecutive=False)
    # The failure shows the finding: rule, subject, the message naming who needs it, and the remedy.
    failure = out[out.index("envcheck::family::packages") :]
    section = failure[failure.index("_ envcheck::family::packages _") :]
    assert f"ERROR ENV-PKG-MISSING {DRIFT_PACKAGE}" in section
    assert f"where {DRIFT_REQUIRER} require(s) it" in section
    assert re.search(rf"remedy: .*pip install .*{DRIFT_PACKAGE}==", section), section
    # Only the packages family fails: the rest of the environment matches.
    failed = re.findall(r"^FAILED (\S+)", out, re.M)
    assert failed == ["envcheck::family::packages"], failed
    assert re.search(r"envcheck gate: .* at or above error: the gate fails", out), out


@pytest.mark.slow
def test_policy_and_fail_on_reach_the_gate(sample: pytest.Pytester, kit_envs: KitEnvs) -> None:
    sample.makefile(".toml", policy='ignore = ["ENV-PKG-MISSING", "ENV-PKG-UNMET"]\n')
    ignored = _gate(sample, kit_envs.manifest, kit_envs.drifting, "--envcheck-policy", "policy.toml")
    assert ignored.ret == pytest.ExitCode.OK, ignored.stdout.str()
    assert "policy:" in ignored.stdout.str()


@pytest.mark.slow
def test_fail_on_info_fails_on_what_error_lets_pass(sample: pytest.Pytester, kit_envs: KitEnvs) -> None:
    # Matching but not identical: the suite's skipped CUDA checks are info findings, which fail at info.
    result = _gate(sample, kit_envs.manifest, kit_envs.matching, "--envcheck-fail-on", "info")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["envcheck::check::cuda/matmul_fp32 FAILED*"], consecutive=False)
    assert "INFO VERIFY-SKIPPED cuda/matmul_fp32" in result.stdout.str()


def test_collect_only_lists_stable_node_ids_without_running_the_gate(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    result = sample.runpytest(f"--envcheck={kit_envs.manifest}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK
    ids = [line for line in result.outlines if "::" in line]
    assert ids[: _families()] == sorted(ids[: _families()])
    assert "envcheck::family::packages" in ids and "envcheck::family::torch" in ids
    assert "envcheck::check::import_torch" in ids and "envcheck::smoke-suite" in ids
    assert ids[-1] == "test_sample.py::test_the_model_loads"
    assert "envcheck gate:" not in result.stdout.str()  # nothing ran
    # -k selects among them like any other test.
    picked = sample.runpytest(f"--envcheck={kit_envs.manifest}", "--collect-only", "-q", "-k", "family")
    assert [line for line in picked.outlines if "::" in line] == ids[: _families()]


def test_without_the_option_or_with_the_plugin_off_nothing_is_added(sample: pytest.Pytester) -> None:
    plain = sample.runpytest("--collect-only", "-q")
    assert [line for line in plain.outlines if "::" in line] == ["test_sample.py::test_the_model_loads"]
    off = sample.runpytest("-p", "no:envcheck", "--collect-only", "-q")
    assert [line for line in off.outlines if "::" in line] == ["test_sample.py::test_the_model_loads"]
    unknown = sample.runpytest("-p", "no:envcheck", "--envcheck=m.json")
    assert unknown.ret == pytest.ExitCode.USAGE_ERROR
    assert "unrecognized arguments: --envcheck" in unknown.stderr.str()


@pytest.mark.parametrize(
    ("content", "args", "expected"),
    [
        (None, [], "ERROR: --envcheck: missing.json: cannot read: No such file or directory"),
        ('{"schema_version": ', [], "ERROR: --envcheck: bad.json: line 1 column 20: not valid JSON"),
        ('{"schema_version": 1}', [], "ERROR: --envcheck: bad.json: "),
        (
            None,
            ["--envcheck-python", "/nonexistent/python9"],
            "ERROR: --envcheck: --envcheck-python: interpreter not found: /nonexistent/python9",
        ),
        (None, ["--envcheck-fail-on", "fatal"], "*--envcheck-fail-on: invalid choice: 'fatal'*"),
    ],
)
def test_bad_input_is_a_one_line_usage_error(
    sample: pytest.Pytester, kit_envs: KitEnvs, content: str | None, args: list[str], expected: str
) -> None:
    if content is not None:
        (sample.path / "bad.json").write_text(content, encoding="utf-8")
        manifest = "bad.json"
    else:
        manifest = "missing.json" if not args else str(kit_envs.manifest)
    result = sample.runpytest(f"--envcheck={manifest}", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    if expected.startswith("*"):  # refused by pytest's own option parser, in its words
        result.stderr.fnmatch_lines([expected])
    else:
        errors = [line for line in result.stderr.lines if "error" in line.lower()]
        assert len(errors) == 1, result.stderr.str()
        assert errors[0].startswith(expected), errors
    assert "Traceback" not in result.stderr.str()


LOADED_MODULES = """
import sys

def pytest_sessionfinish(session):
    with open("modules.txt", "w", encoding="utf-8") as f:
        f.write("\\n".join(sorted(m for m in sys.modules if m == "envcheck" or m.startswith("envcheck."))))
"""


@pytest.mark.slow
def test_loading_the_plugin_without_the_option_imports_nothing_else_of_envcheck(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    # Every pytest run in an environment with envcheck installed loads the plugin: without --envcheck it
    # costs the import of itself and nothing more of envcheck. (-X importtime cannot tell: pytest loads
    # entry points with importlib.import_module, which it does not time.) A fresh process, so that nothing
    # this test run imported counts.
    sample.makeconftest(LOADED_MODULES)
    result = sample.runpytest_subprocess("--collect-only", "-q", "-p", "no:cacheprovider", timeout=300)
    assert result.ret == pytest.ExitCode.OK
    loaded = (sample.path / "modules.txt").read_text(encoding="utf-8").split()
    assert loaded == ["envcheck", "envcheck.pytest_plugin"]
    # The same check sees envcheck's modules when the option brings them in: it can fail.
    with_option = sample.runpytest_subprocess(
        f"--envcheck={kit_envs.manifest}", "--collect-only", "-q", "-p", "no:cacheprovider", timeout=300
    )
    assert with_option.ret == pytest.ExitCode.OK
    loaded = (sample.path / "modules.txt").read_text(encoding="utf-8").split()
    assert "envcheck.manifest.io" in loaded and "envcheck.core.findings" in loaded


@pytest.mark.slow
def test_a_gate_that_cannot_run_fails_every_item_with_one_line(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    # An interpreter that is no Python at all: the gate cannot take its snapshot. Each of its items says so
    # in one line (the error is kept, not retried per item); the project's own tests still run.
    fake = sample.path / "not-python"
    fake.write_text('#!/bin/sh\necho "not python"\nexit 3\n', encoding="utf-8")
    fake.chmod(0o755)
    result = _gate(sample, kit_envs.manifest, fake)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    failed = re.findall(r"^FAILED (\S+) - (.*)$", out, re.M)
    assert len(failed) == FAMILIES + len(re.findall(r"^envcheck::check::", out, re.M)) + 1
    assert all(node.startswith("envcheck::") for node, _ in failed)
    assert "envcheck gate could not run: the target interpreter " in out
    assert "Traceback" not in out
    result.stdout.fnmatch_lines(["test_sample.py::test_the_model_loads PASSED*"], consecutive=False)


def test_check_names_from_a_hostile_manifest_are_escaped_in_node_ids(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    data = json.loads(kit_envs.manifest.read_text(encoding="utf-8"))
    data["verify"]["results"][1]["name"] = "evil\x1b]0;owned\x07::x[1]"
    hostile = sample.path / "hostile.json"
    hostile.write_text(json.dumps(data), encoding="utf-8")
    result = sample.runpytest(f"--envcheck={hostile}", "--collect-only", "-q")
    assert result.ret == pytest.ExitCode.OK, result.stderr.str()
    out = result.stdout.str()
    assert "\x1b" not in out and "\x07" not in out
    assert "envcheck::check::evil\\x1b)0;owned\\x07__x(1)" in result.outlines


@pytest.mark.slow
def test_a_manifest_without_goldens_has_no_check_items_and_says_so(
    sample: pytest.Pytester, kit_envs: KitEnvs
) -> None:
    data = json.loads(kit_envs.manifest.read_text(encoding="utf-8"))
    data["verify"]["results"] = []
    plain = sample.path / "plain.json"
    plain.write_text(json.dumps(data), encoding="utf-8")
    result = _gate(sample, plain, kit_envs.matching, "--envcheck-fail-on", "warning")
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    out = result.stdout.str()
    assert not re.findall(r"^envcheck::check::", out, re.M)
    failed = re.findall(r"^FAILED (\S+)", out, re.M)
    # pytester's subprocess sets PYTHONPATH, a warning of the environment family: real drift, left in.
    assert "envcheck::smoke-suite" in failed
    assert set(failed) <= {"envcheck::smoke-suite", "envcheck::family::environment"}, failed
    assert "WARNING VERIFY-NO-GOLDEN verify" in out and "holds no verify goldens" in out


@pytest.mark.slow
def test_an_interpreter_without_torch_gets_the_plugins_own_tip(
    sample: pytest.Pytester, kit_envs: KitEnvs, tmp_path: Path
) -> None:
    # The API says the fact (no torch where the manifest has torch); each face words the tip with its own
    # option: here --envcheck-python, never the command line's --python.
    from venvs import make_venv

    bare = make_venv(tmp_path / "bare")
    result = _gate(sample, kit_envs.manifest, bare)
    out = result.stdout.str()
    assert "probably the wrong interpreter" in out
    assert "Tip: pass the environment's interpreter with --envcheck-python" in out
    assert not re.search(r"(?<![\w-])--python\b", out), out
