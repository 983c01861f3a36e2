"""Static native dependency trees (ELF / PE / Mach-O), resolved the way each platform's loader would.

Public API:

- ``scan_for_snapshot(manifest, options)``: the ``native`` section of a snapshot (the environment's tree,
  resolved against this machine);
- ``scan_image(manifest, root)``: the same section for a container image unpacked at ``root``, resolved by
  the image's own loader inside it;
- ``reconcile_loaded(native, runtimes)``: the same section with the static-vs-loaded disagreements;
- ``scan_path(path)``: the tree of a wheel, an unpacked tree or a site-packages folder of any platform,
  resolved only inside it (``envcheck scan``).
"""

# ruff: noqa: PTH110, PTH113, PTH118, PTH119, PTH120, PTH208
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import dataclasses
import os
import platform
import posixpath
import re
from typing import TYPE_CHECKING, Protocol, TypeVar

from envcheck.core.files import is_inside
from envcheck.manifest.native import LoadedDisagreement, NativeSection, RefusedFile
from envcheck.native.binary import BinaryError, read_binary
from envcheck.native.linux import LinuxResolver
from envcheck.native.macos import MacosResolver
from envcheck.native.scan import scan_target
from envcheck.native.tree import NATIVE_SUFFIX, Catalog, RootFile, Walker, is_extension
from envcheck.native.windows import WindowsResolver

if TYPE_CHECKING:
    from envcheck.core.deadline import Deadline
    from envcheck.manifest.model import Manifest, Runtimes
    from envcheck.native.interface import Probe, Resolver

_T = TypeVar("_T")

__all__ = ["ScanOptions", "reconcile_loaded", "scan_for_snapshot", "scan_image", "scan_path"]


class ScanOptions(Protocol):
    """What a snapshot's native scan is asked for (``envcheck.collect.launch.SnapshotOptions`` has these)."""

    @property
    def verify_files(self) -> bool: ...

    @property
    def integrity(self) -> bool: ...

    @property
    def deadline(self) -> Deadline | None: ...


def scan_for_snapshot(manifest: Manifest, options: ScanOptions) -> NativeSection | None:
    """The ``native`` section of a snapshot: every native file every distribution's RECORD lists, plus the
    interpreter's shared library, through the transitive closure into system libraries, resolved by the
    loader of this machine with the target's environment variables (``manifest.env``). With
    ``options.integrity`` every RECORD-listed file is checked against its RECORD sha256 through the hash
    cache (``verified``, or ``modified`` when it differs; ``envcheck.native.hashing``); with
    ``options.verify_files`` every one is re-hashed and the folders holding them are searched for native
    files no RECORD lists (``foreign``).

    Never raises: a scanner failure becomes ``NativeSection(skipped=reason)``.
    """
    try:
        return _snapshot_tree(
            manifest,
            verify_files=options.verify_files,
            integrity=options.integrity,
            deadline=options.deadline,
        )
    except Exception as e:  # partial failure is data: the snapshot goes on
        return NativeSection(skipped=f"native scan failed: {type(e).__name__}: {e}")


def scan_image(manifest: Manifest, root: str, *, deadline: Deadline | None = None) -> NativeSection:
    """The ``native`` section of a container image's manifest (``manifest``'s paths are the image's),
    its files read in ``root``, where the image is unpacked on this machine with every link inside it
    (``envcheck.image.rootfs.flatten``). The tree is resolved as the image's ld.so would resolve it: its
    own libc and ``/etc/ld.so.cache``, its default folders, RPATH, RUNPATH and the ``LD_LIBRARY_PATH`` of
    its config, each taken inside ``root`` (``LinuxResolver(sysroot=...)``): nothing of this machine's
    stands in for what the image lacks. Every file RECORD lists is checked against RECORD's digest
    (``verified`` / ``modified``), without the hash cache: the tree lives only for this snapshot. The
    section's paths and keys are the image's; ``hwcaps`` is left out (the CPU is the one the image will
    run on) and ``loaded`` is None (nothing ran).

    Never raises: a failure becomes ``NativeSection(skipped=reason)``."""
    base = os.path.realpath(root)
    try:
        rooted = _rooted_manifest(manifest, base)
        section = _snapshot_tree(rooted, verify_files=False, integrity=True, deadline=deadline, sysroot=base)
    except Exception as e:  # partial failure is data, as for a live snapshot
        return NativeSection(skipped=f"native scan failed: {type(e).__name__}: {e}")
    return _unrooted(section, base)


