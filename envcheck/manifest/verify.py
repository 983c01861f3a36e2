"""The manifest's ``verify`` section: smoke-suite results kept as goldens (filled by ``envcheck.verify``)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, kw_only=True, slots=True)
class VerifySection:
    """Outcomes and golden outputs of the import-and-verify smoke suite on this machine."""

    skipped: str | None = None
