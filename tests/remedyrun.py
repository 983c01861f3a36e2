"""Running remedies for real, as a user would paste them: the tests that prove a rule's remedy build its
broken environment, take the report, run what it says in bash against that environment's own interpreter,
and run envcheck again. Each such test is marked ``@pytest.mark.remedy("RULE-ID", ...)``;
``tests/test_remedy_coverage.py`` fails on a rule that declares a runnable remedy (``Rule.fixes``) and no
marked test proves it.

``run_script`` writes the report's ``--remedies`` script (``envcheck.report.remedies``) and runs it;
``run_actions`` renders one finding's actions (``envcheck.core.remedy.render``) and runs them;
``variables`` is the environment the application would run with after the report's variable steps.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterable, Mapping
from pathlib import Path

from envcheck.core.findings import Finding
from envcheck.core.remedy import Action, SetVariable, render
from envcheck.report import Report
from envcheck.report.remedies import remedy_script

BASH = shutil.which("bash") or "/bin/bash"


def _run(
    script: str, *, cwd: Path, env: Mapping[str, str] | None, timeout: float
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        [BASH, "--norc", "--noprofile", "-e", "-c", script],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        env=dict(env if env is not None else os.environ),
    )
    assert done.returncode == 0, f"remedy failed ({done.returncode}):\n{script}\n{done.stdout}\n{done.stderr}"
    return done


def run_script(
    report: Report, folder: Path, *, env: Mapping[str, str] | None = None, timeout: float = 600
) -> str:
    """Write ``report``'s ``--remedies`` script into ``folder`` and run it with bash; its text."""
    path = folder / "remedies.sh"
    text = remedy_script(report, path)
    path.write_text(text, encoding="utf-8")
    _run(f". {str(path)!r}", cwd=folder, env=env, timeout=timeout)
    return text


def commands(findings: Iterable[Finding], python: str) -> list[str]:
    """The POSIX commands of ``findings``' actions, run by ``python``'s pip (variables excluded: see
    ``variables``)."""
    out = []
    for f in findings:
        for action in f.actions:
            if isinstance(action, SetVariable):
                continue
            line = render(action, "posix", python)
            if line is not None:
                out.append(line)
    return out


def run_actions(
    findings: Iterable[Finding], python: str, folder: Path, *, env: Mapping[str, str] | None = None
) -> list[str]:
    """Run ``findings``' actions in bash against ``python``, in order; the commands run."""
    lines = commands(findings, python)
    assert lines, "no runnable remedy"
    _run("\n".join(lines), cwd=folder, env=env, timeout=600)
    return lines


def variables(findings: Iterable[Finding], env: Mapping[str, str]) -> dict[str, str]:
    """``env`` after the variable steps of ``findings``' remedies (set or unset)."""
    return applied([a for f in findings for a in f.actions], env)


def applied(actions: Iterable[Action], env: Mapping[str, str]) -> dict[str, str]:
    """``env`` after the variable steps among ``actions`` (set or unset)."""
    out = dict(env)
    for action in actions:
        if isinstance(action, SetVariable):
            if action.value is None:
                out.pop(action.name, None)
            else:
                out[action.name] = action.value
    return out


def roots(report: Report) -> list[Finding]:
    """The report's root causes that fail the gate (what ``--remedies`` writes)."""
    return [
        f
        for f in report.findings
        if f.caused_by is None and f.intended is None and f.severity != "info" and f.actions
    ]
