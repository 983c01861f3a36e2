"""The catalog of the configuration torch reads: ``envcheck/data/runtime_config.json``
(docs/runtime-config.md).

Each entry names an environment variable (or a prefix, ``NCCL_*``) that torch, its runtimes (OpenMP, MKL,
oneDNN, CUDA) or the tools it runs (the C++ compiler of torch.compile, setuptools) read, with what a
difference in it does (``consequence``, a closed set), a one-line ``what`` and the ``source`` that documents
it. Optional fields: ``on`` (the values that switch it on; any other value, or unset, is off),
``unset_values`` (values that act as if it were unset), ``check`` (``compiler``, ``folder`` or ``file``:
the probe checks what it names, ``envcheck/inside/config_checks.py``) and ``used_by`` (the documented call
that fails when that check fails).

The file is read once, bounded and validated; a broken file is an ``EnvcheckError`` naming every problem.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from importlib import resources
from typing import Any, Literal, cast, get_args

from envcheck.core.errors import ManifestError
from envcheck.core.findings import Severity

Consequence = Literal["call-fails", "load-fails", "numerics", "what-runs", "speed", "logging"]
CONSEQUENCES: tuple[Consequence, ...] = get_args(Consequence)
CheckKind = Literal["compiler", "folder", "file"]
CHECK_KINDS: tuple[CheckKind, ...] = get_args(CheckKind)

# What a difference in a variable of each consequence is worth (docs/runtime-config.md).
SEVERITY: dict[Consequence, Severity] = {
    "call-fails": "error",
    "load-fails": "error",
    "numerics": "warning",
    "what-runs": "warning",
    "speed": "info",
    "logging": "info",
}

SOURCE = "envcheck/data/runtime_config.json"
MAX_BYTES = 1 << 20
MAX_ENTRIES = 2000
_FIELDS = frozenset(
    {"name", "consequence", "what", "source", "on", "unset_values", "check", "used_by", "fails_when"}
)
# Which side of a difference fails, for a variable whose consequence is a failure: ``set`` (the variable
# set on the target makes the call fail: TORCH_FORCE_WEIGHTS_ONLY_LOAD) or ``unset`` (the target lacks what
# made the base's call succeed: KMP_DUPLICATE_LIB_OK, TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD). Absent: either.
FAILS_WHEN = ("set", "unset")


@dataclass(frozen=True, slots=True)
class Entry:
    """One variable (``name``) or prefix (``name`` ending in ``*``) of the catalog."""

    name: str
    consequence: Consequence
    what: str
    source: str
    on: tuple[str, ...] | None = None
    unset_values: tuple[str, ...] = ()
    check: CheckKind | None = None
    used_by: str | None = None
    fails_when: str | None = None

    def fails_on(self, target_active: bool) -> bool:
        """Whether the target's side of a difference is the one whose call fails (``fails_when``): a
        failure-class variable the target sets where only its absence fails (or the reverse) changes what
        runs, it does not break it."""
        if self.fails_when is None:
            return True
        return target_active == (self.fails_when == "set")

    @property
    def is_prefix(self) -> bool:
        return self.name.endswith("*")

    @property
    def severity(self) -> Severity:
        return SEVERITY[self.consequence]

    def state(self, value: str | None) -> object:
        """What ``value`` means to the reader: on/off for a switch, None for a value that acts as unset,
        else the value itself. Two values with the same state behave the same."""
        if self.on is not None:
            return value is not None and value.strip().lower() in self.on
        if value is None or value.strip().lower() in self.unset_values:
            return None
        return value


@dataclass(frozen=True, slots=True)
class Catalog:
    entries: tuple[Entry, ...]
    by_name: dict[str, Entry]
    prefixes: tuple[Entry, ...]  # longest first

    def get(self, name: str) -> Entry | None:
        upper = name.upper()
        found = self.by_name.get(upper)
        if found is not None:
            return found
        for entry in self.prefixes:
            if upper.startswith(entry.name[:-1]):
                return entry
        return None


def _strings(raw: Any, where: str, problems: list[str]) -> tuple[str, ...] | None:
    if (
        not isinstance(raw, list)
        or not all(isinstance(v, str) and len(v) <= 200 for v in raw)
        or len(raw) > 50
    ):
        problems.append(f"{where}: a list of at most 50 short strings")
        return None
    return tuple(v.strip().lower() for v in raw)


def _entry(raw: Any, where: str, problems: list[str]) -> Entry | None:
    if not isinstance(raw, dict):
        problems.append(f"{where}: an object")
        return None
    start = len(problems)
    unknown = sorted(set(raw) - _FIELDS)
    if unknown:
        problems.append(f"{where}: unknown field {unknown[0]!r}")
    texts = {}
    for key in ("name", "what", "source"):
        value = raw.get(key)
        if not isinstance(value, str) or not value.strip() or len(value) > 400:
            problems.append(f"{where}.{key}: a non-empty string of at most 400 characters")
        else:
            texts[key] = value
    name = texts.get("name", "")
    stem = name[:-1] if name.endswith("*") else name
    if name and (not stem or not all(c.isupper() or c.isdigit() or c == "_" for c in stem)):
        problems.append(
            f"{where}.name: {name!r} is not an upper-case variable name (or a prefix ending in *)"
        )
    if "source" in texts and not texts["source"].startswith("https://"):
        problems.append(f"{where}.source: an https:// URL")
    consequence = raw.get("consequence")
    if consequence not in CONSEQUENCES:
        problems.append(f"{where}.consequence: one of {', '.join(CONSEQUENCES)}, not {consequence!r}")
    check = raw.get("check")
    if check is not None and check not in CHECK_KINDS:
        problems.append(f"{where}.check: one of {', '.join(CHECK_KINDS)}, not {check!r}")
    used_by = raw.get("used_by")
    if used_by is not None and (not isinstance(used_by, str) or not used_by.strip() or len(used_by) > 200):
        problems.append(f"{where}.used_by: a non-empty string of at most 200 characters")
    if used_by is not None and check is None:
        problems.append(f"{where}.used_by: only with a check")
    fails_when = raw.get("fails_when")
    if fails_when is not None and fails_when not in FAILS_WHEN:
        problems.append(f"{where}.fails_when: one of {', '.join(FAILS_WHEN)}, not {fails_when!r}")
    on = _strings(raw["on"], f"{where}.on", problems) if "on" in raw else None
    unset_values = _strings(raw.get("unset_values", []), f"{where}.unset_values", problems) or ()
    if len(problems) > start:
        return None
    return Entry(
        name=name,
        consequence=cast(Consequence, consequence),
        what=texts["what"],
        source=texts["source"],
        on=on,
        unset_values=unset_values,
        check=cast(CheckKind | None, check),
        used_by=used_by,
        fails_when=fails_when,
    )


def parse(data: bytes, source: str = SOURCE) -> Catalog:
    """The catalog in ``data``; a ``ManifestError`` naming every problem otherwise."""
    if len(data) > MAX_BYTES:
        raise ManifestError(source, [f"larger than {MAX_BYTES} bytes"])
    try:
        doc = json.loads(data)
    except (ValueError, UnicodeDecodeError) as e:
        raise ManifestError(source, [f"not JSON: {e}"]) from None
    if not isinstance(doc, dict) or doc.get("version") != 1 or not isinstance(doc.get("entries"), list):
        raise ManifestError(source, ['an object {"version": 1, "entries": [...]}'])
    raw_entries = doc["entries"]
    if len(raw_entries) > MAX_ENTRIES:
        raise ManifestError(source, [f"more than {MAX_ENTRIES} entries"])
    problems: list[str] = []
    entries: list[Entry] = []
    seen: set[str] = set()
    for i, raw in enumerate(raw_entries):
        entry = _entry(raw, f"entries[{i}]", problems)
        if entry is None:
            continue
        if entry.name in seen:
            problems.append(f"entries[{i}].name: {entry.name} is listed twice")
        seen.add(entry.name)
        entries.append(entry)
    if problems:
        raise ManifestError(source, problems)
    return Catalog(
        entries=tuple(entries),
        by_name={e.name: e for e in entries if not e.is_prefix},
        prefixes=tuple(sorted((e for e in entries if e.is_prefix), key=lambda e: -len(e.name))),
    )


@functools.cache
def catalog() -> Catalog:
    """The packaged catalog, read and validated once."""
    path = resources.files("envcheck").joinpath("data").joinpath("runtime_config.json")
    with path.open("rb") as f:
        data = f.read(MAX_BYTES + 1)
    return parse(data)


def consequence(name: str) -> Entry | None:
    """The catalog's entry for the variable ``name`` (exact name first, then the longest prefix), or None."""
    return catalog().get(name)


__all__ = ["CONSEQUENCES", "SEVERITY", "Catalog", "Consequence", "Entry", "catalog", "consequence", "parse"]
