"""What a lock is compiled from, read from a manifest alone (pure: no files, no network).

Every importable distribution of the manifest is pinned at its exact full version, local label kept
(``torch==2.13.0+cpu``), so the lock reproduces the manifest instead of resolving afresh. The roots of
the manifest's requirement graph (``envcheck.manifest.requirements.graph``: markers evaluated for the
manifest's machine, extras followed) are the requirements pip-compile resolves; every other distribution
is a constraint, which pip-compile's ``# via`` then explains by the distributions that require it.

Installer tooling (pip, setuptools, wheel, distribute) is what pip-tools calls "unsafe": never a root,
pinned as a constraint only so that a requirement on it resolves to the manifest's version, and listed by
pip-compile as a comment (``lock --check`` ignores the same names). A distribution installed from a local
path or a VCS checkout (``direct_url.json``) has no index that serves it: it cannot be locked.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.manifest.query import canon, index, torch_index_label, views
from envcheck.manifest.requirements import graph

if TYPE_CHECKING:
    from envcheck.manifest.model import Distribution, Manifest
    from envcheck.manifest.requirements import Graph

# pip-tools' unsafe packages (pip, setuptools, distribute) and wheel, the other installer tool a venv
# brings: pip-sync leaves all four alone, so the lock and --check leave them alone too.
INSTALLER_TOOLING = frozenset({"pip", "setuptools", "wheel", "distribute"})
# The comment block that lists what ``envcheck lock --allow-unlocked`` left out (``#   name==version:
# reason`` lines follow it): ``lock --check`` reads it back, and compares those by name and version.
LEFT_OUT_HEADER = "# Left out (--allow-unlocked): install these by other means."


@dataclass(frozen=True, kw_only=True, slots=True)
class Pin:
    """``name==version`` of one distribution: ``name`` canonical (PEP 503), ``version`` in full."""

    name: str
    version: str

    @property
    def requirement(self) -> str:
        return f"{self.name}=={self.version}"


@dataclass(frozen=True, kw_only=True, slots=True)
class Unlocked:
    """A distribution left out of the lock, and why (``installed from a local path``, ...)."""

    name: str
    version: str
    reason: str


@dataclass(frozen=True, kw_only=True, slots=True)
class LockInputs:
    """The compile's inputs: ``roots`` (what nothing else requires), ``constraints`` (everything else,
    installer tooling included), ``tooling`` (the canonical names treated as unsafe), ``markers`` (a
    PEP 508 marker per canonical name whose every requirer asks for it only on some platforms),
    ``unlocked`` (what cannot be locked), and ``labels`` (PyTorch index labels of the pinned builds)."""

    roots: tuple[Pin, ...]
    constraints: tuple[Pin, ...]
    tooling: frozenset[str]
    markers: Mapping[str, str]
    unlocked: tuple[Unlocked, ...]
    labels: tuple[str, ...]

    @property
    def pinned(self) -> dict[str, Pin]:
        """Every pin by canonical name (roots and constraints)."""
        return {p.name: p for p in (*self.roots, *self.constraints)}

    def without(self, reasons: Mapping[str, str], graph: Graph) -> LockInputs:
        """These inputs less the distributions named in ``reasons`` and every distribution that requires
        one of them, directly or not (pip could not install it without them), each recorded in
        ``unlocked`` with its reason (``requires X, which is not locked`` for the requirers)."""
        dropped: dict[str, str] = {}
        todo = [(canon(n), why) for n, why in reasons.items()]
        while todo:
            name, why = todo.pop()
            if name in dropped:
                continue
            dropped[name] = why
            todo += [(r, f"requires {name}, which is not locked") for r in graph.required_by.get(name, ())]
        pinned = self.pinned
        unlocked = list(self.unlocked)
        for name, why in sorted(dropped.items()):
            if name in pinned and name not in self.tooling:
                unlocked.append(Unlocked(name=name, version=pinned[name].version, reason=why))
        kept = {n: p for n, p in pinned.items() if n not in dropped}
        roots, constraints = _split(kept, graph, self.tooling)
        return LockInputs(
            roots=roots,
            constraints=constraints,
            tooling=self.tooling,
            markers=self.markers,
            unlocked=tuple(unlocked),
            labels=_labels(p for p in kept.values() if p.name not in self.tooling),
        )


def local_source(dist: Distribution) -> str | None:
    """Why ``dist`` cannot come from an index: ``installed from a local path`` / ``from a VCS checkout``
    per its ``direct_url.json`` (PEP 610), or None (an index or a remote archive served it)."""
    info = dist.direct_url
    if not isinstance(info, dict):
        return None
    if "vcs_info" in info:
        return "installed from a VCS checkout (direct_url.json)"
    url = info.get("url")
    if "dir_info" in info or (isinstance(url, str) and url.startswith("file:")):
        return "installed from a local path (direct_url.json)"
    return None


def lock_inputs(m: Manifest) -> LockInputs:
    """The lock's inputs for ``m``. Raises nothing: an empty manifest gives empty inputs (the caller
    refuses them)."""
    with views(m):
        installed = index(m)
        g = graph(m)
    unlocked = []
    pins: dict[str, Pin] = {}
    for name, dist in sorted(installed.items()):
        reason = local_source(dist)
        if reason is not None and name not in INSTALLER_TOOLING:
            unlocked.append(Unlocked(name=name, version=dist.version, reason=reason))
        else:
            pins[name] = Pin(name=name, version=dist.version)
    roots, constraints = _split(pins, g, INSTALLER_TOOLING)
    inputs = LockInputs(
        roots=roots,
        constraints=constraints,
        tooling=INSTALLER_TOOLING,
        markers=_markers(g, {n for n in pins if n not in INSTALLER_TOOLING}),
        unlocked=tuple(unlocked),
        labels=_labels(p for p in pins.values() if p.name not in INSTALLER_TOOLING),
    )
    # What requires an unlocked distribution cannot be installed from the lock either.
    requirers = {
        r: f"requires {u.name}, which is not locked"
        for u in unlocked
        for r in sorted(g.required_by.get(u.name, ()))
        if r in pins
    }
    return inputs.without(requirers, g) if requirers else inputs


def _split(
    pins: Mapping[str, Pin], g: Graph, tooling: frozenset[str]
) -> tuple[tuple[Pin, ...], tuple[Pin, ...]]:
    """``(roots, constraints)`` of ``pins``: a root is required by no other pinned distribution (tooling
    aside: it requires nothing that matters); a distribution that no root reaches through pinned ones (a
    cycle nothing else requires, or what only a dropped distribution required) becomes a root too, or
    pip-compile would never install it."""
    locked = {n for n in pins if n not in tooling}
    roots = {n for n in locked if not (g.required_by.get(n, frozenset()) & (locked - {n}))}
    reached = _reach(roots, g, locked)
    for name in sorted(locked - reached):
        if name not in reached:
            roots.add(name)
            reached |= _reach({name}, g, locked)
    return (
        tuple(pins[n] for n in sorted(roots)),
        tuple(pins[n] for n in sorted(set(pins) - roots)),
    )


def _reach(starts: set[str], g: Graph, locked: set[str]) -> set[str]:
    """``starts`` and every pinned distribution their requirements reach through pinned ones."""
    seen = set(starts)
    todo = list(starts)
    while todo:
        for edge in g.edges.get(todo.pop(), ()):
            if edge.req.name in locked and edge.req.name not in seen:
                seen.add(edge.req.name)
                todo.append(edge.req.name)
    return seen


def _labels(pins: Iterable[Pin]) -> tuple[str, ...]:
    return tuple(sorted({label for p in pins if (label := torch_index_label(p.version))}))


def _markers(g: Graph, locked: set[str]) -> dict[str, str]:
    """A marker for each locked distribution that every locked requirer asks for under a marker of the
    platform (``nvidia-cublas ; platform_system == "Linux"``): installed from the lock elsewhere, pip then
    skips it where its requirers would not want it. Requirements through an extra (their marker holds
    ``extra == ...``, false in a requirements file) and unmarked ones leave the distribution unmarked."""
    conditions: dict[str, set[str]] = {}
    unconditional: set[str] = set()
    for requirer, edges in g.edges.items():
        if requirer not in locked:
            continue
        for edge in edges:
            name = edge.req.name
            if edge.extra or not edge.req.marker or "extra" in edge.req.marker:
                unconditional.add(name)
            else:
                conditions.setdefault(name, set()).add(edge.req.marker)
    return {
        name: " or ".join(f"({c})" for c in sorted(found)) if len(found) > 1 else next(iter(found))
        for name, found in sorted(conditions.items())
        if name in locked and name not in unconditional
    }
