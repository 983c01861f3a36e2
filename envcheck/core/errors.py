"""One error family. The CLI turns every ``EnvcheckError`` into ``error: …`` + ``Tip: …`` and exit code 2."""

from __future__ import annotations

from collections.abc import Sequence


class EnvcheckError(Exception):
    """Root of every error envcheck raises on purpose. ``tip`` tells the user what to do next."""

    tip: str | None = None

    def __init__(self, message: str, *, tip: str | None = None) -> None:
        super().__init__(message)
        if tip is not None:
            self.tip = tip


class ManifestError(EnvcheckError):
    """A manifest could not be read: not JSON, too big, wrong shape, or from a newer schema.

    ``problems`` lists every problem found, each naming its location (``packages[3].version``).
    """

    def __init__(self, source: str, problems: Sequence[str], *, tip: str | None = None) -> None:
        self.source = source
        self.problems = tuple(problems)
        shown = "; ".join(self.problems[:5])
        more = f" (and {len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"{source}: {shown}{more}", tip=tip)


class ProbeError(EnvcheckError):
    """The target interpreter could not be started at all (not found, not executable, not Python).

    A target that starts and then crashes, hangs or fails to import torch is *not* an error: that outcome
    is recorded in the manifest as data.
    """


class UsageError(EnvcheckError):
    """The command line or a policy / checks file is wrong."""


class ImageError(EnvcheckError):
    """A container image could not be read or flattened: not an image, damaged (a blob that does not match
    its digest), hostile (a member leaving the root, a bomb) or past a limit. The message names the blob,
    layer or member."""
