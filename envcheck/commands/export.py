"""``envcheck export``: a manifest as a software bill of materials (CycloneDX 1.6 JSON)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, write_output
from envcheck.core.outputs import destination


@handles_errors
def export(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
    fmt: Annotated[
        api.ExportFormat, typer.Option("--format", "-f", help="SBOM format.", case_sensitive=False)
    ] = api.ExportFormat.cyclonedx,
    output: Annotated[
        str | None,
        typer.Option(
            "--output", "-o", help="Write the SBOM to this file (default: stdout).", show_default=False
        ),
    ] = None,
) -> None:
    """Write MANIFEST as an SBOM: CycloneDX 1.6 JSON for security and compliance tools.

    Distributions become library components with their purl (pkg:pypi/torch@2.13.0%2Bcpu: the local label
    is kept, and also given as the envcheck:local_label property); the native libraries of the manifest's
    tree become file components with their sha256, nested in the distribution that ships them; the
    dependencies list which file needs which, and which distribution requires which and ships which file.
    Python, platform and
    torch variant are metadata properties (envcheck:python, envcheck:platform, envcheck:torch.variant).
    The same manifest gives the same bytes. Needs cyclonedx-python-lib.
    """
    target = destination(output)  # a bad -o is refused before the manifest is read
    write_output(api.export(manifest, fmt=fmt), target)
