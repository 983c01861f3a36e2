"""What the jobs of ``envcheck.api`` share: the progress callback's type, how a report names a manifest or
the inspected interpreter, the slips a first hour makes (an interpreter without torch checked against a
reference with torch: most often envcheck's own interpreter where the environment's was meant), and
``describe_error``: an error as the lines a person reads (the command line's and the pytest plugin's)."""

from __future__ import annotations

import dataclasses
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.core.errors import EnvcheckError
from envcheck.core.escape import one_line
from envcheck.core.redact import redact_text

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection
    from envcheck.report import Report

# A job's progress: told one short line per step (the command line draws it; None: nobody listens).
Progress = Callable[[str], None]

# What ``--python`` takes, in the tips: any environment's interpreter, as typed on this machine (a Windows
# venv keeps python.exe in Scripts).
EXAMPLE_PYTHON = "path\\to\\venv\\Scripts\\python.exe" if os.name == "nt" else "path/to/venv/bin/python"


def prefixed(progress: Progress | None, prefix: str) -> Progress | None:
    """``progress`` with ``prefix`` on each line: the gate's snapshot and suite share one progress line."""
    if progress is None:
        return None
    return lambda line: progress(prefix + line)


def name(path: Path | str, manifest: Manifest) -> str:
    """One manifest named in a title: its label, else its path (doctor, gate, verify --against)."""
    return str(manifest.meta.label or path)


def interpreter_path(python: str | None) -> str:
    """The interpreter a job inspects, as a path: ``python`` as given (found on PATH when it is a bare
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
    def lines(self) -> tuple[str, str]:
        """The warning and its tip, as said on stderr before the report (redacted, one line each)."""
        return one_line(redact_text(self.line)), one_line(redact_text(self.tip))

    @property
    def title_note(self) -> str:
        return (
            f"probably the wrong interpreter (it has no torch, {self.reference} has torch {self.torch}): "
            f"pass --python {EXAMPLE_PYTHON}"
        )

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


def slipped(report: Report, slip: WrongInterpreter | None, tell: Progress | None) -> Report:
    """``report`` with ``slip`` noted in its title and its lines told to ``tell``; as it is without one."""
    if slip is None:
        return report
    if tell is not None:
        for line in slip.lines:
            tell(line)
    return slip.titled(report)


def error_message(error: BaseException) -> str:
    """What went wrong, in one phrase: an ``EnvcheckError``'s message, or ``internal error: Type: message``
    for anything else (a bug). Not yet redacted nor escaped (``describe_error`` does both)."""
    if isinstance(error, EnvcheckError):
        return str(error)
    return f"internal error: {type(error).__name__}: {error}"


def describe_error(error: BaseException) -> list[str]:
    """The lines a person reads for ``error``: ``error: …`` and, for an ``EnvcheckError`` with one,
    ``Tip: …``; a bug's tip says that ``ENVCHECK_DEBUG=1`` shows its traceback. Messages quote untrusted
    input (paths, manifest values): each line is redacted and escaped for the terminal."""
    lines = [f"error: {error_message(error)}"]
    if isinstance(error, EnvcheckError):
        lines += [f"Tip: {error.tip}"] if error.tip else []
    else:
        lines.append("Tip: this is a bug in envcheck; ENVCHECK_DEBUG=1 shows the traceback for a report.")
    return [one_line(redact_text(line)) for line in lines]
