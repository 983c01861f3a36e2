"""Facts only a Windows machine holds: its version, the VC++ runtime installed on it, the DLLs a process
loaded (after ``import torch``, or as far as a failed import got), where Windows' loader stopped, and the
``PATH`` folders that hold a DLL of a name the environment uses.

Every reader here fails soft (a missing key, file or API is ``None`` or an empty list) and is bounded (so
many ``PATH`` entries, so many files a folder, so many bytes of a PE header). Nothing here runs outside
Windows: ``windows_facts`` and ``load_failure`` return None elsewhere.
"""

import os
import re
import struct
import sys

# The VC++ 2015-2022 runtime's DLLs (the redistributable installs them into System32), and the OpenMP
# runtimes torch and numpy builds load: names a PATH folder may hold a stale or foreign copy of.
VC_RUNTIME_DLL = re.compile(
    r"^(msvcp140(_\d|_atomic_wait|_codecvt_ids)?|vcruntime140(_1|_threads)?|concrt140|vccorlib140|vcomp140)"
    r"\.dll$",
    re.I,
)
OPENMP_DLL = re.compile(
    r"^(libiomp5md|libiompstubs5md|vcomp140d?|libomp(140\.x86_64)?|libgomp-1)\.dll$", re.I
)
VC_RUNTIME_KEY = r"SOFTWARE\Microsoft\VisualStudio\14.0\VC\Runtimes\x64"

MAX_PATH_ENTRIES = 64
MAX_FOLDER_FILES = 20000
MAX_PATH_DLLS = 200
MAX_ENV_DLLS = 4000
MAX_PE_READ = 2000
MAX_MODULES = 4096
MAX_CHAIN = 16
MAX_IMPORTS = 512
HEADER_BYTES = 1 << 12

LOAD_LIBRARY_SEARCH_DEFAULT_DIRS = 0x00001000
ERROR_MOD_NOT_FOUND = 126


def windows_facts(env_dll_names=()):
    # type: (object) -> dict | None
    """The machine's facts (None outside Windows): ``version``, ``vc_runtime``, ``path_dlls`` (DLLs of the
    names in ``env_dll_names``, the VC++ runtime's or an OpenMP runtime's, found in a ``PATH`` folder)."""
    if os.name != "nt":
        return None
    return {
        "version": _attempt(windows_version),
        "vc_runtime": _attempt(vc_runtime),
        "path_dlls": _attempt(lambda: path_dlls(env_dll_names), []),
    }


def _attempt(fn, default=None):
    try:
        return fn()
    except Exception:
        return default


def windows_version():
    """``{"version": "10.0", "build": 19045, "ubr": 3803, "product": "...", "display": "22H2"}`` from
    ``sys.getwindowsversion`` and the ``CurrentVersion`` registry key (each part None when unknown)."""
    info = sys.getwindowsversion()  # type: ignore[attr-defined]
    major, minor, build = info.platform_version if hasattr(info, "platform_version") else info[:3]
    out = {"version": "%d.%d" % (major, minor), "build": int(build), "ubr": None, "product": None}
    out["display"] = None
    values = _registry_values(r"SOFTWARE\Microsoft\Windows NT\CurrentVersion", 0)
    if values:
        ubr = values.get("UBR")
        out["ubr"] = ubr if isinstance(ubr, int) else None
        for key, name in (("product", "ProductName"), ("display", "DisplayVersion")):
            value = values.get(name)
            out[key] = value[:200] if isinstance(value, str) else None
    return out


def _registry_values(path, view):
    """The values of ``HKLM\\path`` as a dict (``view``: 0, or winreg's KEY_WOW64_32KEY / _64KEY), or None
    when the key is absent or unreadable. At most 64 values."""
    import winreg

    try:
        key = winreg.OpenKey(winreg.HKEY_LOCAL_MACHINE, path, 0, winreg.KEY_READ | view)
    except OSError:
        return None
    out = {}
    try:
        for i in range(64):
            try:
                name, value, _kind = winreg.EnumValue(key, i)
            except OSError:
                break
            out[name] = value
    finally:
        winreg.CloseKey(key)
    return out


