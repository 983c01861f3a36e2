"""Reading and writing manifests. Manifests are untrusted input: size-bounded, parsed as data, validated."""

from __future__ import annotations

import gc
import json
import os
import re
from pathlib import Path
from typing import Any

from envcheck.core.errors import ManifestError
from envcheck.core.files import MAX_MANIFEST_BYTES, Unreadable, read_input
from envcheck.core.outputs import destination, write
from envcheck.manifest.codec import decode, encode, parse_json_int
from envcheck.manifest.model import SCHEMA_VERSION, Manifest

# What a manifest may hold, each kind named when refused (docs/guarantees.md). The bytes cap alone does not
# bound memory: 32 MiB of short JSON strings parse into ~4 M objects (~300 MB), and every requirement line,
# variable or distribution becomes objects again in a diff (300 k requirement lines: 670 MB, 400 k
# variables: 744 MB). The example manifests (manifests/examples/) hold ~15 k JSON values, 31-52
# distributions, 292-360 requirement lines, 6 variables and 133-283 native files; a diff of a manifest at
# every limit at once peaks at ~210 MB (tests/manifest/test_bounds_manifest.py).
MAX_JSON_VALUES = 1_000_000
MAX_DISTRIBUTIONS = 10_000
MAX_REQUIREMENT_LINES = 10_000
MAX_ENV_VARIABLES = 10_000
MAX_NATIVE_FILES = 100_000


def dumps(manifest: Manifest, *, source: str = "the manifest to write") -> str:
    """The canonical text: UTF-8 JSON, keys sorted, 2-space indent, trailing newline. Raises
    ``ManifestError`` for a manifest that ``loads`` would refuse for its size (the per-kind limits,
    ``MAX_JSON_VALUES``, ``MAX_MANIFEST_BYTES``): envcheck never writes a manifest it cannot read back (a
    target with 10,001 allowlisted variables would otherwise give one)."""
    data = encode(manifest)
    check_counts(data, source, action="not written")
    text = json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n"
    check_values(text, source, action="not written")
    size = len(text.encode("utf-8", "backslashreplace"))  # as outputs.write_output writes it
    if size > MAX_MANIFEST_BYTES:
        raise ManifestError(
            source, [f"{size} bytes, more than the {MAX_MANIFEST_BYTES} bytes a manifest may be: not written"]
        )
    return text


def loads(text: str | bytes, *, source: str = "manifest") -> Manifest:
    """Parse and validate. Raises ``ManifestError`` naming the location of every problem."""
    if len(text) > MAX_MANIFEST_BYTES:
        raise ManifestError(
            source, [f"file is {len(text)} bytes, more than the {MAX_MANIFEST_BYTES} bytes a manifest may be"]
        )
    if not text.strip():
        raise ManifestError(source, ["file is empty"], tip="Write one with `envcheck snapshot -o FILE`.")
    check_values(text, source)
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
    check_counts(data, source)
    # Decoding allocates tens of thousands of objects that all live on: the cyclic collector would walk
    # them again and again for nothing (~25% of the decode).
    enabled = gc.isenabled()
    gc.disable()
    try:
        return decode(Manifest, data, source=source)
    finally:
        if enabled:
            gc.enable()


def check_values(text: str | bytes, source: str, *, action: str = "not parsed") -> None:
    """Refuse, before it is parsed, a text that could hold more than ``MAX_JSON_VALUES`` JSON values: each
    value but the first of its array or object follows a comma, so commas and brackets bound the count
    (commas inside strings only make the bound looser). Raises ``ManifestError``."""
    comma, brackets, braces = (",", "[", "{") if isinstance(text, str) else (b",", b"[", b"{")
    bound = text.count(comma) + text.count(brackets) + text.count(braces)  # type: ignore[arg-type]
    if bound > MAX_JSON_VALUES:
        raise ManifestError(
            source,
            [
                f"the text may hold up to {bound} JSON values, more than the {MAX_JSON_VALUES} a manifest "
                f"may hold (MAX_JSON_VALUES): {action}"
            ],
        )


def check_counts(data: dict[str, Any], source: str, *, action: str = "not read") -> None:
    """Refuse a parsed manifest that holds more distributions, requirement lines, environment variables or
    native files than its named limit, before it is decoded (the shape itself is the decoder's to judge).
    Raises ``ManifestError`` naming the kind, the count and the limit."""
    packages = data.get("packages")
    dists = packages if isinstance(packages, list) else []
    env = data.get("env")
    caller = data.get("env_caller")
    counts = (
        ("packages", "distributions", len(dists), MAX_DISTRIBUTIONS),
        ("packages[].requires", "requirement lines", _total(dists, "requires"), MAX_REQUIREMENT_LINES),
        ("packages[].native_files", "native files", _total(dists, "native_files"), MAX_NATIVE_FILES),
        ("env", "environment variables", len(env) if isinstance(env, dict) else 0, MAX_ENV_VARIABLES),
        (
            "env_caller",
            "environment variables",
            len(caller) if isinstance(caller, list) else 0,
            MAX_ENV_VARIABLES,
        ),
    )
    for location, kind, count, limit in counts:
        if count > limit:
            raise ManifestError(
                source, [f"{location}: {count} {kind}, more than the {limit} a manifest may hold: {action}"]
            )


