"""The Windows facts of ``envcheck/inside/windows_facts.py``, read by the real embeddable CPython under Wine.

The machine is a Wine prefix of this module's own, so that its System32 and registry can be put in each
state a customer's machine has: without the VC++ redistributable (no ``msvcp140.dll`` in System32, no
registry key), and with an old or a current one (Microsoft's own ``msvcp140.dll`` from the ``msvc-runtime``
wheel, the redistributable's registry key). The target package runs as envcheck runs it: copied, in the
target interpreter, stdlib only.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import wine
from wine import Wine, windows_path

from .conftest import WinPython

pytestmark = [pytest.mark.windows, pytest.mark.slow]

CHECKOUT = Path(__file__).resolve().parents[2]
VC_KEY = r"HKLM\SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64"
# What Wine puts in System32 in place of the redistributable's DLLs: removed, the prefix is a machine
# without it (and run with wine.NO_VC_RUNTIME, Wine's builtin copies are not used either).
VC_FILES = ("msvcp140*.dll", "vcruntime140*.dll", "concrt140.dll", "vcomp140.dll")

FACTS = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from envcheck_target import windows_facts as w
out = {"facts": w.windows_facts(w.env_dll_names())}
if sys.argv[2] == "import":
    try:
        import torch
        out["imported"] = True
    except OSError as e:
        out["loaded"] = w.loaded_modules()
        out["failure"] = w.load_failure(str(e))
print("FACTS" + json.dumps(out))
"""


def pe_file_version(path: Path) -> str:
    """The FileVersion pefile reads from the version resource: the oracle of the target's ctypes reader."""
    import pefile

    pe = pefile.PE(str(path), fast_load=False)
    fixed = pe.VS_FIXEDFILEINFO[0]
    ms, ls = fixed.FileVersionMS, fixed.FileVersionLS
    return f"{ms >> 16}.{ms & 0xFFFF}.{ls >> 16}.{ls & 0xFFFF}"


def system32(machine: Wine) -> Path:
    return machine.prefix / "drive_c" / "windows" / "system32"


def without_vc_runtime(machine: Wine) -> None:
    for pattern in VC_FILES:
        for path in system32(machine).glob(pattern):
            path.unlink()
    machine.run(["reg", "delete", VC_KEY, "/f"], timeout=60)


@pytest.fixture(scope="module")
def machine(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Wine]:
    """A Wine prefix of this module's own (its System32 and registry are changed by the tests)."""
    session = wine.make_wine(tmp_path_factory.mktemp("facts-wine") / "prefix")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="module")
