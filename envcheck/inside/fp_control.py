"""The floating-point control state of this process: flush-to-zero and denormals-are-zero, and who set it.

FTZ (results too small for a normal float become zero) and DAZ (subnormal inputs read as zero) live in the
thread's control register, MXCSR on x86-64 (bits 15 and 6) and FPCR on arm64 (FZ does both), and are
inherited by every thread started after they are set. One library can set them for the whole process:
GCC links ``crtfastmath.o`` into anything built with ``-ffast-math``, and its constructor
``set_fast_math`` turns both on as soon as the library is loaded (https://gcc.gnu.org/bugzilla/show_bug.cgi?id=55522),
so an unrelated extension changes torch's numerics.

The state is read by behaviour, not by reading the register: CPython's float arithmetic runs on the same
unit (SSE2 on x86-64, the FP/SIMD unit on arm64) and honours both bits, so no compiler, no executable
memory and no architecture table is needed, and what is recorded is exactly what arithmetic does here.
Which library set it is told where it can be: the state before ``import torch`` (``note_start``) against
the state after it, and the loaded libraries whose ELF symbol tables name ``set_fast_math``.
"""

import os
import struct
import sys

# 2**-1022, the smallest normal double, and 2**-1074, the smallest subnormal, from their bits: built at
# run time, so no compiler constant-folds the arithmetic below into the interpreter's own answer.
_MIN_NORMAL_BITS = 0x0010000000000000
_SMALLEST_SUBNORMAL_BITS = 0x0000000000000001
# A string table bigger than this is not read: the symbol is looked for in small libraries (a -ffast-math
# extension), and reading torch's own tables would cost more than the rest of the probe.
_MAX_STRTAB = 32 << 20
_MAX_SECTIONS_BYTES = 1 << 20
_SHT_SYMTAB = 2
_SHT_DYNSYM = 11
_FAST_MATH_SYMBOL = b"\x00set_fast_math\x00"

_start = None


def _double(bits):
    return struct.unpack("<d", struct.pack("<Q", bits))[0]


def fp_flags():
    # type: () -> dict
    """``{"flush_to_zero": bool, "denormals_are_zero": bool}`` of the calling thread, by behaviour.

    DAZ: ``2**-1022 + 2**-1074`` is the next double after ``2**-1022`` (exact, a normal result), unless the
    subnormal addend is read as zero. FTZ: ``2**-1022 / 3`` is a subnormal, inexact result: it is zero
    exactly when tiny results are flushed. Neither test depends on the other bit.
    """
    normal = _double(_MIN_NORMAL_BITS)
    subnormal = _double(_SMALLEST_SUBNORMAL_BITS)
    three = float(len("abc"))
    return {
        "flush_to_zero": (normal / three) == 0.0,
        "denormals_are_zero": (normal + subnormal) == normal,
    }


def note_start():
    """Remember the state before ``import torch`` (what the process started with)."""
    global _start  # noqa: PLW0603 - the one piece of state: the state before torch came in
    _start = fp_flags()


def fp_control(loaded):
    # type: (list | None) -> dict
    """The state now, when it was set, and the loaded libraries (paths in ``loaded``) that carry GCC's
    ``set_fast_math``. ``set_when``: ``"start-up"`` when it was already on at ``note_start`` (a library
    preloaded or linked into the interpreter, or a module imported by ``site``), ``"import torch"`` when it
    came on after it, ``None`` when it is off or ``note_start`` was not called."""
    now = fp_flags()
    on = now["flush_to_zero"] or now["denormals_are_zero"]
    set_when = None
    if on and _start is not None:
        was_on = _start["flush_to_zero"] or _start["denormals_are_zero"]
        set_when = "start-up" if was_on else "import torch"
    libraries = []
    if on:
        # Only when it is on: reading symbol tables costs, and an off state needs no culprit.
        libraries = [p for p in (loaded or []) if _has_fast_math_symbol(p)]
    out = {
        "flush_to_zero": now["flush_to_zero"],
        "denormals_are_zero": now["denormals_are_zero"],
        "set_when": set_when,
        "fast_math_libraries": libraries,
        "preloaded": _preloaded() if on else [],
        "method": "arithmetic",
    }
    if on:
        from .startup import customize_files

        # A start-up module that calls torch.set_flush_denormal: read as text, never run.
        out["customize"] = [c["path"] for c in customize_files() if "set_flush_denormal" in c["mentions"]]
    return out


def _preloaded():
    """The libraries LD_PRELOAD names (Linux, glibc: separated by spaces or colons), an entry that is a link
    as the file it resolves to: what the loader maps, and so what ``fast_math_libraries`` names."""
    if not sys.platform.startswith("linux"):
        return []
    value = os.environ.get("LD_PRELOAD") or ""
    return [os.path.realpath(p) if "/" in p else p for p in value.replace(":", " ").split() if p]


def _has_fast_math_symbol(path):
    # type: (str) -> bool
    """Whether the ELF file ``path`` names ``set_fast_math`` in its symbol tables (false when it cannot be
    read, is not ELF, is stripped, or its tables are larger than this module reads)."""
    try:
        with open(path, "rb") as f:
            return _scan_elf(f)
    except (OSError, ValueError, struct.error):
        return False


def _scan_elf(f):
    head = f.read(64)
    if len(head) < 52 or head[:4] != b"\x7fELF" or head[4] not in (1, 2) or head[5] not in (1, 2):
        return False
    wide = head[4] == 2
    order = "<" if head[5] == 1 else ">"
    if wide:
        (shoff,) = struct.unpack(order + "Q", head[0x28:0x30])
        shentsize, shnum = struct.unpack(order + "HH", head[0x3A:0x3E])
        layout, need = order + "IIQQQQI", 0x2C
    else:
        (shoff,) = struct.unpack(order + "I", head[0x20:0x24])
        shentsize, shnum = struct.unpack(order + "HH", head[0x2E:0x32])
        layout, need = order + "IIIIIII", 0x1C
    if not shoff or not shnum or shentsize < need or shnum * shentsize > _MAX_SECTIONS_BYTES:
        return False
    f.seek(shoff)
    table = f.read(shnum * shentsize)
    sections = []
    for i in range(len(table) // shentsize):
        fields = struct.unpack(layout, table[i * shentsize : i * shentsize + need])
        sections.append((fields[1], fields[4], fields[5], fields[6]))  # type, offset, size, link
    for kind, _offset, _size, link in sections:
        if kind not in (_SHT_SYMTAB, _SHT_DYNSYM) or link >= len(sections):
            continue
        _kind, str_offset, str_size, _link = sections[link]
        if str_size > _MAX_STRTAB:
            continue
        f.seek(str_offset)
        if _FAST_MATH_SYMBOL in b"\x00" + f.read(str_size):
            return True
    return False
