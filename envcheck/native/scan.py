"""``envcheck scan``'s core: the tree of a wheel or folder of any platform, and its text report."""

# ruff: noqa: PTH100, PTH118, PTH119, PTH120, PTH208
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

from envcheck.errors import UsageError
from envcheck.manifest.native import NativeSection
from envcheck.native.interface import Resolver
from envcheck.native.linux import LinuxResolver
from envcheck.native.macos import MacosResolver
from envcheck.native.tree import NATIVE_SUFFIX, Catalog, Role, RootFile, Walker, is_extension
from envcheck.native.windows import WindowsResolver

MAX_WHEEL_MEMBERS = 200_000


def scan_target(path: str) -> NativeSection:
    """See ``envcheck.native.scan_path``. Raises ``UsageError`` on a bad path or a corrupt wheel."""
    target = Path(path)
    if not target.exists():
        raise UsageError(
            f"{path} does not exist", tip="Give a .whl file, an unpacked tree or a site-packages folder."
        )
    if target.is_file():
        if target.suffix.lower() != ".whl":
            raise UsageError(
                f"{path} is a file but not a wheel (.whl)",
                tip="Give a .whl file, an unpacked tree or a site-packages folder.",
            )
        with tempfile.TemporaryDirectory(prefix="envcheck-scan-") as tmp:
            _extract_native(target, tmp)
            return scan_folder(tmp, display_root=tmp)
    if not target.is_dir():
        raise UsageError(f"{path} is neither a file nor a folder")
    return scan_folder(str(target), display_root=None)


