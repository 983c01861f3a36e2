"""Linux ``ld.so`` (glibc) search order, from ld.so(8) "Description" and glibc ``elf/dl-load.c``
(``_dl_map_object``):

1. a name with a slash is a path, used as it is;
2. DT_RPATH of the object that needs it, then of the object that loaded *that* one, and so on up to the
   executable — but only when the needing object has no DT_RUNPATH ("Use of DT_RPATH is deprecated");
3. LD_LIBRARY_PATH (ignored for set-user-ID programs; python is not one);
4. DT_RUNPATH of the needing object only: "DT_RUNPATH entries are used only to find the object's direct
   dependencies, not for its dependencies' dependencies";
5. ``/etc/ld.so.cache`` (skipped for an object linked with ``-z nodefaultlib``, DF_1_NODEFLIB);
6. the default directories (``/lib``, ``/usr/lib``; ``/lib64``, ``/usr/lib64`` on 64-bit; Debian's
   multiarch folders).

``$ORIGIN`` (and ``${ORIGIN}``) in an RPATH / RUNPATH entry is the folder of the object whose entry it is.
A candidate of the wrong ELF class or machine is skipped and the search goes on, as ld.so does.

Before searching, ld.so reuses an object already loaded under the same soname. A static tree cannot know
the load order, so the search result is kept and "already-loaded" is only the fallback when the search finds
nothing but another file in the tree carries that soname (the CUDA libraries torch preloads); what really
got loaded is compared afterwards by ``reconcile_loaded``.
"""

# ruff: noqa: PTH113
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
import posixpath
from collections.abc import Sequence

from envcheck.native.interface import Found, Image, Probe, Resolver
from envcheck.native.ldcache import cache_lookup, read_ld_cache
from envcheck.native.records import Needed

_MULTIARCH = {
    "x86_64": "x86_64-linux-gnu",
    "aarch64": "aarch64-linux-gnu",
    "ppc64": "powerpc64le-linux-gnu",
    "s390x": "s390x-linux-gnu",
    "x86": "i386-linux-gnu",
    "arm": "arm-linux-gnueabihf",
    "riscv": "riscv64-linux-gnu",
}


class LinuxResolver(Resolver):
    """ld.so's rules. ``ld_library_path`` as the target process saw it; ``sonames`` maps a soname to a
    file already in the tree (filled by the walker) for the already-loaded fallback."""

    loader = "ld.so"

    def __init__(
        self,
        *,
        host: bool,
        probe: Probe,
        ld_library_path: str | None = None,
        cache_file: str = "/etc/ld.so.cache",
    ) -> None:
        super().__init__(host=host, probe=probe)
        # An empty entry in LD_LIBRARY_PATH means the current directory (ld.so(8)); the target's
        # current directory is unknown, so empty entries are dropped.
        self.ld_library_path = [p for p in (ld_library_path or "").replace(";", ":").split(":") if p]
        self.cache = read_ld_cache(cache_file) if host else {}
        # One listing per search folder instead of one stat per (folder, name): torch's CUDA libraries
        # carry seven RPATH entries each, tried for every needed name, libc's included.
        self._listings: dict[str, frozenset[str]] = {}

    def resolve(self, needed: Needed, importer: Image, chain: Sequence[Image], root: Image) -> Found:
        name = needed.name
        machine = importer.info.machine
        if "/" in name:
            path = name if posixpath.isabs(name) else posixpath.join(posixpath.dirname(importer.path), name)
            if self._fits(path, machine):
                return Found(path, "absolute", name)
            return Found(None, "missing", name)
        if not importer.info.runpath:
            for image in (importer, *chain):
                if image.info.runpath:
                    continue  # glibc get-dynamic-info.h: with DT_RUNPATH present, DT_RPATH is dropped
                for entry in image.info.rpath:
                    hit = self._in(entry, image, name, machine)
                    if hit:
                        return Found(hit, "rpath", entry)
        if self.host:
            for entry in self.ld_library_path:
                hit = self._in(entry, importer, name, machine)
                if hit:
                    return Found(hit, "ld-library-path", entry)
        for entry in importer.info.runpath:
            hit = self._in(entry, importer, name, machine)
            if hit:
                return Found(hit, "runpath", entry)
        # ld -z nodefaultlib (DF_1_NODEFLIB): "ignore any default library search paths" (ld(1)): neither
        # the cache nor the default folders.
        if self.host and not importer.info.nodeflib:
            cached = cache_lookup(self.cache, name, machine)
            if cached and self._fits(cached, machine):
                return Found(cached, "ld-so-cache", None)
            for folder in self._default_dirs(machine, importer.info.bits):
                hit = posixpath.join(folder, name)
                if self._fits(hit, machine):
                    return Found(hit, "default-dirs", folder)
        loaded = self.sonames.get(name)
        if loaded is not None:
            return Found(loaded, "already-loaded", None)
        return Found(None, "missing", None)

    def _in(self, entry: str, owner: Image, name: str, machine: str) -> str | None:
        folder = expand_origin(entry, posixpath.dirname(owner.path), owner.info.bits, machine)
        if folder is None:
            return None
        folder = posixpath.normpath(folder)
        listing = self._listings.get(folder)
        if listing is None:
            try:
                listing = frozenset(os.listdir(folder))  # noqa: PTH208 - names only, no Path per entry
            except OSError:
                listing = frozenset()
            self._listings[folder] = listing
        if name not in listing:
            return None
        candidate = posixpath.join(folder, name)
        return candidate if self._fits(candidate, machine) else None

    def _fits(self, path: str, machine: str) -> bool:
        if not os.path.isfile(path):
            return False
        info = self.probe(path)
        # ld.so skips a file of the wrong class / machine and goes on searching ("wrong ELF class").
        return info is None or info.format != "elf" or info.machine == machine

    @staticmethod
    def _default_dirs(machine: str, bits: int) -> list[str]:
        triple = _MULTIARCH.get(machine)
        dirs = [f"/lib/{triple}", f"/usr/lib/{triple}"] if triple else []
        if bits == 64:
            dirs += ["/lib64", "/usr/lib64"]
        return [*dirs, "/lib", "/usr/lib"]


def expand_origin(entry: str, origin: str, bits: int, machine: str) -> str | None:
    """``$ORIGIN`` / ``${ORIGIN}`` to ``origin``, ``$LIB`` to the library folder name; None when the entry
    names a token ld.so would expand that this static view cannot (``$PLATFORM``)."""
    out = entry.replace("${ORIGIN}", origin).replace("$ORIGIN", origin)
    if "$LIB" in out or "${LIB}" in out:
        triple = _MULTIARCH.get(machine)
        lib = f"lib/{triple}" if triple else ("lib64" if bits == 64 else "lib")
        out = out.replace("${LIB}", lib).replace("$LIB", lib)
    if "$" in out:
        return None
    return out
