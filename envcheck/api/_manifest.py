"""``envcheck.api.load_manifest`` and ``dump_manifest``: a manifest file read (checked as untrusted input:
``ManifestError`` with each problem) and written as ``envcheck snapshot`` writes it."""

from __future__ import annotations

from pathlib import Path

from envcheck.api._common import public
from envcheck.manifest.io import dumps, load
from envcheck.manifest.model import Manifest

__all__ = ["Manifest", "dump_manifest", "load_manifest"]


@public
def load_manifest(path: str | Path) -> Manifest:
    """The manifest at ``path``. Raises ``ManifestError`` (every problem named) for a file that is not one,
    one that is too large, or one from a newer envcheck."""
    return load(path)


@public
def dump_manifest(manifest: Manifest) -> str:
    """``manifest`` as the JSON text ``envcheck snapshot`` writes (UTF-8 JSON, keys sorted). Raises
    ``ManifestError`` for one too large to read back."""
    return dumps(manifest)
