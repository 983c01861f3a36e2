"""The oldest VC++ redistributable a Windows tree needs, and what the machine must provide, on the real torch
2.0.0, 2.13.0 and 2.14.1 Windows wheels with and without numpy 2.0.2: Microsoft's rule (at least the newest
MSVC toolset, the PE linker version, of any binary loading the machine's runtime), never the FileVersion of
numpy's private renamed msvcp140; VCRUNTIME140.dll and VCRUNTIME140_1.dll are python.exe's."""

from __future__ import annotations

import dataclasses
import os
import zipfile
from collections.abc import Sequence
from pathlib import Path

import pytest

from envcheck.manifest.native import NativeDependency, NativeNode
from envcheck.native.scan import scan_folder
from envcheck.native.vcruntime import vc_runtime_floor


def _node(key: str, linker: str | None, *deps: tuple[str, str, bool], owner: str = "pkg") -> NativeNode:
    return NativeNode(
        key=key,
        path=key,
        owner=owner,
        role="library",
        format="pe",
        linker_version=linker,
        dependencies=[
            NativeDependency(name=n, target=None, how="expected-on-machine", kind=k, delay_load=delay)  # type: ignore[arg-type]
            for n, k, delay in deps
        ],
    )


def test_the_newest_toolset_among_binaries_loading_the_machines_runtime_sets_the_floor() -> None:
    msvcp = ("MSVCP140.dll", "redistributable", False)
    nodes = [
        _node("pkg:b.dll", "14.29", msvcp),
        _node("pkg:a.dll", "14.38", msvcp),
        _node("pkg:c.dll", "14.44", ("VCRUNTIME140.dll", "interpreter", False)),  # python.exe's runtime
        _node("pkg:d.dll", "14.44", ("CONCRT140.dll", "redistributable", True)),  # delay-load only
        _node("pkg:e.dll", "14.44", ("msvcp140-1a2b.dll", "bundled", False)),  # its own renamed copy
        _node("pkg:f.dll", "2.30", msvcp),  # lld's own version: not an MSVC toolset
    ]
    floor = vc_runtime_floor(nodes)
    assert floor is not None
    assert (floor.version, floor.key) == ("14.38", "pkg:a.dll")
    assert floor.reason == "built with MSVC toolset 14.38 (PE linker version)"
    threads = _node("pkg:g.dll", "14.34", ("VCRUNTIME140_THREADS.dll", "redistributable", False))
    floor = vc_runtime_floor([*nodes, threads])
    assert floor is not None and (floor.version, floor.key) == ("14.40", "pkg:g.dll")
    assert "VCRUNTIME140_THREADS.dll, first in redistributable 14.40" in floor.reason
    assert vc_runtime_floor(nodes[2:]) is None
    # A program the tree ships with the same toolset does not take the floor from what an import loads.
    program = dataclasses.replace(_node("pkg:bin/a.exe", "14.38", msvcp), role="executable")
    floor = vc_runtime_floor([program, *nodes])
    assert floor is not None and floor.key == "pkg:a.dll"


def _cached(name: str) -> Path:
    from wine import need

    return need(name)


@pytest.fixture(scope="module")
def wheels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The native files of each cached Windows wheel, unpacked once."""
    out = {}
    root = tmp_path_factory.mktemp("winwheels")
    for name in ("torch-2.0.0", "torch-2.13.0", "torch-2.14.1", "numpy-2.0.2"):
        wheel = _cached(f"{name}-cp311-cp311-win_amd64.whl")
        folder = root / name
        with zipfile.ZipFile(wheel) as zf:
            for info in zf.infolist():
                if info.filename.lower().endswith((".dll", ".pyd")):
                    zf.extract(info, folder)
        out[name] = folder
    return out


def _site(wheels: dict[str, Path], names: Sequence[str], dest: Path) -> Path:
    for name in names:
        for f in wheels[name].rglob("*"):
            if f.is_file():
                target = dest / f.relative_to(wheels[name])
                target.parent.mkdir(parents=True, exist_ok=True)
                os.link(f, target)
    return dest


@pytest.mark.slow
@pytest.mark.parametrize(
    ("torch", "floor", "setter", "machine"),
    [
        ("torch-2.0.0", "14.34", "tree:functorch/_C.cp311-win_amd64.pyd", {"MSVCP140.dll"}),
        ("torch-2.13.0", "14.42", "tree:torch/lib/c10.dll", {"MSVCP140.dll", "MSVCP140_ATOMIC_WAIT.dll"}),
        (
            "torch-2.14.1",
            "14.42",
            "tree:torch/lib/c10.dll",
            {"MSVCP140.dll", "MSVCP140_ATOMIC_WAIT.dll", "VCRUNTIME140_THREADS.dll"},
        ),
    ],
)
@pytest.mark.parametrize("numpy", [False, True], ids=["torch", "torch+numpy"])
def test_real_windows_wheels(
    wheels: dict[str, Path],
    tmp_path: Path,
    torch: str,
    floor: str,
    setter: str,
    machine: set[str],
    numpy: bool,
) -> None:
    site = _site(wheels, [torch, *(["numpy-2.0.2"] if numpy else [])], tmp_path / "site")
    section = scan_folder(str(site), display_root=str(site))
    found = vc_runtime_floor(section.nodes or [])
    assert found is not None
    assert (found.version, found.key) == (floor, setter)
    assert found.reason == f"built with MSVC toolset {floor} (PE linker version)"
    requires = section.requires or []
    # What a machine without the redistributable really lacks: numpy's CONCRT140.dll is a delay-load import
    # of its own msvcp140 copy, and VCRUNTIME140*.dll lie beside python.exe.
    assert {r.name for r in requires if r.kind == "redistributable"} == machine
    assert {r.name for r in requires if r.kind == "interpreter"} >= {"VCRUNTIME140.dll", "VCRUNTIME140_1.dll"}
    if numpy:  # numpy 2.0.2's private msvcp140 copy states FileVersion 14.16.27033.0: never the minimum
        copy = next(n for n in section.nodes or [] if "msvcp140-" in n.key)
        assert copy.file_version == "14.16.27033.0" and found.key != copy.key
