"""ELF parsing and ld.so resolution, on shared objects gcc builds in this test run, checked against the real
loader (``ctypes.CDLL`` in a subprocess) where the loader can say."""

# ruff: noqa: PTH207
# Paths are compared as the strings the native tree records.

from __future__ import annotations

import glob
import os
import subprocess
import sys
from pathlib import Path

import pytest

from envcheck.native.binary import read_binary
from envcheck.native.elf import read_elf_reference
from envcheck.native.ldcache import cache_lookup, read_ld_cache

from .conftest import EXT, ElfTree, dep, node, walk_host


def _dlopen(path: Path, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Load ``path`` with the real ld.so in a fresh interpreter; print the libdep.so it mapped."""
    code = (
        "import ctypes, sys\n"
        "try:\n"
        f"    ctypes.CDLL({str(path)!r})\n"
        "except OSError as e:\n"
        "    print('ERROR', e); sys.exit(3)\n"
        "maps = open('/proc/self/maps').read().split()\n"
        "print(sorted({m for m in maps if m.endswith('libdep.so')}))\n"
    )
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)


def test_reader_facts(elf_tree: ElfTree) -> None:
    info = read_binary(str(elf_tree / "libuser_rpath.so"))
    assert info.format == "elf"
    assert info.machine in ("x86_64", "aarch64")
    assert info.soname == "libuser_rpath.so"
    assert info.needed[0].name == "libdep.so"
    assert info.rpath == ("$ORIGIN/lib",)
    assert info.runpath == ()
    assert info.build_id is not None and len(info.build_id) == 40  # gcc on Debian links --build-id (sha1)
    runpath = read_binary(str(elf_tree / "libuser_runpath.so"))
    assert runpath.runpath == ("$ORIGIN/lib",)
    assert runpath.rpath == ()


def test_glibc_version_need_from_a_version_node(elf_tree: ElfTree) -> None:
    info = read_binary(str(elf_tree / "libnewglibc.so"))
    assert info.version_needs["GLIBC"] == "2.99"
    provider = read_binary(str(elf_tree / "lib/libfakeglibc.so"))
    assert provider.version_provides == {"GLIBC": "2.99"}
    # libuser_rpath.so brings in this machine's libc.so.6 (libnewglibc.so alone needs no libc symbol).
    section = walk_host(elf_tree.root, [elf_tree / "libnewglibc.so", elf_tree / "libuser_rpath.so"])
    assert section.glibc_required == "2.99"
    libc = read_binary(
        cache_lookup(read_ld_cache(), "libc.so.6", info.machine) or "/lib/x86_64-linux-gnu/libc.so.6"
    )
    assert section.glibc_provided == libc.version_provides["GLIBC"]
    assert tuple(map(int, section.glibc_provided.split("."))) < (2, 99)  # type: ignore[union-attr]


def test_fast_reader_matches_pyelftools(elf_tree: ElfTree) -> None:
    """The mmap reader and pyelftools agree on every gcc-built file and on this machine's libc/libstdc++."""
    files = sorted(str(p) for p in elf_tree.root.rglob("*.so"))
    cache = read_ld_cache()
    files += [p for p in (cache_lookup(cache, n, "x86_64") for n in ("libc.so.6", "libstdc++.so.6")) if p]
    for path in files:
        assert read_binary(path) == read_elf_reference(path), path


@pytest.mark.skipif(
    not glob.glob(f"{sys.prefix}/lib/python3*/site-packages/torch/lib/*.so"), reason="torch absent"
)
def test_fast_reader_matches_pyelftools_on_torch() -> None:
    for path in sorted(glob.glob(f"{sys.prefix}/lib/python3*/site-packages/torch/lib/*.so*")):
        assert read_binary(path) == read_elf_reference(path), path


def test_rpath_and_runpath_with_origin(elf_tree: ElfTree) -> None:
    section = walk_host(elf_tree.root, [elf_tree / "libuser_rpath.so", elf_tree / "libuser_runpath.so"])
    d = dep(node(section, "fixture:libuser_rpath.so"), "libdep.so")
    assert (d.how, d.via, d.target, d.kind) == ("rpath", "$ORIGIN/lib", "fixture:lib/libdep.so", "bundled")
    d = dep(node(section, "fixture:libuser_runpath.so"), "libdep.so")
    assert (d.how, d.via, d.target) == ("runpath", "$ORIGIN/lib", "fixture:lib/libdep.so")
    libc = dep(node(section, "fixture:libuser_rpath.so"), "libc.so.6")
    assert libc.how == "ld-so-cache" and libc.kind == "os" and libc.target is not None
    assert section.missing == []


def test_runpath_serves_direct_dependencies_only(elf_tree: ElfTree) -> None:
    """ld.so(8): DT_RUNPATH is used only for the object's direct dependencies; DT_RPATH of the loader also
    serves its dependencies' dependencies. The real loader agrees."""
    with_rpath = elf_tree / f"ext_rpath{EXT}"
    with_runpath = elf_tree / f"ext_runpath{EXT}"
    section = walk_host(elf_tree.root, [with_rpath])
    leaf = dep(node(section, "fixture:a/libmid.so"), "libleaf.so")
    assert (leaf.how, leaf.via, leaf.target) == ("rpath", "$ORIGIN/a", "fixture:a/libleaf.so")
    assert _dlopen(with_rpath).returncode == 0

    section = walk_host(elf_tree.root, [with_runpath])
    mid = dep(node(section, f"fixture:ext_runpath{EXT}"), "libmid.so")
    assert (mid.how, mid.via) == ("runpath", "$ORIGIN/a")
    leaf = dep(node(section, "fixture:a/libmid.so"), "libleaf.so")
    assert (leaf.how, leaf.kind, leaf.target) == ("missing", "missing", None)
    [chain] = section.missing or []
    assert chain.text == f"ext_runpath{EXT} → libmid.so → libleaf.so: MISSING"
    assert chain.from_extension
    assert chain.chain == [f"fixture:ext_runpath{EXT}", "fixture:a/libmid.so"]
    real = _dlopen(with_runpath)
    assert real.returncode == 3 and "libleaf.so" in real.stdout


def test_ld_library_path_order(elf_tree: ElfTree) -> None:
    """LD_LIBRARY_PATH comes after DT_RPATH and before DT_RUNPATH — as the real loader maps it."""
    alt = str(elf_tree / "alt")
    section = walk_host(
        elf_tree.root, [elf_tree / "libuser_rpath.so", elf_tree / "libuser_runpath.so"], ld_library_path=alt
    )
    assert dep(node(section, "fixture:libuser_rpath.so"), "libdep.so").how == "rpath"
    shadowed = dep(node(section, "fixture:libuser_runpath.so"), "libdep.so")
    assert (shadowed.how, shadowed.via, shadowed.target) == ("ld-library-path", alt, "fixture:alt/libdep.so")
    env = {"LD_LIBRARY_PATH": alt, "PATH": "/usr/bin:/bin"}
    assert str(elf_tree / "alt/libdep.so") in _dlopen(elf_tree / "libuser_runpath.so", env).stdout
    assert str(elf_tree / "lib/libdep.so") in _dlopen(elf_tree / "libuser_rpath.so", env).stdout


def test_missing_dependency_chain(elf_tree: ElfTree) -> None:
    section = walk_host(elf_tree.root, [elf_tree / "libgone_user.so"])
    d = dep(node(section, "fixture:libgone_user.so"), "libgone.so")
    assert (d.how, d.kind, d.target) == ("missing", "missing", None)
    [chain] = section.missing or []
    assert chain.text == "libgone_user.so → libgone.so: MISSING"
    assert not chain.from_extension


def test_scan_outside_search_path_is_external_not_missing(elf_tree: ElfTree, tmp_path: Path) -> None:
    from envcheck.native import scan_path

    tree = tmp_path / "tree"
    tree.mkdir()
    (tree / "libexternal_user.so").write_bytes((elf_tree / "libexternal_user.so").read_bytes())
    (tree / "libgone_user.so").write_bytes((elf_tree / "libgone_user.so").read_bytes())
    section = scan_path(str(tree))
    ext = dep(node(section, "tree:libexternal_user.so"), "libexternal.so")
    assert (ext.kind, ext.how, ext.target) == ("external", "expected-on-machine", None)
    gone = dep(node(section, "tree:libgone_user.so"), "libgone.so")
    assert (gone.kind, gone.how) == ("missing", "missing")  # $ORIGIN/lib is inside the tree
    libc = dep(node(section, "tree:libexternal_user.so"), "libc.so.6")
    assert (libc.kind, libc.how) == ("os", "expected-on-machine")


def test_cycle_is_walked_once(elf_tree: ElfTree) -> None:
    section = walk_host(elf_tree.root, [elf_tree / "cyc/libcyc_a.so"])
    a = node(section, "fixture:cyc/libcyc_a.so")
    b = node(section, "fixture:cyc/libcyc_b.so")
    assert dep(a, "libcyc_b.so").target == b.key
    assert dep(b, "libcyc_a.so").target == a.key
    assert section.missing == []


def test_soname_already_loaded(elf_tree: ElfTree) -> None:
    """Nothing on libneeds_sibling.so's search path holds libsibling.so; another file of the environment
    carries that soname, so the dependency is met only once that file is loaded."""
    section = walk_host(elf_tree.root, [elf_tree / "libneeds_sibling.so", elf_tree / "sib/libsibling.so"])
    sibling = dep(node(section, "fixture:libneeds_sibling.so"), "libsibling.so")
    assert (sibling.how, sibling.target) == ("already-loaded", "fixture:sib/libsibling.so")
    alone = walk_host(elf_tree.root, [elf_tree / "libneeds_sibling.so"])
    assert dep(node(alone, "fixture:libneeds_sibling.so"), "libsibling.so").how == "missing"


def test_nodeflib_takes_libc_from_the_interpreter(elf_tree: ElfTree) -> None:
    """ld(1) -z nodefaultlib: no ld.so.cache, no default folders; the interpreter (a dynamically linked
    python) has libc.so.6 loaded already, so the real loader loads the library anyway."""
    lib = elf_tree / "libnodeflib.so"
    assert read_binary(str(lib)).nodeflib
    python = os.path.realpath(sys.executable)
    section = walk_host(elf_tree.root, [lib], executable=python)
    libc = dep(node(section, "fixture:libnodeflib.so"), "libc.so.6")
    assert libc.how == "already-loaded" and libc.target is not None
    assert dep(node(section, "fixture:libnodeflib.so"), "libdep.so").how == "runpath"
    bare = walk_host(elf_tree.root, [lib])  # no interpreter: nothing has loaded libc
    assert dep(node(bare, "fixture:libnodeflib.so"), "libc.so.6").how == "missing"
    assert _dlopen(lib).returncode == 0


def test_ld_so_cache_agrees_with_ldconfig() -> None:
    out = subprocess.run(["ldconfig", "-p"], capture_output=True, text=True, check=False)
    if out.returncode != 0:
        pytest.skip("ldconfig -p is not available")
    cache = read_ld_cache()
    listed = {}
    for line in out.stdout.splitlines()[1:]:
        name, _, rest = line.strip().partition(" (")
        if "x86-64" in rest and "=>" in rest:
            listed.setdefault(name, rest.split("=> ")[-1])
    assert listed, "ldconfig printed no x86-64 entries"
    for name, path in listed.items():
        assert cache_lookup(cache, name, "x86_64") == path, name


def test_binary_dispatch_and_format(elf_tree: ElfTree) -> None:
    assert read_binary(str(elf_tree / "libuser_rpath.so")).format == "elf"
