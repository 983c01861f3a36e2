"""Fixtures for the native-tree tests: ELF libraries built with gcc in the test run, the committed PE /
Mach-O fixtures (tests/fixtures/native/build.sh), and helpers to walk a folder as this machine's loader."""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from envcheck.manifest.native import NativeDependency, NativeNode, NativeSection
from envcheck.native.linux import LinuxResolver
from envcheck.native.tree import Catalog, RootFile, Walker, is_extension

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "native"
EXT = ".cpython-311-x86_64-linux-gnu.so"


@dataclass(frozen=True)
class ElfTree:
    """Where the gcc-built ELF fixtures are."""

    root: Path

    def __truediv__(self, rel: str) -> Path:
        return self.root / rel


def _cc(out: Path, source: str, *flags: str, cwd: Path) -> None:
    src = out.with_suffix(".c") if out.suffix != ".c" else out
    src = cwd / f"{out.name}.c"
    src.write_text(source)
    out.parent.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        ["gcc", "-shared", "-fPIC", "-O1", "-o", str(out), str(src), *flags],
        check=True,
        cwd=cwd,
        capture_output=True,
    )


@pytest.fixture(scope="session")
def elf_tree(tmp_path_factory: pytest.TempPathFactory) -> ElfTree:
    """Real ELF shared objects, built by gcc now:

    - ``lib/libdep.so``, ``lib/libleaf.so``; ``alt/libdep.so`` (another copy, for LD_LIBRARY_PATH);
    - ``a/libmid.so`` needs ``libleaf.so`` and has no search path of its own; ``a/libleaf.so``;
    - ``libuser_rpath.so`` (DT_RPATH ``$ORIGIN/lib``) and ``libuser_runpath.so`` (DT_RUNPATH) need libdep.so;
    - ``ext_rpath*.so`` (DT_RPATH ``$ORIGIN/a``) and ``ext_runpath*.so`` (DT_RUNPATH ``$ORIGIN/a``) need
      libmid.so: its libleaf.so resolves through the loader's RPATH, but never through a RUNPATH;
    - ``libgone_user.so`` needs ``libgone.so``, deleted after linking;
    - ``libnewglibc.so`` needs symbol version GLIBC_2.99 of the private ``lib/libfakeglibc.so``.
    """
    if shutil.which("gcc") is None:
        pytest.skip("gcc is not installed")
    root = tmp_path_factory.mktemp("elf")
    work = tmp_path_factory.mktemp("elf-src")
    _cc(root / "lib/libdep.so", "int dep(void) { return 1; }", "-Wl,-soname,libdep.so", cwd=work)
    _cc(root / "alt/libdep.so", "int dep(void) { return 2; }", "-Wl,-soname,libdep.so", cwd=work)
    _cc(root / "lib/libleaf.so", "int leaf(void) { return 1; }", "-Wl,-soname,libleaf.so", cwd=work)
    _cc(root / "a/libleaf.so", "int leaf(void) { return 1; }", "-Wl,-soname,libleaf.so", cwd=work)
    _cc(
        root / "a/libmid.so",
        "int leaf(void); int mid(void) { return leaf(); }",
        "-Wl,-soname,libmid.so",
        f"-L{root / 'a'}",
        "-lleaf",
        cwd=work,
    )
    # getenv makes it need libc.so.6 (and a GLIBC_ symbol version) for real.
    user = '#include <stdlib.h>\nint dep(void); int user(void) { return dep() + (getenv("X") != 0); }'

    for name, tags in (
        ("libuser_rpath.so", "--disable-new-dtags"),
        ("libuser_runpath.so", "--enable-new-dtags"),
    ):
        _cc(
            root / name,
            user,
            f"-Wl,-soname,{name}",
            f"-L{root / 'lib'}",
            "-ldep",
            f"-Wl,{tags}",
            "-Wl,-rpath,$ORIGIN/lib",
            cwd=work,
        )
    ext = "int mid(void); int PyInit_x(void) { return mid(); }"
    for name, tags in (("ext_rpath", "--disable-new-dtags"), ("ext_runpath", "--enable-new-dtags")):
        _cc(
            root / f"{name}{EXT}",
            ext,
            f"-L{root / 'a'}",
            "-lmid",
            f"-Wl,{tags}",
            "-Wl,-rpath,$ORIGIN/a",
            "-Wl,-rpath-link," + str(root / "a"),
            cwd=work,
        )
    _cc(root / "lib/libgone.so", "int gone(void) { return 1; }", "-Wl,-soname,libgone.so", cwd=work)
    _cc(
        root / "libgone_user.so",
        "int gone(void); int gone_user(void) { return gone(); }",
        f"-L{root / 'lib'}",
        "-lgone",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib",
        cwd=work,
    )
    (root / "lib/libgone.so").unlink()
    # Its search path leads out of the tree (like torch's $ORIGIN/../../nvidia/cudnn/lib): a scan of the
    # tree alone expects libexternal.so from another package.
    _cc(root / "lib/libexternal.so", "int ext(void) { return 1; }", "-Wl,-soname,libexternal.so", cwd=work)
    _cc(
        root / "libexternal_user.so",
        '#include <stdlib.h>\nint ext(void); int external_user(void) { return ext() + (getenv("X") != 0); }',
        f"-L{root / 'lib'}",
        "-lexternal",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/../other_package/lib",
        cwd=work,
    )
    (root / "lib/libexternal.so").unlink()
    # A cycle: libcyc_a.so needs libcyc_b.so, which needs libcyc_a.so (linked against a first draft of a).
    cyc = ("-Wl,--enable-new-dtags,-rpath,$ORIGIN", f"-L{root / 'cyc'}")
    _cc(root / "cyc/libcyc_a.so", "int a(void) { return 1; }", "-Wl,-soname,libcyc_a.so", cwd=work)
    _cc(
        root / "cyc/libcyc_b.so",
        "int a(void); int b(void) { return a(); }",
        "-Wl,-soname,libcyc_b.so",
        *cyc,
        "-lcyc_a",
        cwd=work,
    )
    _cc(
        root / "cyc/libcyc_a.so",
        "int b(void); int a(void) { return b(); }",
        "-Wl,-soname,libcyc_a.so",
        *cyc,
        "-lcyc_b",
        cwd=work,
    )
    # libneeds_sibling.so needs libsibling.so without any search path to find it: only a library already
    # loaded under that soname satisfies it.
    _cc(root / "sib/libsibling.so", "int sib(void) { return 1; }", "-Wl,-soname,libsibling.so", cwd=work)
    _cc(
        root / "libneeds_sibling.so",
        "int sib(void); int needs(void) { return sib(); }",
        f"-L{root / 'sib'}",
        "-lsibling",
        cwd=work,
    )
    # -z nodefaultlib (DF_1_NODEFLIB): neither ld.so.cache nor the default folders serve it; libc only
    # as already loaded.
    _cc(
        root / "libnodeflib.so",
        user,
        f"-L{root / 'lib'}",
        "-ldep",
        "-Wl,-z,nodefaultlib,--enable-new-dtags,-rpath,$ORIGIN/lib",
        cwd=work,
    )
    # A private library that defines its symbol under the version node GLIBC_2.99 (a version script), so
    # the user records a symbol-version need newer than any glibc.
    (work / "fake.map").write_text("GLIBC_2.99 { global: fake_new_symbol; local: *; };\n")
    _cc(
        root / "lib/libfakeglibc.so",
        "int fake_new_symbol(void) { return 99; }",
        "-Wl,-soname,libfakeglibc.so",
        f"-Wl,--version-script={work / 'fake.map'}",
        cwd=work,
    )
    _cc(
        root / "libnewglibc.so",
        "int fake_new_symbol(void); int newglibc(void) { return fake_new_symbol(); }",
        f"-L{root / 'lib'}",
        "-lfakeglibc",
        "-Wl,--enable-new-dtags,-rpath,$ORIGIN/lib",
        cwd=work,
    )
    return ElfTree(root)


