"""Windows' loader, asked on the machine: the DLL a failed ``import torch`` could not load, and why.

The static tree (``ENV-NATIVE-MISSING``) predicts from files; this rule reads what the probe asked of the
loader itself after the import failed (``Manifest.windows.load_failure``, recorded by
``envcheck/inside/windows_facts.py``): the import it finds nowhere, or the file it refuses, and the chain
from the DLL torch named down to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PureWindowsPath

from envcheck.core.findings import Finding, Rule
from envcheck.diff.rules.base import single_rule
from envcheck.diff.rules.loader import reinstall, shipped_by
from envcheck.manifest.model import DllLoadFailure, Manifest
from envcheck.manifest.query import vc_state

FAMILY = "native tree"

VC_RUNTIME = "Microsoft Visual C++ 2015-2022 Redistributable (x64)"
VC_RUNTIME_DLL = re.compile(
    r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140(_1|_threads)?|concrt140|vccorlib140|vcomp140)"
    r"\.dll$",
    re.I,
)
# Microsoft's installer of the current redistributable, and the package id winget knows it by.
VC_RUNTIME_INSTALL = (
    "`winget install --exact --id Microsoft.VCRedist.2015+.x64` "
    "(or the installer https://aka.ms/vs/17/release/vc_redist.x64.exe)"
)


def _name(path: str) -> str:
    return PureWindowsPath(path).name


@single_rule(
    "ENV-WIN-DLL-NOT-FOUND",
    family=FAMILY,
    severity="error",
    title="Windows' loader cannot load a DLL that torch's import needs",
    why=(
        "'OSError: [WinError 126] ... Error loading \"...\\torch\\lib\\c10.dll\" or one of its dependencies' "
        "names the DLL torch loads, not the one missing: asked import by import, the loader names it "
        "(MSVCP140.dll: the VC++ redistributable is not installed)."
    ),
    fm=("FM-02", "FM-03"),
    evidence=("pytorch/pytorch#131662", "pytorch/pytorch#125109"),
)
def dll_not_found(rule: Rule, m: Manifest) -> Iterator[Finding]:
    failure = m.windows.load_failure if m.windows is not None else None
    if failure is None:
        return
    vc = m.windows.vc_runtime if m.windows is not None else None
    seen: set[str] = set()
    entries = [(d.name, d.needed_by, None, None) for d in failure.missing] + [
        (d.name, d.needed_by, d.path, d.error) for d in failure.refused
    ]
    for name, needed_by, path, error in entries:
        if name.lower() in seen:
            continue
        seen.add(name.lower())
        needer = _name(needed_by)
        how = "is found nowhere the loader looks" if path is None else f"is at {path} but does not load"
        if path is not None and error is not None:
            how += f" (error {error})"
        stops = f"Windows stops loading {_name(failure.dll)} there"
        if VC_RUNTIME_DLL.match(name):
            floor = runtime_floor(m)
            message = (
                f"{name}, needed by {needer}, {how}: the {VC_RUNTIME} is {vc_state(vc)}. {stops}, so "
                "import torch fails."
            )
            minimum = f", {floor[0]} or newer ({floor[1]})" if floor else ""
            remedy = f"Install the {VC_RUNTIME}{minimum}: {VC_RUNTIME_INSTALL}."
        else:
            message = f"{name}, needed by {needer}, {how}. {stops}, so import torch fails."
            shippers = shipped_by(m, [name])
            remedy = (
                f"Reinstall what ships {name}: {reinstall(m, shippers)}."
                if shippers
                else f"Install what provides {name}, or reinstall the package that should bundle it."
            )
        yield rule.finding(
            name,
            message,
            remedy,
            target=f"{_name(failure.dll)}: {name} " + ("not found" if path is None else f"refused ({path})"),
        )


def runtime_floor(m: Manifest) -> tuple[str, str] | None:
    """The lowest VC++ redistributable the environment's binaries accept and why (``("14.42",
    "torch:torch/lib/c10.dll: built with MSVC toolset 14.42 (PE linker version)")``): over the native tree
    (``envcheck.native.vcruntime``), else over the loader's chain after a failed import; None when neither
    states an MSVC toolset."""
    # Lazy: envcheck.native loads the native scanners, which a diff of two files never runs.
    from envcheck.native.vcruntime import vc_runtime_floor

    floor = vc_runtime_floor(m.native.nodes or []) if m.native is not None else None
    if floor is not None:
        return floor.version, f"{floor.key}: {floor.reason}"
    failure = m.windows.load_failure if m.windows is not None else None
    version, setter = vc_floor(failure) if failure is not None else (None, None)
    if version is None:
        return None
    return version, f"{setter}: built with MSVC toolset {version} (PE linker version)"


def vc_floor(failure: DllLoadFailure) -> tuple[str | None, str | None]:
    """The lowest VC++ runtime the loader's chain accepts, and the file that sets it: Microsoft's rule is a
    redistributable at least as recent as the newest toolset that built any of the binaries, and an MSVC
    binary's PE linker version is its toolset (``14.42``). Non-MSVC links (GNU ld) say nothing of it."""
    best: tuple[tuple[int, int], str] | None = None
    for link in failure.chain:
        found = re.fullmatch(r"(\d+)\.(\d+)", link.linker or "")
        if found is None or found.group(1) != "14":
            continue
        version = (int(found.group(1)), int(found.group(2)))
        if best is None or version > best[0]:
            best = (version, link.name)
    if best is None:
        return None, None
    return f"{best[0][0]}.{best[0][1]}", best[1]


