"""ENV-WIN-DLL-NOT-FOUND and the Windows facts it reads, on envcheck's side (no Wine: tests/windows runs
the real loader): the rule's verdict and remedy, the failed import folded under it, a manifest without the
facts, the probe's hostile answers, and the target's PE reader on real and broken files."""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import pytest
from diffdata import manifest

from envcheck.app import flows
from envcheck.collect import facts
from envcheck.core.errors import ManifestError
from envcheck.diff.policy import Policy
from envcheck.inside import windows_facts

C10 = "C:\\env\\Lib\\site-packages\\torch\\lib\\c10.dll"
ERROR = (
    "OSError: [WinError 126] The specified module could not be found. "
    f'Error loading "{C10}" or one of its dependencies.'
)


def windows(
    *,
    missing: tuple[str, ...] = ("MSVCP140.dll",),
    refused: list[dict[str, Any]] | None = None,
    registry: Any = None,
) -> Any:
    def edit(data: dict[str, Any]) -> None:
        data["meta"]["probe"] = {
            "status": "error",
            "stage": "import torch",
            "exception": ERROR,
            "exit_code": 3,
        }
        data["windows"] = {
            "version": {"version": "10.0", "build": 19045},
            "vc_runtime": {"registry": registry, "msvcp140": None, "msvcp140_version": None},
            "loaded": ["C:\\env\\python.exe", "C:\\Windows\\System32\\ntdll.dll"],
            "load_failure": {
                "dll": C10,
                "chain": [
                    {"name": "c10.dll", "path": C10, "linker": "14.42"},
                    {"name": "helper.dll", "path": "C:\\env\\helper.dll", "linker": "14.29"},
                    {"name": "gnu.dll", "path": "C:\\env\\gnu.dll", "linker": "2.39"},
                ],
                "missing": [{"name": n, "needed_by": C10} for n in missing],
                "refused": refused or [],
            },
        }

    return edit


def doctor(*edits: Any) -> dict[str, Any]:
    report = flows.doctor("customer.json", manifest("dev-cpu", *edits), Policy())
    return {f.key: f for f in report.findings}


def test_a_missing_vc_runtime_dll_is_the_root_of_the_failed_import() -> None:
    found = doctor(windows())
    root = found["ENV-WIN-DLL-NOT-FOUND:MSVCP140.dll"]
    assert root.caused_by is None and root.severity == "error"
    assert root.message.startswith("MSVCP140.dll, needed by c10.dll, is found nowhere the loader looks")
    assert "not installed (no redistributable registry key; no System32\\msvcp140.dll)" in root.message
    # The newest MSVC toolset of the chain sets the floor; GNU ld's linker version says nothing of it.
    assert "14.42 or newer (c10.dll: built with MSVC toolset 14.42 (PE linker version))" in root.remedy
    assert "winget install --exact --id Microsoft.VCRedist.2015+.x64" in root.remedy
    assert root.target == "c10.dll: MSVCP140.dll not found"
    assert found["ENV-PROBE-FAILED:import torch"].caused_by == root.key


def test_a_refused_dll_and_an_installed_runtime_are_said_as_they_are() -> None:
    refused = [
        {
            "name": "VCRUNTIME140_1.dll",
            "path": "C:\\Windows\\System32\\VCRUNTIME140_1.dll",
            "needed_by": C10,
            "error": 193,
        }
    ]
    registry = {"installed": True, "version": "14.29.30133.0", "view": "32-bit"}
    found = doctor(windows(missing=(), refused=refused, registry=registry))
    root = found["ENV-WIN-DLL-NOT-FOUND:VCRUNTIME140_1.dll"]
    assert "is at C:\\Windows\\System32\\VCRUNTIME140_1.dll but does not load (error 193)" in root.message
    assert "installed as 14.29.30133.0 (registry; no System32\\msvcp140.dll)" in root.message
    assert root.target == "c10.dll: VCRUNTIME140_1.dll refused (C:\\Windows\\System32\\VCRUNTIME140_1.dll)"


def test_a_dll_no_package_ships_and_no_runtime_is_named_without_the_redistributable() -> None:
    found = doctor(windows(missing=("zlibwapi.dll",)))
    root = found["ENV-WIN-DLL-NOT-FOUND:zlibwapi.dll"]
    assert "Redistributable" not in root.message + root.remedy
    assert (
        root.remedy == "Install what provides zlibwapi.dll, or reinstall the package that should bundle it."
    )
    assert found["ENV-PROBE-FAILED:import torch"].caused_by == root.key


