"""Windows' loader, asked on the machine: the DLL a failed ``import torch`` could not load, and why.

The static tree (``ENV-NATIVE-MISSING``) predicts from files; this rule reads what the probe asked of the
loader itself after the import failed (``Manifest.windows.load_failure``, recorded by
``envcheck/target/windows_facts.py``): the import it finds nowhere, or the file it refuses, and the chain
from the DLL torch named down to it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import PureWindowsPath

from envcheck.diff.rules.base import single_rule
from envcheck.diff.rules.native import _shipped_by, reinstall
from envcheck.findings import Finding, Rule
from envcheck.manifest.model import DllLoadFailure, Manifest, VcRuntime

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
            floor, setter = vc_floor(failure)
            message = (
                f"{name}, needed by {needer}, {how}: the {VC_RUNTIME} is {vc_state(vc)}. {stops}, so "
                "import torch fails."
            )
            minimum = f", {floor} or newer ({setter} was built with MSVC {floor})" if floor else ""
            remedy = f"Install the {VC_RUNTIME}{minimum}: {VC_RUNTIME_INSTALL}."
        else:
            message = f"{name}, needed by {needer}, {how}. {stops}, so import torch fails."
            shippers = _shipped_by(m, [name])
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


def vc_state(vc: VcRuntime | None) -> str:
    """What the machine says of its VC++ runtime, in words: the redistributable's registry key and
    ``System32\\msvcp140.dll``."""
    if vc is None:
        return "not known here"
    if vc.registry is None:
        key = "not installed (no redistributable registry key"
    elif not vc.registry.installed:
        key = "not installed (its registry key says Installed=0"
    else:
        key = f"installed as {vc.registry.version or 'an unknown version'} (registry"
    if vc.msvcp140 is None:
        file = "no System32\\msvcp140.dll"
    else:
        file = f"System32\\msvcp140.dll {vc.msvcp140_version or 'without a version'}"
    return f"{key}; {file})"
