"""``--remedies FILE``: the root causes' remedies of one report as one script (``.sh`` for a POSIX shell,
``.ps1`` for PowerShell), for the environment the report is about.

The script is ``envcheck.core.remedy.script``: it opens with the environment it is for and refuses to run
against another, runs each command with that environment's interpreter, in the report's order (the order
of ``FIRST_CAUSES``: an interrupted or doubled install before what it breaks), each under a comment naming
its finding, and lists what it cannot do. Consequences carry no remedy of their own (their root's fixes
them), intended findings and notes none. envcheck writes the script and never runs it.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.core.errors import UsageError
from envcheck.core.remedy import Action, Shell, runnable, script
from envcheck.report import redacted

if TYPE_CHECKING:
    from envcheck.report import Report

SUFFIX_SHELLS: dict[str, Shell] = {".sh": "posix", ".ps1": "powershell"}


def script_shell(path: str | Path) -> Shell:
    """The shell a ``--remedies`` file is for, from its suffix (``UsageError`` for another one)."""
    shell = SUFFIX_SHELLS.get(Path(path).suffix.lower())
    if shell is None:
        raise UsageError(
            f"--remedies {path}: the file's suffix says which shell runs it: .sh (POSIX) or .ps1 (PowerShell)"
        )
    return shell


def remedy_script(report: Report, path: str | Path) -> str:
    """The script of ``report``'s root causes' remedies, for the shell ``path``'s suffix names."""
    shell = script_shell(path)
    if report.target is None:
        raise UsageError(
            "--remedies writes the fixes of one environment: this report has none (a fleet, or no "
            "interpreter recorded)"
        )
    steps: list[tuple[str, list[Action]]] = []
    seen: set[Action] = set()
    # Redacted as every report is: a credential in a manifest's URL reaches no file envcheck writes.
    for f in redacted(report.findings):
        if f.caused_by is not None or f.intended is not None or f.severity == "info" or not f.actions:
            continue
        fresh = [a for a in f.actions if a not in seen]
        seen.update(fresh)
        if fresh:
            steps.append((f"{f.rule} {f.subject} ({f.severity}): {f.message}", fresh))
    if not any(runnable(a) for _, actions in steps for a in actions):
        steps.append(("No root cause of this report has a remedy envcheck writes as commands.", []))
    target = dataclasses.replace(report.target, shell=shell)
    return script(target, steps, title=f"envcheck remedies: {report.title}")
