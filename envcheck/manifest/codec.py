"""Typed (de)serialisation of the manifest's frozen dataclasses, driven by their annotations.

One mechanism serves every section, so validation, ``to_dict`` and the JSON Schema cannot drift apart:

- ``decode(cls, data)`` checks raw JSON against ``cls``'s annotations and builds the dataclass; it collects
  *every* problem with its location (``packages[3].version: expected a string, got 3``) and raises
  ``ManifestError`` once, listing them all.
- ``encode(obj)`` turns a dataclass back into plain JSON data (keys sorted by the writer).
- ``json_schema(cls)`` derives the JSON Schema committed in ``manifests/``.

Supported annotations: ``str``, ``int``, ``float``, ``bool``, ``None``, unions of those, ``list[T]``,
``tuple[T, ...]``, ``dict[str, T]``, ``Literal[...]``, nested dataclasses, and ``JsonValue`` (any JSON).

Numbers are untrusted like everything else in a manifest. A ``float`` field takes only finite numbers
(``1e400`` parses to infinity; ``NaN`` and ``Infinity`` are Python's extensions to JSON, not JSON) and an
integer a float can hold. An integer of more digits than Python will convert (CVE-2020-10735: 4300 by
default) makes ``json.loads`` raise a bare ``ValueError`` with no location; parse with
``json.loads(text, parse_int=parse_json_int)`` and such a number becomes an ``OversizedNumber`` that
``decode`` reports at its location, in typed and ``JsonValue`` fields alike. Strings may hold lone
surrogates (PEP 383 file names): they are data, kept as they are.
A field whose metadata has ``volatile=True`` changes from run to run (timestamps, durations): the diff
ignores it and the schema marks it ``"x-volatile": true``.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import sys
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Literal, TypeVar, Union, get_args, get_origin

from envcheck.core.errors import ManifestError

T = TypeVar("T")

# Any JSON value (an untyped blob such as ``direct_url.json``): accepted as it is.
JsonValue: typing.TypeAlias = Any

_MAX_ERRORS = 50
# Python's own limit on int/str conversion (sys.set_int_max_str_digits, 3.11+); 3.10 has none, so the
# default of later versions bounds the parse there too.
_MAX_INT_DIGITS = getattr(sys, "get_int_max_str_digits", lambda: 0)() or 4300


@dataclass(frozen=True, slots=True)
class OversizedNumber:
    """An integer literal with more digits than a manifest may hold, kept as its digit count only."""

    digits: int


def parse_json_int(token: str) -> int | OversizedNumber:
    """``parse_int`` for ``json.loads``: an ``int``, or an ``OversizedNumber`` that ``decode`` reports at its
    location instead of ``json.loads`` failing with a bare ``ValueError`` (and no location) on the first
    integer past Python's conversion limit."""
    digits = len(token) - token.startswith("-")
    if digits > _MAX_INT_DIGITS:
        return OversizedNumber(digits=digits)
    return int(token)


def volatile(default: Any = dataclasses.MISSING, **kwargs: Any) -> Any:
    """A dataclass field that differs between two snapshots of the same environment."""
    return dataclasses.field(default=default, metadata={"volatile": True}, **kwargs)


def omitted_when_default(default: Any) -> Any:
    """A dataclass field that ``encode`` leaves out while it holds ``default``: a key added to the
    manifest after manifests were written (``meta.kind``, ``predicted``), so that a manifest without it
    still round-trips byte for byte and every snapshot is written as before. Decoding takes the default
    for a missing key, as for any field with one."""
    return dataclasses.field(default=default, metadata={"omit_default": True})


class _Problems:
    def __init__(self) -> None:
        self.items: list[str] = []

    def add(self, location: str, message: str) -> None:
        if len(self.items) < _MAX_ERRORS:
            self.items.append(f"{location or '<top>'}: {message}")


@functools.cache
def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _fields(cls: type) -> tuple[dataclasses.Field[Any], ...]:
    return dataclasses.fields(cls)


def json_kind(value: object) -> str:
    """What a JSON value is, in the words of a validation message (``a string``, ``null``, ...)."""
    if isinstance(value, OversizedNumber):
        return f"a number of {value.digits} digits (at most {_MAX_INT_DIGITS})"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


# A key that reads well after a dot; any other key is shown quoted (see ``_join``).
_PLAIN_KEY = re.compile(r"[A-Za-z_][A-Za-z0-9_.+-]{0,79}")