def test_no_windows_facts_no_finding() -> None:
    assert not any(k.startswith("ENV-WIN-") for k in doctor())
    old = manifest("dev-cpu")
    assert old.windows is None  # a manifest from before the field loads, and round-trips without it


def test_the_import_error_must_name_the_dll_the_loader_started_from() -> None:
    """A loader verdict on another DLL than the one the import's error names does not explain it."""

    def other(data: dict[str, Any]) -> None:
        data["windows"]["load_failure"]["dll"] = "C:\\elsewhere\\other.dll"

    found = doctor(windows(), other)
    assert found["ENV-PROBE-FAILED:import torch"].caused_by != "ENV-WIN-DLL-NOT-FOUND:MSVCP140.dll"


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"version": {"version": 10, "build": 1}}, "windows.version.version"),
        ({"path_dlls": [{"name": "x.dll"}]}, "windows.path_dlls[0]"),
        (
            {"vc_runtime": {"registry": {"installed": "yes", "version": None, "view": "64-bit"}}},
            "windows.vc_runtime",
        ),
        ("not an object", "windows"),
    ],
)
def test_a_malformed_windows_answer_is_named_where(raw: Any, where: str) -> None:
    data = {"platform": manifest_platform(), "python": None, "windows": raw}
    with pytest.raises(ManifestError) as caught:
        facts.static_facts(data)
    assert any(p.startswith(where) for p in caught.value.problems), caught.value.problems


@pytest.mark.parametrize(
    ("raw", "where"),
    [
        ({"loaded": "C:\\x.dll"}, "windows_load.loaded"),
        ({"loaded": [], "failure": {"chain": []}}, "windows_load.load_failure.dll"),
        (
            {"failure": {"dll": "x", "missing": [{"name": 1, "needed_by": "y"}]}},
            "windows_load.load_failure.missing",
        ),
        ([], "windows_load"),
    ],
)
def test_a_malformed_load_failure_is_named_where(raw: Any, where: str) -> None:
    with pytest.raises(ManifestError) as caught:
        facts.runtime_facts({"windows_load": raw})
    assert any(p.startswith(where) for p in caught.value.problems), caught.value.problems


def manifest_platform() -> dict[str, Any]:
    from diffdata import raw

    return dict(raw("dev-cpu")["platform"])


def test_pe_reader_on_torch_windows_dlls(tmp_path: Path) -> None:
    """The target's stdlib PE reader against pefile on c10.dll of the real torch 2.13.0 Windows wheel."""
    import pefile
    import wine

    wheel = wine.need("torch-2.13.0-cp311-cp311-win_amd64.whl")
    with zipfile.ZipFile(wheel) as zf:
        path = tmp_path / "c10.dll"
        path.write_bytes(zf.read("torch/lib/c10.dll"))
    got = windows_facts.pe_facts(str(path))
    pe = pefile.PE(str(path), fast_load=True)
    pe.parse_data_directories(directories=[pefile.DIRECTORY_ENTRY["IMAGE_DIRECTORY_ENTRY_IMPORT"]])
    assert got == {
        "imports": [e.dll.decode() for e in pe.DIRECTORY_ENTRY_IMPORT],
        "linker": f"{pe.OPTIONAL_HEADER.MajorLinkerVersion}.{pe.OPTIONAL_HEADER.MinorLinkerVersion}",
    }
    assert "MSVCP140.dll" in got["imports"] and got["linker"] == "14.42"