def _in_root(root: str, image_path: str) -> str:
    image = posixpath.normpath("/" + image_path.lstrip("/"))  # ``..`` stops at the image's root
    return root if image == "/" else root + image


def _rooted_manifest(manifest: Manifest, root: str) -> Manifest:
    """``manifest`` with the paths the native scan opens placed under ``root``."""

    def put(path: str | None) -> str | None:
        return _in_root(root, path) if path else path

    python = manifest.python
    python = dataclasses.replace(
        python,
        executable=put(python.executable) or "",
        prefix=put(python.prefix) or "",
        exec_prefix=put(python.exec_prefix) or "",
        shared_library=put(python.shared_library),
    )
    packages = [dataclasses.replace(d, location=put(d.location) or "") for d in manifest.packages]
    return dataclasses.replace(manifest, python=python, packages=packages)


def _unrooted(value: _T, root: str) -> _T:
    """``value`` (a section, a node, a list...) with ``root`` taken off every path in it, text included."""
    if isinstance(value, str):
        out = value.replace(root + "/", "/")
        return "/" if out == root else out  # type: ignore[return-value]
    if isinstance(value, list):
        return [_unrooted(v, root) for v in value]  # type: ignore[return-value]
    if isinstance(value, dict):
        return {_unrooted(k, root): _unrooted(v, root) for k, v in value.items()}  # type: ignore[return-value]
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        changes = {f.name: _unrooted(getattr(value, f.name), root) for f in dataclasses.fields(value)}
        return dataclasses.replace(value, **changes)
    return value


def _snapshot_tree(
    manifest: Manifest,
    *,
    verify_files: bool,
    integrity: bool = False,
    deadline: Deadline | None = None,
    sysroot: str | None = None,
) -> NativeSection:
    catalog = Catalog()
    roots: list[RootFile] = []
    refused: list[RefusedFile] = []
    environment = _environment_roots(manifest)
    for dist in manifest.packages:
        location = dist.location
        site = os.path.normcase(os.path.normpath(location))
        if site not in catalog.site_dirs:
            catalog.site_dirs.append(site)
        if dist.shadowed:
            # Never imported: an earlier copy of the same name is (a venv's own numpy ahead of the base
            # interpreter's); its files share the first copy's keys and would stand for them in the tree.
            continue
        for f in dist.native_files:
            full = os.path.normpath(os.path.join(location, f.path))
            # RECORD is untrusted: a native entry may name any file on the machine (``../../../etc/…``).
            # Files a wheel installs stay in the environment (data files in ``<prefix>/lib`` included), so
            # an entry leaving it is a finding and is never read: a string test, no system call.
            if not is_inside(os.path.normcase(full), environment):
                refused.append(
                    RefusedFile(
                        path=f.path,
                        owner=dist.name,
                        kind="record-escape",
                        reason=f"RECORD names {full}, outside the environment: not read",
                    )
                )
                continue
            root = RootFile(
                path=full,
                key=f"{dist.name}:{f.path}",
                owner=dist.name,
                role="extension" if is_extension(full) else "library",
                record_sha256=f.sha256,
                record_size=f.size,
            )
            catalog.add(root)
            roots.append(root)
    catalog.site_dirs.sort(key=len, reverse=True)
    if verify_files:
        roots += _foreign_files(roots, catalog)
    python = manifest.python
    if python.shared_library and os.path.exists(python.shared_library):
        catalog.interpreter = python.shared_library
        roots.append(
            RootFile(
                path=python.shared_library,
                key=f"interpreter:{os.path.basename(python.shared_library)}",
                owner="interpreter",
                role="interpreter",
            )
        )
    system = manifest.platform.system if manifest.platform else platform.system()
    walker = Walker(
        catalog,
        {},
        host=True,
        executable=_executable(python.executable),
        refused=refused,
        scan_root=sysroot,  # an image's files are opened only inside it
        use_cache=sysroot is None,
    )
    if sysroot is None:
        walker.resolvers = _host_resolvers(system, manifest, walker.probe)
    else:
        walker.resolvers = {
            "elf": LinuxResolver(
                host=True,
                probe=walker.probe,
                ld_library_path=manifest.env.get("LD_LIBRARY_PATH"),
                sysroot=sysroot,
            ),
            # A Windows or macOS file in a Linux image is resolved only beside itself, as in a scan.
            "pe": WindowsResolver(host=False, probe=walker.probe, dll_directories=[]),
            "macho": MacosResolver(host=False, probe=walker.probe),
        }
    section = walker.walk(roots, verify_files=verify_files, integrity=integrity, deadline=deadline)
    elf = walker.resolvers.get("elf")
    if system == "Linux" and isinstance(elf, LinuxResolver) and elf.hwcaps:
        # The machine's CPU level is a fact of the tree: the same files load other copies elsewhere.
        section = dataclasses.replace(section, hwcaps=list(elf.hwcaps))
    return section