def _total(dists: list[Any], key: str) -> int:
    total = 0
    for dist in dists:
        items = dist.get(key) if isinstance(dist, dict) else None
        if isinstance(items, list):
            total += len(items)
    return total


def load(path: str | os.PathLike[str]) -> Manifest:
    """Read and validate a manifest file. Raises ``ManifestError`` (also for unreadable files)."""
    source = os.fspath(path)
    return loads(read_text(source), source=source)


def read_text(path: str) -> str:
    """A manifest file's text (``envcheck.core.files.read_input``). Raises ``ManifestError`` for a file that
    is not a readable regular file, is larger than ``MAX_MANIFEST_BYTES`` or is not UTF-8, and, with a
    tip naming the right command or option, for a Python environment's folder, an interpreter (an
    executable, a python script) or a pip-tools requirements lock given where a manifest is expected."""
    try:
        # A FIFO, /dev/zero or /dev/urandom named as a manifest would block or never end: regular files only.
        raw = read_input(path, MAX_MANIFEST_BYTES)
    except Unreadable as e:
        if e.kind == "directory" and is_environment_folder(path):
            python = _interpreter_in(path)
            raise ManifestError(
                path,
                ["a Python environment's folder, not a manifest"],
                tip=f"To inspect that environment, pass its interpreter: --python {python} (`envcheck "
                f"snapshot --python {python}` records its manifest).",
            ) from e
        raise ManifestError(path, [e.problem]) from e
    not_a_manifest = what_else(raw)
    if not_a_manifest is not None:
        what, tip = not_a_manifest
        raise ManifestError(path, [f"{what}, not a manifest"], tip=tip.replace("{path}", path))
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ManifestError(path, [f"byte {e.start}: not UTF-8 text"]) from e


# The first bytes of an executable: ELF, Mach-O (both byte orders, 32/64 bit, universal); a PE file starts
# with MZ and holds its PE signature in its first bytes too (``what_else``).
_EXECUTABLE_MAGICS = (
    b"\x7fELF",
    b"\xcf\xfa\xed\xfe",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xfe\xed\xfa\xce",
    b"\xca\xfe\xba\xbe",
)
# A line of a pip-tools requirements lock: ``name==version`` (extras, ``===``, a direct ``name @ url``).
_PIN_LINE = re.compile(rb"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[^\]]*\])?\s*(===?|@)\s*\S")
_PYTHON_TIP = (
    "To inspect that interpreter's environment, pass it with --python: --python {path} "
    "(`envcheck snapshot --python {path}` records its manifest)."
)
_LOCK_TIP = (
    "That is a requirements lock: check an environment against it with `envcheck lock --check {path}`; "
    "a manifest is the JSON file `envcheck snapshot` writes."
)


def what_else(raw: bytes) -> tuple[str, str] | None:
    """What a file that is not a manifest is instead, when it is a kind often given by mistake, and the
    tip (``{path}`` stands for the file): an executable, a python script, a requirements lock. None for
    anything else, and always for a text that starts as JSON does (``loads`` judges that)."""
    head = raw[:4096]
    if head.lstrip(b"\xef\xbb\xbf \t\r\n").startswith((b"{", b"[")):
        return None
    if head.startswith(_EXECUTABLE_MAGICS) or (head.startswith(b"MZ") and b"PE\x00\x00" in head):
        return "an executable (an interpreter?)", _PYTHON_TIP
    first = head.split(b"\n", 1)[0]
    if first.startswith(b"#!") and b"python" in first:
        return "a Python script or interpreter launcher", _PYTHON_TIP
    lines = [line.strip() for line in head.splitlines()]
    pins = sum(1 for line in lines if _PIN_LINE.match(line))
    via = any(line.startswith(b"# via") for line in lines)
    if pins and (via or pins == sum(1 for line in lines if line and not line.startswith((b"#", b"-")))):
        return "a requirements lock (pip-tools)", _LOCK_TIP
    return None


def is_environment_folder(path: str) -> bool:
    """Whether the folder ``path`` is a Python environment: a venv (pyvenv.cfg), a conda environment
    (conda-meta) or a prefix with an interpreter in bin/ or Scripts/."""
    folder = Path(path)
    names = ("pyvenv.cfg", "conda-meta", "bin/python", "bin/python3", "Scripts/python.exe")
    return any(os.path.lexists(folder / name) for name in names)


def _interpreter_in(path: str) -> str:
    folder = Path(path)
    for name in ("bin/python", "bin/python3", "Scripts/python.exe"):
        if os.path.lexists(folder / name):
            return str(folder / name)
    return str(folder / "bin" / "python")


def write_atomic(path: str | os.PathLike[str], text: str) -> None:
    """Write ``text`` to ``path`` as ``envcheck.core.outputs`` does: a regular file atomically (its old
    content
    survives any failure), a device or FIFO in place, a link through to its target. Raises ``OutputError``."""
    write(destination(path), text)


def save(manifest: Manifest, path: str | os.PathLike[str]) -> None:
    """Write ``manifest`` atomically (temp file in the same folder + rename)."""
    write_atomic(path, dumps(manifest))
