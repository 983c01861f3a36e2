"""Static native dependency trees (ELF / PE / Mach-O), resolved the way each platform's loader would."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envcheck.collect.snapshot import SnapshotOptions
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.native import NativeSection


def scan_for_snapshot(manifest: Manifest, options: SnapshotOptions) -> NativeSection | None:
    """The ``native`` section of a snapshot (None until the native-tree scanner lands)."""
    return None