def _join(location: str, key: str) -> str:
    """``location.key``; a key from the manifest that is not a plain name is shown as ``location['…']``
    with ``repr``'s escapes and cut short, so an error message never carries the manifest's control
    characters, lone surrogates or megabytes to the user's terminal."""
    if not _PLAIN_KEY.fullmatch(key):
        shown = repr(key[:60]) + ("…" if len(key) > 60 else "")
        return f"{location}[{shown}]"
    return f"{location}.{key}" if location else key


def _oversized_in(value: object, location: str) -> tuple[str, OversizedNumber] | None:
    """Where the first ``OversizedNumber`` inside untyped JSON at ``location`` is, and it; or None.

    Iterative: an untyped value may nest as deep as ``json.loads`` allows, deeper than Python's stack."""
    stack: list[tuple[object, str]] = [(value, location)]
    while stack:
        item, where = stack.pop()
        if isinstance(item, OversizedNumber):
            return where, item
        if type(item) is list:
            stack.extend((v, f"{where}[{i}]") for i, v in enumerate(item))
        elif type(item) is dict:
            stack.extend((v, _join(where, k)) for k, v in item.items())
    return None


_SENTINEL = object()


def _finite(value: float) -> float | None:
    """``value`` as a finite float, or None: ``1e400`` parses to infinity, ``NaN``/``Infinity`` are not JSON,
    and ``float(10**400)`` raises ``OverflowError``."""
    try:
        number = float(value)
    except OverflowError:
        return None
    return number if math.isfinite(number) else None


def _decode(tp: Any, value: object, location: str, problems: _Problems) -> Any:
    """Return the decoded value, or ``_SENTINEL`` after recording a problem."""
    if tp is Any:
        found = _oversized_in(value, location)
        if found is None:
            return value
        problems.add(found[0], json_kind(found[1]))
        return _SENTINEL
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = get_args(tp)
        if value is None:
            if type(None) in options:
                return None
            problems.add(location, "must not be null")
            return _SENTINEL
        non_null = [o for o in options if o is not type(None)]
        if len(non_null) == 1:
            return _decode(non_null[0], value, location, problems)
        for option in non_null:
            trial = _Problems()
            decoded = _decode(option, value, location, trial)
            if not trial.items:
                return decoded
        problems.add(location, f"unexpected {json_kind(value)}")
        return _SENTINEL
    if origin is Literal:
        allowed = get_args(tp)
        if value in allowed and not isinstance(value, bool):
            return value
        problems.add(location, f"expected one of {', '.join(map(repr, allowed))}, got {value!r:.40}")
        return _SENTINEL
    if origin is list or origin is tuple:
        if not isinstance(value, list):
            problems.add(location, f"expected an array, got {json_kind(value)}")
            return _SENTINEL
        (item_type, *_) = get_args(tp)
        items = [_decode(item_type, item, f"{location}[{i}]", problems) for i, item in enumerate(value)]
        return tuple(items) if origin is tuple else items
    if origin is dict:
        if not isinstance(value, dict):
            problems.add(location, f"expected an object, got {json_kind(value)}")
            return _SENTINEL
        _, value_type = get_args(tp)
        return {k: _decode(value_type, v, _join(location, k), problems) for k, v in value.items()}
    if dataclasses.is_dataclass(tp):
        assert isinstance(tp, type)
        return _decode_dataclass(tp, value, location, problems)
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    elif tp is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            number = _finite(value)
            if number is not None:
                return number
            problems.add(location, f"{value!r:.40} is not a finite number a float can hold")
            return _SENTINEL
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is type(None):
        if value is None:
            return None
    else:  # pragma: no cover - a programming error in a model, not bad input
        raise TypeError(f"unsupported annotation {tp!r} at {location}")
    name = {bool: "a boolean", int: "an integer", float: "a number", str: "a string"}.get(tp, "null")
    problems.add(location, f"expected {name}, got {json_kind(value)}")
    return _SENTINEL


def _decode_dataclass(cls: type, value: object, location: str, problems: _Problems) -> Any:
    if not isinstance(value, dict):
        problems.add(location, f"expected an object, got {json_kind(value)}")
        return _SENTINEL
    hints = _hints(cls)
    kwargs: dict[str, Any] = {}
    failed = False
    for field in _fields(cls):
        where = _join(location, field.name)
        if field.name not in value:
            has_default = (
                field.default is not dataclasses.MISSING or field.default_factory is not dataclasses.MISSING
            )
            if not has_default:
                problems.add(where, "missing")
                failed = True
            continue
        decoded = _decode(hints[field.name], value[field.name], where, problems)
        if decoded is _SENTINEL:
            failed = True
        else:
            kwargs[field.name] = decoded
    # Unknown keys are tolerated (a manifest from a newer *minor* writer); the schema version guards
    # against incompatible changes.
    if failed:
        return _SENTINEL
    return cls(**kwargs)


