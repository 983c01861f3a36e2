"""The Linux load model against ld.so itself (``ldd``): a library under ``glibc-hwcaps/x86-64-v3/`` beside a
plain copy, and a RUNPATH with an empty element (the current directory). gcc builds the libraries now."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import pytest

from envcheck.native.binary import read_binary
from envcheck.native.elf import read_elf_reference
from envcheck.native.linux import LinuxResolver, hwcaps_levels
from envcheck.native.tree import Catalog, RootFile, Walker

from .conftest import dep, node

pytestmark = pytest.mark.slow


def _cc(out: Path, source: str, *flags: str) -> None:
    src = out.parent / f"{out.name}.c"
    out.parent.mkdir(parents=True, exist_ok=True)
    src.write_text(source)
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *flags], check=True)
    src.unlink()


def _ldd(lib: Path, cwd: Path) -> dict[str, str | None]:
    """What ld.so loads for each needed name (None: not found), as ``ldd`` prints it, run in ``cwd``."""
    done = subprocess.run(["ldd", str(lib)], capture_output=True, text=True, cwd=cwd, check=False, timeout=60)
    out: dict[str, str | None] = {}
    for line in done.stdout.splitlines():
        m = re.match(r"\s*(\S+) => (not found|(\S+) \(0x[0-9a-f]+\))", line)
        if m:
            out[m.group(1)] = None if m.group(2) == "not found" else str((cwd / m.group(3)).resolve())
            continue
        # Found at a path that is its name (the current directory of an empty element): no "=>".
        m = re.match(r"\s*(\S+) \(0x[0-9a-f]+\)", line)
        if m and "/" not in m.group(1):
            out[m.group(1)] = str((cwd / m.group(1)).resolve())
    return out


def _walk(root: Path, *, cwd: str | None = None) -> object:
    catalog = Catalog(site_dirs=[str(root)])
    roots = [
        RootFile(path=str(p), key=f"tree:{p.relative_to(root)}", owner="tree", role="library")
        for p in sorted(root.rglob("*.so"))
        if "glibc-hwcaps" not in p.parts
    ]
    for r in roots:
        catalog.add(r)
    walker = Walker(catalog, {}, host=True)
    walker.resolvers = {"elf": LinuxResolver(host=True, probe=walker.probe, cwd=cwd)}
    return walker.walk(roots, verify_files=False)


def _ldso_levels() -> list[str]:
    """The glibc-hwcaps levels ld.so says it searches here (``ld.so --help``), best first."""
    ldso = next(
        (p for p in ("/lib64/ld-linux-x86-64.so.2", "/lib/ld-linux-x86-64.so.2") if Path(p).exists()), None
    )
    if ldso is None:
        return []
    text = subprocess.run([ldso, "--help"], capture_output=True, text=True, check=False, timeout=60).stdout
    return re.findall(r"^\s+(x86-64-v\d) \(supported, searched\)", text, re.M)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if shutil.which("gcc") is None or shutil.which("ldd") is None:
        pytest.skip("gcc and ldd are needed to build and load the libraries")
    root = tmp_path_factory.mktemp("ldso")
    lib = root / "lib"
    _cc(lib / "libhw.so", "int hw(void) { return 1; }", "-Wl,-soname,libhw.so")
    for level in ("x86-64-v2", "x86-64-v3", "x86-64-v4"):
        _cc(lib / "glibc-hwcaps" / level / "libhw.so", "int hw(void) { return 3; }", "-Wl,-soname,libhw.so")
    _cc(
        root / "libuser_hw.so",
        "int hw(void); int user(void) { return hw(); }",
        f"-L{lib}",
        "-lhw",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib",
    )
    here = root / "here"
    _cc(here / "libcwd.so", "int cwd(void) { return 1; }", "-Wl,-soname,libcwd.so")
    _cc(
        root / "libuser_cwd.so",
        "int cwd(void); int user2(void) { return cwd(); }",
        f"-L{here}",
        "-lcwd",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/nowhere:",
    )
    return root


def test_the_machines_hwcaps_levels_are_the_ones_ldso_searches() -> None:
    if not _ldso_levels() and hwcaps_levels():
        pytest.skip("this ld.so prints no glibc-hwcaps levels (glibc before 2.33)")
    assert list(hwcaps_levels()) == _ldso_levels()


def test_a_library_under_glibc_hwcaps_is_the_one_loaded(built: Path) -> None:
    levels = _ldso_levels()
    if not levels:
        pytest.skip("ld.so here searches no glibc-hwcaps level (glibc before 2.33, or a CPU below x86-64-v2)")
    real = _ldd(built / "libuser_hw.so", cwd=built)["libhw.so"]
    assert real == str(built / "lib" / "glibc-hwcaps" / levels[0] / "libhw.so")
    section = _walk(built)
    found = dep(node(section, "tree:libuser_hw.so"), "libhw.so")  # type: ignore[arg-type]
    assert (found.how, found.via) == ("runpath", "$ORIGIN/lib")
    assert node(section, found.target).path == real  # type: ignore[arg-type]
    # A resolver told the CPU has no level (an older machine) takes the plain copy, as ld.so would there.
    assert LinuxResolver(host=True, probe=lambda p: None, hwcaps=()).hwcaps == ()


def test_an_empty_runpath_element_is_the_current_directory(built: Path) -> None:
    user = built / "libuser_cwd.so"
    # Both readers keep it: the fast one and pyelftools.
    assert read_binary(str(user)).runpath == read_elf_reference(str(user)).runpath == ("$ORIGIN/nowhere", "")
    here = built / "here"
    assert _ldd(user, cwd=here)["libcwd.so"] == str(here / "libcwd.so")
    assert _ldd(user, cwd=built)["libcwd.so"] is None
    section = _walk(built, cwd=str(here))
    user_node = node(section, "tree:libuser_cwd.so")  # type: ignore[arg-type]
    assert user_node.runpath == ["$ORIGIN/nowhere", ""]  # kept, not dropped
    found = dep(user_node, "libcwd.so")
    assert (found.how, found.via, found.target) == ("runpath", "", "tree:here/libcwd.so")
    # Where the current directory is not known (another process's), nothing is guessed.
    unknown = dep(node(_walk(built), "tree:libuser_cwd.so"), "libcwd.so")  # type: ignore[arg-type]
    assert unknown.how != "runpath"


def test_the_real_torch_tree_agrees_with_ldd() -> None:
    """Every DT_NEEDED of every library in this venv's torch/lib resolves to the file ld.so loads (``ldd``
    of that library), with glibc-hwcaps and empty RUNPATH elements modelled as above."""
    import torch

    lib = Path(torch.__file__).parent / "lib"
    files = sorted(p for p in lib.iterdir() if ".so" in p.name)
    assert files
    catalog = Catalog(site_dirs=[str(lib.parent.parent)])
    roots = [
        RootFile(path=str(p), key=f"torch:torch/lib/{p.name}", owner="torch", role="library") for p in files
    ]
    for r in roots:
        catalog.add(r)
    walker = Walker(catalog, {}, host=True)
    walker.resolvers = {"elf": LinuxResolver(host=True, probe=walker.probe)}
    section = walker.walk(roots, verify_files=False)
    by_key = {n.key: n for n in section.nodes or []}
    compared = 0
    for r in roots:
        real = _ldd(Path(r.path), cwd=lib)
        for d in by_key[r.key].dependencies or ():
            if d.name not in real:
                continue
            target = by_key[d.target].path if d.target is not None else None
            resolved = str(Path(target).resolve()) if target is not None else None
            loaded = str(Path(real[d.name]).resolve()) if real[d.name] is not None else None
            assert resolved == loaded, (r.key, d.name, d.how)
            compared += 1
    assert compared >= len(files)


def test_programs_in_a_tree_are_nodes_resolved_as_ldd_loads_them(tmp_path: Path) -> None:
    """``torch/bin/torch_shm_manager`` (RUNPATH ``$ORIGIN/../lib``) is a node of the scanned tree, each of its
    needed libraries inside the tree the one ld.so loads; a script in ``bin/`` is no node."""
    import torch

    from envcheck.native.scan import scan_folder

    real = Path(torch.__file__).parent
    program = real / "bin" / "torch_shm_manager"
    if not program.is_file():
        pytest.skip("this torch build ships no torch/bin/torch_shm_manager")
    tree = tmp_path / "torch"
    (tree / "bin").mkdir(parents=True)
    (tree / "lib").mkdir()
    os.link(program, tree / "bin" / "torch_shm_manager")
    for lib in (real / "lib").iterdir():
        if ".so" in lib.name:
            os.link(lib, tree / "lib" / lib.name)
    (tree / "bin" / "helper").write_text("#!/bin/sh\necho hi\n")
    section = scan_folder(str(tmp_path), display_root=str(tmp_path))
    keys = {n.key: n for n in section.nodes or []}
    assert "tree:torch/bin/helper" not in keys  # a script: dropped, not UNREADABLE
    shm = keys["tree:torch/bin/torch_shm_manager"]
    assert (shm.role, shm.format, shm.error) == ("executable", "elf", None)
    loaded = _ldd(program, cwd=real)
    inside = {d.name: keys[d.target].path for d in shm.dependencies or () if d.target in keys}
    assert inside and {"libshm.so", "libc10.so"} <= set(inside)
    for name, path in inside.items():
        assert loaded[name] == str((real.parent / path).resolve()), name
