"""Starting a snapshot's probes, kept light: the snapshot command starts them before it imports the
manifest models and the native parsers, so that work overlaps with the target's start (DESIGN §6)."""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass

from envcheck.probe.runner import RunningTarget, start_target


@dataclass(frozen=True, kw_only=True, slots=True)
class SnapshotOptions:
    """What ``envcheck snapshot`` was asked for."""

    python: str | None = None
    label: str | None = None
    probe: bool = True
    timeout: float = 120.0
    redact_paths: bool = False
    verify_files: bool = False
    verify: bool = True


@dataclass(frozen=True, kw_only=True, slots=True)
class Probes:
    """The facts probe (standard library only) and, unless ``--no-probe``, the runtime probe (imports torch),
    both already running in the target interpreter."""

    python: str
    started: float
    facts: RunningTarget
    runtime: RunningTarget | None


def start_probes(options: SnapshotOptions) -> Probes:
    """Start both probes now. Raises ``ProbeError`` when the interpreter cannot be started."""
    python = options.python or sys.executable
    started = time.monotonic()
    runtime = start_target(python, args=["runtime"], timeout=options.timeout) if options.probe else None
    facts = start_target(python, args=["facts"], timeout=min(options.timeout, 60.0))
    return Probes(python=python, started=started, facts=facts, runtime=runtime)
