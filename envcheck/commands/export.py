"""``envcheck export``: a manifest as a software bill of materials (CycloneDX 1.6 JSON)."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn

import typer

from envcheck.commands._common import handles_errors, write_output

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest


class ExportFormat(str, enum.Enum):
    """An SBOM format: the values of ``envcheck export --format``."""

    cyclonedx = "cyclonedx"

    def export(self, manifest: Manifest) -> str:
        """``manifest`` in this format: the one mapping, closed (mypy fails on a missing case). The
        exporter (and its library) is imported only here: ``envcheck --version`` loads none of it."""
        match self:
            case ExportFormat.cyclonedx:
                from envcheck.export import cyclonedx

                return cyclonedx(manifest)
            case _:
                return _unknown(self)


def _unknown(name: NoReturn) -> NoReturn:
    raise ValueError(f"unknown export format {name!r}")


@handles_errors
def export(
    manifest: Annotated[Path, typer.Argument(help="A manifest written by `envcheck snapshot`.")],
    fmt: Annotated[
        ExportFormat, typer.Option("--format", "-f", help="SBOM format.", case_sensitive=False)
    ] = ExportFormat.cyclonedx,
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
    from envcheck.core.outputs import destination
    from envcheck.manifest.io import load

    target = destination(output)  # a bad -o is refused before the manifest is read
    write_output(fmt.export(load(manifest)), target)
