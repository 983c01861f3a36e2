"""``envcheck snapshot`` and ``envcheck show``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, image_only, say, write_output
from envcheck.commands.options import (
    ChecksOption,
    ForceOption,
    ImageOption,
    ImagePlatformOption,
    ImagePythonOption,
    ImportOption,
    LabelOption,
    ManifestOutputOption,
    NoProbeOption,
    NoVerifyOption,
    PythonOption,
    QuietOption,
    RedactPathsOption,
    TimeoutOption,
    VerifyFilesOption,
)
from envcheck.commands.progress import progress
from envcheck.core.outputs import Destination, destination


@handles_errors
def snapshot(
    output: ManifestOutputOption = "envcheck.lock.json",
    python: PythonOption = None,
    label: LabelOption = None,
    no_probe: NoProbeOption = False,
    redact_paths: RedactPathsOption = False,
    verify_files: VerifyFilesOption = False,
    checks: ChecksOption = None,
    no_verify: NoVerifyOption = False,
    import_: ImportOption = None,
    image: ImageOption = None,
    image_python: ImagePythonOption = None,
    image_platform: ImagePlatformOption = None,
    timeout: TimeoutOption = 120.0,
    quiet: QuietOption = False,
    force: ForceOption = False,
) -> None:
    """Record this environment (or --python's) into one manifest (default: envcheck.lock.json).

    A manifest already at the output path is replaced only when it was recorded for the same environment
    (the same interpreter path and host, and the same label when --label is given); another environment's
    manifest, or a file that is not a manifest, is kept unless --force is given (exit 2).

    With --image, the Python environment inside a container image, read statically: an OCI layout folder,
    an OCI archive or a `docker save` tarball. Nothing in it runs and no daemon is needed; the manifest
    says so, and leaves out what only a run knows (the runtime probe, the smoke suite's goldens).
    """
    target = destination(output)  # a bad -o fails now, not after the snapshot's seconds of work
    if image is not None:
        image_only(image, python=python, checks=checks, import_=import_, verify_files=verify_files)
        with progress("snapshot", quiet=quiet) as step:
            found = api.snapshot_image(
                image, python=image_python, platform=image_platform, label=label, timeout=timeout,
                replaces=None if force else output, progress=step,
            )  # fmt: skip
        _written(found, output, target)
        return
    options = api.SnapshotOptions(
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
    told: list[str] = []
    with progress("snapshot", quiet=quiet) as step:
        manifest = api.snapshot(
            options, checks=checks, imports=import_ or (), replaces=replaces, progress=step, tell=told.append
        )
    for line in told:  # now that the progress line is gone
        say(line, untrusted=True)
    _written(manifest, output, target)


def _written(manifest: api.Manifest, output: str, target: Destination) -> None:
    """Write ``manifest`` to ``target`` (``output`` as given) and print its summary."""
    # Lazy: the summary loads once the manifest is taken.
    from envcheck.report.summary import summary

    write_output(api.dump_manifest(manifest), target)
    where = "stdout" if output == "-" else output
    typer.echo(summary(manifest, short=True) + f"\nwrote {where}", err=output == "-")


@handles_errors
def show(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
) -> None:
    """Print a readable summary of a manifest."""
    # Lazy: as above: a snapshot's target starts before the summary loads.
    from envcheck.report.summary import summary

    typer.echo(summary(api.load_manifest(manifest), short=False))
