"""The manifest's ``native`` section: the static native library tree (filled by ``envcheck.native``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class NativeSection:
    """The native library tree of every compiled module, resolved the way the platform loader would."""

    skipped: str | None = None
