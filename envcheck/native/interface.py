"""The resolver interface: one implementation per platform loader (``linux``, ``windows``, ``macos``)."""

# ruff: noqa: PTH113, PTH119
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import NamedTuple

from envcheck.manifest.native import Resolution
from envcheck.native.records import BinaryInfo, Needed


class Image(NamedTuple):
    """A binary the loader has mapped (or would map): where it is and what its headers say."""

    path: str
    info: BinaryInfo


class Found(NamedTuple):
    """Where one needed library resolves (``path`` None: not found) and by which loader rule."""

    path: str | None
    how: Resolution
    via: str | None = None


# Reads a candidate's headers (cached by the walker); None when it is not a readable binary.
Probe = Callable[[str], BinaryInfo | None]


class Resolver(ABC):
    """Resolves the needed libraries of one image the way one platform's loader would.

    ``host`` true: resolve against this machine (a snapshot); false: only inside the scanned tree, so a
    library outside it is ``expected-on-machine`` (``envcheck scan`` of a wheel for any platform).
    """

    loader: str

    def __init__(self, *, host: bool, probe: Probe) -> None:
        self.host = host
        self.probe = probe
        # name a file is known by once loaded (ELF soname, DLL file name) -> path, for the roots of the walk
        self.sonames: dict[str, str] = {}

    def register(self, path: str, info: BinaryInfo) -> None:
        """Remember ``path`` as a library that may already be loaded when another one asks for it."""
        self.sonames.setdefault(info.soname or os.path.basename(path), path)

    def register_root(self, path: str, info: BinaryInfo) -> None:
        """A root file of the walk, known before resolving: ld.so's already-loaded fallback (the CUDA
        libraries torch preloads by soname). Windows does not count it (``WindowsResolver``)."""
        self.register(path, info)

    @abstractmethod
    def resolve(self, needed: Needed, importer: Image, chain: Sequence[Image], root: Image) -> Found:
        """Resolve ``needed`` for ``importer``; ``chain`` lists the images that loaded it, nearest first
        (ending with the executable when known); ``root`` is the file the load started from."""

    def is_file(self, path: str) -> bool:
        return os.path.isfile(path)
