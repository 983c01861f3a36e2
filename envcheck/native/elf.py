"""ELF: what ld.so reads from a shared object — DT_NEEDED, DT_SONAME, DT_RPATH / DT_RUNPATH, symbol-version
needs (``.gnu.version_r``) and definitions (``.gnu.version_d``), and the GNU build-id note.

Two readers with one result:

- ``read_elf_file`` walks the *program headers* the way ld.so does (PT_DYNAMIC, PT_LOAD to map addresses,
  PT_NOTE) over an ``mmap`` of the file, touching only the few pages it needs. libtorch_cpu.so is 430 MB;
  its dynamic segment is 1 KB.
- ``read_elf_reference`` does the same through pyelftools, the library made for ELF. It is the reference
  the fast reader is tested against on every real binary, and the fallback for a file the fast reader
  declines (no program headers). It is not the hot path because pyelftools builds its ``construct``
  structures per file: measured 9 ms per library, 1.2 s for the 134 libraries of the torch CUDA venv,
  8x the snapshot budget (docs/budgets.md).

Layouts: System V gABI, "Dynamic Section" and "Program Header"; symbol versioning: LSB Core, "Symbol
Versioning" (Elfxx_Verneed / Elfxx_Vernaux / Elfxx_Verdef / Elfxx_Verdaux).
"""

from __future__ import annotations

import functools
import mmap
import os
import re
import struct
from typing import BinaryIO

from envcheck.core.files import open_regular
from envcheck.native.records import MAX_NEEDED_PER_BINARY, BinaryError, BinaryInfo, Needed, too_many_needed

PT_LOAD, PT_DYNAMIC, PT_NOTE = 1, 2, 4
DT_NULL, DT_NEEDED, DT_STRTAB, DT_STRSZ, DT_SONAME, DT_RPATH, DT_RUNPATH = 0, 1, 5, 10, 14, 15, 29
DT_VERDEF, DT_VERDEFNUM, DT_VERNEED, DT_VERNEEDNUM = 0x6FFFFFFC, 0x6FFFFFFD, 0x6FFFFFFE, 0x6FFFFFFF
NT_GNU_BUILD_ID = 3
VER_FLG_BASE = 1
DT_FLAGS_1, DF_1_NODEFLIB = 0x6FFFFFFB, 0x800

MACHINES = {
    3: "x86",
    8: "mips",
    20: "ppc",
    21: "ppc64",
    22: "s390x",
    40: "arm",
    62: "x86_64",
    183: "aarch64",
    243: "riscv",
    258: "loongarch",
}

_VERSION = re.compile(r"^([A-Za-z][A-Za-z0-9_]*?)_(\d+(?:\.\d+)*)$")


def search_path(text: str) -> list[str]:
    """The elements of a DT_RPATH / DT_RUNPATH string. An empty element (``$ORIGIN/lib:``, ``:/opt``) is
    kept as ``""``: ld.so searches the process's current directory there (glibc ``fillin_rpath``)."""
    return text.split(":") if text else []


class _Declined(Exception):
    """The fast reader cannot handle this (valid) layout: use pyelftools."""


def read_elf_file(f: BinaryIO) -> BinaryInfo:
    """The loader facts of an open regular ELF file.

    Raises ``BinaryError`` (truncated, corrupt) or ``OSError``."""
    try:
        mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError as e:
        raise BinaryError("empty file (0 bytes)") from e
    try:
        return _read(mm)
    except _Declined:
        pass
    except (struct.error, IndexError) as e:
        raise BinaryError(f"truncated or corrupt ELF: {e}") from e
    finally:
        mm.close()
    f.seek(0)
    return _read_reference(f)