class _Invalid(Exception):
    """Raised by a compiled decoder at the first problem; the slow path then finds and names them all."""


Decoder = Callable[[Any], Any]
_COMPILED: dict[Any, Decoder] = {}
# Annotations whose valid values are exactly the instances of that type (JSON ``true`` is no int here).
_EXACT: frozenset[Any] = frozenset({bool, int, str, type(None)})


def _compiled(tp: Any) -> Decoder:
    """A decoder for valid data, built once per annotation: ``diff`` decodes two manifests of thousands of
    values on every run, and the checking path (which tracks locations) costs four times more."""
    try:
        return _COMPILED[tp]
    except KeyError:
        pass
    decoder = _compile(tp)
    _COMPILED[tp] = decoder
    return decoder


def _compile(tp: Any) -> Decoder:
    if tp is Any:

        def untyped(v: Any) -> Any:
            # Containers may hide an oversized integer; scalars (the usual case) are returned at once.
            if (type(v) is list or type(v) is dict or type(v) is OversizedNumber) and _oversized_in(v, ""):
                raise _Invalid
            return v

        return untyped
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        options = get_args(tp)
        nullable = type(None) in options
        if all(o in _EXACT for o in options):  # ``str | None`` and the like: one type test, no dispatch
            kinds = tuple(options)

            def scalars(v: Any) -> Any:
                if type(v) in kinds:
                    return v
                raise _Invalid

            return scalars
        decoders = [_compiled(o) for o in options if o is not type(None)]

        def union(v: Any) -> Any:
            if v is None:
                if nullable:
                    return None
                raise _Invalid
            for d in decoders:
                try:
                    return d(v)
                except _Invalid:
                    continue
            raise _Invalid

        return union
    if origin is Literal:
        allowed = get_args(tp)

        def literal(v: Any) -> Any:
            if v in allowed and not isinstance(v, bool):
                return v
            raise _Invalid

        return literal
    if origin is list or origin is tuple:
        item = _compiled(get_args(tp)[0])
        as_tuple = origin is tuple

        def sequence(v: Any) -> Any:
            if type(v) is not list:
                raise _Invalid
            out = [item(x) for x in v]
            return tuple(out) if as_tuple else out

        return sequence
    if origin is dict:
        value = _compiled(get_args(tp)[1])

        def mapping(v: Any) -> Any:
            if type(v) is not dict:
                raise _Invalid
            return {k: value(x) for k, x in v.items()}

        return mapping
    if dataclasses.is_dataclass(tp):
        assert isinstance(tp, type)
        cls = tp
        hints = _hints(cls)
        specs = [
            (
                f.name,
                f.default is not dataclasses.MISSING or f.default_factory is not dataclasses.MISSING,
                hints[f.name],
            )
            for f in _fields(cls)
        ]
        fields: list[tuple[str, bool, Decoder]] = []

        def record(v: Any) -> Any:
            if not fields:  # resolved on first use: models may refer to each other
                fields.extend((name, optional, _compiled(hint)) for name, optional, hint in specs)
            if type(v) is not dict:
                raise _Invalid
            kwargs = {}
            for name, optional, decoder in fields:
                if name in v:
                    kwargs[name] = decoder(v[name])
                elif not optional:
                    raise _Invalid
            return cls(**kwargs)

        return record
    if tp is float:

        def number(v: Any) -> Any:
            if type(v) is float or type(v) is int:
                finite = _finite(v)
                if finite is not None:
                    return finite
            raise _Invalid

        return number
    if tp in _EXACT:
        kinds = (tp,)

        def scalar(v: Any) -> Any:
            if type(v) in kinds:
                return v
            raise _Invalid

        return scalar
    raise TypeError(f"unsupported annotation {tp!r}")  # pragma: no cover


def decode(cls: type[T], data: object, *, source: str = "manifest", location: str = "") -> T:
    """Build ``cls`` from raw JSON data. Raises ``ManifestError`` listing every problem with its location."""
    try:
        return typing.cast(T, _compiled(cls)(data))
    except _Invalid:
        pass  # invalid somewhere: the checking path below names every problem
    problems = _Problems()
    result = _decode(cls, data, location, problems)
    if problems.items or result is _SENTINEL:
        raise ManifestError(source, problems.items or [f"{location or '<top>'}: invalid"])
    return typing.cast(T, result)


