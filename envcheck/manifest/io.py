"""Reading and writing manifests. Manifests are untrusted input: size-bounded, parsed as data, validated."""

from __future__ import annotations

import gc
import json
import os
from typing import Any

from envcheck.errors import ManifestError
from envcheck.manifest.codec import decode, encode, parse_json_int
from envcheck.manifest.model import SCHEMA_VERSION, Manifest

# A torch CUDA environment's manifest is a few MB; 32 MiB leaves room and stops a hostile file early.
MAX_MANIFEST_BYTES = 32 * 1024 * 1024


def dumps(manifest: Manifest) -> str:
    """The canonical text: UTF-8 JSON, keys sorted, 2-space indent, trailing newline."""
    return json.dumps(encode(manifest), indent=2, sort_keys=True, ensure_ascii=False) + "\n"


def loads(text: str | bytes, *, source: str = "manifest") -> Manifest:
    """Parse and validate. Raises ``ManifestError`` naming the location of every problem."""
    if len(text) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            source, [f"file is {len(text)} bytes, more than the {MAX_MANIFEST_BYTES} bytes a manifest may be"]
        )
    if not text.strip():
        raise ManifestError(source, ["file is empty"], tip="Write one with `envcheck snapshot -o FILE`.")
    try:
        # Integers past Python's conversion limit (4300 digits) become a located problem, not a ValueError.
        data: Any = json.loads(text, parse_int=parse_json_int)
    except json.JSONDecodeError as e:
        hint = " (the file looks truncated)" if e.pos >= len(text.rstrip()) - 1 else ""
        raise ManifestError(
            source, [f"line {e.lineno} column {e.colno}: not valid JSON: {e.msg}{hint}"]
        ) from e
    except (UnicodeDecodeError, RecursionError, ValueError) as e:
        raise ManifestError(source, [f"not a JSON text: {type(e).__name__}"]) from e
    if not isinstance(data, dict):
        raise ManifestError(source, ["<top>: expected a JSON object, the manifest"])
    version = data.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool):
        raise ManifestError(
            source,
            ["schema_version: missing or not an integer; is this an envcheck manifest?"],
        )
    if version > SCHEMA_VERSION:
        raise ManifestError(
            source,
            [f"schema_version {version} is newer than this envcheck reads ({SCHEMA_VERSION})"],
            tip="Upgrade envcheck (`pip install -U envcheck`) to read it.",
        )
    if version < 1:
        raise ManifestError(source, [f"schema_version: {version} is not a valid schema version"])
    # Decoding allocates tens of thousands of objects that all live on: the cyclic collector would walk
    # them again and again for nothing (~25% of the decode).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return decode(Manifest, data, source=source)
    finally:
        if enabled:
            gc.enable()


def load(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest file. Raises ``ManifestError`` (also for unreadable files)."""
    source = os.fspath(path)
    return loads(read_text(source), source=source)


def read_text(path: str) -> str:
    """A manifest file's text, at most one byte past ``MAX_MANIFEST_BYTES`` of it (``loads`` refuses
    that). Raises ``ManifestError`` for a file that is not a readable regular file or not UTF-8."""
    from envcheck.files import NotOpened, read_capped

    try:
        # A FIFO, /dev/zero or /dev/urandom named as a manifest would block or never end: regular files only.
        raw = read_capped(path, MAX_MANIFEST_BYTES)
    except NotOpened as e:
        raise ManifestError(path, [f"cannot read: it {e.reason}"]) from e
    except OSError as e:
        raise ManifestError(path, [f"cannot read: {e.strerror or e}"]) from e
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(path, [f"byte {e.start}: not UTF-8 text"]) from e


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` as ``envcheck.outputs`` does: a regular file atomically (its old content
    survives any failure), a device or FIFO in place, a link through to its target. Raises ``OutputError``."""
    from envcheck.outputs import destination, write

    write(destination(path), text)


def save(manifest: Manifest, path: str | os.PathLike[str]) -> None:
    """Write ``manifest`` atomically (temp file in the same folder + rename)."""
    write_atomic(path, dumps(manifest))