def _read(mm: mmap.mmap) -> BinaryInfo:
    size = len(mm)
    if size < 52:
        raise BinaryError(f"truncated ELF header ({size} bytes)")
    bits = {1: 32, 2: 64}.get(mm[4])
    end = {1: "<", 2: ">"}.get(mm[5])
    if bits is None or end is None:
        raise BinaryError("corrupt ELF identification (class or data encoding)")
    machine_no = struct.unpack_from(end + "H", mm, 18)[0]
    machine = MACHINES.get(machine_no, f"elf-machine-{machine_no}")
    if bits == 64:
        if size < 64:
            raise BinaryError(f"truncated ELF header ({size} bytes)")
        phoff = struct.unpack_from(end + "Q", mm, 32)[0]
        phentsize, phnum = struct.unpack_from(end + "HH", mm, 54)
        ph_fmt, dyn_fmt = end + "IIQQQQQQ", end + "qQ"
    else:
        phoff = struct.unpack_from(end + "I", mm, 28)[0]
        phentsize, phnum = struct.unpack_from(end + "HH", mm, 42)
        ph_fmt, dyn_fmt = end + "IIIIIIII", end + "iI"
    if phnum == 0:
        raise _Declined
    if phentsize < struct.calcsize(ph_fmt):
        raise BinaryError(f"corrupt ELF: program header entries of {phentsize} bytes")
    if phoff + phnum * phentsize > size:
        raise BinaryError("truncated ELF: program headers run past the end of the file")
    loads: list[tuple[int, int, int]] = []
    dynamic: tuple[int, int] | None = None
    notes: list[tuple[int, int, int]] = []
    for i in range(phnum):
        raw = struct.unpack_from(ph_fmt, mm, phoff + i * phentsize)
        if bits == 64:
            p_type, _flags, p_offset, p_vaddr, _paddr, p_filesz, _memsz, p_align = raw
        else:
            p_type, p_offset, p_vaddr, _paddr, p_filesz, _memsz, _flags, p_align = raw
        if p_type == PT_LOAD:
            loads.append((p_vaddr, p_filesz, p_offset))
        elif p_type == PT_DYNAMIC:
            dynamic = (p_offset, p_filesz)
        elif p_type == PT_NOTE:
            notes.append((p_offset, p_filesz, p_align))
    info: dict[str, object] = {"build_id": _build_id(mm, notes, end)}
    if dynamic is None:  # a static executable or a non-loadable object: nothing to resolve
        return BinaryInfo(format="elf", machine=machine, bits=bits, build_id=info["build_id"])  # type: ignore[arg-type]
    d_off, d_size = dynamic
    if d_off + d_size > size:
        raise BinaryError("truncated ELF: the dynamic segment runs past the end of the file")
    step = struct.calcsize(dyn_fmt)
    tags: list[tuple[int, int]] = []
    wanted = 0
    for pos in range(d_off, d_off + d_size - step + 1, step):
        tag, val = struct.unpack_from(dyn_fmt, mm, pos)
        if tag == DT_NULL:
            break
        if tag == DT_NEEDED:
            wanted += 1
            if wanted > MAX_NEEDED_PER_BINARY:
                raise too_many_needed(f"more than {MAX_NEEDED_PER_BINARY}", "DT_NEEDED entries")
        tags.append((tag, val))

    def offset(vaddr: int) -> int:
        for start, filesz, file_off in loads:
            if start <= vaddr < start + filesz:
                return vaddr - start + file_off
        raise BinaryError(f"corrupt ELF: address {vaddr:#x} is in no loadable segment")

    values = dict(tags)
    if DT_STRTAB not in values:
        raise BinaryError("corrupt ELF: dynamic segment without a string table")
    strtab = offset(values[DT_STRTAB])
    strsz = values.get(DT_STRSZ, size - strtab)

    # Every lookup is remembered, and the bytes searched for terminators are capped by the file's size:
    # thousands of entries naming offsets inside one long unterminated run would otherwise rescan it each
    # time (quadratic).
    strings: dict[int, str] = {}
    search_budget = [size + 65536]

    def string(at: int) -> str:
        known = strings.get(at)
        if known is not None:
            return known
        if at >= strsz:
            raise BinaryError("corrupt ELF: string offset outside the dynamic string table")
        start = strtab + at
        limit = min(strtab + strsz, size)
        stop = mm.find(b"\0", start, limit)
        search_budget[0] -= (stop if stop >= 0 else limit) - start + 1
        if search_budget[0] < 0:
            raise BinaryError("corrupt ELF: its string lookups read more bytes than the file holds")
        if stop < 0:
            raise BinaryError("truncated ELF: unterminated string in the dynamic string table")
        text = strings[at] = mm[start:stop].decode("utf-8", "replace")
        return text

    needed = tuple(Needed(name=string(v)) for t, v in tags if t == DT_NEEDED)
    soname = next((string(v) for t, v in tags if t == DT_SONAME), None)
    rpath = tuple(p for t, v in tags if t == DT_RPATH for p in search_path(string(v)))
    runpath = tuple(p for t, v in tags if t == DT_RUNPATH for p in search_path(string(v)))

    # Entries chain by relative offsets, so crafted ones can overlap and be visited again and again (every
    # Verneed pointing at one long Vernaux chain is quadratic: 25 s for a 64 KB file). Distinct entries are
    # at least 8 bytes (Elfxx_Verdaux), so a file of ``size`` bytes holds at most ``size // 8`` of them:
    # beyond that budget the walk is revisiting, and the file is corrupt.
    steps = _StepBudget(size // 8, "symbol version")
    needs: dict[str, str] = {}
    if DT_VERNEED in values:
        pos = offset(values[DT_VERNEED])
        for _ in range(values.get(DT_VERNEEDNUM, 0)):
            steps.take()
            _ver, cnt, _file, aux, nxt = struct.unpack_from(end + "HHIII", mm, pos)
            apos = pos + aux
            for _ in range(cnt):
                steps.take()
                _hash, _flags, _other, name, anext = struct.unpack_from(end + "IHHII", mm, apos)
                _keep_highest(needs, string(name))
                if anext == 0:
                    break
                apos += anext
            if nxt == 0:
                break
            pos += nxt
    provides: dict[str, str] = {}
    if DT_VERDEF in values:
        pos = offset(values[DT_VERDEF])
        for _ in range(values.get(DT_VERDEFNUM, 0)):
            steps.take()
            _ver, flags, _ndx, cnt, _hash, aux, nxt = struct.unpack_from(end + "HHHHIII", mm, pos)
            if cnt and not flags & VER_FLG_BASE:  # the base entry is the soname, not a version
                _keep_highest(provides, string(struct.unpack_from(end + "I", mm, pos + aux)[0]))
            if nxt == 0:
                break
            pos += nxt
    return BinaryInfo(
        format="elf",
        machine=machine,
        bits=bits,
        soname=soname,
        needed=needed,
        rpath=rpath,
        runpath=runpath,
        version_needs=needs,
        version_provides=provides,
        build_id=info["build_id"],  # type: ignore[arg-type]
        nodeflib=bool(values.get(DT_FLAGS_1, 0) & DF_1_NODEFLIB),
    )


class _StepBudget:
    """Counts entries walked through offsets read from the file; raises once more than it can hold."""

    __slots__ = ("left", "what")

    def __init__(self, limit: int, what: str) -> None:
        self.left = limit
        self.what = what

    def take(self) -> None:
        self.left -= 1
        if self.left < 0:
            raise BinaryError(f"corrupt ELF: more {self.what} entries than the file's size can hold")


def _build_id(mm: mmap.mmap, notes: list[tuple[int, int, int]], end: str) -> str | None:
    # Many PT_NOTE headers may name the same large region: the notes walked in all are capped by the size
    # of the file (each note header is 12 bytes), or 65535 headers over 1 MB of notes would be 10^9 steps.
    steps = _StepBudget(len(mm) // 12 + 1, "note")
    for n_off, n_size, align in notes:
        pad = 8 if align == 8 else 4
        pos, stop = n_off, min(n_off + n_size, len(mm))
        while pos + 12 <= stop:
            steps.take()
            namesz, descsz, ntype = struct.unpack_from(end + "III", mm, pos)
            name_at = pos + 12
            desc_at = name_at + _round(namesz, pad)
            if ntype == NT_GNU_BUILD_ID and mm[name_at : name_at + namesz] == b"GNU\0":
                return mm[desc_at : desc_at + descsz].hex()
            pos = desc_at + _round(descsz, pad)
    return None


@functools.lru_cache(maxsize=4096)
def _split_version(version_name: str) -> tuple[str, str] | None:
    m = _VERSION.match(version_name)
    return (m.group(1), m.group(2)) if m else None


def _round(n: int, to: int) -> int:
    return (n + to - 1) // to * to


def _keep_highest(into: dict[str, str], version_name: str) -> None:
    split = _split_version(version_name)
    if split is None:  # GLIBC_PRIVATE and version nodes that are not numbered
        return
    family, version = split
    old = into.get(family)
    if old is None or version_key(version) > version_key(old):
        into[family] = version


@functools.lru_cache(maxsize=4096)
def version_key(version: str) -> tuple[int, ...]:
    """``"2.34"`` -> ``(2, 34)``, for comparing symbol versions."""
    return tuple(int(p) for p in version.split(".") if p.isdigit())


def read_elf_reference(path: str) -> BinaryInfo:
    """The same facts through pyelftools (section headers). Raises ``BinaryError`` or pyelftools' errors."""
    with os.fdopen(open_regular(path), "rb") as f:
        return _read_reference(f)


_SHT_NOBITS, _SHT_GNU_VERDEF, _SHT_GNU_VERNEED = 8, 0x6FFFFFFD, 0x6FFFFFFE


def _check_sections(f: BinaryIO) -> None:
    """Bounds pyelftools' loops by the file's size before it runs: the section table and every section
    inside the file, and the symbol-version sections' entry counts no larger than their bytes can hold
    (pyelftools walks ``vn_cnt`` auxiliaries of each of ``sh_info`` entries through file offsets, the same
    quadratic trap as the fast reader's). Raises ``BinaryError``."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    head = f.read(64)
    if len(head) < 52:
        raise BinaryError(f"truncated ELF header ({len(head)} bytes)")
    end = {1: "<", 2: ">"}.get(head[5])
    bits = {1: 32, 2: 64}.get(head[4])
    if end is None or bits is None:
        raise BinaryError("corrupt ELF identification (class or data encoding)")
    if bits == 64:
        shoff = struct.unpack_from(end + "Q", head, 40)[0]
        shentsize, shnum = struct.unpack_from(end + "HH", head, 58)
        sh_fmt = end + "IIQQQQIIQQ"
    else:
        shoff = struct.unpack_from(end + "I", head, 32)[0]
        shentsize, shnum = struct.unpack_from(end + "HH", head, 46)
        sh_fmt = end + "IIIIIIIIII"
    if shoff == 0:
        return
    if shentsize != struct.calcsize(sh_fmt) or shoff + shentsize > size:
        raise BinaryError("corrupt ELF: section header table")
    f.seek(shoff)
    first = struct.unpack(sh_fmt, f.read(shentsize))
    count = shnum or first[5]  # e_shnum 0: the real count is section 0's sh_size (gABI, SHN_LORESERVE)
    if shoff + count * shentsize > size:
        raise BinaryError("corrupt ELF: the section header table runs past the end of the file")
    f.seek(shoff)
    table = f.read(count * shentsize)
    for i in range(count):
        _name, sh_type, _flags, _addr, sh_offset, sh_size, _link, sh_info, _align, _entsize = (
            struct.unpack_from(sh_fmt, table, i * shentsize)
        )
        if sh_type != _SHT_NOBITS and sh_offset + sh_size > size:
            raise BinaryError(f"truncated ELF: section {i} runs past the end of the file")
        if sh_type in (_SHT_GNU_VERNEED, _SHT_GNU_VERDEF):
            f.seek(sh_offset)
            _check_versions(f.read(sh_size), sh_info, end, verdef=sh_type == _SHT_GNU_VERDEF)


def _check_versions(data: bytes, count: int, end: str, *, verdef: bool) -> None:
    steps = _StepBudget(len(data) // 8, "symbol version")
    pos = 0
    for _ in range(count):
        steps.take()
        if verdef:
            _ver, _flags, _ndx, cnt, _hash, _aux, nxt = struct.unpack_from(end + "HHHHIII", data, pos)
        else:
            _ver, cnt, _file, _aux, nxt = struct.unpack_from(end + "HHIII", data, pos)
        for _ in range(cnt):
            steps.take()
        if nxt == 0:
            break
        pos += nxt


def _read_reference(f: BinaryIO) -> BinaryInfo:
    """pyelftools over an open file, its loops bounded first (``_check_sections``)."""
    from elftools.common.exceptions import ELFError
    from elftools.elf.dynamic import DynamicSection
    from elftools.elf.elffile import ELFFile
    from elftools.elf.gnuversions import GNUVerDefSection, GNUVerNeedSection
    from elftools.elf.sections import NoteSection

    try:
        _check_sections(f)
    except struct.error as e:
        raise BinaryError(f"truncated or corrupt ELF: {e}") from e
    f.seek(0)
    try:
        elf = ELFFile(f)
        needed: list[Needed] = []
        soname = None
        rpath: list[str] = []
        runpath: list[str] = []
        needs: dict[str, str] = {}
        provides: dict[str, str] = {}
        build_id = None
        nodeflib = False
        for sec in elf.iter_sections():
            if isinstance(sec, DynamicSection):
                for tag in sec.iter_tags():
                    kind = tag.entry.d_tag
                    if kind == "DT_NEEDED":
                        if len(needed) >= MAX_NEEDED_PER_BINARY:
                            raise too_many_needed(f"more than {MAX_NEEDED_PER_BINARY}", "DT_NEEDED entries")
                        needed.append(Needed(name=tag.needed))  # type: ignore[attr-defined]
                    elif kind == "DT_SONAME":
                        soname = tag.soname  # type: ignore[attr-defined]
                    elif kind == "DT_RPATH":
                        rpath += search_path(tag.rpath)  # type: ignore[attr-defined]
                    elif kind == "DT_FLAGS_1":
                        nodeflib = bool(tag.entry.d_val & DF_1_NODEFLIB)
                    elif kind == "DT_RUNPATH":
                        runpath += search_path(tag.runpath)  # type: ignore[attr-defined]
            elif isinstance(sec, GNUVerNeedSection):
                for _verneed, auxes in sec.iter_versions():
                    for aux in auxes:
                        _keep_highest(needs, aux.name)
            elif isinstance(sec, GNUVerDefSection):
                for verdef, auxes in sec.iter_versions():
                    if verdef["vd_flags"] & VER_FLG_BASE:
                        continue
                    first = next(iter(auxes), None)
                    if first is not None:
                        _keep_highest(provides, first.name)
            elif isinstance(sec, NoteSection) and build_id is None:
                for note in sec.iter_notes():
                    if note["n_type"] == "NT_GNU_BUILD_ID" and note["n_name"] == "GNU":
                        build_id = note["n_desc"]
        machine_no = elf.header["e_machine"]
    except ELFError as e:
        raise BinaryError(f"corrupt ELF: {e}") from e
    number = {"EM_386": 3, "EM_X86_64": 62, "EM_AARCH64": 183, "EM_ARM": 40, "EM_PPC64": 21}
    machine = MACHINES.get(number.get(machine_no, -1), str(machine_no))
    return BinaryInfo(
        format="elf",
        machine=machine,
        bits=elf.elfclass,
        soname=soname,
        needed=tuple(needed),
        rpath=tuple(rpath),
        runpath=tuple(runpath),
        version_needs=needs,
        version_provides=provides,
        build_id=build_id,
        nodeflib=nodeflib,
    )


# ------------------------------------------------------------------------------------- the C++ ABI

# Names of the dynamic string table that mangle a function of torch's C++ namespaces (``c10::``, ``at::``,
# ``torch::``, ``caffe2::``): what a file built against libtorch defines or leaves for libc10 to define.
_TORCH_SYMBOL = re.compile(rb"_ZNK?(?:3c10|2at|5torch|6caffe2)[0-9][\x21-\x7e]{0,4096}")
# A hostile file may hold a million such names: the scan reads at most this many bytes of its dynamic
# string table and looks at this many names, then says "unknown".
MAX_ABI_SCAN_BYTES = 32 * 2**20
MAX_ABI_NAMES = 100_000
# Names that hold ``Ss`` are parsed in Python (``_without_identifiers``): at most this many per file.
MAX_ABI_PARSED = 2_000


def mangled_cxx11_abi(name: bytes) -> bool | None:
    """The ``_GLIBCXX_USE_CXX11_ABI`` a mangled name was compiled with: True when it names a type of
    libstdc++'s ``std::__cxx11`` namespace (``NSt7__cxx1112basic_string…``: the new ``std::string``),
    False when it names the old ``std::string`` (the abbreviation ``Ss``, outside any identifier), None
    when it names no string (Itanium C++ ABI, "Mangling")."""
    if b"__cxx11" in name:
        return True
    return False if b"Ss" in _without_identifiers(name) else None


def _without_identifiers(name: bytes) -> bytes:
    """The mangled name without its source names (``3c10``, ``14torchCheckFail``), substitutions
    (``S0_``, ``T1_``) and literals (``Li5E``): what remains are the grammar's own codes, where ``Ss``
    can only mean ``std::string``."""
    out = bytearray()
    i, n = 0, len(name)
    while i < n:
        c = name[i]
        if (
            c in b"ST"
            and i + 1 < n
            and (name[i + 1] == 0x5F or 0x30 <= name[i + 1] <= 0x39 or 0x41 <= name[i + 1] <= 0x5A)
        ):
            j = i + 1
            while j < n and (0x30 <= name[j] <= 0x39 or 0x41 <= name[j] <= 0x5A):
                j += 1
            if j < n and name[j] == 0x5F:  # a substitution or template parameter: S_, S0_, T1_
                out += name[i : i + 1]
                i = j + 1
                continue
        if c == 0x4C and i + 1 < n and 0x61 <= name[i + 1] <= 0x7A:  # a literal: L <type> <value> E
            end = name.find(b"E", i)
            i = n if end < 0 else end + 1
            continue
        if 0x30 <= c <= 0x39:  # a source name: its length, then that many bytes
            j = i
            while j < n and 0x30 <= name[j] <= 0x39:
                j += 1
            i = j + int(name[i:j])
            continue
        out.append(c)
        i += 1
    return bytes(out)


def cxx11_abi(path: str, *, undefined: bool = True, inside: tuple[str, ...] | None = None) -> bool | None:
    """The C++ ABI ``path`` was built with, from the dynamic symbols whose mangled names are functions of
    torch's namespaces: True (``_GLIBCXX_USE_CXX11_ABI=1``), False (``=0``), None when none says (or the
    file cannot be read). ``undefined``: only the symbols the file leaves for torch's libraries to define
    (what an extension calls); otherwise any (libc10's own exports). The first symbol that tells decides.

    Bounded for hostile files: at most ``MAX_ABI_SCAN_BYTES`` of the dynamic string table, ``MAX_ABI_NAMES``
    names, ``MAX_ABI_PARSED`` of them parsed in Python, ``MAX_ABI_SYMBOLS`` symbol table entries."""
    try:
        with os.fdopen(open_regular(path, inside=inside), "rb") as f:
            try:
                mm = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
            except ValueError:
                return None
            try:
                return _cxx11_abi(mm, undefined)
            finally:
                mm.close()
    except (OSError, ValueError, struct.error, BinaryError):
        return None


# Entries of a dynamic symbol table read at most (24 bytes each for ELF64): beyond, "unknown".
MAX_ABI_SYMBOLS = 1_000_000
_SHT_DYNSYM = 11


def _cxx11_abi(mm: mmap.mmap, undefined: bool) -> bool | None:
    table = _dynamic_symbols(mm)
    if table is None:
        return None
    sym_off, sym_size, entsize, str_off, str_size, fmt, shndx_at = table
    stop = min(str_off + str_size, str_off + MAX_ABI_SCAN_BYTES, len(mm))
    telling: dict[int, bool] = {}  # string table offset of a telling name -> its ABI
    parsed = 0
    for count, match in enumerate(_TORCH_SYMBOL.finditer(mm, str_off, stop)):
        if count >= MAX_ABI_NAMES or parsed >= MAX_ABI_PARSED:
            break
        name = match.group()
        abi: bool | None = None
        if b"__cxx11" in name:
            abi = True
        elif b"Ss" in name:
            parsed += 1
            abi = mangled_cxx11_abi(name)
        if abi is None:
            continue
        if not undefined:
            return abi
        telling.setdefault(match.start() - str_off, abi)
    if not telling:
        return None
    count = min(sym_size // entsize, MAX_ABI_SYMBOLS)
    if entsize == struct.calcsize(fmt):
        entries = struct.iter_unpack(fmt, mm[sym_off : sym_off + count * entsize])
    else:
        entries = (struct.unpack_from(fmt, mm, sym_off + i * entsize) for i in range(count))
    for entry in entries:
        if entry[shndx_at] == 0 and entry[0] in telling:  # SHN_UNDEF: another library defines it
            return telling[entry[0]]
    return None


def _dynamic_symbols(mm: mmap.mmap) -> tuple[int, int, int, int, int, str, int] | None:
    """The dynamic symbol table through the section headers: ``(offset, size, entry size, string table
    offset, string table size, struct format of an entry, index of st_shndx in it)``; None when the file
    has none (or its headers do not fit in it)."""
    size = len(mm)
    if size < 64 or mm[:4] != b"\x7fELF":
        return None
    bits = {1: 32, 2: 64}.get(mm[4])
    end = {1: "<", 2: ">"}.get(mm[5])
    if bits is None or end is None:
        return None
    if bits == 64:
        shoff = struct.unpack_from(end + "Q", mm, 40)[0]
        shentsize, shnum = struct.unpack_from(end + "HH", mm, 58)
        sh_fmt, sym_fmt, shndx_at = end + "IIQQQQIIQQ", end + "IBBHQQ", 3
    else:
        shoff = struct.unpack_from(end + "I", mm, 32)[0]
        shentsize, shnum = struct.unpack_from(end + "HH", mm, 46)
        sh_fmt, sym_fmt, shndx_at = end + "IIIIIIIIII", end + "IIIBBH", 5
    if shoff == 0 or shentsize != struct.calcsize(sh_fmt) or shoff + shnum * shentsize > size:
        return None
    for i in range(shnum):
        _name, sh_type, _flags, _addr, offset, length, link, _info, _align, entsize = struct.unpack_from(
            sh_fmt, mm, shoff + i * shentsize
        )
        if sh_type != _SHT_DYNSYM:
            continue
        if entsize < struct.calcsize(sym_fmt) or offset + length > size or link >= shnum:
            return None
        strings = struct.unpack_from(sh_fmt, mm, shoff + link * shentsize)
        str_off, str_size = strings[4], strings[5]
        if str_off + str_size > size:
            return None
        return offset, length, entsize, str_off, str_size, sym_fmt, shndx_at
    return None
