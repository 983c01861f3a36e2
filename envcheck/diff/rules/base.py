"""The rule interface: a ``Rule`` is metadata (stable id, default severity, evidence) plus a pure check.

Two kinds:

- ``difference`` rules compare a base manifest with a target (``check(base, target)``);
- ``single`` rules look at one environment (``check(manifest)``): traps that need no baseline.

Each family module registers its rules with ``@difference_rule`` / ``@single_rule``; ``catalog`` imports the
families and ``envcheck.findings`` holds the one registry. A check yields ``Finding``s built with
``Rule.finding`` so that the rule id and default severity come from one place.

Versions and names are ``packaging``'s (``Version``, ``canonicalize_name``), imported on first use: the
rule modules are imported by every command, most of which never compare a version.

The engine builds one ``View`` of each manifest per run (``views``): the name index and the requirement
graph that many rules ask for thousands of times on a 500-package manifest. Checks keep their signatures
and reach it through ``view(m)`` / ``pkg(m, name)``.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
from collections.abc import Callable, Hashable, Iterable, Iterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING

from envcheck import escape
from envcheck.findings import Finding, Rule, RuleKind, Severity, register

if TYPE_CHECKING:
    from packaging.version import Version

    from envcheck.manifest.model import Distribution, Manifest

DifferenceCheck = Callable[["Rule", "Manifest", "Manifest"], Iterable[Finding]]
SingleCheck = Callable[["Rule", "Manifest"], Iterable[Finding]]

# The ids of the rules whose checks read only facts a predicted manifest holds (packages, torch's version
# file, the native tree, the prediction itself), declared with ``static_facts=True``. On a predicted side
# the engine runs only these: every other rule reads live facts the prediction marks absent
# (``meta.absent``) and would report their absence as "lost" or "changed".
STATIC_FACT_RULES: set[str] = set()


def runs_on(rule: Rule, *manifests: Manifest) -> bool:
    """Whether the engine runs ``rule`` over ``manifests``: always, unless one of them is predicted and the
    rule reads live facts."""
    return rule.id in STATIC_FACT_RULES or not any(m.meta.kind == "predicted" for m in manifests)


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
    static_facts: bool = False,
) -> Callable[[DifferenceCheck], DifferenceCheck]:
    """Register ``check(rule, base, target)`` as a difference rule (``static_facts``: it reads only facts
    a predicted manifest holds, see ``STATIC_FACT_RULES``)."""
    meta = _Meta(family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence)

    def decorate(check: DifferenceCheck) -> DifferenceCheck:
        register(replace(meta.rule(id, "difference"), difference=check))
        if static_facts:
            STATIC_FACT_RULES.add(id)
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
    static_facts: bool = False,
) -> Callable[[SingleCheck], SingleCheck]:
    """Register ``check(rule, manifest)`` as a single-environment rule (``static_facts``: as above)."""
    meta = _Meta(family=family, severity=severity, title=title, why=why, fm=fm, evidence=evidence)

    def decorate(check: SingleCheck) -> SingleCheck:
        register(replace(meta.rule(id, "single"), single=check))
        if static_facts:
            STATIC_FACT_RULES.add(id)
        return check

    return decorate


@functools.lru_cache(maxsize=8192)
def parse_version(version: str | None) -> Version | None:
    """``packaging``'s reading of a PEP 440 version, or None when it is not one (a distributor's typo)."""
    if not version:
        return None
    from packaging.version import InvalidVersion, Version

    try:
        return Version(version)
    except InvalidVersion:
        return None


def major(version: str | None) -> str | None:
    """The leading release number of a version string (``2`` of ``2.13.0+cpu``), or None."""
    parsed = parse_version(version)
    return str(parsed.release[0]) if parsed is not None else None


def release(version: str | None, parts: int) -> tuple[int, ...] | None:
    """The first ``parts`` release components (``(2, 13)``; missing ones count as 0, as PEP 440 pads them),
    or None when the version does not parse."""
    parsed = parse_version(version)
    if parsed is None:
        return None
    return (parsed.release + (0,) * parts)[:parts]


def public(version: str) -> str:
    """The version without its local label (``2.13.0`` of ``2.13.0+cpu``), as written."""
    return version.split("+", 1)[0]


def local_label(version: str | None) -> str | None:
    """The PEP 440 local label (``cpu`` of ``2.13.0+cpu``), or None."""
    parsed = parse_version(version)
    if parsed is not None:
        return parsed.local
    return version.split("+", 1)[1] if version and "+" in version else None


@functools.lru_cache(maxsize=16384)
def canon(name: str) -> str:
    """PEP 503 normalised project name (cached: rules ask for the same names many times)."""
    from packaging.utils import canonicalize_name

    return str(canonicalize_name(name))


class View:
    """What the rules ask of one manifest again and again, computed once per run: importable (first,
    unshadowed) distributions by canonical name, and memoised answers keyed by the asking rule family.

    Built by the engine for each manifest of a run (``views``); outside a run ``view(m)`` builds a fresh
    one, so a check called directly still works (it just does not share the work).
    """

    __slots__ = ("_memo", "index", "manifest")

    def __init__(self, manifest: Manifest) -> None:
        self.manifest = manifest
        index: dict[str, Distribution] = {}
        for d in manifest.packages:
            if not d.shadowed:
                index.setdefault(canon(d.name), d)
        self.index = index
        self._memo: dict[Hashable, object] = {}

    def memo(self, key: Hashable, compute: Callable[[], object]) -> object:
        """``compute()`` once per run for ``key`` (callers cast the result back to its type)."""
        try:
            return self._memo[key]
        except KeyError:
            value = self._memo[key] = compute()
            return value


_RUN: contextvars.ContextVar[tuple[View, ...]] = contextvars.ContextVar("envcheck_run_views", default=())


@contextlib.contextmanager
def views(*manifests: Manifest) -> Iterator[tuple[View, ...]]:
    """One run of the engine: a ``View`` of each manifest, found by ``view(m)`` until the block ends. A
    manifest that an enclosing run already views keeps that view (a diff and the target's doctor, in one
    flow, share the target's requirement graph instead of building it twice)."""
    outer = _RUN.get()
    built = tuple(next((v for v in outer if v.manifest is m), None) or View(m) for m in manifests)
    token = _RUN.set(built + _RUN.get())
    try:
        yield built
    finally:
        _RUN.reset(token)


def view(m: Manifest) -> View:
    """The current run's view of ``m`` (by identity), or a fresh one outside a run."""
    for v in _RUN.get():
        if v.manifest is m:
            return v
    return View(m)


def index(m: Manifest) -> dict[str, Distribution]:
    """Importable (first, unshadowed) distributions of ``m`` by canonical name."""
    return view(m).index


def pkg(m: Manifest, name: str) -> Distribution | None:
    """Like ``Manifest.package``: the importable distribution called ``name`` (any spelling), or None."""
    return index(m).get(canon(name))


# --- remedies: pip commands a user can paste on the machine they are meant for ---------------------------

# PEP 440 local labels of the PyTorch wheel indexes: each label is served by its own index, named after it.
_TORCH_LABELS = ("cpu", "cu", "rocm", "xpu")


def windows(m: Manifest) -> bool:
    return m.platform is not None and m.platform.system == "Windows"


def _quote(arg: str, on_windows: bool) -> str:
    # Values come from manifests: one literal word, expanded by neither shell (PowerShell, Windows' default
    # shell, expands `$(…)` inside double quotes: single quotes with each quote doubled).
    return escape.shell_word(arg, windows=on_windows)


def shell_word(value: str, m: Manifest | None) -> str:
    """``value`` (a name, a path, a requirement from a manifest) as one literal word of a command pasted on
    ``m``'s machine: POSIX single quotes, or PowerShell's on a Windows machine (``escape.shell_word``)."""
    return _quote(value, m is not None and windows(m))


def torch_index_label(version: str | None) -> str | None:
    """The local label of a build the PyTorch wheel index serves (``cpu``, ``cu130``, ``rocm6.4``), or None
    for a plain version (the default index's build)."""
    label = local_label(version)
    if label and label.startswith(_TORCH_LABELS):
        return label
    return None


def _recorded_index(source: Manifest, label: str) -> str | None:
    """An index URL the source machine's pip was configured with that serves ``label`` (its path ends in
    ``/<label>``, the PyTorch index's convention), unless redaction made it unusable."""
    found = _recorded_index_var(source, label)
    return found[1] if found is not None else None


def _recorded_index_var(source: Manifest, label: str) -> tuple[str, str] | None:
    """``(variable, URL)`` of ``_recorded_index``."""
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        for url in (source.env.get(var) or "").split():
            if "<redacted>" in url or not url.startswith(("https://", "http://", "file://")):
                continue
            if url.rstrip("/").rsplit("/", 1)[-1] == label:
                return var, url
    return None


def _recorded_wheel(source: Manifest, name: str, version: str) -> str | None:
    """The wheel URL ``direct_url.json`` recorded for the distribution, when it is that version's wheel."""
    dist = pkg(source, name)
    if dist is None or dist.version != version or not isinstance(dist.direct_url, dict):
        return None
    url = dist.direct_url.get("url")
    if not isinstance(url, str) or "<redacted>" in url or not url.endswith(".whl"):
        return None
    from urllib.parse import unquote

    parts = unquote(url.rsplit("/", 1)[-1]).split("-")
    return url if len(parts) >= 5 and parts[1] == version else None


def pip_install(
    pins: Iterable[tuple[str, str]],
    *,
    source: Manifest | None = None,
    on: Manifest | None = None,
    options: str = "",
) -> str:
    """A pasteable ``pip install`` of exact ``(name, version)`` pins, full versions with their local labels.

    A labelled torch build (``+cpu``, ``+cu130``) is only on the PyTorch index for that label, so the
    command names it: the URL ``source``'s pip was configured with when it was recorded, the
    ``direct_url.json`` wheel, or else ``"$TORCH_INDEX_URL"`` followed by a note saying which index to set
    it to (envcheck writes no index's host name). ``on`` is the machine the command runs on (its shell's
    quoting); plain versions come from the default index and need no option. ``options`` go right after
    ``pip install`` (``--force-reinstall --no-deps``).
    """
    pins = list(pins)
    on_windows = on is not None and windows(on)
    labels = sorted({label for _, v in pins if (label := torch_index_label(v))})
    install = f"pip install {options} " if options else "pip install "
    if len(pins) == 1 and source is not None and labels:
        wheel = _recorded_wheel(source, *pins[0])
        if wheel is not None:
            return (
                f"`{install}{_quote(f'{pins[0][0]} @ {wheel}', on_windows)}` (the wheel's URL as the "
                "manifest's direct_url.json recorded it: check that you trust it before running)"
            )
    command = install + " ".join(_quote(f"{n}=={v}", on_windows) for n, v in pins)
    note = ""
    if labels:
        label = labels[0]  # one command installs from one index: the pins share torch's label
        recorded = _recorded_index_var(source, label) if source is not None else None
        if recorded is not None:
            var, url = recorded
            command += f" --index-url {_quote(url, on_windows)}"
            note = (
                f" (the index URL as the manifest recorded it in {var}: check that you trust it before "
                "running)"
            )
        else:
            command += " --index-url " + ("$env:TORCH_INDEX_URL" if on_windows else '"$TORCH_INDEX_URL"')
            note = (
                f" (set TORCH_INDEX_URL to the PyTorch wheel index for {label} builds: its URL ends in "
                f"/{label})"
            )
    return f"`{command}`{note}"


def pip_requirement(requirement: str, *, on: Manifest | None = None) -> str:
    """A pasteable ``pip install`` of one requirement (``pillow!=8.3.*,>=5.3.0``) from the default index."""
    return f"`pip install {_quote(requirement, on is not None and windows(on))}`"
