"""``envcheck snapshot`` and ``envcheck show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck.api._snapshot import SnapshotOptions
from envcheck.api._snapshot import snapshot as take
from envcheck.commands._common import handles_errors, write_output
from envcheck.commands.options import PythonOption, QuietOption, TimeoutOption
from envcheck.commands.progress import progress
from envcheck.core.outputs import destination


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
    target = destination(output)  # a bad -o fails now, not after the snapshot's seconds of work
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
    replaces = None if force else output
    with progress("snapshot", quiet=quiet) as step:
        manifest = take(options, checks=checks, imports=import_ or (), replaces=replaces, progress=step)
    # Lazy: the target starts before the manifest writer loads (0.05 s of imports).
    from envcheck.manifest.io import dumps

    # Lazy: the summary loads once the manifest is taken.
    from envcheck.report.summary import summary

    write_output(dumps(manifest), target)
    where = "stdout" if output == "-" else output
    typer.echo(summary(manifest, short=True) + f"\nwrote {where}", err=output == "-")


@handles_errors
def show(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
) -> None:
    """Print a readable summary of a manifest."""
    # Lazy: this module's imports come before a snapshot's target starts; show's come here.
    from envcheck.manifest.io import load

    # Lazy: as above: a snapshot's target starts before the summary loads.
    from envcheck.report.summary import summary

    typer.echo(summary(load(manifest), short=False))
