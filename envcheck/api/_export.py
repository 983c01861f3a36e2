"""``envcheck.api.export``: a manifest as a software bill of materials."""

from __future__ import annotations

import enum
from pathlib import Path
from typing import NoReturn

from envcheck.api._common import public
from envcheck.export import cyclonedx
from envcheck.manifest.io import load
from envcheck.manifest.model import Manifest

__all__ = ["ExportFormat", "export"]


class ExportFormat(str, enum.Enum):
    """An SBOM format: the values of ``envcheck export --format``."""

    cyclonedx = "cyclonedx"

    def export(self, manifest: Manifest) -> str:
        """``manifest`` in this format: the one mapping, closed (mypy fails on a missing case). The SBOM
        library is imported only when an export runs (``envcheck.export``)."""
        match self:
            case ExportFormat.cyclonedx:
                return cyclonedx(manifest)
            case _:
                return _unknown(self)


def _unknown(name: NoReturn) -> NoReturn:
    raise ValueError(f"unknown export format {name!r}")


@public
def export(manifest: Path | str | Manifest, *, fmt: ExportFormat = ExportFormat.cyclonedx) -> str:
    """The SBOM text of ``manifest`` (a file, or a ``Manifest``) as ``envcheck export`` writes it: CycloneDX
    1.6 JSON, the same bytes for the same manifest. Raises ``ManifestError`` for a file that does not
    load, ``UsageError`` without cyclonedx-python-lib (each an ``EnvcheckError``)."""
    return fmt.export(manifest if isinstance(manifest, Manifest) else load(manifest))