def target_package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``envcheck/inside/`` copied as ``envcheck_target``, as envcheck copies it for a probe."""
    folder = tmp_path_factory.mktemp("target")
    shutil.copytree(
        CHECKOUT / "envcheck" / "inside",
        folder / "envcheck_target",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    return folder


def facts(
    machine: Wine, python: WinPython, package: Path, *, import_torch: bool = False, path: str | None = None
) -> dict[str, Any]:
    env = {"WINEPATH": path} if path is not None else None
    done = machine.run(
        [str(python.exe), "-c", FACTS, windows_path(package), "import" if import_torch else "facts"],
        dll_overrides=wine.NO_VC_RUNTIME,
        env=env,
        timeout=300,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("FACTS")), None)
    assert line is not None, (done.returncode, done.stdout[-2000:], done.stderr[-3000:])
    found: dict[str, Any] = json.loads(line[len("FACTS") :])
    return found


def test_no_redistributable_no_key_no_msvcp140(
    machine: Wine, customer: WinPython, target_package: Path
) -> None:
    without_vc_runtime(machine)
    found = facts(machine, customer, target_package)["facts"]
    assert found["vc_runtime"] == {"registry": None, "msvcp140": None, "msvcp140_version": None}
    version = found["version"]
    assert version["version"].startswith(("6.", "10."))
    assert isinstance(version["build"], int) and version["build"] > 0


def test_import_failure_names_msvcp140_needed_by_c10(
    machine: Wine, customer: WinPython, target_package: Path
) -> None:
    """The customer's failure: the loader, asked import by import, finds MSVCP140.dll nowhere; c10.dll is
    the DLL torch named and MSVC 14.42 built it; the modules loaded so far are listed with full paths."""
    without_vc_runtime(machine)
    out = facts(machine, customer, target_package, import_torch=True)
    assert "imported" not in out
    failure = out["failure"]
    assert failure["dll"].lower().endswith("\\torch\\lib\\c10.dll")
    assert [m["name"] for m in failure["missing"]] == ["MSVCP140.dll"]
    assert failure["missing"][0]["needed_by"].lower().endswith("\\c10.dll")
    assert failure["refused"] == []
    assert failure["chain"][0]["name"] == "c10.dll" and failure["chain"][0]["linker"] == "14.42"
    loaded = [p.lower() for p in out["loaded"]]
    assert loaded[0].endswith("\\python.exe")
    assert any(p.endswith("\\python311.dll") and p.startswith("z:\\") for p in loaded)
    assert not any("\\torch\\lib\\" in p for p in loaded)  # nothing of torch's loaded: c10.dll failed first


def test_current_runtime_and_an_old_registry_record(
    machine: Wine, customer: WinPython, target_package: Path, vc_runtime: Path
) -> None:
    """Microsoft's msvcp140.dll in System32 gives its FileVersion; the redistributable's registry key is
    read as it states itself (here an old 14.16 record: the two sources are reported, not reconciled)."""
    without_vc_runtime(machine)
    shutil.copy(vc_runtime / "msvcp140.dll", system32(machine) / "msvcp140.dll")
    for name, kind, value in (
        ("Installed", "REG_DWORD", "1"),
        ("Version", "REG_SZ", "v14.16.27012.06"),
        ("Major", "REG_DWORD", "14"),
        ("Minor", "REG_DWORD", "16"),
        ("Bld", "REG_DWORD", "27012"),
        ("Rbld", "REG_DWORD", "6"),
    ):
        done = machine.run(["reg", "add", VC_KEY, "/v", name, "/t", kind, "/d", value, "/f"], timeout=60)
        assert done.returncode == 0, done.stderr[-2000:]
    try:
        found = facts(machine, customer, target_package)["facts"]["vc_runtime"]
    finally:
        without_vc_runtime(machine)
    assert found["registry"] == {"installed": True, "version": "14.16.27012.6", "view": "64-bit"}
    assert found["msvcp140"].lower() == "c:\\windows\\system32\\msvcp140.dll"
    assert found["msvcp140_version"] == pe_file_version(vc_runtime / "msvcp140.dll")
    assert found["msvcp140_version"].startswith("14.")


def test_an_old_runtime_file_and_no_registry_record(
    machine: Wine, customer: WinPython, target_package: Path, tmp_path: Path
) -> None:
    """An old redistributable's msvcp140.dll (msvc-runtime 14.34.31931, older than the 14.42 toolset of
    torch 2.13.0's DLLs) in System32 without a registry record: its FileVersion is read as it is."""
    wheel = wine.need("msvc_runtime-14.34.*-win_amd64.whl")
    with zipfile.ZipFile(wheel) as zf:
        name = next(n for n in zf.namelist() if n.lower().endswith("/scripts/msvcp140.dll"))
        old = tmp_path / "msvcp140.dll"
        old.write_bytes(zf.read(name))
    without_vc_runtime(machine)
    shutil.copy(old, system32(machine) / "msvcp140.dll")
    try:
        found = facts(machine, customer, target_package)["facts"]["vc_runtime"]
    finally:
        without_vc_runtime(machine)
    assert found["registry"] is None
    assert found["msvcp140_version"] == pe_file_version(old)
    assert found["msvcp140_version"].startswith("14.34.")


def test_path_folder_with_a_foreign_openmp_and_runtime(
    machine: Wine, customer: WinPython, target_package: Path, tmp_path: Path, vc_runtime: Path
) -> None:
    """A folder on PATH holding another environment's libiomp5md.dll (a name torch ships) and a
    msvcp140.dll is reported with each file; torch's own lib folder on PATH is not."""
    other = tmp_path / "other-env" / "Library" / "bin"
    other.mkdir(parents=True)
    shutil.copy(customer.site / "torch" / "lib" / "libiomp5md.dll", other / "libiomp5md.dll")
    shutil.copy(vc_runtime / "msvcp140.dll", other / "msvcp140.dll")
    (other / "unrelated.dll").write_bytes(b"MZ")
    own = windows_path(customer.site / "torch" / "lib")
    found = facts(
        machine, customer, target_package, path=f"{own};{windows_path(other)};C:\\windows\\system32"
    )["facts"]
    named = {d["name"].lower(): d for d in found["path_dlls"]}
    assert set(named) == {"libiomp5md.dll", "msvcp140.dll"}
    assert named["libiomp5md.dll"]["folder"].lower() == windows_path(other).lower()
    assert named["msvcp140.dll"]["version"] == pe_file_version(vc_runtime / "msvcp140.dll")


NEEDS_ZLIB = """
const char *zlibVersion(void);
__declspec(dllexport) const char *needs_zlib(void) { return zlibVersion(); }
"""


def mingw_dll(folder: Path, name: str, source: str, imports: dict[str, str]) -> Path:
    """A DLL built by MinGW from ``source`` that imports ``imports`` (DLL name -> one exported function),
    through import libraries made by dlltool; skips where MinGW is missing."""
    gcc = shutil.which("x86_64-w64-mingw32-gcc")
    dlltool = shutil.which("x86_64-w64-mingw32-dlltool")
    if gcc is None or dlltool is None:
        pytest.skip("MinGW (x86_64-w64-mingw32-gcc, -dlltool) is not installed; .ci/run installs it")
    libs = []
    for dll, function in imports.items():
        stem = dll.removesuffix(".dll")
        (folder / f"{stem}.def").write_text(f"LIBRARY {dll}\nEXPORTS\n{function}\n", encoding="ascii")
        subprocess.run(
            [dlltool, "-d", str(folder / f"{stem}.def"), "-l", str(folder / f"lib{stem}.a")], check=True
        )
        libs.append(f"-l{stem}")
    (folder / f"{name}.c").write_text(source, encoding="ascii")
    out = folder / f"{name}.dll"
    subprocess.run(
        [gcc, "-shared", "-o", str(out), str(folder / f"{name}.c"), f"-L{folder}", *libs], check=True
    )
    return out


