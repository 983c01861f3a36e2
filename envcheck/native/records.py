"""What a reader extracts from one native file, whatever its format (the readers' common vocabulary: they
import it from here, and ``binary`` dispatches to them, so nothing imports back)."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Literal, NamedTuple

# NamedTuples, not dataclasses, for the per-file records: they are built in a hot loop and each dataclass
# definition costs ~2 ms of import time, which envcheck snapshot pays on every run (docs/budgets.md).
_NO_VERSIONS: Mapping[str, str] = MappingProxyType({})

Format = Literal["elf", "pe", "macho"]

# Libraries one binary may ask for (ELF DT_NEEDED, PE import and delay-import descriptors). Real ones ask
# for a few dozen (torch_cpu.dll: 40 with the API sets, libtorch_cuda.so: 30); a file's own size bounds the
# count too (16 bytes per DT_NEEDED, 20 per import descriptor). Past the limit the file is refused, unread:
# each entry would become a record of the tree (1 M DT_NEEDED entries took 1.36 GB).
MAX_NEEDED_PER_BINARY = 4096


def too_many_needed(count: str, what: str) -> BinaryError:
    """The refusal of a file asking for more libraries than ``MAX_NEEDED_PER_BINARY``."""
    return BinaryError(
        f"{count} {what}, over the limit of {MAX_NEEDED_PER_BINARY} libraries one binary may need: not read"
    )


class BinaryError(Exception):
    """The file cannot be read as a native binary; the message is the reason recorded in the tree.
    ``refused`` names why a file was never opened (``not-regular``, ``link-outside``, ``link-loop``)."""

    def __init__(self, reason: str, *, refused: str | None = None) -> None:
        super().__init__(reason)
        self.refused = refused


class Needed(NamedTuple):
    """One library a binary asks its loader for."""

    name: str
    delay_load: bool = False
    weak: bool = False


class BinaryInfo(NamedTuple):
    """The loader-relevant header facts of one binary."""

    format: Format
    machine: str
    bits: int
    soname: str | None = None
    needed: tuple[Needed, ...] = ()
    rpath: tuple[str, ...] = ()
    runpath: tuple[str, ...] = ()
    version_needs: Mapping[str, str] = _NO_VERSIONS
    version_provides: Mapping[str, str] = _NO_VERSIONS
    build_id: str | None = None
    file_version: str | None = None
    nodeflib: bool = False  # ELF DF_1_NODEFLIB: no ld.so.cache, no default folders
    linker_version: str | None = None  # PE optional header Major.MinorLinkerVersion (MSVC: the toolset)