def vc_runtime():
    """The VC++ 2015-2022 x64 runtime as the machine records it: the redistributable's registry key
    (both registry views: its installer is 32-bit) and ``System32\\msvcp140.dll`` with its FileVersion.

    ``registry``: ``{"installed": bool, "version": "14.44.35112.0", "view": "64-bit" | "32-bit"}`` or None
    (no key); ``msvcp140``: the file's path or None (absent); ``msvcp140_version``: its FileVersion or None
    (absent, or a file without a version resource)."""
    import winreg

    registry = None
    for view, label in ((winreg.KEY_WOW64_64KEY, "64-bit"), (winreg.KEY_WOW64_32KEY, "32-bit")):
        values = _registry_values(VC_RUNTIME_KEY, view)
        if values is None:
            continue
        parts = [values.get(k) for k in ("Major", "Minor", "Bld", "Rbld")]
        if all(isinstance(p, int) for p in parts):
            version = ".".join(str(p) for p in parts)
        else:
            text = values.get("Version")
            version = text.lstrip("vV")[:40] if isinstance(text, str) else None
        installed = values.get("Installed")
        registry = {"installed": installed == 1, "version": version, "view": label}
        break
    system = system_directory()
    path = os.path.join(system, "msvcp140.dll") if system else None
    present = bool(path) and os.path.isfile(path)
    return {
        "registry": registry,
        "msvcp140": path if present else None,
        "msvcp140_version": file_version(path) if present else None,
    }


def system_directory():
    """``C:\\Windows\\System32`` as ``GetSystemDirectoryW`` says, or None."""
    import ctypes

    buf = ctypes.create_unicode_buffer(520)
    n = ctypes.WinDLL("kernel32").GetSystemDirectoryW(buf, 520)
    return buf.value if 0 < n < 520 else None


def file_version(path):
    """The FileVersion of ``path``'s version resource (``14.44.35112.1``), or None."""
    import ctypes
    from ctypes import wintypes

    version = ctypes.WinDLL("version")
    version.GetFileVersionInfoSizeW.argtypes = [wintypes.LPCWSTR, ctypes.POINTER(wintypes.DWORD)]
    version.GetFileVersionInfoW.argtypes = [wintypes.LPCWSTR, wintypes.DWORD, wintypes.DWORD, ctypes.c_void_p]
    version.VerQueryValueW.argtypes = [
        ctypes.c_void_p,
        wintypes.LPCWSTR,
        ctypes.POINTER(ctypes.c_void_p),
        ctypes.POINTER(wintypes.UINT),
    ]
    handle = wintypes.DWORD()
    size = version.GetFileVersionInfoSizeW(path, ctypes.byref(handle))
    if not size or size > (1 << 20):
        return None
    data = ctypes.create_string_buffer(size)
    if not version.GetFileVersionInfoW(path, 0, size, data):
        return None
    pointer = ctypes.c_void_p()
    length = wintypes.UINT()
    if not version.VerQueryValueW(data, "\\", ctypes.byref(pointer), ctypes.byref(length)):
        return None
    if length.value < 52 or not pointer.value:
        return None
    fixed = ctypes.string_at(pointer.value, 52)
    signature, _struct, ms, ls = struct.unpack_from("<IIII", fixed, 0)
    if signature != 0xFEEF04BD:
        return None
    return "%d.%d.%d.%d" % (ms >> 16, ms & 0xFFFF, ls >> 16, ls & 0xFFFF)


def path_entries():
    """The folders of ``PATH`` in order, without duplicates (compared case-insensitively), bounded. A
    network folder (a UNC path, a drive Windows calls remote) is left out: listing an unreachable share
    can block for minutes, past the probe's deadline, and the facts would be lost with it."""
    out, seen = [], set()
    for raw in (os.environ.get("PATH") or "").split(os.pathsep):
        entry = raw.strip().strip('"')
        if not entry or os.path.normcase(entry) in seen or _remote(entry):
            continue
        seen.add(os.path.normcase(entry))
        out.append(entry)
        if len(out) >= MAX_PATH_ENTRIES:
            break
    return out


