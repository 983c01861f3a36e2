"""The shared libraries mapped into this process (the dynamic truth, docs/architecture.md)."""

import os
import sys

from .names import NATIVE_SUFFIX
from .system import read_text


def loaded_libraries():
    """Paths of the shared libraries mapped into this process, in load order where the OS tells it."""
    if sys.platform.startswith("linux"):
        seen, out = set(), []
        text = read_text("/proc/self/maps", 1 << 24) or ""
        for line in text.splitlines():
            parts = line.split(None, 5)
            if len(parts) < 6:
                continue
            path = parts[5].strip()
            if path.endswith(" (deleted)"):
                path = path[: -len(" (deleted)")]
            if not path.startswith("/") or path in seen or not NATIVE_SUFFIX.search(os.path.basename(path)):
                continue
            seen.add(path)
            out.append(path)
        return out
    if sys.platform == "darwin":
        import ctypes

        dyld = ctypes.CDLL(None)
        dyld._dyld_get_image_name.restype = ctypes.c_char_p
        return [
            dyld._dyld_get_image_name(i).decode("utf-8", "replace") for i in range(dyld._dyld_image_count())
        ]
    if os.name == "nt":
        import ctypes
        from ctypes import wintypes

        psapi = ctypes.WinDLL("psapi")
        kernel32 = ctypes.WinDLL("kernel32")
        # Without argtypes ctypes passes a 64-bit module handle as a C int and refuses it (ArgumentError).
        kernel32.GetCurrentProcess.restype = wintypes.HANDLE
        psapi.EnumProcessModules.argtypes = [
            wintypes.HANDLE,
            ctypes.POINTER(wintypes.HMODULE),
            wintypes.DWORD,
            ctypes.POINTER(wintypes.DWORD),
        ]
        psapi.GetModuleFileNameExW.argtypes = [
            wintypes.HANDLE,
            wintypes.HMODULE,
            wintypes.LPWSTR,
            wintypes.DWORD,
        ]
        process = kernel32.GetCurrentProcess()
        needed = wintypes.DWORD()
        modules = (wintypes.HMODULE * 4096)()
        psapi.EnumProcessModules(process, modules, ctypes.sizeof(modules), ctypes.byref(needed))
        out = []
        for i in range(min(needed.value // ctypes.sizeof(wintypes.HMODULE), 4096)):
            buf = ctypes.create_unicode_buffer(1024)
            if psapi.GetModuleFileNameExW(process, modules[i], buf, 1024):
                out.append(buf.value)
        return out
    return []
