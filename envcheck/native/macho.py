"""Mach-O (macOS dylib / bundle, thin or fat): install name, LC_LOAD_DYLIB family, LC_RPATH, via macholib."""

# ruff: noqa: PTH120

from __future__ import annotations

import os
import struct
from typing import BinaryIO

from envcheck.native.records import BinaryError, BinaryInfo, Needed

# Real fat files hold a handful of architectures; dyld and lipo know about a dozen CPU types.
MAX_FAT_ARCHS = 64
# Load commands per image: real dylibs have tens to a few hundred; each one is an object in macholib.
MAX_LOAD_COMMANDS = 65_536
FAT_MAGIC, FAT_MAGIC_64 = 0xCAFEBABE, 0xCAFEBABF
_THIN = {
    b"\xfe\xed\xfa\xce": (">", 28),
    b"\xce\xfa\xed\xfe": ("<", 28),
    b"\xfe\xed\xfa\xcf": (">", 32),
    b"\xcf\xfa\xed\xfe": ("<", 32),
}


def check_layout(f: BinaryIO) -> None:
    """Bounds what macholib will build by the file's size, before it runs: a fat header's architecture
    count by the bytes its table takes (``fat_arch`` is 20 bytes, ``fat_arch_64`` 32), each architecture
    inside the file and none overlapping another, and each image's load-command count by ``sizeofcmds``
    (a load command is at least 8 bytes). macholib builds one object per claimed entry: a fat header
    claiming 10^6 architectures took 4 GB. Raises ``BinaryError``."""
    size = os.fstat(f.fileno()).st_size
    f.seek(0)
    head = f.read(8)
    if len(head) < 8:
        raise BinaryError(f"truncated Mach-O header ({len(head)} bytes)")
    magic, count = struct.unpack(">II", head)
    if magic not in (FAT_MAGIC, FAT_MAGIC_64):
        _check_image(f, 0, size)
        return
    entry = 20 if magic == FAT_MAGIC else 32
    if count == 0 or count > MAX_FAT_ARCHS or 8 + count * entry > size:
        # Java class files share 0xCAFEBABE; their second word is the class-file version (45..70).
        raise BinaryError(
            f"not a valid Mach-O file: a fat header claiming {count} architectures "
            f"({8 + count * entry} bytes of table) in a file of {size} bytes (at most {MAX_FAT_ARCHS})"
        )
    table = f.read(count * entry)
    fmt = ">iiIII" if magic == FAT_MAGIC else ">iiQQII"
    spans = sorted(struct.unpack_from(fmt, table, i * entry)[2:4] for i in range(count))
    last_end = 8 + count * entry
    for offset, length in spans:
        if offset < last_end or offset + length > size:
            raise BinaryError("not a valid Mach-O file: fat architectures overlap or run past the end")
        last_end = offset + length
    for offset, length in spans:
        _check_image(f, offset, length)


def _check_image(f: BinaryIO, offset: int, length: int) -> None:
    f.seek(offset)
    head = f.read(32)
    layout = _THIN.get(head[:4])
    if layout is None:
        return  # macholib names the unknown magic
    end, header_size = layout
    if len(head) < header_size:
        raise BinaryError("truncated Mach-O header")
    ncmds, sizeofcmds = struct.unpack_from(end + "II", head, 16)
    if header_size + sizeofcmds > length or ncmds > min(sizeofcmds // 8, MAX_LOAD_COMMANDS):
        raise BinaryError(
            f"not a valid Mach-O file: {ncmds} load commands in {sizeofcmds} bytes of a {length}-byte image"
        )


def read_macho_file(f: BinaryIO, path: str) -> BinaryInfo:
    """The loader facts of an open regular Mach-O file; ``path`` is only its name. Raises ``BinaryError``."""
    from macholib import mach_o
    from macholib.MachO import MachO

    check_layout(f)
    f.seek(0)
    # MachO(path) would open the path again (a second open, racing the check): build it over this file.
    macho = MachO.__new__(MachO)
    macho.graphident = macho.filename = path
    macho.loader_path = os.path.dirname(path)
    macho.fat = None
    macho.headers = []
    macho.allow_unknown_load_commands = False
    try:
        macho.load(f)
    except (ValueError, KeyError, struct.error) as e:  # macholib: ValueError on unknown magic / headers
        raise BinaryError(f"not a valid Mach-O file: {e}") from e
    if not macho.headers:
        raise BinaryError("Mach-O file without an architecture")
    kinds = {
        mach_o.LC_LOAD_DYLIB: {},
        mach_o.LC_LOAD_WEAK_DYLIB: {"weak": True},
        mach_o.LC_REEXPORT_DYLIB: {},
        mach_o.LC_LAZY_LOAD_DYLIB: {"delay_load": True},
        mach_o.LC_LOAD_UPWARD_DYLIB: {},
    }
    machines: list[str] = []
    needed: dict[str, Needed] = {}
    rpaths: list[str] = []
    install_name = None
    bits = 64
    for header in macho.headers:
        cputype = header.header.cputype
        machines.append(_arch(mach_o, cputype))
        bits = 64 if cputype & 0x01000000 else 32
        for load_cmd, cmd, data in header.commands:
            kind = load_cmd.cmd
            if kind in kinds:
                name = _text(data)
                needed.setdefault(name, Needed(name=name, **kinds[kind]))
            elif kind == mach_o.LC_ID_DYLIB:
                install_name = _text(data)
            elif kind == mach_o.LC_RPATH:
                # LC_RPATH's path is after the rpath_command, like a dylib name.
                rpath = _text(data)
                if rpath not in rpaths:
                    rpaths.append(rpath)
            del cmd
    return BinaryInfo(
        format="macho",
        machine="+".join(sorted(set(machines))),
        bits=bits,
        soname=install_name,
        needed=tuple(needed.values()),
        rpath=tuple(rpaths),
    )


def _text(data: bytes) -> str:
    return data.split(b"\0", 1)[0].decode("utf-8", "replace")


def _arch(mach_o: object, cputype: int) -> str:
    names = {7: "x86", 0x01000007: "x86_64", 12: "arm", 0x0100000C: "arm64", 0x0200000C: "arm64_32"}
    return names.get(cputype, f"macho-cpu-{cputype}")