DRIVE_REMOTE = 4


def _remote(folder):
    """Whether ``folder`` is on a network share (UNC, or a drive ``GetDriveTypeW`` calls remote)."""
    if folder.startswith(("\\\\", "//")):
        return True
    drive = os.path.splitdrive(folder)[0]
    if len(drive) != 2 or drive[1] != ":":
        return False
    try:
        import ctypes

        return ctypes.WinDLL("kernel32").GetDriveTypeW(drive + "\\") == DRIVE_REMOTE
    except (AttributeError, OSError):
        return False


def environment_dll_names(folders, system=None):
    # type: (list, str | None) -> set
    """The lower-case names of the DLLs the environment ships in ``folders`` (its own: torch's ``lib``, a
    ``Library\\bin``, the folder of ``python.exe``) and of those its DLLs import that neither it nor
    ``system`` (System32: the OS's own) holds, such as a ``zlibwapi.dll`` a cuDNN needs. Bounded: so many
    files a folder, names and PE headers read."""
    names = set()
    binaries = []
    for folder in folders:
        try:
            with os.scandir(folder) as it:
                for i, entry in enumerate(it):
                    if i >= MAX_FOLDER_FILES or len(names) >= MAX_ENV_DLLS:
                        break
                    lower = entry.name.lower()
                    if lower.endswith(".dll"):
                        names.add(lower)
                    if lower.endswith((".dll", ".pyd")) and len(binaries) < MAX_PE_READ:
                        binaries.append(entry.path)
        except OSError:
            continue
    imported = set()
    for path in binaries:
        facts = _attempt(lambda p=path: pe_facts(p))  # an unreadable file (locked, denied) is skipped
        for name in facts["imports"] if facts else ():
            lower = name.lower()
            if not lower.startswith(("api-ms-win-", "ext-ms-win-")) and lower.endswith(".dll"):
                imported.add(lower)
    for name in sorted(imported - names):
        if len(names) >= MAX_ENV_DLLS:
            break
        if system and os.path.isfile(os.path.join(system, name)):
            continue
        names.add(name)
    return names


def path_dlls(env_dll_names):
    """``[{"name", "folder", "path", "version"}]``: for each ``PATH`` folder, the DLLs in it named as one of
    ``env_dll_names`` (shipped or needed by the environment), a VC++ runtime DLL or an OpenMP runtime, in
    ``PATH`` order (the environment's own folders are left out: they are where those names should come
    from; in System32 the VC++ runtime is where the redistributable puts it)."""
    wanted = {n.lower() for n in env_dll_names}
    own = {os.path.normcase(os.path.abspath(f)) for f in _own_folders()}
    system = _attempt(system_directory)
    system = os.path.normcase(os.path.abspath(system)) if system else None
    out = []
    for folder in path_entries():
        try:
            normal = os.path.normcase(os.path.abspath(folder))
            if normal in own:
                continue
            with os.scandir(folder) as it:
                for i, entry in enumerate(it):
                    if i >= MAX_FOLDER_FILES or len(out) >= MAX_PATH_DLLS:
                        break
                    name = entry.name
                    lower = name.lower()
                    if not lower.endswith(".dll"):
                        continue
                    # System32 is where the redistributable puts the VC++ runtime: only a copy of a DLL the
                    # environment ships, or an OpenMP runtime, is out of place there.
                    if VC_RUNTIME_DLL.match(name) and normal == system:
                        continue
                    if lower in wanted or VC_RUNTIME_DLL.match(name) or OPENMP_DLL.match(name):
                        path = os.path.join(folder, name)
                        version = _attempt(lambda p=path: file_version(p))
                        out.append({"name": name, "folder": folder, "path": path, "version": version})
        except (OSError, ValueError):
            continue
    return out


