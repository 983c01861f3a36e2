"""The rule interface: a ``Rule`` is metadata (stable id, default severity, evidence) plus a pure check.

Two kinds:

- ``difference`` rules compare a base manifest with a target (``check(base, target)``);
- ``single`` rules look at one environment (``check(manifest)``): traps that need no baseline.

Each family module registers its rules with ``@difference_rule`` / ``@single_rule``; ``catalog`` imports the
families and ``envcheck.findings`` holds the one registry. A check yields ``Finding``s built with
``Rule.finding`` so that the rule id and default severity come from one place.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from envcheck.findings import Finding, Rule, RuleKind, Severity, register

if TYPE_CHECKING:
    from envcheck.manifest.model import Distribution, Manifest

DifferenceCheck = Callable[["Rule", "Manifest", "Manifest"], Iterable[Finding]]
SingleCheck = Callable[["Rule", "Manifest"], Iterable[Finding]]


@dataclass(frozen=True, kw_only=True, slots=True)
class _Meta:
    family: str
    severity: Severity
    title: str
    why: str
    fm: Iterable[str] = ()
    evidence: Iterable[str] = ()

    def rule(self, id: str, kind: RuleKind) -> Rule:
        return Rule(
            id=id,
            kind=kind,
            family=self.family,
            severity=self.severity,
            title=self.title,
            why=self.why,
            failure_modes=tuple(self.fm),
            evidence=tuple(self.evidence),
        )


def difference_rule(
    id: str,
    *,
    family: str,
    severity: Severity,
    title: str,
    why: str,
    fm: Iterable[str] = (),
    evidence: Iterable[str] = (),
) -> Callable[[DifferenceCheck], DifferenceCheck]:
    """Register ``check(rule, base, target)`` as a difference rule."""
    meta = _Meta(family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence)

    def decorate(check: DifferenceCheck) -> DifferenceCheck:
        register(replace(meta.rule(id, "difference"), difference=check))
        return check

    return decorate


def single_rule(
    id: str,
    *,
    family: str,
    severity: Severity,
    title: str,
    why: str,
    fm: Iterable[str] = (),
    evidence: Iterable[str] = (),
) -> Callable[[SingleCheck], SingleCheck]:
    """Register ``check(rule, manifest)`` as a single-environment rule."""
    meta = _Meta(family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence)

    def decorate(check: SingleCheck) -> SingleCheck:
        register(replace(meta.rule(id, "single"), single=check))
        return check

    return decorate


def major(version: str | None) -> str | None:
    """The leading release number of a version string (``2`` of ``2.13.0+cpu``), or None."""
    if not version:
        return None
    head = version.split("+", 1)[0].split(".", 1)[0]
    return head if head.isdigit() else None


def release(version: str | None, parts: int) -> tuple[int, ...] | None:
    """The first ``parts`` numeric release components (``(2, 13)``), or None when it does not parse."""
    if not version:
        return None
    out: list[int] = []
    for piece in version.split("+", 1)[0].split(".")[:parts]:
        digits = ""
        for ch in piece:
            if not ch.isdigit():
                break
            digits += ch
        if not digits:
            return None
        out.append(int(digits))
    return tuple(out) if len(out) == parts else None


def local_label(version: str | None) -> str | None:
    """The PEP 440 local label (``cpu`` of ``2.13.0+cpu``), or None."""
    if not version or "+" not in version:
        return None
    return version.split("+", 1)[1]


def iter_nonempty(*items: str | None) -> Iterator[str]:
    yield from (i for i in items if i)


_SEPARATORS = re.compile(r"[-_.]+")


@functools.lru_cache(maxsize=16384)
def canon(name: str) -> str:
    """PEP 503 normalised project name (cached: rules ask for the same names many times)."""
    return _SEPARATORS.sub("-", name).lower()


# The last manifests' name -> distribution maps. ``Manifest.package`` scans the list on every call; the
# rules ask thousands of times on a 500-package manifest, which would make them quadratic.
_INDEX: dict[int, tuple[Manifest, dict[str, Distribution]]] = {}


def index(m: Manifest) -> dict[str, Distribution]:
    """Importable (first, unshadowed) distributions of ``m`` by canonical name."""
    hit = _INDEX.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    out: dict[str, Distribution] = {}
    for d in m.packages:
        if not d.shadowed:
            out.setdefault(canon(d.name), d)
    if len(_INDEX) >= 16:
        _INDEX.clear()
    _INDEX[id(m)] = (m, out)
    return out


def pkg(m: Manifest, name: str) -> Distribution | None:
    """Like ``Manifest.package``, from the cached index."""
    return index(m).get(canon(name))
