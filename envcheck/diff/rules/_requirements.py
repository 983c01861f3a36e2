"""Reading ``Requires-Dist`` lines of a manifest's distributions, with markers evaluated for *that* machine.

``packaging`` is imported only when a rule needs a full parse: most manifests never get there, which keeps
``envcheck diff`` inside its start-up budget.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.diff.rules.base import canon
from envcheck.manifest.model import Manifest

if TYPE_CHECKING:
    from packaging.requirements import Requirement

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SYS_PLATFORM = {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}


def requirement_name(line: str) -> str | None:
    """The canonical project name a ``Requires-Dist`` line names, without parsing the rest."""
    match = _NAME.match(line)
    return canon(match.group(1)) if match else None


def marker_environment(m: Manifest, extra: str = "") -> dict[str, str]:
    """PEP 508 marker variables of the manifest's machine (not of the machine running envcheck)."""
    py = m.python
    system = m.platform.system if m.platform else ""
    version = py.version
    return {
        "python_version": ".".join(version.split(".")[:2]),
        "python_full_version": version,
        "implementation_name": py.implementation.lower(),
        "implementation_version": version,
        "platform_python_implementation": py.implementation,
        "platform_system": system,
        "sys_platform": _SYS_PLATFORM.get(system, system.lower()),
        "os_name": "nt" if system == "Windows" else "posix",
        "platform_machine": m.platform.machine if m.platform else "",
        "platform_release": m.platform.release if m.platform else "",
        "platform_version": m.platform.kernel if m.platform else "",
        "extra": extra,
    }


@dataclass(frozen=True, slots=True)
class Applicable:
    """A requirement that applies on the manifest's machine."""

    requirement: Requirement
    line: str


def applicable(m: Manifest, lines: list[str], extras: tuple[str, ...] = ("",)) -> Iterator[Applicable]:
    """Parse ``lines`` and yield the requirements whose marker holds on ``m``'s machine for any of
    ``extras`` (``""`` = no extra). Unparseable lines are skipped: metadata is the distributor's, and a
    broken line is not this rule's finding."""
    if not lines:
        return
    from packaging.markers import InvalidMarker, UndefinedComparison, UndefinedEnvironmentName
    from packaging.requirements import InvalidRequirement, Requirement

    envs = [marker_environment(m, extra) for extra in extras]
    for line in lines:
        try:
            req = Requirement(line)
        except InvalidRequirement:
            continue
        if req.marker is not None:
            try:
                if not any(req.marker.evaluate(env) for env in envs):
                    continue
            except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
                continue
        yield Applicable(req, line)


def satisfies(version: str, req: Requirement) -> bool:
    """True when ``version`` meets the requirement's specifier (pre-releases allowed; unparseable = True)."""
    from packaging.version import InvalidVersion, Version

    try:
        return req.specifier.contains(Version(version), prereleases=True)
    except InvalidVersion:
        return True
