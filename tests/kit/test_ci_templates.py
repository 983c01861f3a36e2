"""The CI templates parse as YAML and run the gate through ci/gate.sh, publishing its JUnit report.

No YAML parser is a dependency of envcheck or its tests: the test uses PyYAML where it is already
installed (in this environment, else in the system's python3), and is skipped otherwise.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from .conftest import REPO

_DUMP = "import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1], encoding='utf-8'))))"


def _load(path: Path) -> Any:
    try:
        import yaml  # type: ignore[import-untyped]
    except ImportError:
        pass
    else:
        return yaml.safe_load(path.read_text(encoding="utf-8"))
    for python in ("/usr/bin/python3", shutil.which("python3")):
        if python is None or not Path(python).exists():
            continue
        done = subprocess.run(
            [python, "-c", _DUMP, str(path)], capture_output=True, text=True, timeout=60, check=False
        )
        if done.returncode == 0:
            return json.loads(done.stdout)
    pytest.skip("no YAML parser installed (PyYAML), here or in the system's python3")


def test_gitlab_job_runs_gate_sh_and_publishes_junit() -> None:
    job = _load(REPO / "ci" / "gitlab-ci.yml")["envcheck-gate"]
    script = "\n".join(job["script"])
    assert "sh ci/gate.sh" in script and "--junit envcheck-junit.xml" in script
    assert job["artifacts"]["reports"]["junit"] == "envcheck-junit.xml"
    assert job["artifacts"]["when"] == "always"  # a failing gate's report is the one people need


def test_github_workflow_runs_gate_sh_uploads_junit_and_writes_a_summary() -> None:
    workflow = _load(REPO / "ci" / "github-actions.yml")
    # `on` is quoted in the file: a YAML 1.1 parser reads a bare `on` as true.
    assert {"push", "pull_request"} <= set(workflow["on"])
    steps = workflow["jobs"]["gate"]["steps"]
    runs = "\n".join(s.get("run", "") for s in steps)
    assert "sh ci/gate.sh" in runs and "--junit envcheck-junit.xml" in runs
    assert "GITHUB_STEP_SUMMARY" in runs
    upload = next(s for s in steps if str(s.get("uses", "")).startswith("actions/upload-artifact@"))
    assert "envcheck-junit.xml" in upload["with"]["path"]
    assert upload["if"] == "${{ !cancelled() }}"