def walk_host(
    folder: Path,
    files: list[Path],
    *,
    ld_library_path: str | None = None,
    verify_files: bool = False,
    executable: str | None = None,
) -> NativeSection:
    """Walk ``files`` with this machine's ld.so rules; every ``.so`` under ``folder`` belongs to the
    distribution ``fixture`` (keys ``fixture:<path relative to folder>``), as if a RECORD listed it."""
    catalog = Catalog(site_dirs=[str(folder)])
    owned = {}
    for f in sorted(folder.rglob("*.so")):
        rel = f.relative_to(folder).as_posix()
        owned[f] = RootFile(
            path=str(f),
            key=f"fixture:{rel}",
            owner="fixture",
            role="extension" if is_extension(str(f)) else "library",
        )
        catalog.add(owned[f])
    roots = [owned[f] for f in files]
    walker = Walker(catalog, {}, host=True, executable=executable)
    walker.resolvers = {"elf": LinuxResolver(host=True, probe=walker.probe, ld_library_path=ld_library_path)}
    return walker.walk(roots, verify_files=verify_files)


def node(section: NativeSection, key: str) -> NativeNode:
    for n in section.nodes or []:
        if n.key == key:
            return n
    raise AssertionError(f"no node {key}; have {[n.key for n in section.nodes or []]}")


def dep(n: NativeNode, name: str) -> NativeDependency:
    for d in n.dependencies or []:
        if d.name == name:
            return d
    raise AssertionError(f"{n.key} does not need {name}; needs {[d.name for d in n.dependencies or []]}")
