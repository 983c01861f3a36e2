"""A check any report test can make: no remedy tells the user to change a loader or Python search variable
that is unset on the machine the report is about (there is nothing there to remove; the fix is elsewhere:
the loader cache, a .pth file, the distribution to reinstall)."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping

from envcheck.core.findings import Finding

SEARCH_VARIABLES = (
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "PYTHONPATH",
    "DYLD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
)


def unset_variable_remedies(findings: Iterable[Finding], env: Mapping[str, str]) -> list[str]:
    """``RULE:subject: remedy`` of every finding whose remedy names a search variable that ``env`` (the
    target's recorded environment, ``Manifest.env``, or the one a live target inherits) does not set."""
    unset = [name for name in SEARCH_VARIABLES if not env.get(name)]
    bad = []
    for f in findings:
        named = [name for name in unset if re.search(rf"\b{name}\b", f.remedy)]
        if named:
            bad.append(f"{f.key}: {f.remedy}")
    return bad


def assert_no_unset_variable_remedies(findings: Iterable[Finding], env: Mapping[str, str]) -> None:
    bad = unset_variable_remedies(findings, env)
    assert not bad, "remedies that change a variable unset on the target:\n" + "\n".join(bad)
