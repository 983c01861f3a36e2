"""Reading ``Requires-Dist`` lines of a manifest's distributions, with markers evaluated for *that* machine.

Parsing, markers and specifiers are ``packaging``'s (PEP 508 / PEP 440), imported on first use and cached
per distinct line: metadata repeats the same lines (cuda-toolkit's long markers) across extras, rules and
the machines of a fleet. The one thing read here without ``packaging`` is a line's leading project name
(``requirement_name``), a filter that lets a rule parse only the lines about the names it cares for; it
is checked against ``packaging`` on every requirement line of the real test manifests.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.manifest.query import canon, index, parse_version, view

if TYPE_CHECKING:
    from packaging.markers import Marker
    from packaging.specifiers import SpecifierSet

    from envcheck.manifest.model import Manifest

# A name at the start of the line as packaging's tokenizer takes it: PEP 508's production, but greedy to the
# end (packaging reads ``A_`` as the name ``A_``, which PEP 508 would not allow; the property test in
# tests/fuzz/test_fuzz_requirements.py holds the two equal).
_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SYS_PLATFORM = {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}


def requirement_name(line: str) -> str | None:
    """The canonical project name a ``Requires-Dist`` line names, without parsing the rest."""
    match = _NAME.match(line)
    return canon(match.group(1)) if match else None


@dataclass(frozen=True, slots=True)
class Req:
    """One requirement: canonical ``name``, the ``name`` as written, extras, specifier text, marker text."""

    name: str
    written: str
    extras: frozenset[str]
    specifier: str
    marker: str | None
    line: str


# The shape most Requires-Dist lines take (nine in ten on a real torch venv): a name, extras, plain version
# specifiers (parenthesised or not), at most an ``extra == "..."`` marker. Versions are restricted to
# release[pre][.post][.dev] (``==``/``!=`` may end in ``.*``; ``~=`` needs two release parts), so every line
# this accepts is one ``packaging`` accepts, read the same. Anything else goes to ``packaging``.
_RELEASE = r"[0-9]+(?:\.[0-9]+)*"
_VERSION = _RELEASE + r"(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?"
_SPEC = (
    rf"(?:(?:==|!=)\s*{_RELEASE}\.\*|(?:==|!=|>=|<=|>|<)\s*{_VERSION}|~=\s*[0-9]+(?:\.[0-9]+)+"
    r"(?:(?:a|b|rc)[0-9]+)?(?:\.post[0-9]+)?(?:\.dev[0-9]+)?)"
)
_IDENT = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_SIMPLE = re.compile(
    rf"""\s*(?P<name>{_IDENT})\s*
    (?:\[\s*(?P<extras>{_IDENT}(?:\s*,\s*{_IDENT})*)\s*\]\s*)?
    (?P<open>\(\s*)?(?P<specs>{_SPEC}(?:\s*,\s*{_SPEC})*)?\s*(?(open)\))\s*
    (?:;\s*extra\s*==\s*(?P<q>['"])(?P<extra>{_IDENT})(?P=q)\s*)?""",
    re.VERBOSE,
)
_EXTRA_MARKER = re.compile(r'extra == "([a-z0-9](?:[a-z0-9-]*[a-z0-9])?)"')


def _simple_requirement(line: str) -> Req | None:
    """``line`` read without ``packaging`` when it has the common shape above, else None."""
    match = _SIMPLE.fullmatch(line)
    if match is None:
        return None
    specs = match["specs"]
    extras = match["extras"]
    specifier = ",".join(sorted({"".join(s.split()) for s in specs.split(",")})) if specs else ""
    return Req(
        canon(match["name"]),
        match["name"],
        frozenset(canon(e.strip()) for e in extras.split(",")) if extras else frozenset(),
        specifier,
        f'extra == "{canon(match["extra"])}"' if match["extra"] else None,
        line,
    )


@functools.lru_cache(maxsize=8192)
def parse_requirement(line: str) -> Req | None:
    """The requirement on ``line`` as ``packaging`` reads it, or None when it is not PEP 508 (an
    unparseable requirement: data, never an exception). A manifest is untrusted: whatever ``packaging``
    raises on a line counts as unparseable, such as the ``ValueError`` of a marker value holding both
    quote characters (``platform_release == "a\\x22b'c"``), which packaging 26 reads but cannot write
    back."""
    simple = _simple_requirement(line)
    if simple is not None:
        return simple
    from packaging.requirements import Requirement

    try:
        req = Requirement(line)
        return Req(
            canon(req.name),
            req.name,
            frozenset(canon(e) for e in req.extras),
            str(req.specifier),
            str(req.marker) if req.marker is not None else None,
            line,
        )
    except Exception:  # InvalidRequirement, ValueError, RecursionError...: an unparseable requirement
        return None


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


@functools.lru_cache(maxsize=4096)
def _marker(text: str) -> Marker | None:
    from packaging.markers import Marker

    try:
        return Marker(text)
    except Exception:  # InvalidMarker, or anything else packaging raises on untrusted text: unparseable
        return None


def applies(m: Manifest, req: Req, extras: tuple[str, ...] = ("",)) -> bool:
    """True when the requirement's marker holds on ``m``'s machine for any of ``extras`` (``""`` = none).
    A marker ``packaging`` cannot evaluate counts as not applying: metadata is the distributor's, and a
    broken line is not this rule's finding."""
    if not req.marker:
        return True
    machine = tuple(marker_environment(m).items())
    return any(_holds(req.marker, machine, extra) for extra in extras)


@functools.lru_cache(maxsize=16384)
def _holds(text: str, machine: tuple[tuple[str, str], ...], extra: str) -> bool:
    """One marker on one machine: the same few markers recur across hundreds of requirements, and
    evaluating one walks packaging's parse tree (a third of a 500-package diff before this cache)."""
    only_extra = _EXTRA_MARKER.fullmatch(text)
    if only_extra is not None:  # packaging compares extras canonicalised, as here
        return canon(extra) == only_extra.group(1)
    marker = _marker(text)
    if marker is None:
        return False
    try:
        return bool(marker.evaluate({**dict(machine), "extra": extra}))
    except Exception:  # UndefinedComparison, UndefinedEnvironmentName...: a marker that cannot be evaluated
        return False


@dataclass(frozen=True, slots=True)
class Applicable:
    """A requirement that applies on the manifest's machine."""

    requirement: Req
    line: str


def applicable(m: Manifest, lines: list[str], extras: tuple[str, ...] = ("",)) -> Iterator[Applicable]:
    """The requirements on ``lines`` whose marker holds on ``m``'s machine for any of ``extras``."""
    for line in lines:
        req = parse_requirement(line)
        if req is not None and applies(m, req, extras):
            yield Applicable(req, line)


@functools.lru_cache(maxsize=4096)
def specifier_set(text: str) -> SpecifierSet | None:
    """``packaging``'s reading of a specifier (``>=5.3.0,!=8.3.*``), or None when it is not one."""
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return SpecifierSet(text)
    except InvalidSpecifier:
        return None


def satisfies(version: str, req: Req) -> bool:
    """True when ``version`` meets the requirement's specifier (PEP 440: pre-releases allowed, a local
    label ignored unless the specifier names one); a version or specifier that does not parse counts as
    satisfied, since it is not this rule's finding."""
    if not req.specifier:
        return True
    spec, parsed = specifier_set(req.specifier), parse_version(version)
    if spec is None or parsed is None:
        return True
    return spec.contains(parsed, prereleases=True)


@dataclass(frozen=True, slots=True)
class Edge:
    """An applicable requirement of an installed distribution: ``requirer`` (canonical) needs ``req``;
    ``extra`` is the requirer's extra that brings it in (``""``: a plain requirement)."""

    requirer: str
    req: Req
    extra: str


@dataclass(frozen=True, slots=True, eq=False)
class Graph:
    """The applicable requirements of a manifest's importable distributions, extras followed.

    A distribution's extras are what other installed distributions ask of it (``pkg[y]``): the metadata
    does not record the extras a user asked for at install time, so those are invisible here."""

    manifest: Manifest
    edges: dict[str, tuple[Edge, ...]]
    extras: dict[str, frozenset[str]]
    required_by: dict[str, frozenset[str]]

    def closure(self, root: str) -> frozenset[str]:
        """The canonical names reachable from ``root`` through applicable requirements (``root`` excluded
        unless a cycle comes back to it)."""
        seen: set[str] = set()
        todo = [root]
        while todo:
            for edge in self.edges.get(todo.pop(), ()):
                if edge.req.name not in seen:
                    seen.add(edge.req.name)
                    todo.append(edge.req.name)
        return frozenset(seen)


def _via(m: Manifest, req: Req, extras: frozenset[str]) -> str | None:
    if applies(m, req):
        return ""
    return next((e for e in sorted(extras) if applies(m, req, (e,))), None)


def graph(m: Manifest) -> Graph:
    """The requirement graph of ``m`` (once per run: the engine's view holds it)."""
    return view(m).memo("requirement-graph", lambda: _build_graph(m))  # type: ignore[return-value]


def _build_graph(m: Manifest) -> Graph:
    installed = index(m)
    extras: dict[str, set[str]] = {name: set() for name in installed}
    edges: dict[str, dict[str, Edge]] = {}
    todo = sorted(installed)
    # A requirer's extras can grow when a later distribution asks for one: re-read it then (extras only
    # grow, so this ends).
    while todo:
        name = todo.pop()
        mine = edges.setdefault(name, {})
        for line in installed[name].requires:
            req = parse_requirement(line)
            if req is None:
                continue
            via = _via(m, req, frozenset(extras[name]))
            if via is None:
                continue
            mine[line] = Edge(name, req, via)
            wanted = extras.get(req.name)
            if wanted is not None and not req.extras <= wanted:
                wanted |= req.extras
                todo.append(req.name)
    required_by: dict[str, set[str]] = {}
    for name, mine in edges.items():
        for edge in mine.values():
            required_by.setdefault(edge.req.name, set()).add(name)
    return Graph(
        manifest=m,
        edges={k: tuple(v.values()) for k, v in edges.items()},
        extras={k: frozenset(v) for k, v in extras.items() if v},
        required_by={k: frozenset(v) for k, v in required_by.items()},
    )
