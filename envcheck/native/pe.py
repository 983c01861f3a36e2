"""PE (Windows DLL / .pyd): imports, delay-load imports, machine type and FileVersion, read with pefile.

Only the three data directories the loader question needs are parsed (``fast_load`` then
``parse_data_directories``): the import table, the delay-load import table, and the resource directory
for the version resource. Import *names* are read; imported symbols are not needed and not kept.
"""

from __future__ import annotations

import mmap
from typing import Any, BinaryIO

from envcheck.native.records import MAX_NEEDED_PER_BINARY, BinaryError, BinaryInfo, Needed, too_many_needed

# IMAGE_FILE_HEADER.Machine (Microsoft PE format: "Machine Types")
MACHINES = {
    0x14C: "x86",
    0x8664: "x86_64",
    0xAA64: "arm64",
    0x1C4: "arm",
    0xA641: "arm64ec",
}


def read_pe_file(f: BinaryIO) -> BinaryInfo:
    """The loader facts of an open regular PE file. pefile bounds its own loops by the data's length (import
    descriptors until the end of the data, ``MAX_IMPORT_SYMBOLS``, ``MAX_SECTIONS``, resource limits).
    Raises ``BinaryError`` when it is not a valid PE."""
    import pefile

    data = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    try:
        return _read(pefile, pefile.PE(data=data, fast_load=True))
    except pefile.PEFormatError as e:
        raise BinaryError(f"not a valid PE file: {e.value}") from e
    finally:
        data.close()


def _count_descriptors(pe: Any, index: int, size: int) -> int:
    """How many descriptors of data directory ``index`` (``size`` bytes each) precede the all-zero one that
    ends the table, counting no further than one past ``MAX_NEEDED_PER_BINARY``: read from the file's bytes,
    so a table of a million entries is refused before pefile builds an object for each."""
    directories = pe.OPTIONAL_HEADER.DATA_DIRECTORY
    if index >= len(directories) or not directories[index].VirtualAddress:
        return 0
    try:
        start = pe.get_offset_from_rva(directories[index].VirtualAddress)
    except Exception:  # an RVA in no section: pefile's own parse reports it
        return 0
    data = pe.__data__
    count = 0
    while count <= MAX_NEEDED_PER_BINARY:
        entry = data[start + count * size : start + (count + 1) * size]
        if len(entry) < size or not any(entry):
            break
        count += 1
    return count


def _read(pefile: Any, pe: Any) -> BinaryInfo:
    try:
        for index, size, what in ((1, 20, "import descriptors"), (13, 32, "delay-load import descriptors")):
            if _count_descriptors(pe, index, size) > MAX_NEEDED_PER_BINARY:
                raise too_many_needed(f"more than {MAX_NEEDED_PER_BINARY}", what)
        want = [
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"],
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_DELAY_IMPORT"],
            pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_RESOURCE"],
        ]
        pe.parse_data_directories(directories=want, import_dllnames_only=True)
        needed: list[Needed] = []
        seen: set[str] = set()
        for attr, delay in (("DIRECTORY_ENTRY_IMPORT", False), ("DIRECTORY_ENTRY_DELAY_IMPORT", True)):
            for entry in getattr(pe, attr, []) or []:
                raw = entry.dll
                if not raw:
                    continue
                name = raw.decode("ascii", "replace")
                if name.lower() in seen:
                    continue
                seen.add(name.lower())
                needed.append(Needed(name=name, delay_load=delay))
        machine_no = pe.FILE_HEADER.Machine
        bits = 64 if pe.OPTIONAL_HEADER.Magic == 0x20B else 32
        version = _file_version(pe)
        linker = f"{pe.OPTIONAL_HEADER.MajorLinkerVersion}.{pe.OPTIONAL_HEADER.MinorLinkerVersion}"
    finally:
        pe.close()
    return BinaryInfo(
        format="pe",
        machine=MACHINES.get(machine_no, f"pe-machine-{machine_no:#x}"),
        bits=bits,
        needed=tuple(needed),
        file_version=version,
        linker_version=linker,
    )


def _file_version(pe: object) -> str | None:
    """VS_FIXEDFILEINFO's FileVersion (``14.36.32532.0``), or the string table's, or None."""
    try:
        if not hasattr(pe, "DIRECTORY_ENTRY_RESOURCE"):
            return None
        fixed = getattr(pe, "VS_FIXEDFILEINFO", None)
        if fixed:
            info = fixed[0]
            ms, ls = info.FileVersionMS, info.FileVersionLS
            return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"
        for file_info in getattr(pe, "FileInfo", []) or []:
            for entry in file_info:
                for table in getattr(entry, "StringTable", []) or []:
                    value = table.entries.get(b"FileVersion")
                    if value:
                        return str(value.decode("utf-8", "replace"))
    except (AttributeError, IndexError, TypeError):  # a malformed version resource is only a missing fact
        return None
    return None