def test_path_folder_with_a_dll_the_environment_needs_and_hostile_path(
    machine: Wine, customer: WinPython, target_package: Path, tmp_path: Path
) -> None:
    """A DLL the environment imports but neither ships nor gets from System32 (zlibwapi.dll, as cuDNN 8
    needs) is reported where PATH holds it; PATH's hostile entries (missing folders, a file, quotes, an
    empty entry, a UNC share, one folder twice in two cases, 200 entries) are read without failing, first 64
    only."""
    build = tmp_path / "build"
    build.mkdir()
    dll = mingw_dll(build, "needs_zlib", NEEDS_ZLIB, {"zlibwapi.dll": "zlibVersion"})
    own = customer.site / "envcheck_fake.libs"
    own.mkdir()
    shutil.copy(dll, own / dll.name)
    other = tmp_path / "cuda" / "bin"
    other.mkdir(parents=True)
    (other / "zlibwapi.dll").write_bytes(b"MZ")
    (other / "kernel32.dll").write_bytes(b"MZ")  # the OS's own name: System32's copy is the one loaded
    a_file = tmp_path / "not-a-folder.dll"
    a_file.write_bytes(b"MZ")
    entries = [
        windows_path(tmp_path / "missing"),
        windows_path(a_file),
        f'"{windows_path(other)}"',
        "",
        "\\\\no-such-server\\share\\bin",  # a network share: never listed (it may block for minutes)
        windows_path(other).upper(),
        *(windows_path(tmp_path / f"nothing-{i}") for i in range(200)),
    ]
    try:
        found = facts(machine, customer, target_package, path=";".join(entries))["facts"]
    finally:
        shutil.rmtree(own)
    assert [(d["name"].lower(), d["folder"].lower()) for d in found["path_dlls"]] == [
        ("zlibwapi.dll", windows_path(other).lower())
    ]
    assert found["path_dlls"][0]["version"] is None  # two bytes: no version resource


HOST = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
from envcheck_target.host import platform_facts
print("FACTS" + json.dumps(platform_facts()))
"""


def test_platform_facts_say_windows_not_the_wine_host(
    machine: Wine, customer: WinPython, target_package: Path
) -> None:
    """Under Wine "/etc/os-release" and "/.dockerenv" are the Linux host's files: a Windows target names
    its Windows, and no Linux container or cgroup quota."""
    done = machine.run([str(customer.exe), "-c", HOST, windows_path(target_package)], timeout=120)
    line = next((x for x in done.stdout.splitlines() if x.startswith("FACTS")), None)
    assert line is not None, done.stderr[-3000:]
    found = json.loads(line[len("FACTS") :])
    assert found["system"] == "Windows"
    assert found["distro"].startswith("Windows ") and " build " in found["distro"]
    assert found["container"] == []
    assert found["cpu"]["cgroup_cpu_quota"] is None


FAKE_C = "__declspec(dllimport) int missing_dep(void);\nint PyInit__C(void) { return missing_dep(); }\n"

LOAD_C = r"""
import json, sys
sys.path.insert(0, sys.argv[1])
sys.path.insert(0, sys.argv[2])
from envcheck_target import windows_facts as w
try:
    import fakepkg
except ImportError as e:
    print("FACTS" + json.dumps({"error": str(e), "failure": w.load_failure(str(e), sys.argv[3])}))
"""


def test_dll_load_failed_while_importing_an_extension_module(
    machine: Wine, customer: WinPython, target_package: Path, tmp_path: Path
) -> None:
    """CPython's own form of the failure (``DLL load failed while importing _C``, no file named): the
    loader is asked from the package's ``_C*.pyd`` and names the import it cannot find."""
    build = tmp_path / "build"
    build.mkdir()
    pyd = mingw_dll(build, "_C", FAKE_C, {"missing_dep.dll": "missing_dep"})
    package = tmp_path / "pkgs" / "fakepkg"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("from . import _C\n", encoding="ascii")
    shutil.copy(pyd, package / "_C.cp311-win_amd64.pyd")
    paths = [windows_path(target_package), windows_path(package.parent), windows_path(package)]
    done = machine.run(
        [str(customer.exe), "-c", LOAD_C, *paths],
        dll_overrides=wine.NO_VC_RUNTIME,
        timeout=120,
    )
    line = next((x for x in done.stdout.splitlines() if x.startswith("FACTS")), None)
    assert line is not None, (done.stdout[-2000:], done.stderr[-3000:])
    out = json.loads(line[len("FACTS") :])
    assert "DLL load failed while importing _C" in out["error"]
    failure = out["failure"]
    assert failure["dll"].lower().endswith("\\fakepkg\\_c.cp311-win_amd64.pyd")
    assert [(m["name"], m["needed_by"].lower().rsplit("\\", 1)[-1]) for m in failure["missing"]] == [
        ("missing_dep.dll", "_c.cp311-win_amd64.pyd")
    ]