@pytest.mark.parametrize(
    "content",
    [
        b"",
        b"MZ",
        b"MZ" + b"\0" * 58 + b"\xff\xff\xff\x7f",  # e_lfanew far past the file
        b"MZ" + b"\0" * 58 + b"\x40\0\0\0" + b"PE\0\0" + b"\0" * 20,  # headers cut after the COFF header
        b"MZ" + b"\0" * 58 + b"\x40\0\0\0" + b"PE\0\0" + b"\0\0\xff\xff" + b"\0" * 14 + b"\x0b\x02\x0e\x2a",
        b"\x7fELF" + b"\0" * 100,
    ],
)
def test_pe_reader_on_broken_files_never_raises(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "broken.dll"
    path.write_bytes(content)
    got = windows_facts.pe_facts(str(path))
    assert got is None or isinstance(got["imports"], list)


def test_failing_dll_and_the_loader_outside_windows() -> None:
    assert windows_facts.failing_dll(ERROR) == C10
    assert windows_facts.failing_dll("ImportError: DLL load failed while importing _C") is None
    assert windows_facts.failing_dll("x" * 100_000) is None
    assert windows_facts.load_failure(ERROR) is None  # only Windows has that loader
    assert windows_facts.windows_facts() is None


def test_the_summary_shows_the_windows_facts_escaped() -> None:
    """``envcheck show`` / snapshot's lines: the version, the runtime, where the loader stopped, the PATH
    DLLs; a hostile value (an escape sequence in a DLL name) prints as visible data."""
    from envcheck.report.summary import summary

    def hostile(data: dict[str, Any]) -> None:
        data["windows"]["version"]["ubr"] = 3803
        data["windows"]["version"]["product"] = "Windows 10 Pro"
        data["windows"]["load_failure"]["missing"][0]["name"] = "MSVCP140.dll\x1b[2J"
        data["windows"]["path_dlls"] = [
            {"name": "libiomp5md.dll", "folder": "C:\\other\\bin", "path": "C:\\other\\bin\\libiomp5md.dll"}
        ]

    text = summary(manifest("dev-cpu", windows(), hostile), short=True)
    lines = text.splitlines()
    assert "windows    10.0 build 19045.3803 (Windows 10 Pro)" in lines
    assert "vc++       not installed (no redistributable registry key; no System32\\msvcp140.dll)" in lines
    assert any(line.startswith("loader     stops at c10.dll: MSVCP140.dll") for line in lines)
    assert "\x1b" not in text
    assert "PATH DLLs  1 outside the environment: C:\\other\\bin\\libiomp5md.dll" in lines


def test_the_openmp_runtimes_loaded_come_from_the_failed_import_or_the_loaded_libraries() -> None:
    """``windows.openmp``: the OpenMP DLLs among the modules a failed import loaded (or, after a
    successful one, among ``runtimes.loaded``), matched by name in any case."""
    from envcheck.collect.snapshot import _windows_runtime
    from envcheck.manifest.model import WindowsInfo

    loaded = ["C:\\env\\python.exe", "C:\\env\\torch\\lib\\LIBIOMP5MD.DLL", "C:\\x\\vcomp140.dll"]
    found = facts.runtime_facts({"windows_load": {"loaded": loaded, "failure": None}})
    got = _windows_runtime(WindowsInfo(), found, None)
    assert got is not None and got.loaded == loaded and got.load_failure is None
    assert got.openmp == ["C:\\env\\torch\\lib\\LIBIOMP5MD.DLL", "C:\\x\\vcomp140.dll"]
    assert _windows_runtime(None, found, None) is None  # not a Windows manifest


ERROR_998 = (
    "OSError: [WinError 998] Invalid access to memory location. "
    f'Error loading "{C10}" or one of its dependencies.'
)


def old_runtime(file_version: str | None, registry: Any = None, error: int | None = 998) -> Any:
    """A machine whose System32 msvcp140.dll has ``file_version``, where c10.dll's imports all load and
    c10.dll itself fails with ``error``."""

    def edit(data: dict[str, Any]) -> None:
        windows(missing=(), registry=registry)(data)
        data["meta"]["probe"]["exception"] = ERROR_998
        data["windows"]["vc_runtime"]["msvcp140"] = "C:\\Windows\\System32\\msvcp140.dll"
        data["windows"]["vc_runtime"]["msvcp140_version"] = file_version
        data["windows"]["load_failure"]["error"] = error

    return edit


def test_a_runtime_older_than_the_toolset_is_the_root_of_the_failed_import() -> None:
    found = doctor(old_runtime("14.34.31931.0"))
    root = found["ENV-WIN-VC-RUNTIME-OLD:VC++ runtime"]
    assert root.caused_by is None and root.severity == "error"
    assert root.message.startswith(
        "The Microsoft Visual C++ 2015-2022 Redistributable (x64) on this machine is 14.34.31931.0 "
        "(System32\\msvcp140.dll), older than 14.42"
    )
    assert "c10.dll: built with MSVC toolset 14.42" in root.message
    assert "Loading c10.dll fails with error 998 though every import it has loads." in root.message
    assert root.remedy.startswith(
        "Install the Microsoft Visual C++ 2015-2022 Redistributable (x64), 14.42 or newer"
    )
    assert (root.base, root.target) == (">= 14.42", "14.34.31931.0")
    assert found["ENV-PROBE-FAILED:import torch"].caused_by == root.key
    assert not any(k.startswith("ENV-WIN-DLL-NOT-FOUND") for k in found)


@pytest.mark.parametrize(
    ("file_version", "registry", "fires"),
    [
        ("14.44.35211.0", None, False),  # new enough
        ("14.42.34433.0", None, False),  # the floor itself
        (
            None,
            {"installed": True, "version": "14.29.30133.0", "view": "32-bit"},
            True,
        ),  # the key, no resource
        (None, {"installed": False, "version": "14.29.30133.0", "view": "64-bit"}, False),  # Installed=0
        (None, None, False),  # a file without a version and no key: nothing to compare
    ],
)
def test_which_runtime_version_is_compared(file_version: str | None, registry: Any, fires: bool) -> None:
    found = doctor(old_runtime(file_version, registry))
    assert ("ENV-WIN-VC-RUNTIME-OLD:VC++ runtime" in found) is fires


def test_an_old_runtime_does_not_explain_a_missing_dll() -> None:
    """A failure that is not a start-up fault (a DLL not found) is not put under the old runtime."""

    def missing_too(data: dict[str, Any]) -> None:
        data["meta"]["probe"]["exception"] = ERROR
        data["windows"]["load_failure"]["missing"] = [{"name": "zlibwapi.dll", "needed_by": C10}]
        data["windows"]["load_failure"]["error"] = None

    found = doctor(old_runtime("14.34.31931.0"), missing_too)
    assert found["ENV-PROBE-FAILED:import torch"].caused_by == "ENV-WIN-DLL-NOT-FOUND:zlibwapi.dll"
    assert found["ENV-WIN-VC-RUNTIME-OLD:VC++ runtime"].caused_by is None


def test_the_environments_dll_names_survive_an_unreadable_file(tmp_path: Path) -> None:
    """A "DLL" that cannot be opened (here a folder of that name; on Windows a locked or denied file) is
    named but not read: the facts probe must finish."""
    (tmp_path / "folder.dll").mkdir()
    (tmp_path / "broken.dll").write_bytes(b"MZ")
    names = windows_facts.environment_dll_names([str(tmp_path), str(tmp_path / "missing")])
    assert names == {"folder.dll", "broken.dll"}


def test_dll_load_failed_while_importing_names_the_extension_module(tmp_path: Path) -> None:
    """``ImportError: DLL load failed while importing _C`` names a module, not a file: the extension module
    of that name in torch's folder is where the loader is asked from, and the verdict explains the error."""
    (tmp_path / "_C.cp311-win_amd64.pyd").write_bytes(b"MZ")
    (tmp_path / "_Cother.pyd").write_bytes(b"MZ")
    error = "ImportError: DLL load failed while importing _C: The specified module could not be found."
    assert windows_facts.failing_dll(error, str(tmp_path)) == str(tmp_path / "_C.cp311-win_amd64.pyd")
    assert windows_facts.failing_dll(error, None) is None
    assert windows_facts.failing_dll(error, str(tmp_path / "missing")) is None

    pyd = "C:\\env\\torch\\_C.cp311-win_amd64.pyd"

    def from_c(data: dict[str, Any]) -> None:
        data["meta"]["probe"]["exception"] = error
        data["windows"]["load_failure"]["dll"] = pyd
        data["windows"]["load_failure"]["chain"][0] = {"name": "_C.cp311-win_amd64.pyd", "path": pyd}
        data["windows"]["load_failure"]["missing"] = [{"name": "torch_python.dll", "needed_by": pyd}]

    found = doctor(windows(), from_c)
    root = found["ENV-WIN-DLL-NOT-FOUND:torch_python.dll"]
    assert root.target == "_C.cp311-win_amd64.pyd: torch_python.dll not found"
    assert found["ENV-PROBE-FAILED:import torch"].caused_by == root.key
