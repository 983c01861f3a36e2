"""Who provides a library that is not in the environment: the OS, a redistributable runtime, the GPU driver.

The tables name libraries by the name a binary asks for. Sources:

- Linux: the libraries every manylinux policy lets a wheel assume on the host (PEP 600 / auditwheel
  ``policy.json``: glibc's libraries, libgcc_s, libstdc++, X11 / GL / glib basics).
- Windows: API sets (``api-ms-win-*``, ``ext-ms-*``) are virtual names the loader maps to OS modules
  ("Windows API sets", Microsoft Learn); KnownDLLs (``HKLM\\SYSTEM\\CurrentControlSet\\Control\\Session
  Manager\\KnownDLLs`` on Windows 10/11) always load from System32; other System32 DLLs a binary commonly
  imports. The VC++ runtime is *not* the OS: "Latest supported Visual C++ Redistributable downloads".
- macOS: everything under ``/usr/lib`` and ``/System/Library`` lives in the dyld shared cache (macOS 11+).
"""

from __future__ import annotations

import re
from typing import Literal

ProviderKind = Literal["os", "redistributable", "driver", "interpreter"]

LINUX_OS = frozenset(
    {
        "libc.so.6",
        "libm.so.6",
        "libdl.so.2",
        "librt.so.1",
        "libpthread.so.0",
        "libutil.so.1",
        "libresolv.so.2",
        "libnsl.so.1",
        "libcrypt.so.1",
        "libanl.so.1",
        "libmvec.so.1",
        "libgcc_s.so.1",
        "libstdc++.so.6",
        "ld-linux-x86-64.so.2",
        "ld-linux-aarch64.so.1",
        "ld-linux.so.2",
        "ld64.so.2",
        "ld64.so.1",
        "ld-linux-riscv64-lp64d.so.1",
        "libX11.so.6",
        "libXext.so.6",
        "libXrender.so.1",
        "libICE.so.6",
        "libSM.so.6",
        "libGL.so.1",
        "libgobject-2.0.so.0",
        "libgthread-2.0.so.0",
        "libglib-2.0.so.0",
        # auditwheel's policy.json lets manylinux wheels assume zlib too: numpy's own wheel ships a
        # libgfortran that needs libz.so.1 and does not bundle it.
        "libz.so.1",
    }
)

WINDOWS_KNOWN_DLLS = frozenset(
    {
        "advapi32.dll",
        "clbcatq.dll",
        "combase.dll",
        "comdlg32.dll",
        "coml2.dll",
        "difxapi.dll",
        "gdi32.dll",
        "gdiplus.dll",
        "imagehlp.dll",
        "imm32.dll",
        "kernel32.dll",
        "msctf.dll",
        "msvcrt.dll",
        "normaliz.dll",
        "nsi.dll",
        "ole32.dll",
        "oleaut32.dll",
        "psapi.dll",
        "rpcrt4.dll",
        "sechost.dll",
        "setupapi.dll",
        "shcore.dll",
        "shell32.dll",
        "shlwapi.dll",
        "user32.dll",
        "wldap32.dll",
        "wow64.dll",
        "wow64win.dll",
        "ws2_32.dll",
        "ntdll.dll",
    }
)

WINDOWS_SYSTEM32 = frozenset(
    {
        "kernelbase.dll",
        "ucrtbase.dll",
        "msvcp_win.dll",
        "bcrypt.dll",
        "bcryptprimitives.dll",
        "crypt32.dll",
        "cfgmgr32.dll",
        "comctl32.dll",
        "d3d11.dll",
        "d3d12.dll",
        "dxgi.dll",
        "dbghelp.dll",
        "dbgeng.dll",
        "dnsapi.dll",
        "dwmapi.dll",
        "dwrite.dll",
        "d2d1.dll",
        "glu32.dll",
        "hid.dll",
        "iphlpapi.dll",
        "mpr.dll",
        "msi.dll",
        "mswsock.dll",
        "ncrypt.dll",
        "netapi32.dll",
        "opengl32.dll",
        "pdh.dll",
        "powrprof.dll",
        "secur32.dll",
        "shfolder.dll",
        "userenv.dll",
        "uxtheme.dll",
        "version.dll",
        "winhttp.dll",
        "wininet.dll",
        "winmm.dll",
        "wintrust.dll",
        "wsock32.dll",
        "wtsapi32.dll",
        "authz.dll",
        "avrt.dll",
        "cabinet.dll",
        "ntmarta.dll",
        "oleacc.dll",
        "propsys.dll",
        "rstrtmgr.dll",
        "winspool.drv",
        "winusb.dll",
        "wevtapi.dll",
        "setupapi.dll",
    }
)

# VCRUNTIME140.dll and VCRUNTIME140_1.dll ship beside python.exe in every python.org CPython (and conda's
# python): the loader finds them in the application folder, also on a machine without the redistributable
# (checked with Wine's loader and the embeddable CPython 3.11: only MSVCP140.dll is then missing).
INTERPRETER_VC_RUNTIME = "the VC++ runtime DLLs that ship beside python.exe (python.org and conda CPython)"