_SCALARS = (str, int, float, bool, type(None))


_FIELD_NAMES: dict[type, tuple[str, ...] | None] = {}
# Per dataclass: the fields ``encode`` leaves out while they hold their default (``omitted_when_default``).
_OMITTED: dict[type, dict[str, Any]] = {}


def _field_names(cls: type) -> tuple[str, ...] | None:
    try:
        return _FIELD_NAMES[cls]
    except KeyError:
        names = tuple(f.name for f in dataclasses.fields(cls)) if dataclasses.is_dataclass(cls) else None
        _OMITTED[cls] = (
            {f.name: f.default for f in dataclasses.fields(cls) if f.metadata.get("omit_default")}
            if dataclasses.is_dataclass(cls)
            else {}
        )
        _FIELD_NAMES[cls] = names
        return names


def encode(obj: object) -> Any:
    """Plain JSON data for a dataclass tree (tuples become arrays). On the snapshot's hot path: a manifest
    of a CUDA environment has tens of thousands of values, so the per-type field names are cached."""
    if isinstance(obj, _SCALARS):
        return obj
    if isinstance(obj, list | tuple):
        return [encode(v) for v in obj]
    if isinstance(obj, dict):
        return {str(k): encode(v) for k, v in obj.items()}
    names = _field_names(type(obj))
    if names is None:
        return obj
    omitted = _OMITTED[type(obj)]
    if not omitted:
        return {name: encode(getattr(obj, name)) for name in names}
    out = {}
    for name in names:
        value = getattr(obj, name)
        if name not in omitted or value != omitted[name]:
            out[name] = encode(value)
    return out


def volatile_paths(cls: type, prefix: str = "") -> Iterator[str]:
    """Dotted paths (``[]`` for any array index, ``*`` for any key) of every volatile field under ``cls``."""
    hints = _hints(cls)
    for field in _fields(cls):
        path = _join(prefix, field.name)
        if field.metadata.get("volatile"):
            yield path
            continue
        yield from _volatile_in(hints[field.name], path)


def _volatile_in(tp: Any, path: str) -> Iterator[str]:
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        for option in get_args(tp):
            yield from _volatile_in(option, path)
    elif origin is list or origin is tuple:
        yield from _volatile_in(get_args(tp)[0], f"{path}[]")
    elif origin is dict:
        yield from _volatile_in(get_args(tp)[1], f"{path}.*")
    elif dataclasses.is_dataclass(tp):
        assert isinstance(tp, type)
        yield from volatile_paths(tp, path)


def json_schema(cls: type) -> dict[str, Any]:
    """A JSON Schema (draft 2020-12) for ``cls``, with ``$defs`` for every nested dataclass."""
    defs: dict[str, Any] = {}
    root = _schema(cls, defs)
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        **root,
        "$defs": dict(sorted(defs.items())),
    }


def _schema(tp: Any, defs: dict[str, Any]) -> dict[str, Any]:
    if tp is Any:
        return {}
    origin = get_origin(tp)
    if origin is Union or origin is types.UnionType:
        return {"anyOf": [_schema(o, defs) for o in get_args(tp)]}
    if origin is Literal:
        return {"enum": list(get_args(tp))}
    if origin is list or origin is tuple:
        return {"type": "array", "items": _schema(get_args(tp)[0], defs)}
    if origin is dict:
        return {"type": "object", "additionalProperties": _schema(get_args(tp)[1], defs)}
    if dataclasses.is_dataclass(tp):
        assert isinstance(tp, type)
        name = tp.__name__
        if name not in defs:
            defs[name] = {}  # reserve: recursive models terminate
            hints = _hints(tp)
            properties: dict[str, Any] = {}
            required: list[str] = []
            for field in _fields(tp):
                prop = _schema(hints[field.name], defs)
                if field.metadata.get("volatile"):
                    prop = {**prop, "x-volatile": True}
                properties[field.name] = prop
                if field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING:
                    required.append(field.name)
            doc = (tp.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
            defs[name] = {
                "type": "object",
                "description": doc,
                "properties": properties,
                "required": required,
            }
        return {"$ref": f"#/$defs/{name}"}
    simple = {bool: "boolean", int: "integer", float: "number", str: "string", type(None): "null"}
    if tp in simple:
        return {"type": simple[tp]}
    raise TypeError(f"unsupported annotation {tp!r}")  # pragma: no cover
