"""Reading one native file, whatever its format: the dispatch on magic bytes to the format's reader."""

# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
from collections.abc import Sequence

from envcheck.core.files import NotOpened, open_regular
from envcheck.native.elf import read_elf_file
from envcheck.native.macho import read_macho_file
from envcheck.native.pe import read_pe_file
from envcheck.native.records import BinaryError, BinaryInfo, Format, Needed

__all__ = ["BinaryError", "BinaryInfo", "Format", "Needed", "read_binary", "sniff"]


def sniff(head: bytes) -> Format | None:
    """The format by the first four bytes, or None for anything else."""
    if head == b"\x7fELF":
        return "elf"
    if head[:2] == b"MZ":
        return "pe"
    if head in _MACHO_MAGICS:
        return "macho"
    return None


_MACHO_MAGICS = {
    b"\xfe\xed\xfa\xce",
    b"\xce\xfa\xed\xfe",
    b"\xfe\xed\xfa\xcf",
    b"\xcf\xfa\xed\xfe",
    b"\xca\xfe\xba\xbe",  # fat (also Java class files; macholib tells them apart)
    b"\xbe\xba\xfe\xca",
}


def read_binary(path: str, *, inside: Sequence[str] | None = None) -> BinaryInfo:
    """Parse ``path`` with the reader for its format. Raises ``BinaryError`` with the reason when it is not a
    readable binary (empty, truncated, not native, unreadable, a directory, a symlink loop) or was refused
    unopened (a device, a FIFO, a socket; with ``inside``, the real paths of a scanned tree, a link leading
    out of it): see ``envcheck.core.files``."""
    try:
        fd = open_regular(path, inside=inside)
    except NotOpened as e:
        raise BinaryError(e.reason, refused=e.kind if e.kind != "directory" else None) from e
    except OSError as e:
        raise BinaryError(f"cannot read: {e.strerror or e}") from e
    with os.fdopen(fd, "rb") as f:
        try:
            size = os.fstat(fd).st_size
            if size == 0:
                raise BinaryError("empty file (0 bytes)")
            kind = sniff(f.read(4))
            f.seek(0)
        except OSError as e:
            raise BinaryError(f"cannot read: {e.strerror or e}") from e
        if kind is None:
            raise BinaryError("not an ELF, PE or Mach-O file")
        try:
            if kind == "elf":
                return read_elf_file(f)
            if kind == "pe":
                return read_pe_file(f)
            return read_macho_file(f, path)
        except BinaryError:
            raise
        except OSError as e:
            raise BinaryError(f"cannot read: {e.strerror or e}") from e
        except MemoryError as e:  # a parser asked for more than RLIMIT_AS allows: the file is a bomb
            raise BinaryError(f"malformed {kind.upper()} file: needs more memory than its size allows") from e
        except Exception as e:  # a malformed file can make any parser raise anything
            raise BinaryError(f"malformed {kind.upper()} file: {type(e).__name__}: {e}") from e
