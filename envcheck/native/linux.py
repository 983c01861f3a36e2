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
An empty entry is the process's current directory (searched only when that is known: ``cwd``). A candidate
of the wrong ELF class or machine is skipped and the search goes on, as ld.so does.

glibc >= 2.33 searches ``<folder>/glibc-hwcaps/<level>/`` before each folder, for every level the CPU
supports, best first (``x86-64-v4``, ``-v3``, ``-v2``; ``ld.so --help`` lists them): a library there beside
a plain copy is the one loaded on such a CPU. The levels are this machine's (``hwcaps_levels``), so only a
host resolver uses them.

Before searching, ld.so reuses an object already loaded under the same soname. A static tree cannot know
the load order, so the search result is kept and "already-loaded" is only the fallback when the search finds
nothing but another file in the tree carries that soname (the CUDA libraries torch preloads); what really
got loaded is compared afterwards by ``reconcile_loaded``.

``sysroot``: the loader of another root, a container image unpacked on this machine
(``envcheck.image``). Every path the loader would take from the image's point of view (an absolute
RPATH / RUNPATH entry, LD_LIBRARY_PATH, the cache's entries, the default folders, a needed name with a
slash, ``$ORIGIN``) is taken as the image's path, normalised with ``..`` stopping at its ``/`` (as in a
chroot), and only then placed under ``sysroot``: no search leaves the image, whatever its binaries name.
The cache is the image's ``/etc/ld.so.cache``; the CPU the image will run on is unknown, so no
``glibc-hwcaps`` level is searched.
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
        cwd: str | None = None,
        hwcaps: Sequence[str] | None = None,
        sysroot: str | None = None,
    ) -> None:
        super().__init__(host=host, probe=probe)
        self.cwd = cwd
        self.sysroot = os.path.normpath(sysroot) if sysroot else None
        if self.sysroot is not None:
            cache_file = self.sysroot + "/etc/ld.so.cache"
            hwcaps = ()  # the CPU the image runs on is not known here
        # glibc-hwcaps subfolders searched before each folder, best first (this machine's when None).
        self.hwcaps = tuple(hwcaps) if hwcaps is not None else (hwcaps_levels() if host else ())
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
            path = name if posixpath.isabs(name) else posixpath.join(self._origin(importer.path), name)
            path = self._rooted(path)
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
            if cached:
                cached = self._rooted(cached)
            if cached and self._fits(cached, machine):
                return Found(cached, "ld-so-cache", None)
            for folder in self._default_dirs(machine, importer.info.bits):
                hit = self._in(folder, importer, name, machine)
                if hit:
                    return Found(hit, "default-dirs", folder)
        loaded = self.sonames.get(name)
        if loaded is not None:
            return Found(loaded, "already-loaded", None)
        return Found(None, "missing", None)

    def _in(self, entry: str, owner: Image, name: str, machine: str) -> str | None:
        if entry == "":
            if self.cwd is None:  # the current directory of a process that is not this one: unknown
                return None
            entry = self.cwd
        folder = expand_origin(entry, self._origin(owner.path), owner.info.bits, machine)
        if folder is None:
            return None
        if self.sysroot is not None:
            if not posixpath.isabs(folder):
                return None  # relative to the image process's current directory, which is not known
            folder = self._rooted(folder)
        folder = posixpath.normpath(folder)
        for level in self.hwcaps:
            hit = self._listed(posixpath.join(folder, "glibc-hwcaps", level), name, machine)
            if hit:
                return hit
        return self._listed(folder, name, machine)

    def _rooted(self, path: str) -> str:
        """An absolute path as this loader opens it: unchanged on the host; under ``sysroot`` the image's
        path, normalised with ``..`` stopping at the image's ``/``, placed under the root."""
        root = self.sysroot
        if root is None:
            return path
        image = posixpath.normpath("/" + path.lstrip("/"))
        return root if image == "/" else root + image

    def _origin(self, host_path: str) -> str:
        """The folder ``$ORIGIN`` names for the file at ``host_path``: the image's path under ``sysroot``."""
        folder = posixpath.dirname(host_path)
        root = self.sysroot
        if root is None:
            return folder
        if folder == root or folder.startswith(root + "/"):
            return folder[len(root) :] or "/"
        return "/"

    def _listed(self, folder: str, name: str, machine: str) -> str | None:
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

    def _default_dirs(self, machine: str, bits: int) -> list[str]:
        triple = _MULTIARCH.get(machine)
        dirs = [f"/lib/{triple}", f"/usr/lib/{triple}"] if triple else []
        if bits == 64:
            dirs += ["/lib64", "/usr/lib64"]
        return [*dirs, "/lib", "/usr/lib"]


# x86-64 micro-architecture levels (the x86-64 psABI), by the CPU flags Linux reports in /proc/cpuinfo.
_V2 = frozenset({"cx16", "lahf_lm", "popcnt", "sse4_1", "sse4_2", "ssse3"})
_V3 = _V2 | {"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}
_V4 = _V3 | {"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"}


def hwcaps_levels(cpuinfo: str = "/proc/cpuinfo") -> tuple[str, ...]:
    """The ``glibc-hwcaps`` subfolders ld.so searches on this machine, best first: none before glibc 2.33
    or off x86-64 (other architectures' levels are not modelled), else every level the CPU supports."""
    import platform

    if platform.machine() not in ("x86_64", "AMD64"):
        return ()
    try:
        version = os.confstr("CS_GNU_LIBC_VERSION") or ""
    except (ValueError, OSError):
        return ()
    numbers = version.rpartition(" ")[2].split(".")
    if not version.startswith("glibc") or tuple(int(n) for n in numbers[:2] if n.isdigit()) < (2, 33):
        return ()
    flags: set[str] = set()
    try:
        with open(cpuinfo, encoding="ascii", errors="replace") as f:  # noqa: PTH123
            for line in f.read(1 << 20).splitlines():
                if line.startswith("flags"):
                    flags = set(line.partition(":")[2].split())
                    break
    except OSError:
        return ()
    return tuple(
        level for level, need in (("x86-64-v4", _V4), ("x86-64-v3", _V3), ("x86-64-v2", _V2)) if need <= flags
    )


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
