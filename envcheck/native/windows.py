"""Windows loader as Python >= 3.8 uses it for extension modules.

Python 3.8 loads an extension with ``LoadLibraryExW(path, NULL, LOAD_LIBRARY_SEARCH_DEFAULT_DIRS |
LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR)`` and no longer searches PATH or the current directory for its
dependencies (bpo-36085, "What's New In Python 3.8": "DLL dependencies for extension modules ... are now
resolved more securely. Only the system paths, the directory containing the DLL or PYD file, and
directories added with add_dll_directory() are searched"). Microsoft Learn, "Dynamic-link library search
order" (standard order for unpackaged apps, with the LOAD_LIBRARY_SEARCH flags):

1. API set names (``api-ms-win-*``, ``ext-ms-*``) are mapped by the OS's API set schema, never searched;
2. KnownDLLs load from System32 whatever the search path says;
3. LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR: the folder of the DLL passed to LoadLibraryEx — for a whole import
   that is the ``.pyd``'s folder, also for its dependencies' dependencies (the flags apply to the load
   operation, not to each DLL);
4. LOAD_LIBRARY_SEARCH_APPLICATION_DIR: the folder of ``python.exe`` (the base interpreter's: a venv's
   ``python.exe`` is a launcher that starts the base one);
5. LOAD_LIBRARY_SEARCH_USER_DIRS: ``os.add_dll_directory`` folders. torch's ``__init__`` adds
   ``torch\\lib``, ``sys.exec_prefix\\Library\\bin``, ``sys.base_exec_prefix\\Library\\bin`` and the user
   base's ``Library\\bin``; delvewheel-repaired wheels add their ``<name>.libs`` folder;
6. LOAD_LIBRARY_SEARCH_SYSTEM32.

Names are case-insensitive. Before searching, the loader reuses a module of the same base name that the
process has already loaded. Statically that is only what is known to be loaded: the interpreter's own
imports, the images of the chain being loaded, and the DLLs ``import torch`` loaded before its extension
modules; never a same-named file that merely exists somewhere in the environment (checked against Wine's
loader: ``tests/windows/test_loader_oracle.py``).

A delay-load import is not loaded with its importer: it is loaded when one of its functions is first
called, so a missing one does not make the importer fail to load (``tree.broken``).

torch's ``__init__`` (``_load_dll_libraries``) loads every ``torch\\lib\\*.dll`` in name order before
``torch._C`` with ``LoadLibraryExW(dll, NULL, 0x1100)``; one failing with error 126 is loaded again, as a
whole, with plain ``LoadLibraryW`` after torch puts its own DLL folders (``torch_path``) at the head of
``PATH``. That load searches the standard order — the application folder, System32, then ``PATH`` — and
not the other ``os.add_dll_directory`` folders: it finds a runtime on ``PATH`` only, and also a stale
same-named DLL in another environment's folder on ``PATH`` in place of the right one in a folder PATH
does not list. Such a dependency resolves ``path`` with the folder in ``via``. What those loads bring in
is loaded before any extension module of torch.
"""

# ruff: noqa: PTH113, PTH118, PTH120, PTH208, PTH119
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
from collections.abc import Sequence

from envcheck.native.interface import Found, Image, Probe, Resolver
from envcheck.native.oslibs import WINDOWS_KNOWN_DLLS, is_api_set
from envcheck.native.records import BinaryInfo, Needed


