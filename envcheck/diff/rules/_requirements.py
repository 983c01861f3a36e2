"""Reading ``Requires-Dist`` lines of a manifest's distributions, with markers evaluated for *that* machine.

The common shapes (``name[extra]>=1.2,<2; platform_system == "Linux"``, numeric versions) are parsed and
evaluated here; anything else (URLs, ``in`` markers, pre-releases, ``===``) falls back to
``packaging``, imported only then. Importing ``packaging`` costs 40-90 ms (it compiles dozens of regular
expressions), a third of ``envcheck diff``'s whole budget (DESIGN §6). The fast path is checked against
``packaging`` on every requirement line of the real test manifests.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from envcheck.diff.rules.base import canon
from envcheck.manifest.model import Manifest

_NAME = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)")
_SYS_PLATFORM = {"Linux": "linux", "Windows": "win32", "Darwin": "darwin"}
_LINE = re.compile(
    r"^\s*(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)\s*"
    r"(?:\[(?P<extras>[A-Za-z0-9._,\s-]*)\])?\s*"
    r"(?P<spec>\(?[<>=!~][^;()@]*\)?)?\s*"
    r"(?:;\s*(?P<marker>.+?))?\s*$"
)
_ATOM = re.compile(r"""^(?P<var>[a-z_]+)\s*(?P<op>==|!=|<=|>=|<|>)\s*(?P<q>["'])(?P<value>[^"']*)(?P=q)$""")
_NUMERIC = re.compile(r"^\d+(?:\.\d+)*$")
_CLAUSE = re.compile(r"^(?P<op>==|!=|<=|>=|<|>|~=)\s*(?P<value>\d+(?:\.\d+)*)(?P<star>\.\*)?$")
_VERSION_VARS = frozenset({"python_version", "python_full_version", "implementation_version"})


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


def parse_requirement(line: str) -> Req | None:
    """The requirement on ``line``, or None when even ``packaging`` cannot read it."""
    match = _LINE.match(line)
    if match is not None:
        spec = (match.group("spec") or "").strip().strip("()").replace(" ", "")
        extras = frozenset(e.strip() for e in (match.group("extras") or "").split(",") if e.strip())
        name = match.group("name")
        return Req(canon(name), name, extras, spec, match.group("marker"), line)
    from packaging.requirements import InvalidRequirement, Requirement

    try:
        req = Requirement(line)
    except InvalidRequirement:
        return None
    return Req(
        canon(req.name), req.name, frozenset(req.extras), str(req.specifier), str(req.marker) or None, line
    )


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


def _release(text: str) -> tuple[int, ...]:
    return tuple(int(x) for x in text.split("."))


def _pad(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)), b + (0,) * (width - len(b))


_TOKEN = re.compile(
    r"""\s*(?:(?P<paren>[()])|(?P<logic>and|or)\b|(?P<atom>[a-z_]+\s*(?:==|!=|<=|>=|<|>)\s*(["'])[^"']*\4))"""
)


class _NeedsPackaging(Exception):
    """The marker uses something the fast evaluator leaves to ``packaging``."""


# A compiled marker: ("or" | "and", (children...)) or ("atom", (var, op, value)).
_Node = tuple[str, tuple[object, ...]]


@functools.lru_cache(maxsize=4096)
def _compile(marker: str) -> _Node | None:
    """Parse once: metadata repeats the same long markers (cuda-toolkit's) across extras and machines."""
    tokens: list[tuple[str, str]] = []
    pos, text = 0, marker.strip()
    while pos < len(text):
        match = _TOKEN.match(text, pos)
        if match is None or match.end() == pos:
            return None
        kind = next(k for k in ("paren", "logic", "atom") if match.group(k))
        tokens.append((kind, match.group(kind)))
        pos = match.end()
        while pos < len(text) and text[pos].isspace():
            pos += 1
    index = 0

    def peek() -> tuple[str, str] | None:
        return tokens[index] if index < len(tokens) else None

    def sequence(logic: str, part: Callable[[], _Node]) -> _Node:
        nonlocal index
        parts = [part()]
        while peek() == ("logic", logic):
            index += 1
            parts.append(part())
        return parts[0] if len(parts) == 1 else (logic, tuple(parts))

    def expr() -> _Node:
        return sequence("or", term)

    def term() -> _Node:
        return sequence("and", factor)

    def factor() -> _Node:
        nonlocal index
        token = peek()
        if token == ("paren", "("):
            index += 1
            node = expr()
            if peek() != ("paren", ")"):
                raise _NeedsPackaging
            index += 1
            return node
        if token is None or token[0] != "atom":
            raise _NeedsPackaging
        index += 1
        match = _ATOM.match(token[1].strip())
        if match is None:
            raise _NeedsPackaging
        return ("atom", (match.group("var"), match.group("op"), match.group("value")))

    try:
        node = expr()
    except _NeedsPackaging:
        return None
    return node if index == len(tokens) else None


def _evaluate(node: _Node, env: dict[str, str]) -> bool:
    kind, args = node
    if kind == "or":
        return any(_evaluate(child, env) for child in args)  # type: ignore[arg-type]
    if kind == "and":
        return all(_evaluate(child, env) for child in args)  # type: ignore[arg-type]
    var, op, want = (str(a) for a in args)
    if var not in env:
        raise _NeedsPackaging
    have = env[var]
    if var == "extra":
        have, want = canon(have) if have else "", canon(want)
    if var in _VERSION_VARS and _NUMERIC.match(have) and _NUMERIC.match(want):
        h, w = _pad(_release(have), _release(want))
        return {"==": h == w, "!=": h != w, "<": h < w, "<=": h <= w, ">": h > w, ">=": h >= w}[op]
    if op in ("==", "!="):
        return (have == want) == (op == "==")
    raise _NeedsPackaging  # an ordering on a non-version string: packaging's rules


def fast_marker(marker: str, env: dict[str, str]) -> bool | None:
    """Evaluate a PEP 508 marker made of ``var op "value"`` comparisons, ``and``, ``or`` and parentheses;
    None when it needs ``packaging`` (``in``, reversed operands, ``===``, orderings on plain strings)."""
    node = _compile(marker)
    if node is None:
        return None
    try:
        return _evaluate(node, env)
    except _NeedsPackaging:
        return None


def applies(m: Manifest, req: Req, extras: tuple[str, ...] = ("",)) -> bool:
    """True when the requirement's marker holds on ``m``'s machine for any of ``extras`` (``""`` = none).
    A marker ``packaging`` cannot evaluate counts as not applying: metadata is the distributor's, and a
    broken line is not this rule's finding."""
    if not req.marker:
        return True
    envs = [marker_environment(m, extra) for extra in extras]
    answers = [fast_marker(req.marker, env) for env in envs]
    if None not in answers:
        return any(answers)
    from packaging.markers import InvalidMarker, Marker, UndefinedComparison, UndefinedEnvironmentName

    try:
        marker = Marker(req.marker)
        return any(marker.evaluate(env) for env in envs)
    except (InvalidMarker, UndefinedComparison, UndefinedEnvironmentName):
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


def fast_satisfies(version: str, specifier: str) -> bool | None:
    """Numeric versions against ``==``/``!=`` (with ``.*``), ``<``/``<=``/``>``/``>=``, ``~=``, following
    PEP 440 (a local label is ignored unless the clause is an exclusive ordering); None when it needs
    ``packaging`` (pre-/post-/dev releases, ``===``, local labels in the specifier)."""
    public, _, local = version.partition("+")
    if not _NUMERIC.match(public):
        return None
    have = _release(public)
    for raw in specifier.split(","):
        clause = raw.strip()
        if not clause:
            continue
        match = _CLAUSE.match(clause)
        if match is None:
            return None
        op, want, star = match.group("op"), _release(match.group("value")), bool(match.group("star"))
        if star:
            if op not in ("==", "!="):
                return None
            ok = (have[: len(want)] + (0,) * max(0, len(want) - len(have))) == want
            ok = ok if op == "==" else not ok
        elif op == "~=":
            if len(want) < 2:
                return None
            h, w = _pad(have, want)
            ok = h >= w and have[: len(want) - 1] == want[:-1]
        else:
            if op in ("<", ">") and local:
                return None
            h, w = _pad(have, want)
            ok = {"==": h == w, "!=": h != w, "<": h < w, "<=": h <= w, ">": h > w, ">=": h >= w}[op]
        if not ok:
            return False
    return True


def satisfies(version: str, req: Req) -> bool:
    """True when ``version`` meets the requirement's specifier (pre-releases allowed; unparseable = True)."""
    if not req.specifier:
        return True
    fast = fast_satisfies(version, req.specifier)
    if fast is not None:
        return fast
    from packaging.specifiers import InvalidSpecifier, SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return SpecifierSet(req.specifier).contains(Version(version), prereleases=True)
    except (InvalidVersion, InvalidSpecifier):
        return True
