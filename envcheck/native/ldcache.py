"""``/etc/ld.so.cache``, read directly (glibc's ``elf/cache.c`` / ``sysdeps/generic/dl-cache.h`` format).

Measured here (543 entries): parsing the file 1.6 ms, one ``ldconfig -p`` 1.7 ms; the file wins because
it needs no process (there may be no ``ldconfig`` on PATH) and keeps the architecture flags that ld.so
checks. The file has an optional old-format part (``ld.so-1.7.0``)
followed by the new format (``glibc-ld.so.cache1.1``): a header, ``nlibs`` entries of
``{int32 flags; uint32 key; uint32 value; uint32 osversion; uint64 hwcap}`` whose string offsets count
from the start of the new-format header.
"""

from __future__ import annotations

import struct

from envcheck.core.files import NotOpened, read_capped

# A real cache is 20-200 KiB (one entry per library the system has; a large CUDA host's ~1 MiB). One past
# this is no cache ld.so made: read as none (an image's file is untrusted; a FIFO or device is never read).
MAX_CACHE_BYTES = 16 << 20
OLD_MAGIC = b"ld.so-1.7.0"
NEW_MAGIC = b"glibc-ld.so.cache1.1"

# dl-cache.h: FLAG_ELF_LIBC6 with the architecture bits ld.so checks (_DL_CACHE_DEFAULT_ID).
FLAG_TYPE_MASK = 0x00FF
FLAG_REQUIRED_MASK = 0xFF00
FLAG_ELF_LIBC6 = 0x0003
_ARCH_FLAGS = {
    "x86_64": 0x0300,  # FLAG_X8664_LIB64
    "aarch64": 0x0A00,  # FLAG_AARCH64_LIB64
    "ppc64": 0x0500,  # FLAG_POWERPC_LIB64
    "s390x": 0x0400,  # FLAG_S390_LIB64
    "riscv": 0x1000,  # FLAG_RISCV_FLOAT_ABI_DOUBLE (rv64 lp64d)
    "x86": 0x0000,
    "arm": 0x0900,  # FLAG_ARM_LIBHF
}


def read_ld_cache(path: str = "/etc/ld.so.cache") -> dict[str, dict[int, str]]:
    """``{soname: {arch flags: path}}`` keeping the first entry per name and flags, as ld.so's lookup
    prefers the earlier one. An absent, unreadable or oversized cache is empty (musl has none), and so is
    one that is not a regular file."""
    try:
        data = read_capped(path, MAX_CACHE_BYTES)
    except (OSError, NotOpened):
        return {}
    if len(data) > MAX_CACHE_BYTES:
        return {}
    start = data.find(NEW_MAGIC)
    if start < 0:
        return {}
    try:
        nlibs, _len_strings = struct.unpack_from("<II", data, start + 20)
        entries_at = start + 48  # magic(20) nlibs len_strings flags(1)+pad(3) extension_offset unused[3]
        out: dict[str, dict[int, str]] = {}
        for i in range(nlibs):
            flags, key, value, _os, _hwcap = struct.unpack_from("<iIIIQ", data, entries_at + 24 * i)
            name = _cstr(data, start + key)
            full = _cstr(data, start + value)
            out.setdefault(name, {}).setdefault(flags, full)
        return out
    except struct.error:
        return {}


def cache_lookup(cache: dict[str, dict[int, str]], name: str, machine: str) -> str | None:
    """The path ld.so would take from the cache for ``name`` on ``machine``, or None."""
    options = cache.get(name)
    if not options:
        return None
    want = FLAG_ELF_LIBC6 | _ARCH_FLAGS.get(machine, 0)
    for flags, full in options.items():
        if flags & (FLAG_TYPE_MASK | FLAG_REQUIRED_MASK) == want:
            return full
    return None


def _cstr(data: bytes, at: int) -> str:
    end = data.index(b"\0", at)
    return data[at:end].decode("utf-8", "replace")