def _environment_roots(manifest: Manifest) -> list[str]:
    """Where the environment's files may be: its prefixes, and the installation base of each
    distribution's site-packages (``<base>/lib/pythonX.Y/site-packages``, ``<base>\\Lib\\site-packages``),
    which holds the data files a wheel installs (mkl's ``<prefix>/lib/libmkl_core.so.2``)."""
    python = manifest.python
    roots = {p for p in (python.prefix, python.exec_prefix) if p}
    for dist in manifest.packages:
        roots.add(_scheme_base(dist.location))
    return sorted(os.path.normcase(os.path.normpath(r)) for r in roots if r)


def _scheme_base(location: str) -> str:
    base = os.path.normpath(location)
    if os.path.basename(base).lower() not in ("site-packages", "dist-packages"):
        return base
    base = os.path.dirname(base)
    if os.path.basename(base).lower().startswith(("python", "pypy")):
        base = os.path.dirname(base)
    if os.path.basename(base).lower() in ("lib", "lib64"):
        base = os.path.dirname(base)
    return base


def _executable(path: str) -> str | None:
    try:
        return os.path.realpath(path) if path else None
    except OSError:
        return None


def _host_resolvers(system: str, manifest: Manifest, probe: Probe) -> dict[str, Resolver]:
    """This machine's loader for its own format; the other formats resolved as in a scan (tree only)."""
    env = manifest.env
    python = manifest.python
    resolvers: dict[str, Resolver] = {
        "elf": LinuxResolver(host=system == "Linux", probe=probe, ld_library_path=env.get("LD_LIBRARY_PATH")),
        "pe": WindowsResolver(host=False, probe=probe, dll_directories=_torch_dll_dirs(manifest)),
        "macho": MacosResolver(host=False, probe=probe),
    }
    if system == "Windows":
        root = os.environ.get("SYSTEMROOT", r"C:\Windows")  # environ is case-insensitive on Windows
        resolvers["pe"] = WindowsResolver(
            host=True,
            probe=probe,
            dll_directories=_torch_dll_dirs(manifest),
            application_dir=python.base_exec_prefix,
            system32=os.path.join(root, "System32"),
            path=env.get("PATH", "").split(";"),
            torch_path=_torch_dll_dirs(manifest, libs=False),
        )
    elif system == "Darwin":
        resolvers["macho"] = MacosResolver(
            host=True,
            probe=probe,
            executable=python.executable,
            dyld_library_path=env.get("DYLD_LIBRARY_PATH"),
            fallback_path=env.get("DYLD_FALLBACK_LIBRARY_PATH"),
        )
    return resolvers


def _torch_dll_dirs(manifest: Manifest, *, libs: bool = True) -> list[str]:
    """The folders ``os.add_dll_directory`` adds before extensions load: torch's ``__init__``
    (``_load_dll_libraries``) adds ``torch\\lib``, ``sys.exec_prefix\\Library\\bin``,
    ``sys.base_exec_prefix\\Library\\bin`` and the user base's ``Library\\bin`` (also put on PATH for
    its retry); delvewheel's patched ``__init__`` adds ``<name>.libs`` (not with ``libs=False``)."""
    python = manifest.python
    dirs = [os.path.join(t, "lib") for t in manifest.torch.trees]
    dirs += [
        os.path.join(python.exec_prefix, "Library", "bin"),
        os.path.join(python.base_exec_prefix, "Library", "bin"),
    ]
    if python.user_site:
        user_base = os.path.dirname(os.path.dirname(python.user_site))
        dirs.append(os.path.join(user_base, "Library", "bin"))
    if libs:
        for site in sorted({d.location for d in manifest.packages}):
            dirs += _libs_dirs(site)
    return list(dict.fromkeys(dirs))


def _libs_dirs(site: str) -> list[str]:
    try:
        return sorted(os.path.join(site, e) for e in os.listdir(site) if e.endswith(".libs"))
    except OSError:
        return []


