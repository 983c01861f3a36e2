"""The slips of a first hour, caught where they happen: the interpreter a report is about, named in its
title (``this machine (/path/to/python)``), and an interpreter without torch checked against a manifest
or a requirements lock that has torch, which is most often envcheck's own interpreter where the
environment's was meant (``--python`` forgotten)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import typer

if TYPE_CHECKING:
    from envcheck.app.flows import Report
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection

# What ``--python`` takes, in the tips: any environment's interpreter, as typed on this machine (a Windows
# venv keeps python.exe in Scripts).
EXAMPLE_PYTHON = "path\\to\\venv\\Scripts\\python.exe" if os.name == "nt" else "path/to/venv/bin/python"


def interpreter_path(python: str | None) -> str:
    """The interpreter a command inspects, as a path: ``python`` as given (found on PATH when it is a bare
    name, made absolute), else this interpreter (``sys.executable``)."""
    if python is None:
        return sys.executable
    found = python if os.sep in python or (os.altsep and os.altsep in python) else shutil.which(python)
    return str(Path(found or python).absolute())


def live_name(executable: str) -> str:
    """How a report's title names the inspected environment: ``this machine (/path/to/python)``."""
    return f"this machine ({executable})"


@dataclass(frozen=True, kw_only=True, slots=True)
class WrongInterpreter:
    """An interpreter without torch checked against a reference with torch: what to say first."""

    executable: str
    own: bool  # no --python: envcheck's own interpreter was inspected
    reference: str  # the manifest's or the lock's name
    torch: str  # the reference's torch version

    @property
    def line(self) -> str:
        who = f"envcheck's own interpreter ({self.executable})" if self.own else self.executable
        return (
            f"warning: {who} has no torch, and {self.reference} has torch {self.torch}: "
            "probably the wrong interpreter"
        )

    @property
    def tip(self) -> str:
        return f"Tip: pass the environment's interpreter with --python, e.g. --python {EXAMPLE_PYTHON}"

    @property
    def title_note(self) -> str:
        return (
            f"probably the wrong interpreter (it has no torch, {self.reference} has torch {self.torch}): "
            f"pass --python {EXAMPLE_PYTHON}"
        )

    def say(self) -> None:
        """The warning and its tip on stderr, before the report."""
        from envcheck.core.escape import one_line
        from envcheck.core.redact import redact_text

        typer.echo(one_line(redact_text(self.line)), err=True)
        typer.echo(one_line(redact_text(self.tip)), err=True)

    def titled(self, report: Report) -> Report:
        """``report`` whose title ends with the note: the report's first line says it too."""
        return dataclasses.replace(report, title=f"{report.title}: {self.title_note}")


def wrong_interpreter(
    *,
    python: str | None,
    executable: str,
    reference: str,
    reference_torch: str | None,
    has_torch: bool,
) -> WrongInterpreter | None:
    """The slip when the reference (a manifest or a lock named ``reference``) has torch
    ``reference_torch`` and the inspected interpreter has none; else None."""
    if reference_torch is None or has_torch:
        return None
    return WrongInterpreter(
        executable=executable, own=python is None, reference=reference, torch=reference_torch
    )


def live_against(
    python: str | None, reference: str, base: Manifest, live: Manifest
) -> WrongInterpreter | None:
    """``wrong_interpreter`` of a live snapshot ``live`` checked against the manifest ``base`` (named
    ``reference``): a gate, or a diff against this machine."""
    return wrong_interpreter(
        python=python,
        executable=live.python.executable,
        reference=reference,
        reference_torch=base.torch.static.version if base.torch.static else None,
        has_torch=live.torch.static is not None,
    )


def suite_lacks_torch(section: VerifySection) -> bool:
    """Whether the smoke suite's first check failed because torch is not installed at all (not a torch
    that fails to load: that is the environment's own problem, reported as it is)."""
    result = section.result("import_torch")
    return (
        result is not None and result.status == "error" and "No module named 'torch'" in (result.error or "")
    )