def _own_folders():
    """The environment's own DLL folders: beside ``python.exe``, ``Library\\bin`` (conda), ``DLLs``, and the
    ``lib`` / ``.libs`` folders of the packages in the environment's site folders."""
    folders = [os.path.dirname(sys.executable)]
    for prefix in (sys.prefix, getattr(sys, "base_prefix", sys.prefix)):
        folders.extend([os.path.join(prefix, "Library", "bin"), os.path.join(prefix, "DLLs")])
    for entry in sys.path:
        if not entry or not os.path.isdir(entry) or entry.lower().endswith(".zip"):
            continue
        folders.append(os.path.join(entry, "torch", "lib"))
        try:
            with os.scandir(entry) as it:
                for i, item in enumerate(it):
                    if i >= MAX_FOLDER_FILES:
                        break
                    if item.name.lower().endswith(".libs"):
                        folders.append(item.path)
        except OSError:
            continue
    return folders


def env_dll_names():
    """The names of the DLLs the environment ships in its own folders, or needs from outside them."""
    # The facts probe must finish: a failure here costs these names, never the snapshot.
    return _attempt(lambda: environment_dll_names(_own_folders(), _attempt(system_directory)), set())


def loaded_modules():
    """Full paths of the modules mapped into this process (``EnumProcessModules``), in load order, or []."""
    if os.name != "nt":
        return []
    from .loaded_libraries import loaded_libraries

    return _attempt(loaded_libraries, [])[:MAX_MODULES]


def pe_facts(path):
    # type: (str) -> dict | None
    """``{"imports": [names], "linker": "14.42"}`` of a PE file (its import directory, read with bounded
    seeks: torch_cpu.dll is 250 MB), or None when it is not one (or its headers are cut or broken)."""
    try:
        return _pe_facts(path)
    except (struct.error, IndexError, ValueError):
        return None


def _pe_facts(path):
    with open(path, "rb") as f:
        head = f.read(HEADER_BYTES)
        if len(head) < 0x40 or head[:2] != b"MZ":
            return None
        pe = struct.unpack_from("<I", head, 0x3C)[0]
        if pe + 24 > len(head) or head[pe : pe + 4] != b"PE\0\0":
            return None
        sections_n, _t, _p, _n, optional_size = struct.unpack_from("<HIIIH", head, pe + 6)
        optional = pe + 24
        magic = struct.unpack_from("<H", head, optional)[0]
        linker = "%d.%d" % (head[optional + 2], head[optional + 3])
        directories = optional + (112 if magic == 0x20B else 96)
        if directories + 16 > len(head):
            return {"imports": [], "linker": linker}
        import_rva = struct.unpack_from("<I", head, directories + 8)[0]
        sections = []
        start = optional + optional_size
        for i in range(min(sections_n, 96)):
            at = start + 40 * i
            if at + 40 > len(head):
                break
            vsize, vaddr, rsize, raw = struct.unpack_from("<IIII", head, at + 8)
            sections.append((vaddr, max(vsize, rsize), raw))

        def offset(rva):
            for vaddr, size, raw in sections:
                if vaddr <= rva < vaddr + size:
                    return rva - vaddr + raw
            return None

        names = []
        at = offset(import_rva) if import_rva else None
        while at is not None and len(names) < MAX_IMPORTS:
            f.seek(at)
            entry = f.read(20)
            if len(entry) < 20 or entry == b"\0" * 20:
                break
            name_at = offset(struct.unpack_from("<I", entry, 12)[0])
            if name_at is not None:
                f.seek(name_at)
                raw = f.read(256).split(b"\0", 1)[0]
                if raw:
                    names.append(raw.decode("ascii", "replace"))
            at += 20
        return {"imports": names, "linker": linker}


_ERROR_LOADING = re.compile(r'Error loading "([^"]+)"')


_WHILE_IMPORTING = re.compile(r"DLL load failed while importing ([A-Za-z_][A-Za-z0-9_]*)")


def failing_dll(error, package_dir=None):
    # type: (str | None, str | None) -> str | None
    """The DLL a failed ``import torch`` names (``Error loading "...\\c10.dll"``), or the extension module
    of ``package_dir`` that ``DLL load failed while importing _C`` names (``_C.cp311-win_amd64.pyd``), or
    None."""
    found = _ERROR_LOADING.search(error or "")
    if found:
        return found.group(1)
    named = _WHILE_IMPORTING.search(error or "")
    if not named or not package_dir:
        return None
    try:
        candidates = sorted(os.listdir(package_dir))[:MAX_FOLDER_FILES]
    except OSError:
        return None
    for name in candidates:
        lower = name.lower()
        if lower.endswith(".pyd") and lower.split(".", 1)[0] == named.group(1).lower():
            return os.path.join(package_dir, name)
    return None


