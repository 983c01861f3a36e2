"""Mach-O (macOS dylib / bundle, thin or fat): install name, LC_LOAD_DYLIB family, LC_RPATH, via macholib."""

from __future__ import annotations

from envcheck.native.binary import BinaryError, BinaryInfo, Needed


def read_macho(path: str) -> BinaryInfo:
    """The loader facts of the Mach-O file ``path`` (every architecture of a fat file, merged).
    Raises ``BinaryError`` when macholib cannot read it."""
    from macholib import mach_o
    from macholib.MachO import MachO

    try:
        macho = MachO(path)
    except (ValueError, KeyError) as e:  # macholib raises ValueError on unknown magic / bad headers
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