class WindowsResolver(Resolver):
    """The search above. ``application_dir`` and ``system32`` are None when scanning for another machine."""

    loader = "windows"

    def __init__(
        self,
        *,
        host: bool,
        probe: Probe,
        dll_directories: Sequence[str] = (),
        application_dir: str | None = None,
        system32: str | None = None,
        path: Sequence[str] = (),
        torch_path: Sequence[str] | None = None,
    ) -> None:
        super().__init__(host=host, probe=probe)
        self.dll_directories = list(dll_directories)
        # The folders torch puts at the head of PATH for its retry (all DLL folders when not told).
        self.torch_path = list(torch_path) if torch_path is not None else list(dll_directories)
        self._retries: dict[str, bool] = {}
        self.application_dir = application_dir
        self.system32 = system32
        # PATH as the target process has it (host only): searched by torch's LoadLibraryW retry.
        self.path = [p for p in path if p]
        # The torch\lib DLLs ``import torch`` loads one by one (their folder's normalised path).
        self.preload_dirs: set[str] = set()
        self._listings: dict[str, dict[str, str]] = {}

    def resolve(self, needed: Needed, importer: Image, chain: Sequence[Image], root: Image) -> Found:
        name = needed.name
        low = name.lower()
        if is_api_set(low):
            return Found(None, "api-set", None)
        if low in WINDOWS_KNOWN_DLLS:
            if self.system32:
                hit = self._find(self.system32, low)
                if hit:
                    return Found(hit, "known-dll", None)
            return Found(None, "known-dll", None)
        if self.is_preload(root.path) and self._retried(root.path):
            return self._standard_order(low, chain)
        found = self._first_order(low, chain, root.path)
        return found if found is not None else Found(None, "missing", None)

    def _first_order(self, low: str, chain: Sequence[Image], root_path: str) -> Found | None:
        """LoadLibraryExW with LOAD_LIBRARY_SEARCH_DEFAULT_DIRS | LOAD_LIBRARY_SEARCH_DLL_LOAD_DIR."""
        load_dir = os.path.dirname(root_path)
        hit = self._find(load_dir, low)
        if hit:
            return Found(hit, "loader-dir", None)
        if self.application_dir:
            hit = self._find(self.application_dir, low)
            if hit:
                return Found(hit, "loader-dir", "application")
        for folder in self.dll_directories:
            hit = self._find(folder, low)
            if hit:
                return Found(hit, "dll-directory", folder)
        if self.system32:
            hit = self._find(self.system32, low)
            if hit:
                return Found(hit, "system32", None)
        # The loader reuses a module already loaded under the same base name before it searches
        # ("Dynamic-link library search order": "If a DLL with the same module name is already loaded
        # in memory"): one the interpreter or an earlier preload loaded, or an image of this load's chain.
        loaded = self.loaded_by_name(low)
        if loaded is not None:
            return Found(loaded, "already-loaded", None)
        for image in chain:
            if os.path.basename(image.path).lower() == low:
                return Found(image.path, "already-loaded", None)
        return None

    def _standard_order(self, low: str, chain: Sequence[Image]) -> Found:
        """torch's retry, plain LoadLibraryW: already loaded, the application folder, System32, then PATH
        with torch's DLL folders first (the Windows folder and the current folder are not modelled)."""
        loaded = self.loaded_by_name(low)
        if loaded is not None:
            return Found(loaded, "already-loaded", None)
        for image in chain:
            if os.path.basename(image.path).lower() == low:
                return Found(image.path, "already-loaded", None)
        if self.application_dir:
            hit = self._find(self.application_dir, low)
            if hit:
                return Found(hit, "loader-dir", "application")
        if self.system32:
            hit = self._find(self.system32, low)
            if hit:
                return Found(hit, "system32", None)
        for folder in self.torch_path:
            hit = self._find(folder, low)
            if hit:
                return Found(hit, "dll-directory", folder)
        for folder in self.path:
            hit = self._find(folder, low)
            if hit:
                return Found(hit, "path", folder)
        return Found(None, "missing", None)

    def _retried(self, root_path: str) -> bool:
        """Whether torch's first load of this preload fails with 126 (an import of its closure, delay-load
        ones aside, found nowhere in the first order), so that its retry is what loads."""
        known = self._retries.get(root_path)
        if known is not None:
            return known
        failed = False
        todo, seen = [root_path], {os.path.normcase(root_path)}
        chain: list[Image] = []
        while todo and not failed:
            path = todo.pop()
            info = self.probe(path)
            if info is None:
                continue
            chain.append(Image(path, info))
            for needed in info.needed:
                low = needed.name.lower()
                if needed.delay_load or is_api_set(low) or low in WINDOWS_KNOWN_DLLS:
                    continue
                found = self._first_order(low, chain, root_path)
                if found is None:
                    failed = True
                    break
                if found.path is not None and os.path.normcase(found.path) not in seen:
                    seen.add(os.path.normcase(found.path))
                    todo.append(found.path)
        self._retries[root_path] = failed
        return failed

    def register(self, path: str, info: BinaryInfo) -> None:
        self.sonames.setdefault(os.path.basename(path).lower(), path)

    def register_root(self, path: str, info: BinaryInfo) -> None:
        """Nothing: a file of the environment is loaded only when a load reaches it (Wine's loader fails
        with 126 for a DLL that exists only in a folder no search covers)."""

    def is_preload(self, path: str) -> bool:
        """Whether ``import torch`` loads this file itself, one DLL at a time, before its extensions."""
        return os.path.normcase(os.path.dirname(path)) in self.preload_dirs

    def loaded_by_name(self, low_name: str) -> str | None:
        return self.sonames.get(low_name)

    def _find(self, folder: str, low_name: str) -> str | None:
        """Case-insensitive look-up, one directory listing per folder (the tree may be on a case-sensitive
        file system when a Windows wheel is scanned on Linux)."""
        listing = self._listings.get(folder)
        if listing is None:
            try:
                listing = {e.lower(): os.path.join(folder, e) for e in os.listdir(folder)}
            except OSError:
                listing = {}
            self._listings[folder] = listing
        hit = listing.get(low_name)
        return hit if hit is not None and os.path.isfile(hit) else None