# name pattern -> (kind, the runtime a person installs or bundles)
_RUNTIMES: tuple[tuple[re.Pattern[str], ProviderKind, str], ...] = (
    (re.compile(r"^vcruntime140(_1)?\.dll$", re.I), "interpreter", INTERPRETER_VC_RUNTIME),
    (
        re.compile(
            r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140_threads|concrt140|vccorlib140)\.dll$",
            re.I,
        ),
        "redistributable",
        "Microsoft Visual C++ 2015-2022 Redistributable",
    ),
    (
        re.compile(r"^vcomp140\.dll$", re.I),
        "redistributable",
        "Microsoft Visual C++ OpenMP (vcomp140, VC++ 2015-2022 Redistributable)",
    ),
    (
        re.compile(r"^(msvc[pr]1[0-2]0|vcomp1[0-2]0)\.dll$", re.I),
        "redistributable",
        "Microsoft Visual C++ 2010-2013 Redistributable",
    ),
    (re.compile(r"^libiomp5(md)?(\.dll|\.so|\.dylib)$", re.I), "redistributable", "Intel OpenMP runtime"),
    (
        re.compile(r"^(libmmd|svml_dispmd|libifcoremd|libirngmd)\.dll$", re.I),
        "redistributable",
        "Intel compiler runtime",
    ),
    (
        re.compile(r"^libomp(140\.x86_64|140\.aarch64)?(\.dll|\.so(\.5)?|\.dylib)$", re.I),
        "redistributable",
        "LLVM OpenMP runtime",
    ),
    (
        re.compile(r"^libgomp(-1\.dll|\.so\.1|\.1\.dylib)$", re.I),
        "redistributable",
        "GNU OpenMP runtime (libgomp)",
    ),
    (
        re.compile(
            r"^(libgfortran\.so\.\d+|libquadmath\.so\.0|libgfortran\.\d+\.dylib|libquadmath\.0\.dylib)$"
        ),
        "redistributable",
        "GNU Fortran runtime",
    ),
    (
        re.compile(
            r"^(libgcc_s_seh-1|libgcc_s_dw2-1|libstdc\+\+-6|libwinpthread-1|libgfortran-\d|libquadmath-0)\.dll$",
            re.I,
        ),
        "redistributable",
        "GNU (MinGW-w64) runtime",
    ),
    (re.compile(r"^libgcc_s\.1(\.1)?\.dylib$"), "redistributable", "GNU runtime (libgcc_s)"),
    (
        re.compile(
            r"^(libcuda\.so(\.1)?|libnvidia-ml\.so(\.1)?|libnvcuvid\.so(\.1)?|libnvidia-[\w.-]+\.so[\d.]*|nvcuda\.dll|nvml\.dll)$",
            re.I,
        ),
        "driver",
        "NVIDIA GPU driver",
    ),
    (
        re.compile(r"^(python3\d*\.dll|libpython3[\d.]*m?\.so(\.[\d.]+)?|libpython3[\d.]*\.dylib)$", re.I),
        "interpreter",
        "the Python interpreter",
    ),
)


def classify_name(name: str, fmt: str) -> tuple[ProviderKind, str] | None:
    """``(kind, runtime)`` when a library of this name comes from outside the environment, else None."""
    base = name.rsplit("/", 1)[-1]
    for pattern, kind, runtime in _RUNTIMES:
        if pattern.search(base):
            return kind, runtime
    if fmt == "pe":
        low = base.lower()
        if is_api_set(low):
            return "os", "Windows API set"
        if low in WINDOWS_KNOWN_DLLS or low in WINDOWS_SYSTEM32:
            return "os", "Windows"
        return None
    if fmt == "macho":
        if name.startswith(("/usr/lib/", "/System/Library/")):
            return "os", "macOS"
        return None
    if base in LINUX_OS:
        return "os", "Linux base libraries a manylinux wheel may assume"
    return None


def is_api_set(lower_name: str) -> bool:
    """API set contract names are resolved by the loader's schema, never searched on disk."""
    return lower_name.startswith(("api-ms-win-", "ext-ms-"))


OpenMPFamily = Literal["gnu", "intel", "llvm", "msvc"]

_OPENMP = (
    # Renamed copies count: auditwheel's libgomp-a34b3233.so.1, delocate's libomp.dylib, delvewheel's
    # libiomp5md-<hash>.dll.
    (re.compile(r"^libgomp([-.]|$)", re.I), "gnu"),
    (re.compile(r"^libiomp5(md)?([-.]|$)", re.I), "intel"),
    (re.compile(r"^libomp(140\.(x86_64|aarch64))?([-.]|$)", re.I), "llvm"),
    (re.compile(r"^vcomp\d+([-.]|$)", re.I), "msvc"),
)


def openmp_family(file_name: str) -> OpenMPFamily | None:
    """The OpenMP runtime family of a file name (renamed copies included), or None."""
    for pattern, family in _OPENMP:
        if pattern.search(file_name):
            return family  # type: ignore[return-value]
    return None
