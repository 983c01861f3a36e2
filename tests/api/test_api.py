"""envcheck.api, the documented Python API: the example of docs/reference.md run as written, and each job
of the core called directly (diff, doctor and fleet_diff of the committed example manifests, load_policy,
expand_targets on hostile input, gate in this interpreter)."""

from __future__ import annotations

import dataclasses
import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck import api
from envcheck.core.errors import ManifestError, UsageError
from envcheck.manifest.io import dumps, load

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"
CPU = EXAMPLES / "torch-2.13.0-cpu-linux.json"
CUDA = EXAMPLES / "torch-2.14.1-cu130-linux-nogpu.json"
REFERENCE = ROOT / "docs" / "reference.md"


def _example() -> str:
    """The one Python example of docs/reference.md's "Python API" section."""
    section = REFERENCE.read_text(encoding="utf-8").split("## Python API", 1)[1]
    (code,) = re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)
    return code


@pytest.mark.slow
def test_the_documented_example_runs_as_written(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", _example()],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "envcheck doctor: here"
    assert "policy: none" in lines
    assert re.fullmatch(r"\d+ packages; \d+ findings", lines[-1])
    assert int(lines[-1].split()[0]) > 0  # the test environment: torch, pytest, envcheck itself...


@pytest.mark.slow
def test_every_job_named_in_the_table_loads() -> None:
    for job in api._JOBS:
        assert getattr(api, job) is not None, job
    assert set(api._JOBS) <= set(api.__all__)
    with pytest.raises(AttributeError):
        api.no_such_job  # noqa: B018


def test_importing_the_api_loads_no_job() -> None:
    code = "import sys, envcheck.api; print(sorted(m for m in sys.modules if m.startswith('envcheck.api.')))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert json.loads(done.stdout.replace("'", '"')) == ["envcheck.api._common"]


def test_diff_of_the_example_manifests() -> None:
    report = api.diff(CUDA, CPU)
    assert report.title == "envcheck diff: example-cuda → example"
    assert report.policy_line == "policy: none"
    errors = {f.rule for f in report.findings if f.severity == "error"}
    assert "ENV-TORCH-VARIANT" in errors
    # In memory as from the files: a Manifest is named by its label the same way.
    again = api.diff(load(CUDA), load(CPU))
    assert again.findings == report.findings and again.title == report.title


def test_diff_of_a_manifest_with_itself_finds_no_difference() -> None:
    report = api.diff(CPU, CPU)
    assert not [f for f in report.findings if f.rule.startswith("ENV-TORCH")]
    assert report.title == f"envcheck diff: {CPU} → {CPU}"  # one label for both: named by their paths
    assert "No differences that matter." in api.render_report(report, api.ReportOptions())


def test_doctor_of_an_example_and_the_report_options() -> None:
    report = api.doctor(CPU)
    assert report.title == "envcheck doctor: example"
    rendered = api.render_report(report, api.ReportOptions(format=api.FormatName.json))
    assert json.loads(rendered)["title"] == "envcheck doctor: example"


def test_fleet_diff_groups_identical_machines(tmp_path: Path) -> None:
    fleet = tmp_path / "fleet"
    fleet.mkdir()
    manifest = load(CPU)
    for n in range(3):
        labelled = manifest.replace(meta=dataclasses.replace(manifest.meta, label=f"node-{n}"))
        (fleet / f"node-{n}.json").write_text(dumps(labelled), encoding="utf-8")
    (fleet / "broken.json").write_text("{", encoding="utf-8")
    found = api.fleet_diff(CUDA, [fleet])
    assert len(found.unreadable) == 1 and "broken.json" in found.unreadable[0]
    assert [g.members for g in found.report.groups] == [("node-0", "node-1", "node-2")]
    assert found.report.title.endswith("→ 3 machines")


def test_load_policy(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert api.load_policy().source is None  # no pyproject.toml here: the empty policy
    (tmp_path / "pyproject.toml").write_text(
        '[tool.envcheck]\nignore = ["ENV-TORCH-VARIANT"]\n', encoding="utf-8"
    )
    policy = api.load_policy()
    assert policy.source is not None
    report = api.diff(CUDA, CPU, policy=policy)
    assert "ENV-TORCH-VARIANT" not in {f.rule for f in report.findings}
    assert report.policy_changed
    assert api.load_policy(disabled=True).disabled
    with pytest.raises(UsageError, match="contradict"):
        api.load_policy(tmp_path / "pyproject.toml", disabled=True)
    (tmp_path / "bad.toml").write_text('ignore = ["NO-SUCH-RULE"]\n', encoding="utf-8")
    with pytest.raises(UsageError, match="NO-SUCH-RULE"):
        api.load_policy(tmp_path / "bad.toml")


def test_expand_targets_hostile(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / ".hidden.json").write_text("{}", encoding="utf-8")
    (empty / "notes.txt").write_text("", encoding="utf-8")
    with pytest.raises(UsageError, match="no manifest"):
        api.expand_targets([empty])
    with pytest.raises(UsageError, match="no file matches"):
        api.expand_targets([str(tmp_path / "nothing-*.json")])
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /usr/bin\n", encoding="utf-8")
    with pytest.raises(UsageError, match="Python environment"):
        api.expand_targets([venv])
    # A plain path is taken as given (the reader judges it), each once, in order.
    assert api.expand_targets([CPU, CUDA, CPU]) == ([str(CPU), str(CUDA)], False)
    with pytest.raises(ManifestError):
        api.diff(CPU, tmp_path / "missing.json")


def test_describe_error_is_the_cli_s_lines() -> None:
    assert api.describe_error(UsageError("bad \x1b[31m", tip="do this")) == [
        "error: bad \\x1b[31m",
        "Tip: do this",
    ]
    lines = api.describe_error(KeyError("x"))
    assert lines[0] == "error: internal error: KeyError: 'x'" and "ENVCHECK_DEBUG=1" in lines[1]


@pytest.mark.slow
def test_gate_in_this_interpreter_tells_its_counts() -> None:
    told: list[str] = []
    steps: list[str] = []
    options = api.SuiteOptions(python=sys.executable, app_imports=False)
    run = api.run_gate(CPU, options=options, progress=steps.append, tell=told.append)
    assert run.report.title.startswith(f"envcheck gate: this machine ({sys.executable}")
    assert run.suite.results and run.imports is None
    assert any(line.endswith(" beyond") for line in told)  # the outputs compared with the goldens
    assert any(s.startswith("smoke suite: ") for s in steps) and any(
        s.startswith("snapshot: ") for s in steps
    )
