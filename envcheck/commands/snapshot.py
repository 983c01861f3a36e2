"""``envcheck snapshot`` and ``envcheck show``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envcheck.commands._common import handles_errors, write_output
from envcheck.commands.options import PythonOption, QuietOption, TimeoutOption

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest


@handles_errors
def snapshot(
    output: Annotated[
        str, typer.Option("-o", "--output", help="Manifest file to write, or - for stdout.")
    ] = "envcheck.lock.json",
    python: PythonOption = None,
    label: Annotated[
        str | None, typer.Option(help="A name for this environment (dev, prod-eu, ...).")
    ] = None,
    no_probe: Annotated[
        bool,
        typer.Option(
            "--no-probe",
            help="Static facts only: the target is started but imports nothing (no torch, no smoke suite).",
        ),
    ] = False,
    redact_paths: Annotated[
        bool, typer.Option("--redact-paths", help="Replace your home folder and user name in every path.")
    ] = False,
    verify_files: Annotated[
        bool, typer.Option("--verify-files", help="Re-hash installed native files against their RECORD.")
    ] = False,
    checks: Annotated[
        Path | None,
        typer.Option(
            "--checks",
            help="A Python file of your own check_* functions whose outputs become goldens too.",
            envvar="ENVCHECK_CHECKS",
            show_default=False,
        ),
    ] = None,
    no_verify: Annotated[
        bool, typer.Option("--no-verify", help="Do not run the smoke suite (no goldens in the manifest).")
    ] = False,
    import_: Annotated[
        list[str] | None,
        typer.Option(
            "--import",
            help="An entry module of your application (repeatable), recorded in the manifest: verify "
            "--against and gate import it in the target.",
            show_default=False,
        ),
    ] = None,
    timeout: TimeoutOption = 120.0,
    quiet: QuietOption = False,
    force: Annotated[
        bool,
        typer.Option(
            "--force",
            help="Replace the output file even when it holds another environment's manifest (another "
            "interpreter, host or label) or is not a manifest at all.",
        ),
    ] = False,
) -> None:
    """Record this environment (or --python's) into one manifest (default: envcheck.lock.json).

    A manifest already at the output path is replaced only when it was recorded for the same environment
    (the same interpreter path and host, and the same label when --label is given); another environment's
    manifest, or a file that is not a manifest, is kept unless --force is given (exit 2).
    """
    from envcheck.collect.launch import SnapshotOptions, start_probes
    from envcheck.commands.progress import progress
    from envcheck.core.outputs import destination

    target = destination(output)  # a bad -o fails now, not after the snapshot's seconds of work
    existing = None if force or output == "-" else _existing(output)
    if import_:
        from envcheck.commands.verify import app_modules

        imports = app_modules(("--import", import_))  # a bad name fails now too
    options = SnapshotOptions(
        python=python,
        label=label,
        probe=not no_probe,
        timeout=timeout,
        redact_paths=redact_paths,
        verify_files=verify_files,
        # The smoke suite imports torch: --no-probe promises that nothing in the target does.
        verify=not (no_verify or no_probe),
    )
    if checks is not None and options.verify:
        from envcheck.verify.checks_file import compile_checks_file

        compile_checks_file(checks)  # a file that does not compile is refused before the target starts
    with progress("snapshot", quiet=quiet) as step:
        probes = start_probes(options)  # first: the target starts while the rest of envcheck imports
        from envcheck.collect.snapshot import record
        from envcheck.native import scan_for_snapshot

        manifest = record(options, native=scan_for_snapshot, probes=probes, checks_file=checks, progress=step)
    if import_:
        import dataclasses

        from envcheck.manifest.verify import VerifySection

        section = manifest.verify or VerifySection()
        manifest = manifest.replace(verify=dataclasses.replace(section, imports=imports))
    from envcheck.manifest.io import dumps
    from envcheck.report.summary import summary

    if existing is not None:
        _refuse_another(output, existing, manifest, label_given=label is not None)
    write_output(dumps(manifest), target)
    where = "stdout" if output == "-" else output
    typer.echo(summary(manifest, short=True) + f"\nwrote {where}", err=output == "-")


def _existing(output: str) -> Manifest | None:
    """The manifest already at ``output`` (None: nothing there, or not a regular file:
    ``envcheck.core.outputs``
    judges that). Raises ``UsageError`` for a file that is not a manifest: a user's file is never replaced
    without --force."""
    from envcheck.core.errors import ManifestError, UsageError
    from envcheck.manifest.io import load

    if not Path(output).is_file():
        return None
    try:
        return load(output)
    except ManifestError as e:
        raise UsageError(
            f"{output} exists and is not a manifest envcheck can read ({'; '.join(e.problems[:1])}): "
            "not replaced",
            tip="Write the manifest elsewhere with -o FILE, or replace that file with --force.",
        ) from e


def _refuse_another(output: str, existing: Manifest, new: Manifest, *, label_given: bool) -> None:
    """Raise ``UsageError`` when ``existing`` (at ``output``) was recorded for another environment than
    ``new``: another interpreter path, another host, or (with --label) another label."""
    from envcheck.core.errors import UsageError

    old_host = existing.platform.hostname if existing.platform is not None else None
    new_host = new.platform.hostname if new.platform is not None else None
    differs = []
    from envcheck.core.files import same_path

    if not same_path(existing.python.executable, new.python.executable):
        differs.append(f"interpreter {existing.python.executable} (this one: {new.python.executable})")
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


@handles_errors
def show(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
) -> None:
    """Print a readable summary of a manifest."""
    from envcheck.manifest.io import load
    from envcheck.report.summary import summary

    typer.echo(summary(load(manifest), short=False))
