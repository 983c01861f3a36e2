"""Windows and macOS trees, on DLLs built by mingw-w64 / lld and dylibs built by clang + lld
(tests/fixtures/native/build.sh), scanned on Linux the way a release engineer would: ``envcheck scan``."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import zipfile
from pathlib import Path

import pytest
from typer.testing import CliRunner

from envcheck.cli import app
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.native import NativeSection
from envcheck.native import scan_path
from envcheck.native.binary import read_binary

from .conftest import FIXTURES, dep, node

PE = FIXTURES / "pe"
MACHO = FIXTURES / "macho"


def _wheel(tmp_path: Path, folder: Path, name: str, tag: str) -> Path:
    """A real wheel (zip + .dist-info with a RECORD of sha256 digests) holding everything under ``folder``."""
    wheel = tmp_path / f"{name}-1.0-py3-none-{tag}.whl"
    info = f"{name}-1.0.dist-info"
    rows = []
    with zipfile.ZipFile(wheel, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted(p for p in folder.rglob("*") if p.is_file()):
            rel = path.relative_to(folder).as_posix()
            data = path.read_bytes()
            digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
            rows.append(f"{rel},sha256={digest},{len(data)}")
            zf.writestr(rel, data)
        zf.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
        zf.writestr(f"{info}/WHEEL", f"Wheel-Version: 1.0\nRoot-Is-Purelib: false\nTag: py3-none-{tag}\n")
        rows += [f"{info}/METADATA,,", f"{info}/WHEEL,,", f"{info}/RECORD,,"]
        zf.writestr(f"{info}/RECORD", "\n".join(rows) + "\n")
    return wheel


@pytest.mark.slow
def test_pe_reader_imports_delay_imports_and_version() -> None:
    bar = read_binary(str(PE / "winpkg/bar.dll"))
    assert (bar.format, bar.machine) == ("pe", "x86_64")
    needed = {n.name: n.delay_load for n in bar.needed}
    assert needed["baz.dll"] is True
    assert needed["foo.dll"] is False
    assert {"VCRUNTIME140.dll", "api-ms-win-crt-runtime-l1-1-0.dll", "gone.dll", "KERNEL32.dll"} <= set(
        needed
    )
    assert read_binary(str(PE / "winpkg.libs/foo.dll")).file_version == "1.2.3.4"


@pytest.mark.slow
def test_windows_wheel_scan(tmp_path: Path) -> None:
    section = scan_path(str(_wheel(tmp_path, PE, "winpkg", "win_amd64")))
    assert section.loader == "windows"
    ext = node(section, "winpkg:winpkg/ext.cp311-win_amd64.pyd")
    assert ext.role == "extension" and ext.identity is not None and ext.integrity == "record"
    assert ext.path == "winpkg/ext.cp311-win_amd64.pyd"  # location-independent inside the wheel
    bar = dep(ext, "bar.dll")
    assert (bar.how, bar.kind, bar.target) == ("loader-dir", "bundled", "winpkg:winpkg/bar.dll")
    assert dep(ext, "python311.dll").kind == "interpreter"
    bar_node = node(section, "winpkg:winpkg/bar.dll")
    # The DLL load folder is the .pyd's for the whole import; foo.dll only lies in the delvewheel-style
    # winpkg.libs folder, which the package adds with os.add_dll_directory.
    foo = dep(bar_node, "foo.dll")
    assert (foo.how, foo.target) == ("dll-directory", "winpkg:winpkg.libs/foo.dll")
    baz = dep(bar_node, "baz.dll")
    assert (baz.delay_load, baz.how, baz.target) == (True, "loader-dir", "winpkg:winpkg/baz.dll")
    api = dep(bar_node, "api-ms-win-crt-runtime-l1-1-0.dll")
    assert (api.how, api.kind, api.target) == ("api-set", "os", None)
    assert (dep(bar_node, "KERNEL32.dll").how, dep(bar_node, "KERNEL32.dll").kind) == ("known-dll", "os")
    vc = dep(bar_node, "VCRUNTIME140.dll")  # beside python.exe: the interpreter's, not the machine's
    assert (vc.kind, vc.how) == ("interpreter", "expected-on-machine")
    gone = dep(bar_node, "gone.dll")
    assert (gone.kind, gone.how) == ("missing", "missing")
    [chain] = section.missing or []
    assert chain.text == "ext.cp311-win_amd64.pyd → bar.dll → gone.dll: MISSING"
    assert chain.from_extension
    [vc_req] = [r for r in section.requires or [] if r.name == "VCRUNTIME140.dll"]
    assert vc_req.kind == "interpreter"
    assert (
        vc_req.runtime == "the VC++ runtime DLLs that ship beside python.exe (python.org and conda CPython)"
    )
    assert vc_req.needed_by == ["winpkg:winpkg/bar.dll"]
    assert node(section, "winpkg:winpkg.libs/foo.dll").file_version == "1.2.3.4"


@pytest.mark.slow
def test_scan_cli_text_json_and_exit_codes(tmp_path: Path) -> None:
    wheel = _wheel(tmp_path, PE, "winpkg", "win_amd64")
    runner = CliRunner()
    text = runner.invoke(app, ["scan", str(wheel)])
    assert text.exit_code == 1, text.output
    assert "VCRUNTIME140.dll [interpreter] - the VC++ runtime DLLs that ship beside python.exe" in text.output
    assert "ext.cp311-win_amd64.pyd → bar.dll → gone.dll: MISSING" in text.output
    js = runner.invoke(app, ["scan", str(wheel), "--format", "json"])
    assert js.exit_code == 1
    section = decode(NativeSection, json.loads(js.stdout), source="scan output")
    assert section == scan_path(str(wheel))  # deterministic
    # Without the missing import the tree is complete: exit 0.
    clean = tmp_path / "clean"
    (clean / "winpkg").mkdir(parents=True)
    for f in ("winpkg/baz.dll",):
        (clean / f).write_bytes((PE / f).read_bytes())
    assert runner.invoke(app, ["scan", str(clean)]).exit_code == 0
    bad = runner.invoke(app, ["scan", str(tmp_path / "nope.whl")])
    assert bad.exit_code == 2 and "does not exist" in bad.output
    (tmp_path / "x.txt").write_text("hello")
    assert runner.invoke(app, ["scan", str(tmp_path / "x.txt")]).exit_code == 2
    (tmp_path / "broken.whl").write_bytes(b"PK\x03\x04 not a zip")
    broken = runner.invoke(app, ["scan", str(tmp_path / "broken.whl")])
    assert broken.exit_code == 2 and "not a readable wheel" in broken.output


@pytest.mark.slow
def test_json_round_trip() -> None:
    section = scan_path(str(PE))
    assert decode(NativeSection, encode(section), source="t") == section


def test_macho_rpath_loader_path_and_system(tmp_path: Path) -> None:
    section = scan_path(str(MACHO))
    assert section.loader == "dyld"
    mod = node(section, "tree:macpkg/mod.cpython-311-darwin.so")
    assert mod.rpath == ["@loader_path/.dylibs"]
    bar = dep(mod, "@rpath/libbar.dylib")
    assert (bar.how, bar.via, bar.target) == (
        "lc-rpath",
        "@loader_path/.dylibs",
        "tree:macpkg/.dylibs/libbar.dylib",
    )
    system = dep(mod, "/usr/lib/libSystem.B.dylib")
    assert (system.how, system.kind) == ("system-image", "os")
    weak = dep(mod, "@rpath/libweak.dylib")
    assert (weak.weak, weak.how) == (True, "missing")
    libbar = node(section, "tree:macpkg/.dylibs/libbar.dylib")
    assert libbar.soname == "@rpath/libbar.dylib" and libbar.rpath is None
    # libbar has no LC_RPATH: @rpath resolves through its loader's (dyld searches the load chain).
    foo = dep(libbar, "@rpath/libfoo.dylib")
    assert (foo.how, foo.via) == ("lc-rpath", "@loader_path/.dylibs")
    same = dep(libbar, "@loader_path/libsame.dylib")
    assert (same.how, same.target) == ("loader-path", "tree:macpkg/.dylibs/libsame.dylib")
    # The weak import does not fail the import; the absent libgone does.
    assert [c.text for c in section.missing or []] == [
        "mod.cpython-311-darwin.so → @rpath/libgone.dylib: MISSING"
    ]
    assert [(o.family, o.key) for o in section.openmp or []] == [("llvm", "tree:macpkg/.dylibs/libomp.dylib")]


@pytest.mark.skipif(
    not os.environ.get("ENVCHECK_WIN_TORCH_WHEEL"),
    reason="set ENVCHECK_WIN_TORCH_WHEEL to a torch win_amd64 wheel (pip download --platform win_amd64)",
)
def test_real_windows_torch_wheel() -> None:
    section = scan_path(os.environ["ENVCHECK_WIN_TORCH_WHEEL"])
    assert section.loader == "windows"
    assert section.missing == []
    vc = {r.name.lower(): r for r in section.requires or [] if r.kind == "redistributable"}
    assert "msvcp140.dll" in vc and "vcruntime140.dll" not in vc  # python.exe's folder has that one
    beside_python = {r.name.lower() for r in section.requires or [] if r.kind == "interpreter"}
    assert "vcruntime140.dll" in beside_python
    assert any(k.endswith("torch_cpu.dll") for k in vc["msvcp140.dll"].needed_by)
    assert [o.family for o in section.openmp or []] == ["intel"]


@pytest.mark.slow
def test_windows_host_search_order(tmp_path: Path) -> None:
    """A snapshot on Windows resolves against System32 and python.exe's folder; simulated on Linux with
    folders holding real DLLs (copies of the fixtures under the names Windows would have)."""
    from envcheck.native.tree import Catalog, RootFile, Walker
    from envcheck.native.windows import WindowsResolver

    site = tmp_path / "site-packages"
    shutil.copytree(PE, site)
    system32 = tmp_path / "Windows" / "System32"
    system32.mkdir(parents=True)
    for name in ("KERNEL32.DLL", "msvcrt.dll", "gone.dll"):  # case differs from the import: still found
        shutil.copyfile(PE / "winpkg/baz.dll", system32 / name)
    app = tmp_path / "Python311"
    app.mkdir()
    shutil.copyfile(PE / "winpkg/baz.dll", app / "python311.dll")
    shutil.copyfile(PE / "winpkg/baz.dll", app / "vcruntime140.dll")
    catalog = Catalog(site_dirs=[str(site)])
    roots = []
    for f in sorted(p for p in site.rglob("*") if p.suffix in (".dll", ".pyd")):
        rel = f.relative_to(site).as_posix()
        roots.append(
            RootFile(
                path=str(f),
                key=f"winpkg:{rel}",
                owner="winpkg",
                role="extension" if f.suffix == ".pyd" else "library",
            )
        )
        catalog.add(roots[-1])
    walker = Walker(catalog, {}, host=True)
    walker.resolvers = {
        "pe": WindowsResolver(
            host=True,
            probe=walker.probe,
            dll_directories=[str(site / "winpkg.libs")],
            application_dir=str(app),
            system32=str(system32),
        )
    }
    section = walker.walk(roots, verify_files=False)
    bar = node(section, "winpkg:winpkg/bar.dll")
    kernel = dep(bar, "KERNEL32.dll")
    assert (kernel.how, kernel.kind, kernel.target) == ("known-dll", "os", str(system32 / "KERNEL32.DLL"))
    gone = dep(bar, "gone.dll")  # not shipped, but this machine has one in System32
    assert (gone.how, gone.target) == ("system32", str(system32 / "gone.dll"))
    vc = dep(bar, "VCRUNTIME140.dll")  # python.org's installer puts vcruntime140.dll beside python.exe
    assert (vc.how, vc.via, vc.kind) == ("loader-dir", "application", "interpreter")
    assert dep(bar, "foo.dll").via == "winpkg.libs"
    ext = node(section, "winpkg:winpkg/ext.cp311-win_amd64.pyd")
    python = dep(ext, "python311.dll")
    assert (python.kind, python.target) == ("interpreter", str(app / "python311.dll"))
    assert section.missing == []
