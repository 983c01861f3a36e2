"""``envcheck.api.snapshot``: record an environment into a manifest (with the smoke suite's goldens), and
``snapshot_this_machine``: the fresh snapshot without the suite that diff, doctor and gate check."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, NamedTuple

from envcheck.api._common import existing_manifest, interpreter_path, public
from envcheck.collect.launch import SnapshotOptions, start_probes
from envcheck.core.errors import UsageError
from envcheck.core.files import MAX_MANIFEST_BYTES, Unreadable, read_input, same_path

if TYPE_CHECKING:
    from envcheck.api._common import Progress
    from envcheck.collect.launch import Started
    from envcheck.core.deadline import Deadline
    from envcheck.manifest.model import Manifest

__all__ = ["SnapshotOptions", "app_modules", "snapshot", "snapshot_this_machine"]


@public
def snapshot(
    options: SnapshotOptions | None = None,
    *,
    checks: Path | None = None,
    imports: Sequence[str] = (),
    replaces: str | Path | None = None,
    progress: Progress | None = None,
    tell: Callable[[str], None] | None = None,
) -> Manifest:
    """The manifest of ``options.python``'s environment (default: this interpreter), as ``envcheck
    snapshot`` records it: static facts, the runtime probe (unless ``options.probe`` is off) and the smoke
    suite's outputs as goldens (unless ``options.verify`` is off), your own ``checks`` file's too.
    ``imports``: the application's entry modules, recorded for ``verify --against`` and ``gate``.

    ``replaces``: the file the manifest will be written to; a manifest there recorded for another
    environment (another interpreter, host, or label when ``options.label`` is set), or a file that is not
    a manifest, is refused with ``UsageError``, before any work when the interpreter or host already tell
    (``_refuse_early``). Replacing this environment's own manifest keeps its label when none is given and
    ``tell`` says so, and what the new one lacks (goldens). ``progress`` is told each step.
    Raises ``ProbeError`` when the interpreter cannot run, ``UsageError`` for a bad module name or a checks
    file that does not compile."""
    options = options or SnapshotOptions()
    if not options.probe and options.verify:
        # The smoke suite imports torch: no probe promises that nothing in the target does.
        options = dataclasses.replace(options, verify=False)
    recorded = _recorded(str(replaces)) if replaces is not None else None
    if recorded is not None:
        # Before any work: the interpreter and host it will record are known now.
        _refuse_early(str(replaces), recorded, options)
    modules: list[str] = []
    if imports:
        modules = app_modules(("--import", imports))  # a bad name fails now, before the target starts
    if checks is not None and options.verify:
        # Lazy: only a snapshot with a checks file compiles one.
        from envcheck.verify.checks_file import compile_checks_file

        compile_checks_file(checks)  # a file that does not compile is refused before the target starts
    probes = start_probes(options)  # first: the target starts while the rest of envcheck imports
    try:
        # The whole manifest there is read while the target starts (the manifest model's import and its
        # decoding: 0.04 s); one that does not decode ends the probes unread.
        existing = existing_manifest(str(replaces)) if recorded is not None else None
    except BaseException:
        probes.kill()
        raise
    # Lazy: the snapshot's machinery loads while the target starts.
    from envcheck.collect.snapshot import record

    # Lazy: the native scanners load while the target starts.
    from envcheck.native import scan_for_snapshot

    manifest = record(options, native=scan_for_snapshot, probes=probes, checks_file=checks, progress=progress)
    if imports:
        # Lazy: every import above runs before the target starts (the manifest model: 0.05 s).
        from envcheck.manifest.verify import VerifySection

        section = manifest.verify or VerifySection()
        manifest = manifest.replace(verify=dataclasses.replace(section, imports=modules))
    if existing is not None:
        _refuse_another(str(replaces), existing, manifest, label_given=options.label is not None)
        manifest = _carry_over(existing, manifest, tell)
    return manifest


def app_modules(*sources: tuple[str, Sequence[str] | None]) -> list[str]:
    """The application's entry modules from each ``(where, names)`` source in order (the manifest's
    recorded ones, the policy's, --import's), each once. Raises ``UsageError`` naming a bad name."""
    # Lazy: the application imports' machinery (0.13 s) loads for a snapshot only with --import.
    from envcheck.verify.imports import check_module_names

    out: list[str] = []
    for where, names in sources:
        problems = check_module_names(list(names or ()), where)
        if problems:
            raise UsageError(problems[0], tip="Name a module as Python imports it: --import myapp.main")
        out += [n for n in names or () if n not in out]
    return out


@public
def snapshot_this_machine(
    python: str | None = None,
    *,
    timeout: float = 120.0,
    progress: Progress | None = None,
    runtime: Started | None = None,
    deadline: Deadline | None = None,
) -> Manifest:
    """A fresh snapshot (no smoke suite) of ``python`` or this interpreter: what diff, doctor and gate
    check. ``progress`` is told each step. Every native file a RECORD lists is checked against its RECORD
    sha256 (through the hash cache: cheap once warm) unless ``ENVCHECK_INTEGRITY`` is ``0``. ``deadline``:
    the caller's (default: ``timeout`` from now). ``runtime``: the runtime probe, run elsewhere (the gate's
    suite)."""
    # Lazy: diff and doctor of two files never take a snapshot; the collector loads here.
    from envcheck.collect.snapshot import take_snapshot

    # Lazy: the native scanners are never on the path of a diff of two files.
    from envcheck.native import scan_for_snapshot

    integrity = os.environ.get("ENVCHECK_INTEGRITY", "").strip().lower() not in ("0", "false", "no", "off")
    options = SnapshotOptions(python=python, timeout=timeout, integrity=integrity, deadline=deadline)
    probes = start_probes(options, runtime) if runtime is not None else None
    return take_snapshot(options, native=scan_for_snapshot, probes=probes, progress=progress)


def _refuse_another(output: str, existing: Manifest, new: Manifest, *, label_given: bool) -> None:
    """Raise ``UsageError`` when ``existing`` (at ``output``) was recorded for another environment than
    ``new``: another interpreter path, another host, or (with --label) another label."""
    old_host = existing.platform.hostname if existing.platform is not None else None
    new_host = new.platform.hostname if new.platform is not None else None
    differs = []
    old_python, new_python = existing.python, new.python
    # One environment, one prefix: `python` and `python3` of one venv are the same environment; two venvs
    # whose interpreters link to one binary are not.
    if not same_path(old_python.executable, new_python.executable) and not same_path(
        old_python.prefix, new_python.prefix
    ):
        differs.append(f"interpreter {old_python.executable} (this one: {new_python.executable})")
    if old_host and new_host and old_host != new_host:
        differs.append(f"host {old_host} (this one: {new_host})")
    if label_given and existing.meta.label != new.meta.label:
        differs.append(f"label {existing.meta.label!r} (this one: {new.meta.label!r})")
    if differs:
        raise UsageError(
            f"{output} holds the manifest of another environment: {'; '.join(differs)}: not replaced",
            tip="Write this one elsewhere with -o FILE (e.g. -o prod.json), or replace that one with "
            "--force.",
        )


class _Recorded(NamedTuple):
    """What ``_refuse_early`` compares of the manifest a snapshot would replace."""

    executable: str
    hostname: str | None
    label: str | None


def _recorded(output: str) -> _Recorded | None:
    """The interpreter, host and label of the manifest at ``output``, read as JSON alone (the manifest
    model's import and a full decode took 0.04 s before the target could start); None when no regular file
    is there. A file these cannot be read from so is judged by the full reader, whose ``UsageError`` says
    why it is no manifest (for a manifest after all, they are taken from it)."""
    if output == "-" or not Path(output).is_file():
        return None
    try:
        data = json.loads(read_input(output, MAX_MANIFEST_BYTES))
        python, platform, meta = data["python"], data["platform"] or {}, data["meta"]
        found = _Recorded(python["executable"], platform.get("hostname"), meta.get("label"))
    except (Unreadable, ValueError, RecursionError, TypeError, KeyError, AttributeError):
        found = None
    if (
        found is not None
        and type(data.get("schema_version")) is int
        and isinstance(found.executable, str)
        and all(v is None or isinstance(v, str) for v in found[1:])
    ):
        return found
    existing = existing_manifest(output)  # raises UsageError naming what is wrong with it
    if existing is None:
        return None
    host = existing.platform.hostname if existing.platform is not None else None
    return _Recorded(existing.python.executable, host, existing.meta.label)


def _refuse_early(output: str, existing: _Recorded, options: SnapshotOptions) -> None:
    """``_refuse_another`` before the target starts, where it can already tell: another host, another
    label (``--label``), or an interpreter that is not the recorded one (neither the same path nor the same
    file). What it cannot tell yet (two venvs whose interpreters link to one binary) waits for the
    snapshot."""
    import platform

    differs = []
    old_host = existing.hostname
    host = platform.node()
    if old_host and host and old_host != host and "<redacted>" not in old_host:
        differs.append(f"host {old_host} (this one: {host})")
    if options.label is not None and existing.label != options.label:
        differs.append(f"label {existing.label!r} (this one: {options.label!r})")
    candidate = interpreter_path(options.python)
    recorded = existing.executable
    if recorded and not same_path(recorded, candidate):
        try:
            same = Path(recorded).samefile(candidate)
        except OSError:
            same = False
        if not same:
            differs.append(f"interpreter {recorded} (this one: {candidate})")
    if differs:
        raise UsageError(
            f"{output} holds the manifest of another environment: {'; '.join(differs)}: not replaced",
            tip="Write this one elsewhere with -o FILE (e.g. -o prod.json), or replace that one with "
            "--force.",
        )


def _carry_over(existing: Manifest, new: Manifest, tell: Callable[[str], None] | None) -> Manifest:
    """This environment's manifest re-recorded: the label kept when none was given; what is dropped said."""
    if existing.meta.label and not new.meta.label:
        new = new.replace(meta=dataclasses.replace(new.meta, label=existing.meta.label))
        if tell is not None:
            tell(f"kept the label {existing.meta.label!r} of the manifest this one replaces")
    old_goldens = len(existing.verify.results) if existing.verify is not None else 0
    new_goldens = len(new.verify.results) if new.verify is not None else 0
    if tell is not None and old_goldens and not new_goldens:
        tell(
            f"the manifest this one replaces held goldens for {old_goldens} smoke checks; this one holds "
            "none (the suite did not run): gate and verify will compare no numbers"
        )
    return new
