"""``envcheck.api.diff``, ``doctor`` and ``fleet_diff``: a manifest against another, against this machine,
or against a fleet of manifests; one environment's traps alone; and ``expand_targets``, the manifests
that paths, folders and patterns name."""

from __future__ import annotations

import glob
import itertools
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import live_against, name, public, slipped
from envcheck.app import flows
from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.diff.policy import Policy
from envcheck.manifest.io import is_environment_folder, load
from envcheck.manifest.model import Manifest
from envcheck.report import Report

if TYPE_CHECKING:
    from envcheck.api._common import Progress

__all__ = [
    "MAX_FLEET_FILES",
    "FleetReport",
    "diff",
    "diff_targets",
    "doctor",
    "expand_targets",
    "fleet_diff",
]

# A TARGET that is no file but holds one of these is a pattern (quoted, so that the shell left it alone).
_GLOB_CHARS = frozenset("*?[")
# The manifests one fleet diff reads (docs/guarantees.md): a folder or a pattern is listed up to one past
# it, never whole, so a folder of a million files costs no more than this many names.
MAX_FLEET_FILES = 50_000


@public
def diff(
    base: Path | str | Manifest,
    target: Path | str | Manifest | None = None,
    *,
    policy: Policy | None = None,
    python: str | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> Report:
    """Every difference from the manifest ``base`` to ``target`` that matters, ranked, with remedies (the
    difference rules, and the target's single-environment rules as ``doctor`` runs them). Each is a file
    (named in the title by its label, else its path) or a ``Manifest`` (``snapshot``'s). Without
    ``target``: a fresh snapshot of ``python`` (default: this interpreter), told to ``progress``; an
    interpreter without torch against a base with torch is noted in the title and told to ``tell``.

    ``policy``: applied to the findings (default: none; ``load_policy`` reads one). ``timeout``: one
    deadline for the snapshot and the rules. Raises ``ManifestError`` for a manifest that cannot be read,
    ``ProbeError`` when the interpreter cannot run, ``DeadlineExpired`` past the deadline."""
    deadline = Deadline.after(timeout)
    policy = policy if policy is not None else Policy()
    base_manifest = _loaded(base)
    if target is not None:  # one pair: both named by label, or both by path
        loaded = _loaded(target)
        base_name, target_name = _names([_shown(base), _shown(target)], [base_manifest, loaded])
        # The rules are envcheck's own work: they get the grace past the targets' deadline.
        return flows.diff(base_name, base_manifest, (target_name, loaded), policy, deadline.for_own_work())
    live = _snapshot(python, timeout, progress, deadline)
    base_name = name(_shown(base), base_manifest)
    report = flows.diff(base_name, base_manifest, (_live(live), live), policy, deadline.for_own_work())
    return slipped(report, live_against(python, base_name, base_manifest, live), tell)


@dataclass(frozen=True, kw_only=True, slots=True)
class FleetReport:
    """A fleet diff: the report (one group per distinct environment) and each manifest that could not be
    read (one line each: the report covers the others)."""

    report: Report
    unreadable: tuple[str, ...]


@public
def diff_targets(
    base: Path | str,
    targets: Sequence[Path | str],
    *,
    policy: Policy | None = None,
    python: str | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> FleetReport:
    """What ``envcheck diff BASE [TARGET]...`` reports: ``diff`` of one target (or of this machine, without
    any), else ``fleet_diff`` of the manifests the targets name (several, a folder or a pattern:
    ``expand_targets``). Raises ``UsageError`` for a folder or a pattern without a manifest."""
    paths, expanded = expand_targets(targets)
    if len(paths) > 1 or expanded:
        return _fleet(base, paths, policy, timeout)
    report = diff(
        base,
        paths[0] if paths else None,
        policy=policy,
        python=python,
        timeout=timeout,
        progress=progress,
        tell=tell,
    )
    return FleetReport(report=report, unreadable=())


@public
def fleet_diff(
    base: Path | str, targets: Sequence[Path | str], *, policy: Policy | None = None, timeout: float = 120.0
) -> FleetReport:
    """``base`` against every manifest ``targets`` name (files, folders of them, quoted patterns:
    ``expand_targets``), streamed and grouped (``envcheck.app.fleet``): machines whose manifests differ
    only in volatile fields share an environment, diffed once on every CPU and reported once as a group.
    A manifest that cannot be read is left out of the report and named in ``unreadable``."""
    return _fleet(base, expand_targets(targets)[0], policy, timeout)


def _fleet(base: Path | str, paths: Sequence[str], policy: Policy | None, timeout: float) -> FleetReport:
    # Lazy: the fleet's worker pool and streaming reader load only for a fleet.
    from envcheck.app.fleet import base_document, diff_files

    deadline = Deadline.after(timeout)
    base_manifest, base_fingerprint = base_document(str(base))
    fleet = diff_files(base_manifest, base_fingerprint, paths, deadline=deadline.for_own_work())
    names = [m for e in fleet.environments for m in e.members]
    given = set(paths)
    base_name = _base_name(Path(base), base_manifest, names, by_label=any(n not in given for n in names))
    report = flows.diff_fleet(base_name, fleet, policy if policy is not None else Policy())
    return FleetReport(report=report, unreadable=tuple(str(e) for e in fleet.unreadable))


@public
def doctor(
    manifest: Path | str | Manifest | None = None,
    *,
    policy: Policy | None = None,
    python: str | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
) -> Report:
    """The traps in one environment that need no baseline (two OpenMP runtimes, a driver older than torch's
    CUDA, a companion pinned to another torch, ...): the manifest's (a file, or a ``Manifest``), or without
    one a fresh snapshot of
    ``python`` (default: this interpreter), told to ``progress``. ``policy`` and ``timeout``: as ``diff``."""
    deadline = Deadline.after(timeout)
    policy = policy if policy is not None else Policy()
    if manifest is not None:
        loaded = _loaded(manifest)
        return flows.doctor(name(_shown(manifest), loaded), loaded, policy, deadline.for_own_work())
    live = _snapshot(python, timeout, progress, deadline)
    return flows.doctor(_live(live), live, policy, deadline.for_own_work())


def _snapshot(python: str | None, timeout: float, progress: Progress | None, deadline: Deadline) -> Manifest:
    """``snapshot_this_machine``: for a diff or doctor without a manifest to read."""
    # Lazy: a diff of two files starts no process: the process runner (0.01 s) loads for a snapshot only.
    from envcheck.api._snapshot import snapshot_this_machine

    return snapshot_this_machine(python, timeout=timeout, progress=progress, deadline=deadline)


def _loaded(manifest: Path | str | Manifest) -> Manifest:
    """``manifest`` itself, or the manifest in that file."""
    return manifest if isinstance(manifest, Manifest) else load(manifest)


def _shown(manifest: Path | str | Manifest) -> str:
    """How a title names a manifest without a label: its file, or the interpreter it was taken of."""
    return _live(manifest) if isinstance(manifest, Manifest) else str(manifest)


def _live(live: Manifest) -> str:
    """The live environment named in a title by its interpreter's path: ``this machine (/path/python)``."""
    return f"this machine ({live.python.executable})"


def _names(paths: Sequence[Path | str], manifests: Sequence[Manifest]) -> list[str]:
    """A name per manifest, one way for all: each its label when every one has a label and no two share
    one, else each its file path."""
    labels = [m.meta.label for m in manifests]
    if all(labels) and len(set(labels)) == len(labels):
        return [str(label) for label in labels]
    return [str(p) for p in paths]


def _base_name(base: Path, manifest: Manifest, targets: Sequence[str], by_label: bool) -> str:
    """The base named like its targets (labels or paths, never one of each); its path when its label
    would read as one of the targets'."""
    label = manifest.meta.label
    return str(label) if by_label and label and label not in targets else str(base)


@public
def expand_targets(targets: Sequence[Path | str]) -> tuple[list[str], bool]:
    """The manifest files the TARGETs name, in order, each once, and whether a folder or pattern was
    among them. A folder gives the ``*.json`` files directly in it, a pattern that is not itself a path
    (``'fleet/*.json'``, quoted for a fleet too large for a command line) the files it matches, both
    sorted, hidden files left out; anything else is taken as given (the reader refuses a FIFO, a device
    or a link loop). Raises ``UsageError`` for a folder or a pattern without a manifest, and for more than
    ``MAX_FLEET_FILES`` of them."""
    out: list[str] = []
    expanded = False
    for given in targets:
        target = Path(given)
        text = str(given)
        if target.is_dir():
            expanded = True
            try:
                with os.scandir(text) as entries:
                    named = (e.name for e in entries if e.name.endswith(".json") and e.name[0] != ".")
                    found = sorted(str(target / n) for n in _at_most(named, MAX_FLEET_FILES - len(out), text))
            except OSError as e:
                raise UsageError(f"{text}: cannot list the folder: {e.strerror or e}") from e
            if not found:
                if is_environment_folder(text):
                    raise UsageError(
                        f"{text}: a Python environment's folder, not a manifest nor a folder of them",
                        tip=f"To diff that environment, pass its interpreter: --python {text}/bin/python",
                    )
                raise UsageError(f"{text}: no manifest (*.json) in this folder")
            out += found
        elif not os.path.lexists(text) and _GLOB_CHARS & set(text):
            expanded = True
            # Path.glob takes relative patterns only; a fleet's folder is often absolute.
            found = sorted(_at_most(glob.iglob(text), MAX_FLEET_FILES - len(out), text))  # noqa: PTH207
            if not found:
                raise UsageError(f"no file matches {text}")
            out += found
        else:
            out.append(text)
    if len(out) > MAX_FLEET_FILES:
        raise UsageError(f"{len(out)} manifests named, more than the {MAX_FLEET_FILES} one fleet diff reads")
    return list(dict.fromkeys(out)), expanded


def _at_most(names: Iterator[str], left: int, where: str) -> list[str]:
    """The first ``left`` of ``names``; raises ``UsageError`` at the next one (``MAX_FLEET_FILES``)."""
    taken = list(itertools.islice(names, max(0, left) + 1))
    if len(taken) > left:
        raise UsageError(f"{where}: more than the {MAX_FLEET_FILES} manifests one fleet diff reads")
    return taken
