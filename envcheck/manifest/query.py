"""What envcheck asks of a manifest, again and again: versions and names read as ``packaging`` reads them,
and one ``View`` per manifest and run.

Versions and names are ``packaging``'s (``Version``, ``canonicalize_name``), imported on first use: these
queries are imported by every command, most of which never compare a version.

The diff engine builds one ``View`` of each manifest per run (``views``): the name index and the
requirement graph that many rules ask for thousands of times on a 500-package manifest. Callers keep their
signatures and reach it through ``view(m)`` / ``pkg(m, name)``; outside a run each call builds a fresh one.
"""

from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import re
from collections.abc import Callable, Hashable, Iterable, Iterator
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from packaging.version import Version

    from envcheck.manifest.model import Distribution, Manifest, VcRuntime


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


# PEP 440 local labels of the PyTorch wheel indexes: each label is served by its own index, named after it.
_TORCH_LABELS = ("cpu", "cu", "rocm", "xpu")


def windows(m: Manifest) -> bool:
    return m.platform is not None and m.platform.system == "Windows"


def torch_index_label(version: str | None) -> str | None:
    """The local label of a build the PyTorch wheel index serves (``cpu``, ``cu130``, ``rocm6.4``), or None
    for a plain version (the default index's build)."""
    label = local_label(version)
    if label and label.startswith(_TORCH_LABELS):
        return label
    return None


# auditwheel / delocate rename vendored libraries with a content hash (libgomp-a34b3233.so.1): the hash is
# a build detail, the library is the same one.
VENDORED_HASH = re.compile(r"-[0-9a-f]{8}(?=\.)")


def library_key(path: str) -> str:
    """The library's name without folder and vendoring hash: ``libgomp.so.1``."""
    name = path.replace("\\", "/").rsplit("/", 1)[-1]
    return VENDORED_HASH.sub("", name)


_OMP_FAMILIES = (
    (re.compile(r"^libiomp5(md)?\b|^libiomp5"), "Intel"),
    (re.compile(r"^libomp(140)?\b|^libomp[.-]"), "LLVM"),
    (re.compile(r"^libgomp"), "GNU"),
    (re.compile(r"^vcomp\d+", re.IGNORECASE), "MSVC"),
)


def omp_family(path: str) -> str | None:
    """Intel / LLVM / GNU / MSVC for an OpenMP runtime file, None for anything else."""
    key = library_key(path)
    for pattern, family in _OMP_FAMILIES:
        if pattern.search(key):
            return family
    return None


def vc_state(vc: VcRuntime | None) -> str:
    """What the machine says of its VC++ runtime, in words: the redistributable's registry key and
    ``System32\\msvcp140.dll``."""
    if vc is None:
        return "not known here"
    if vc.registry is None:
        key = "not installed (no redistributable registry key"
    elif not vc.registry.installed:
        key = "not installed (its registry key says Installed=0"
    else:
        key = f"installed as {vc.registry.version or 'an unknown version'} (registry"
    if vc.msvcp140 is None:
        file = "no System32\\msvcp140.dll"
    else:
        file = f"System32\\msvcp140.dll {vc.msvcp140_version or 'without a version'}"
    return f"{key}; {file})"


_RUN: contextvars.ContextVar[tuple[View, ...]] = contextvars.ContextVar("envcheck_run_views", default=())


def _emptied(value: object) -> object:
    """The empty value of ``value``'s kind: what a manifest holds for a fact it marks absent."""
    if isinstance(value, str):
        return ""
    if isinstance(value, bool):
        return False
    if isinstance(value, list):
        return []
    if isinstance(value, dict):
        return {}
    return None


def without_absent(manifest: Manifest, absent: Iterable[str]) -> Manifest:
    """``manifest`` with each fact that ``absent`` names (dotted paths, as ``Meta.absent`` holds them:
    ``torch.runtime``, ``platform.cpu``) emptied, as a manifest that lacks it holds it: diffed against one
    that cannot know a fact, a manifest that knows it gives no finding about it. A path that names no
    field is passed over."""
    for path in absent:
        names = path.split(".")
        chain: list[object] = [manifest]
        for name in names:
            holder = chain[-1]
            if holder is None or not dataclasses.is_dataclass(holder) or not hasattr(holder, name):
                break
            chain.append(getattr(holder, name))
        else:
            value = _emptied(chain[-1])
            for name, holder in zip(reversed(names), reversed(chain[:-1]), strict=True):
                value = dataclasses.replace(holder, **{name: value})  # type: ignore[type-var]
            manifest = value  # type: ignore[assignment]
    return manifest
