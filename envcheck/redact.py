"""Keeping secrets and user names out of manifests.

Credential redaction is the probe's own (``envcheck.probe.target``), so the target process never writes a
secret even to its temporary result file; envcheck applies the same functions to what it adds itself.
``redact_paths`` implements ``--redact-paths``: the user's home folder and login name are replaced in every
string of the manifest.
"""

from __future__ import annotations

import re
from typing import Any

from envcheck.probe.target import REDACTED, redact_json, redact_text

__all__ = ["REDACTED", "PathRedactor", "redact_json", "redact_text"]


class PathRedactor:
    """Replaces a home folder with ``~`` and a user name with ``<user>`` wherever they appear in a path."""

    def __init__(self, home: str | None, user: str | None) -> None:
        self._home = home.rstrip("/\\") if home and len(home.rstrip("/\\")) > 1 else None
        # A user name only counts as a path component: "/home/ann/x" loses "ann", "annotated" keeps it.
        self._user = (
            re.compile(r"(?<=[/\\])" + re.escape(user) + r"(?=[/\\]|$)") if user and len(user) > 1 else None
        )

    def text(self, value: str) -> str:
        if self._home:
            value = value.replace(self._home, "~")
        if self._user:
            value = self._user.sub("<user>", value)
        return value

    def json(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, list):
            return [self.json(v) for v in value]
        if isinstance(value, dict):
            return {self.text(k): self.json(v) for k, v in value.items()}
        return value
