"""The oldest VC++ 2015-2022 redistributable that satisfies a Windows tree, and the binary that sets it.

Microsoft's rule ("Microsoft Visual C++ Redistributable latest supported downloads"): the redistributable
must be at least as recent as the newest toolset that built any binary of the application that uses it.
For an MSVC-built PE file the toolset is its optional header's linker version (``14.42`` from
``link.exe`` 14.42, Visual Studio 2022 17.12). Only binaries that load the machine's runtime count: those
importing a redistributable DLL that the tree does not bundle. ``VCRUNTIME140.dll`` and
``VCRUNTIME140_1.dll`` ship beside python.exe (``oslibs.INTERPRETER_VC_RUNTIME``), and a bundled, renamed
copy (numpy's ``msvcp140-<hash>.dll``) is its owner's own runtime: neither says anything about the
machine's. A linker version whose major is not 14 is not MSVC's (LLVM's lld writes its own), and a DLL
name newer than the toolset floor raises it:

- ``VCRUNTIME140_THREADS.dll``: absent from msvc-runtime 14.34.31931, present in 14.40.33807 (the
  msvc-runtime wheels on the package index; there is none between them).

``MSVCP140_ATOMIC_WAIT.dll`` is in every msvc-runtime wheel there is (14.34 and later), so it sets no floor
of its own beyond the linker version of the file importing it (torch_python.dll: 14.42).
"""

# ruff: noqa: PTH119
# Paths stay strings: a node's path may be another platform's.

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from typing import NamedTuple

from envcheck.manifest.native import NativeNode

# The machine's runtime DLLs (what the redistributable installs into System32).
_MACHINE_DLL = re.compile(
    r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140_threads|concrt140|vccorlib140|vcomp140)\.dll$",
    re.I,
)
# DLL name -> the oldest redistributable that holds it, where that is newer than 14.0.
NAME_FLOORS = {"vcruntime140_threads.dll": (14, 40)}


class Floor(NamedTuple):
    """The minimum redistributable version (``14.42``), the node key of the binary that sets it, and why."""

    version: str
    key: str
    reason: str


def machine_runtime_dlls(node: NativeNode) -> list[str]:
    """The VC++ runtime DLLs ``node`` loads from the machine (not bundled in the tree, not python.exe's)."""
    out = []
    for d in node.dependencies or ():
        if d.delay_load or not _MACHINE_DLL.match(os.path.basename(d.name)):
            continue
        if d.kind in ("bundled", "distribution"):
            continue
        out.append(d.name)
    return out


def _linker(text: str | None) -> tuple[int, int] | None:
    m = re.fullmatch(r"(\d+)\.(\d+)", text or "")
    if m is None or int(m.group(1)) != 14:
        return None
    return int(m.group(1)), int(m.group(2))


def vc_runtime_floor(nodes: Sequence[NativeNode]) -> Floor | None:
    """The floor over every binary that loads the machine's VC++ runtime, or None when no binary does or
    none states an MSVC toolset. Ties go to what an import loads before a program the tree ships
    (``torch/lib/c10.dll`` before ``torch/bin/protoc.exe``), then to the first node key."""
    best: tuple[tuple[int, int], str, str] | None = None
    for n in sorted(nodes, key=lambda n: (n.role == "executable", n.key)):
        if n.owner == "system":
            continue
        dlls = machine_runtime_dlls(n)
        if not dlls:
            continue
        candidates: list[tuple[tuple[int, int], str]] = []
        linker = _linker(n.linker_version)
        if linker is not None:
            candidates.append(
                (linker, f"built with MSVC toolset {linker[0]}.{linker[1]} (PE linker version)")
            )
        for name in dlls:
            floor = NAME_FLOORS.get(os.path.basename(name).lower())
            if floor is not None:
                candidates.append((floor, f"imports {name}, first in redistributable {floor[0]}.{floor[1]}"))
        for version, reason in candidates:
            if best is None or version > best[0]:
                best = (version, n.key, reason)
    if best is None:
        return None
    return Floor(f"{best[0][0]}.{best[0][1]}", best[1], best[2])
