"""Keeping secrets and user names out of manifests, reports and diagnostics.

Credential redaction is the target package's one redactor (``envcheck.inside.redact``): the target applies
it to its whole result before writing even its temporary result file, and envcheck applies the same
functions to what it reads back (``redact_json`` on a parsed result, ``redact_text`` on a stderr tail) and
to the lines it prints. ``PathRedactor`` implements ``--redact-paths``: the user's home folder and login
name are replaced in every string of the manifest.
"""

from __future__ import annotations

import re
from typing import Any

from envcheck.inside.redact import REDACTED, is_secret_name, redact_json, redact_text

__all__ = ["REDACTED", "PathRedactor", "is_secret_name", "redact_json", "redact_strings", "redact_text"]


def redact_strings(value: Any) -> Any:
    """A copy of JSON-like ``value`` with ``redact_text`` applied to every string, keys included, and
    nothing replaced for its key's name: for envcheck's own documents (a scan's native tree), whose field
    names (``key``, ``token`` counts) are a schema, not variables a credential hides under."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, list):
        return [redact_strings(v) for v in value]
    if isinstance(value, dict):
        return {redact_text(k) if isinstance(k, str) else k: redact_strings(v) for k, v in value.items()}
    return value


class PathRedactor:
    """Replaces a home folder with ``~`` and a user name with ``<user>`` wherever they appear in a path.

    A Windows home (``C:\\Users\\Ann``: a drive letter) becomes ``%USERPROFILE%``, the way Windows writes it,
    and is matched as Windows compares paths: in any case, with ``\\`` or ``/`` between its parts
    (``c:/users/ann`` is the same folder); the user name too is matched in any case there."""

    def __init__(self, home: str | None, user: str | None) -> None:
        home = home.rstrip("/\\") if home and len(home.rstrip("/\\")) > 1 else None
        windows = home is not None and re.match(r"[A-Za-z]:[/\\]", home) is not None
        flags = re.IGNORECASE if windows else 0
        self._replacement = "%USERPROFILE%" if windows else "~"
        self._home: re.Pattern[str] | None = None
        if home is not None:
            # On Windows each separator of the home matches either separator.
            parts = re.split(r"[/\\]", home) if windows else [home]
            # Windows: not a longer name that starts with it (C:\Users\Ann is not C:\Users\Anna).
            boundary = r"(?![\w.-])" if windows else ""
            self._home = re.compile(r"[/\\]".join(re.escape(part) for part in parts) + boundary, flags)
        # A user name only counts as a path component: "/home/ann/x" loses "ann", "annotated" keeps it.
        self._user = (
            re.compile(r"(?<=[/\\])" + re.escape(user) + r"(?=[/\\]|$)", flags)
            if user and len(user) > 1
            else None
        )

    def text(self, value: str) -> str:
        if self._home:
            value = self._home.sub(lambda _: self._replacement, value)
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
