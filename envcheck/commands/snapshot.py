"""``envcheck snapshot`` and ``envcheck show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck.commands._common import PythonOption, TimeoutOption, handles_errors, write_output
from envcheck.report.options import QuietOption


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
) -> None:
    """Record this environment (or --python's) into one lockfile manifest."""
    from envcheck.collect.launch import SnapshotOptions, start_probes
    from envcheck.commands.progress import progress
    from envcheck.outputs import destination

    target = destination(output)  # a bad -o fails now, not after the snapshot's seconds of work
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

    write_output(dumps(manifest), target)
    where = "stdout" if output == "-" else output
    typer.echo(summary(manifest, short=True) + f"\nwrote {where}", err=output == "-")


@handles_errors
def show(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
) -> None:
    """Print a readable summary of a manifest."""
    from envcheck.manifest.io import load
    from envcheck.report.summary import summary

    typer.echo(summary(load(manifest), short=False))