def load_failure(error, package_dir=None):
    # type: (str, str | None) -> dict | None
    """Where Windows' loader stopped, asked of the loader itself after an import failed with ``error``.

    ``{"dll", "chain": [{"name", "path", "linker"}], "missing": [{"name", "needed_by"}], "refused": [{"name",
    "path", "needed_by", "error"}], "error"}``: starting from the DLL the error names, each import that does
    not load is found on disk (the importer's folder, ``python.exe``'s, System32) and followed (``chain``,
    with each file's linker version) down to the DLLs that exist nowhere the loader looks (``missing``) or
    exist and still fail to load (``refused``); ``needed_by`` is the path of the file importing it. Windows
    stops at the first of them; all are listed here, in import order. When every import loads, ``error`` is
    the Windows error of loading the DLL itself (its start-up code failed), None when it now loads. None
    outside Windows or when the error names no DLL."""
    if os.name != "nt":
        return None
    dll = failing_dll(error, package_dir)
    if not dll or not os.path.isfile(dll):
        return None
    import ctypes
    from ctypes import wintypes

    kernel32 = ctypes.WinDLL("kernel32", use_last_error=True)
    kernel32.LoadLibraryExW.argtypes = [wintypes.LPCWSTR, wintypes.HANDLE, wintypes.DWORD]
    kernel32.LoadLibraryExW.restype = wintypes.HMODULE
    kernel32.GetModuleHandleW.argtypes = [wintypes.LPCWSTR]
    kernel32.GetModuleHandleW.restype = wintypes.HMODULE
    system = _attempt(system_directory)
    out = {"dll": dll, "chain": [], "missing": [], "refused": []}
    seen = set()

    def follow(path, depth):
        facts = _attempt(lambda: pe_facts(path))
        out["chain"].append(
            {"name": os.path.basename(path), "path": path, "linker": facts["linker"] if facts else None}
        )
        if facts is None or depth >= MAX_CHAIN:
            return
        folder = os.path.dirname(path)
        for name in facts["imports"]:
            lower = name.lower()
            if lower in seen or lower.startswith(("api-ms-win-", "ext-ms-win-")):
                continue
            seen.add(lower)
            if kernel32.GetModuleHandleW(name):
                continue
            local = os.path.join(folder, name)
            target = local if os.path.isfile(local) else name
            flags = 0x00000008 if target == local else LOAD_LIBRARY_SEARCH_DEFAULT_DIRS
            handle = kernel32.LoadLibraryExW(target, None, flags)
            if handle:
                continue
            code = ctypes.get_last_error()
            found = None
            for where in (folder, os.path.dirname(sys.executable), system):
                candidate = os.path.join(where, name) if where else None
                if candidate and os.path.isfile(candidate):
                    found = candidate
                    break
            if found is None:
                out["missing"].append({"name": name, "needed_by": path})
                continue
            before = len(out["missing"]) + len(out["refused"])
            follow(found, depth + 1)
            if len(out["missing"]) + len(out["refused"]) == before:
                out["refused"].append({"name": name, "path": found, "needed_by": path, "error": code})

    follow(dll, 0)
    # With every import in place, the DLL itself: its own start-up code may be what fails (error 998 or
    # 1114: c10.dll's initialisers on a msvcp140 older than the toolset that built it).
    if not out["missing"] and not out["refused"]:
        if kernel32.LoadLibraryExW(dll, None, 0x00000100 | LOAD_LIBRARY_SEARCH_DEFAULT_DIRS):
            out["error"] = None
        else:
            out["error"] = ctypes.get_last_error()
    return out


def loaded_openmp(modules):
    """The loaded modules that are an OpenMP runtime."""
    return [m for m in modules if OPENMP_DLL.match(os.path.basename(m))]
