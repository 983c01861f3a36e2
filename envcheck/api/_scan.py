"""``envcheck.api.scan``: the static native tree of a wheel, an unpacked tree or a site-packages folder."""

from __future__ import annotations

import json
from dataclasses import dataclass

from envcheck.api._common import public
from envcheck.core.deadline import Deadline
from envcheck.core.redact import redact_strings, redact_text
from envcheck.manifest.codec import encode
from envcheck.manifest.native import NativeSection
from envcheck.native import scan_path
from envcheck.native.scan import format_text, is_broken

__all__ = ["Scanned", "scan"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Scanned:
    """What ``scan`` found in ``path``: the native ``section`` (the tree, what the machine must provide,
    what is missing, what was never opened)."""

    path: str
    section: NativeSection

    @property
    def broken(self) -> bool:
        """What should be inside the tree is not: a missing library of the tree's own (not the OS or a
        runtime the machine provides), one of its files that cannot be read, or one that was refused."""
        return is_broken(self.section)

    def as_text(self) -> str:
        """The report as ``envcheck scan`` prints it, through the redactor (a folder named after a token
        is a credential's shape)."""
        return redact_text(format_text(self.section, self.path))

    def as_json(self) -> str:
        """The section as JSON (the manifest's encoding), redacted, keys sorted, one trailing newline."""
        return (
            json.dumps(redact_strings(encode(self.section)), indent=2, sort_keys=True, ensure_ascii=False)
            + "\n"
        )


@public
def scan(path: str, *, timeout: float = 120.0) -> Scanned:
    """Resolve the native libraries of the wheel or folder ``path`` (any platform) as its loader would.
    ``timeout``: one deadline for extracting the wheel, listing the tree and reading every header; past it
    ``DeadlineExpired`` names the step. A path that cannot be scanned raises ``UsageError`` (each an
    ``EnvcheckError``)."""
    return Scanned(path=path, section=scan_path(path, deadline=Deadline.after(timeout)))