def _foreign_files(roots: list[RootFile], catalog: Catalog) -> list[RootFile]:
    """Native files in the folders of RECORD-listed native files that no RECORD lists (``--verify-files``)."""
    out = []
    folders = sorted({os.path.dirname(r.path) for r in roots})
    for folder in folders:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            continue
        for name in names:
            full = os.path.join(folder, name)
            if not NATIVE_SUFFIX.search(name) or catalog.owned.get(os.path.normcase(full)) is not None:
                continue
            if not os.path.isfile(full):
                continue
            key, owner, _role, _sha, _foreign = catalog.describe(full)
            root = RootFile(
                path=full,
                key=key,
                owner=owner,
                role="extension" if is_extension(full) else "library",
                foreign=True,
            )
            catalog.add(root)
            out.append(root)
    return out


def scan_path(path: str, *, deadline: Deadline | None = None) -> NativeSection:
    """The tree of a wheel (``.whl``), an unpacked tree or a site-packages folder, for any platform,
    resolved only inside it: what lies outside is what the target machine must provide.

    Raises ``UsageError`` when ``path`` does not exist or is not a wheel or a folder, and
    ``DeadlineExpired`` when ``deadline`` passes before the scan is done.
    """
    return scan_target(path, deadline=deadline)


# Python imports every extension module with dlopen / LoadLibraryEx: those are not "dlopened" findings.
_LIBRARY = re.compile(r"\.(so(\.\d[\w+-]*)*|dll|dylib)$", re.I)


def reconcile_loaded(native: NativeSection, runtimes: Runtimes) -> NativeSection:
    """``native`` with ``loaded`` set to where the live process disagrees with the static tree:
    ``elsewhere`` (the name resolved statically to one file, another was mapped — LD_LIBRARY_PATH
    shadowing the wheel's cuDNN), ``missing-loaded`` (static MISSING, yet loaded), ``dlopened`` (mapped but
    absent from the tree: opened at run time). Extension modules (imported with dlopen by Python itself)
    are not reported. Never raises.
    """
    nodes = native.nodes or []
    real_to_key: dict[str, str] = {}
    for n in nodes:
        try:
            real_to_key[os.path.realpath(n.path)] = n.key
        except OSError:
            continue
    by_key = {n.key: n for n in nodes}
    # name a binary asks for -> keys it resolved to (None: MISSING)
    wanted: dict[str, set[str | None]] = {}
    for n in nodes:
        for d in n.dependencies or ():
            wanted.setdefault(os.path.basename(d.name).lower(), set()).add(d.target)
    # Loaded files outside the tree (the stdlib's lib-dynload modules: _ssl needs libssl.so.3) bring their
    # own static dependencies: those are not dlopen'ed at run time.
    outside: list[tuple[str, str, str]] = []
    needed_outside: set[str] = set()
    for lib in runtimes.loaded:
        path = lib.path
        name = os.path.basename(path)
        try:
            real = os.path.realpath(path)
        except OSError:
            real = path
        if real in real_to_key:
            continue
        try:
            info = read_binary(path)
        except BinaryError:
            info = None
        if info is not None:
            needed_outside.update(os.path.basename(n.name).lower() for n in info.needed)
        if not _LIBRARY.search(name) or is_extension(path):
            continue
        soname = os.path.basename(info.soname) if info is not None and info.soname else name
        outside.append((path, soname, lib.owner))
    out: list[LoadedDisagreement] = []
    for path, soname, owner in outside:
        name = os.path.basename(path)
        targets = wanted.get(soname.lower()) or wanted.get(name.lower())
        if not targets:
            if soname.lower() not in needed_outside:
                out.append(LoadedDisagreement(kind="dlopened", name=soname, loaded=path, loaded_owner=owner))
            continue
        resolved = sorted(t for t in targets if t is not None)
        if not resolved:
            out.append(
                LoadedDisagreement(kind="missing-loaded", name=soname, loaded=path, loaded_owner=owner)
            )
            continue
        expected = resolved[0]
        out.append(
            LoadedDisagreement(
                kind="elsewhere",
                name=soname,
                loaded=path,
                loaded_owner=owner,
                expected=by_key[expected].key if expected in by_key else expected,
            )
        )
    out.sort(key=lambda d: (d.kind, d.name, d.loaded))
    return dataclasses.replace(native, loaded=out)
