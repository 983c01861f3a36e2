"""Starting a snapshot's probes, kept light: the snapshot command starts them before it imports the
manifest models and the native parsers, so that work overlaps with the target's start (docs/budgets.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Protocol

from envcheck.process.runner import Deadline, TargetRun, resolve_python, start_target

# The facts probe reads files and metadata only: when it needs more than this, something is wrong.
FACTS_TIMEOUT = 60.0


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotOptions:
    """What ``envcheck snapshot`` was asked for."""

    python: str | None = None
    label: str | None = None
    probe: bool = True
    timeout: float = 120.0
    redact_paths: bool = False
    verify_files: bool = False
    # Every RECORD-listed native file checked against its RECORD sha256 through the hash cache: on in the
    # live snapshots of gate, doctor and diff (``envcheck.api._snapshot.snapshot_this_machine``).
    integrity: bool = False
    verify: bool = True
    # The command's deadline for envcheck's own work on the snapshot (hashing, the native walk): set by
    # ``take_snapshot`` from its probes' (``envcheck.core.deadline``).
    deadline: Deadline | None = None


class Started(Protocol):
    """A target already running: a ``RunningTarget``, or the runtime probe that the smoke suite's process
    runs first (``envcheck.verify.runner.RuntimeProbe``)."""

    def wait(self) -> TargetRun: ...

    def kill(self) -> None: ...


@dataclass(frozen=True, kw_only=True, slots=True)
class Probes:
    """The facts probe (standard library only) and, unless ``--no-probe``, the runtime probe (imports torch),
    both already running in the target interpreter."""

    python: str
    started: float
    # The deadline the probes were started under: --timeout from their start.
    deadline: Deadline | None = None
    facts: Started
    runtime: Started | None

    def kill(self) -> None:
        """End both now, unread (a snapshot refused once they had started)."""
        self.facts.kill()
        if self.runtime is not None:
            self.runtime.kill()


def start_probes(options: SnapshotOptions, runtime: Started | None = None) -> Probes:
    """Start both probes now, under one deadline ``options.timeout`` seconds away (``--timeout`` is a hard
    deadline for all work in the target; the facts probe gets at most ``FACTS_TIMEOUT`` of it). ``runtime``:
    the runtime probe, already started elsewhere (the gate runs it in the smoke suite's process).

    ``Probes.python`` is the absolute path of the interpreter (``resolve_python``). Raises ``ProbeError``
    when the interpreter does not exist or cannot be started.
    """
    python = resolve_python(options.python)
    started = time.monotonic()
    # The command's own deadline when it made one (``SnapshotOptions.deadline``), else --timeout from now.
    deadline = options.deadline or Deadline.after(options.timeout)
    if runtime is None and options.probe:
        runtime = start_target(python, args=["runtime"], deadline=deadline)
    try:
        facts = start_target(python, args=["facts"], timeout=FACTS_TIMEOUT, deadline=deadline)
    except BaseException:
        if runtime is not None:  # it would be left running until its deadline
            runtime.kill()
        raise
    return Probes(python=python, started=started, deadline=deadline, facts=facts, runtime=runtime)