def _version(text: str | None) -> tuple[int, ...] | None:
    parts = re.findall(r"\d+", text or "")[:4]
    return tuple(int(p) for p in parts) if parts else None


@single_rule(
    "ENV-WIN-VC-RUNTIME-OLD",
    family=FAMILY,
    severity="error",
    title="the machine's VC++ runtime is older than the toolset that built the environment's DLLs",
    why=(
        "Microsoft's rule: the redistributable must be at least as recent as the newest MSVC toolset that "
        "built any binary using it. torch's DLLs (MSVC 14.42 for 2.13.0) fault in their start-up code with "
        "an older msvcp140: 'WinError 998' or '1114' loading c10.dll, or a crash at import."
    ),
    fm=("FM-02", "FM-03"),
    evidence=("pytorch/pytorch#131662",),
)
def vc_runtime_old(rule: Rule, m: Manifest) -> Iterator[Finding]:
    vc = m.windows.vc_runtime if m.windows is not None else None
    if vc is None or vc.msvcp140 is None:
        return  # no runtime at all: what fails to load is ENV-WIN-DLL-NOT-FOUND's
    installed = vc.msvcp140_version
    source = "System32\\msvcp140.dll"
    if installed is None and vc.registry is not None and vc.registry.installed:
        installed, source = vc.registry.version, "the redistributable's registry key"
    have = _version(installed)
    floor = runtime_floor(m)
    need = _version(floor[0]) if floor is not None else None
    if have is None or floor is None or need is None or have[:2] >= need[:2]:
        return
    failure = m.windows.load_failure if m.windows is not None else None
    seen = (
        f" Loading {_name(failure.dll)} fails with error {failure.error} though every import it has loads."
        if failure is not None and failure.error is not None and not failure.missing and not failure.refused
        else ""
    )
    yield rule.finding(
        "VC++ runtime",
        f"The {VC_RUNTIME} on this machine is {installed} ({source}), older than {floor[0]}, the newest MSVC "
        f"toolset of the environment's binaries ({floor[1]}).{seen}",
        f"Install the {VC_RUNTIME}, {floor[0]} or newer: {VC_RUNTIME_INSTALL}.",
        base=f">= {floor[0]}",
        target=installed,
    )
