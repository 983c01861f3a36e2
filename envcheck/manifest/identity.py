"""Identity of files across two manifests: two paths name the same file when they resolve to it.

On the machine that took a snapshot, the probe resolves what it can (real paths of the loaded libraries
and of the interpreter's library; ``collect.facts.Owners`` knows a venv under both its linked and its real
path). Across machines, paths are compared after each manifest's own recorded aliases are applied:
merged /usr (``/lib`` → ``/usr/lib``: ``PlatformInfo.path_aliases``) and linked folders among the
interpreter's prefixes and ``sys.path`` (``PythonInfo.path_aliases``). A manifest that recorded no alias
compares by spelling, as before. Pure: no file is read here.
"""

from __future__ import annotations

import posixpath
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest

Aliases = tuple[tuple[str, str], ...]


def aliases(m: Manifest) -> Aliases:
    """The manifest's folder aliases (link → real folder), longest link first so that the most specific
    one applies."""
    found: dict[str, str] = {}
    if m.platform is not None and m.platform.path_aliases:
        found.update(m.platform.path_aliases)
    if m.python.path_aliases:
        found.update(m.python.path_aliases)
    return tuple(
        sorted(
            ((k.rstrip("/") or "/", v.rstrip("/") or "/") for k, v in found.items()),
            key=lambda kv: -len(kv[0]),
        )
    )


def canonical(path: str, table: Aliases) -> str:
    """``path`` with the first (longest) alias whose link is a leading folder of it replaced by its real
    folder; POSIX paths normalised (``a/./b``, ``a//b``). Windows paths come back unchanged apart from
    slashes: their manifests record no aliases."""
    if not path:
        return path
    if "\\" in path or (len(path) > 1 and path[1] == ":"):
        return path.replace("\\", "/")
    out = posixpath.normpath(path)
    for link, real in table:
        if out == link or out.startswith(link + "/"):
            return real + out[len(link) :]
    return out


def same_file(a: str, a_aliases: Aliases, b: str, b_aliases: Aliases) -> bool:
    """Whether the path ``a`` of one manifest and ``b`` of another name the same file."""
    return canonical(a, a_aliases) == canonical(b, b_aliases)


def folder_entries(value: str | None, table: Aliases) -> frozenset[str]:
    """The canonical folders of a search-path variable (``LD_LIBRARY_PATH``: ``:``-separated; empty
    entries, which mean the current folder, are left out)."""
    if not value:
        return frozenset()
    return frozenset(canonical(e, table) for e in value.split(":") if e)


def foreign_libpython(m: Manifest) -> str | None:
    """The file name of the libpython the interpreter runs when it is not the installation's own one
    (``libpython3.11.so.1.0`` from /usr/lib while the executable is pyenv's), else None. Known only from
    what the probe recorded: the real paths of both libraries, or the version the installation was built
    as against the version the loaded library reports."""
    py = m.python
    if not py.loaded_library:
        return None
    table = aliases(m)
    moved = bool(py.own_library) and canonical(py.own_library or "", table) != canonical(
        py.loaded_library, table
    )
    rebuilt = bool(py.build_version) and py.build_version != py.version
    return posixpath.basename(py.loaded_library) if moved or rebuilt else None