def _extract_native(wheel: Path, into: str) -> None:
    """Only the native files and the ``.dist-info`` RECORD / WHEEL come out of the zip."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_WHEEL_MEMBERS:
                raise UsageError(f"{wheel}: {len(infos)} members is more than a wheel should hold")
            for info in infos:
                name = info.filename
                parts = name.split("/")
                if info.is_dir() or ".." in parts or name.startswith("/"):
                    continue
                keep = NATIVE_SUFFIX.search(name) or (
                    len(parts) == 2 and parts[0].endswith(".dist-info") and parts[1] in ("RECORD", "WHEEL")
                )
                if keep:
                    zf.extract(info, into)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError) as e:
        raise UsageError(f"{wheel} is not a readable wheel: {e}") from e
    except OSError as e:
        raise UsageError(f"cannot read {wheel}: {e.strerror or e}") from e


def _records(root: str) -> Iterator[tuple[str, str, str | None]]:
    """``(distribution, RECORD path, sha256 hex)`` for the native files of each ``*.dist-info/RECORD``."""
    from envcheck.probe.target import parse_record_natives

    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return
    for entry in entries:
        if not entry.endswith(".dist-info"):
            continue
        record = os.path.join(root, entry, "RECORD")
        try:
            text = Path(record).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        dist = entry[: -len(".dist-info")].split("-")[0]
        for native in parse_record_natives(text):
            yield dist, native["path"], native["sha256"]


def scan_folder(root: str, *, display_root: str | None) -> NativeSection:
    """The tree of every native file under ``root`` (RECORD-owned ones keyed by their distribution)."""
    root = os.path.abspath(root)
    catalog = Catalog(site_dirs=[os.path.normcase(root)])
    if display_root is not None:
        base = os.path.abspath(display_root)
        catalog.display = lambda p: os.path.relpath(p, base).replace(os.sep, "/")
    roots: dict[str, RootFile] = {}
    for dist, rel, sha in _records(root):
        full = os.path.normpath(os.path.join(root, rel))
        r = RootFile(path=full, key=f"{dist}:{rel}", owner=dist, role=_role(full), record_sha256=sha)
        catalog.add(r)
        roots.setdefault(os.path.normcase(full), r)
    # No RECORD at all: an unpacked tree (owner "tree"); else a file no RECORD lists was added by hand.
    owned_tree = not any(e.endswith(".dist-info") for e in os.listdir(root))
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            if not NATIVE_SUFFIX.search(name) or os.path.normcase(full) in roots:
                continue
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            r = RootFile(
                path=full,
                key=f"tree:{rel}" if owned_tree else f"unowned:{rel}",
                owner="tree" if owned_tree else "unowned",
                role=_role(full),
                foreign=not owned_tree,
            )
            catalog.add(r)
            roots[os.path.normcase(full)] = r
    walker = Walker(catalog, {}, host=False, scan_root=root)
    walker.resolvers = _scan_resolvers(root, walker)
    return walker.walk(list(roots.values()), verify_files=False)


def _role(path: str) -> Role:
    return "extension" if is_extension(path) else "library"


def _scan_resolvers(root: str, walker: Walker) -> dict[str, Resolver]:
    # torch's __init__ adds torch\lib with os.add_dll_directory before importing torch._C; delvewheel's
    # patched __init__ adds <name>.libs. Both folders exist in the wheel itself.
    dll_dirs = []
    for dirpath, dirnames, _files in os.walk(root):
        dirnames.sort()
        if os.path.basename(dirpath) == "lib" and os.path.basename(os.path.dirname(dirpath)) == "torch":
            dll_dirs.append(dirpath)
        if dirpath != root and dirpath.endswith(".libs") and os.path.dirname(dirpath) == root:
            dll_dirs.append(dirpath)
    return {
        "elf": LinuxResolver(host=False, probe=walker.probe),
        "pe": WindowsResolver(host=False, probe=walker.probe, dll_directories=sorted(dll_dirs)),
        "macho": MacosResolver(host=False, probe=walker.probe),
    }


def format_text(section: NativeSection, target: str) -> str:
    """The readable report of a scan: the tree, what the machine must provide, what is missing."""
    lines = [f"native tree of {target} ({section.loader or 'no binaries'})", ""]
    nodes = section.nodes or []
    for n in nodes:
        if n.owner == "system":
            continue
        head = f"{n.key}  [{n.format or '?'} {n.machine or ''}]".rstrip()
        if n.error:
            lines.append(f"{head}  UNREADABLE: {n.error}")
            continue
        lines.append(head)
        for d in n.dependencies or ():
            where = d.target or ("MISSING" if d.how == "missing" else d.how)
            extra = " (delay-load)" if d.delay_load else ""
            lines.append(f"    {d.name} -> {where} [{d.kind}, {d.how}]{extra}")
    lines.append("")
    requires = section.requires or []
    lines.append("the target machine must provide:")
    if not requires:
        lines.append("    nothing outside the tree")
    for r in requires:
        label = f" - {r.runtime}" if r.runtime else ""
        who = f": needed by {', '.join(r.needed_by)}" if r.needed_by else f" ({r.count} files)"
        lines.append(f"    {r.name} [{r.kind}]{label}{who}")
    external = sorted({(d.name, n.key) for n in nodes for d in n.dependencies or () if d.kind == "external"})
    if external:
        lines.append("")
        lines.append("expected from other packages (outside the scanned tree):")
        lines += [f"    {name} (needed by {key})" for name, key in external]
    if section.openmp:
        lines.append("")
        lines.append("OpenMP runtimes:")
        lines += [f"    {o.family}: {o.key}" for o in section.openmp]
    lines.append("")
    imports = [c for c in section.missing or [] if c.from_extension]
    plugins = [c for c in section.missing or [] if not c.from_extension]
    if imports:
        lines.append("MISSING inside the tree (these imports will fail):")
        lines += [f"    {c.text}" for c in imports]
    else:
        lines.append("nothing an extension module imports is missing inside the tree")
    if plugins:
        lines.append("")
        lines.append("MISSING for libraries no extension module links (plugins opened on demand):")
        lines += [f"    {c.text}" for c in plugins]
    broken = [n for n in nodes if n.error]
    if broken:
        lines.append("")
        lines.append("files that could not be read:")
        lines += [f"    {n.key}: {n.error}" for n in broken]
    return "\n".join(lines) + "\n"


def missing_inside(section: NativeSection) -> bool:
    """Whether the scanned tree is broken: an extension module's import will fail (a chain from it ends
    MISSING or UNREADABLE), or a native file of the tree cannot be read. A missing library of a plugin no
    extension loads (nvshmem's optional transports, opened with dlopen on demand) is reported, not fatal."""
    if any(chain.from_extension for chain in section.missing or []):
        return True
    return any(n.error is not None for n in section.nodes or [] if n.owner != "system")
