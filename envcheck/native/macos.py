"""macOS dyld search, from dyld(1) and ``man dlopen``:

- ``@rpath/x``: each LC_RPATH of the image that needs it, then of the image that loaded that one, and on up
  to the main executable ("dyld searches the run path list ... of all the images in the load chain");
- ``@loader_path/x``: the folder of the image that needs it; ``@executable_path/x``: the folder of the main
  executable (python); both also inside LC_RPATH entries;
- DYLD_LIBRARY_PATH is searched first for the leaf name of any install name; a plain name with no slash is
  searched in DYLD_FALLBACK_LIBRARY_PATH (default ``$HOME/lib:/usr/local/lib:/usr/lib``);
- since macOS 11 the system libraries (``/usr/lib``, ``/System/Library``) exist only in the dyld shared
  cache, not as files: such a name is the OS's, never MISSING.
"""

# ruff: noqa: PTH111, PTH113
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence

from envcheck.native.interface import Found, Image, Probe, Resolver
from envcheck.native.records import Needed

_SYSTEM_PREFIXES = ("/usr/lib/", "/System/Library/")


class MacosResolver(Resolver):
    """dyld's rules. ``executable`` is the main executable (None when scanning for another machine)."""

    loader = "dyld"

    def __init__(
        self,
        *,
        host: bool,
        probe: Probe,
        executable: str | None = None,
        dyld_library_path: str | None = None,
        fallback_path: str | None = None,
    ) -> None:
        super().__init__(host=host, probe=probe)
        self.executable = executable
        self.dyld_library_path = [p for p in (dyld_library_path or "").split(":") if p]
        default_fallback = f"{os.path.expanduser('~')}/lib:/usr/local/lib:/usr/lib"
        self.fallback = [p for p in (fallback_path or default_fallback).split(":") if p] if host else []

    def resolve(self, needed: Needed, importer: Image, chain: Sequence[Image], root: Image) -> Found:
        name = needed.name
        leaf = posixpath.basename(name)
        if self.host:
            for folder in self.dyld_library_path:
                hit = posixpath.join(folder, leaf)
                if os.path.isfile(hit):
                    return Found(hit, "dyld-library-path", folder)
        if name.startswith("@rpath/"):
            rest = name[len("@rpath/") :]
            for image in (importer, *chain):
                for entry in image.info.rpath:
                    expanded = self._expand(entry, image)
                    if expanded is None:
                        continue
                    hit = posixpath.normpath(posixpath.join(expanded, rest))
                    if os.path.isfile(hit):
                        return Found(hit, "lc-rpath", entry)
            return Found(None, "missing", None)
        if name.startswith("@loader_path/"):
            hit = posixpath.normpath(
                posixpath.join(posixpath.dirname(importer.path), name[len("@loader_path/") :])
            )
            return Found(hit, "loader-path", None) if os.path.isfile(hit) else Found(None, "missing", None)
        if name.startswith("@executable_path/"):
            if self.executable is None:
                return Found(None, "expected-on-machine", None)
            hit = posixpath.normpath(
                posixpath.join(posixpath.dirname(self.executable), name[len("@executable_path/") :])
            )
            return (
                Found(hit, "executable-path", None) if os.path.isfile(hit) else Found(None, "missing", None)
            )
        if name.startswith(_SYSTEM_PREFIXES):
            if self.host and os.path.isfile(name):
                return Found(name, "absolute", None)
            return Found(None, "system-image", None)
        if name.startswith("/"):
            if self.host and os.path.isfile(name):
                return Found(name, "absolute", None)
            return Found(None, "missing", None)
        for folder in self.fallback:
            hit = posixpath.join(folder, name)
            if os.path.isfile(hit):
                return Found(hit, "fallback-path", folder)
        return Found(None, "missing", None)

    def _expand(self, entry: str, owner: Image) -> str | None:
        if entry.startswith("@loader_path"):
            return posixpath.dirname(owner.path) + entry[len("@loader_path") :]
        if entry.startswith("@executable_path"):
            if self.executable is None:
                return None
            return posixpath.dirname(self.executable) + entry[len("@executable_path") :]
        return entry
