"""``envcheck scan``'s core: the tree of a wheel or folder of any platform, and its text report."""

# ruff: noqa: PTH100, PTH103, PTH108, PTH117, PTH118, PTH119, PTH120, PTH208
# Paths stay strings (os.path / posixpath): the walk touches thousands of them per snapshot, and a tree
# may come from another platform, whose paths a host-flavoured pathlib.Path would misread.

from __future__ import annotations

import os
import zipfile
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path

from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.core.escape import one_line as esc
from envcheck.core.files import NotOpened, is_inside, open_regular
from envcheck.inside.record import parse_record_natives
from envcheck.manifest.native import NativeSection, RefusalKind, RefusedFile
from envcheck.native.interface import Resolver
from envcheck.native.linux import LinuxResolver
from envcheck.native.macos import MacosResolver
from envcheck.native.tree import (
    NATIVE_SUFFIX,
    Catalog,
    Role,
    RootFile,
    Walker,
    is_executable_name,
    is_extension,
)
from envcheck.native.windows import WindowsResolver
from envcheck.process.sessions import temporary_folder

# A wheel is read member by member, and only native files and ``.dist-info/RECORD`` / ``WHEEL`` come out.
# Every cap is named in the report when it skips a member (docs/guarantees.md). The caps leave room for real
# wheels: torch's CUDA wheel holds ~3 GB of native files, libtorch_cuda.so alone ~1.5 GB, compressed ~2-4x.
# Members per wheel: torch's wheels hold ~13,000. The count and the size of the central directory are read
# from its end record before the directory itself, so a wheel past either is refused unread.
MAX_WHEEL_MEMBERS = 50_000
MAX_DIRECTORY_BYTES = 8 * 1024**2
MAX_MEMBER_BYTES = 4 * 1024**3
# Native files (and RECORD / WHEEL) extracted from one wheel: torch's CUDA wheel brings a few hundred. Each
# becomes a node of the tree, so this bounds the scan's memory; the refusals listed are bounded too.
MAX_NATIVE_MEMBERS = 5_000
MAX_REFUSED_LISTED = 1_000
MAX_TOTAL_BYTES = 8 * 1024**3
# Machine code deflates 2-5x (the real wheels' native members: at most ~6x), zero padding up to ~1000x: a
# member over 1 MiB that expands more than this is a bomb, and a wheel never writes more than this many
# times its own size (many small members each under the floor are a bomb too).
MAX_RATIO = 100
RATIO_FLOOR_BYTES = 1024**2
MAX_RECORD_BYTES = 64 * 1024**2
_CHUNK = 1 << 20


def scan_target(path: str, *, deadline: Deadline | None = None) -> NativeSection:
    """See ``envcheck.native.scan_path``. Raises ``UsageError`` on a bad path or a file that is not a
    wheel (not a zip); a hostile wheel that is a zip gives a report naming what was skipped and why."""
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
        # A folder an interrupt removes too, even while extraction is blocked in a worker.
        with temporary_folder("envcheck-scan-") as folder:
            tmp = str(folder)
            skipped = extract_native(target, tmp, deadline=deadline)
            return scan_folder(tmp, display_root=tmp, refused=skipped, wheel=True, deadline=deadline)
    if not target.is_dir():
        raise UsageError(f"{path} is neither a file nor a folder")
    return scan_folder(str(target), display_root=None, deadline=deadline)


def _member_name_problem(name: str) -> str | None:
    """Why a member name must not be written (zip slip), or None."""
    if name.startswith(("/", "\\")) or (len(name) > 1 and name[1] == ":"):
        return "an absolute member name: not extracted"
    if "\\" in name:
        return "a member name with a backslash: not extracted"
    if ".." in name.split("/") or "\0" in name:
        return "a member name that leaves the wheel (..): not extracted"
    return None


def directory_problem(wheel: Path) -> str | None:
    """Why the zip's central directory is not read (more members than ``MAX_WHEEL_MEMBERS``, or larger than
    ``MAX_DIRECTORY_BYTES``), from its end record alone; None when it may be read (or has no end record:
    ``zipfile`` then says it is not a zip)."""
    import struct

    try:
        count, directory = _directory_size(wheel)
    except struct.error:
        return None
    if count > MAX_WHEEL_MEMBERS:
        return f"{count} members, over the {MAX_WHEEL_MEMBERS} cap for a wheel (MAX_WHEEL_MEMBERS)"
    if directory > MAX_DIRECTORY_BYTES:
        return (
            f"a {directory}-byte member directory, over the {MAX_DIRECTORY_BYTES}-byte cap for a wheel "
            "(MAX_DIRECTORY_BYTES)"
        )
    return None


def _directory_size(wheel: Path) -> tuple[int, int]:
    """The member count and the central directory's size, as the end record (zip64's where used) says;
    ``(0, 0)`` without an end record."""
    import struct

    size = wheel.stat().st_size
    with wheel.open("rb") as f:
        f.seek(max(0, size - (1 << 16) - 22))
        tail = f.read()
        at = tail.rfind(b"PK\x05\x06")
        if at < 0 or len(tail) - at < 22:
            return 0, 0
        _, _, _, _, count, directory, offset, _ = struct.unpack("<4sHHHHIIH", tail[at : at + 22])
        locator = tail.rfind(b"PK\x06\x07", 0, at)
        if locator >= 0 and (count == 0xFFFF or directory == 0xFFFFFFFF or offset == 0xFFFFFFFF):
            (end64,) = struct.unpack("<Q", tail[locator + 8 : locator + 16])
            f.seek(end64)
            record = f.read(56)
            if len(record) == 56 and record[:4] == b"PK\x06\x06":
                count, directory = struct.unpack("<QQ", record[32:48])
    return int(count), int(directory)


def extract_native(
    wheel: Path,
    into: str,
    *,
    max_total: int = MAX_TOTAL_BYTES,
    max_members: int = MAX_NATIVE_MEMBERS,
    deadline: Deadline | None = None,
) -> list[RefusedFile]:
    """Only the native files and the ``.dist-info`` RECORD / WHEEL come out of the zip, member by member,
    within the caps above (``max_total`` and ``max_members``: the bytes and files this wheel may still
    write, for a command's own caps over several wheels); what was skipped is returned with the cap it
    broke (the first ``MAX_REFUSED_LISTED``, then a count). ``deadline``: checked before each member
    (``DeadlineExpired`` once passed).

    Raises ``UsageError`` when ``wheel`` is not a readable zip."""
    skipped: list[RefusedFile] = []
    unlisted = 0
    native = 0

    def skip(name: str, kind: RefusalKind, reason: str) -> None:
        nonlocal unlisted
        if len(skipped) < MAX_REFUSED_LISTED:
            skipped.append(RefusedFile(path=name, owner="wheel", kind=kind, reason=reason))
        else:
            unlisted += 1

    try:
        too_large = directory_problem(wheel)
        if too_large is not None:
            raise UsageError(
                f"{wheel}: {too_large}",
                tip="A wheel this large is not scanned; unpack it yourself and scan the folder.",
            )
        # Past this many bytes in all, every member is refused: the wheel's size times the ratio cap.
        allowed = min(max_total, MAX_RATIO * max(wheel.stat().st_size, RATIO_FLOOR_BYTES))
        with zipfile.ZipFile(wheel) as zf:
            infos = zf.infolist()
            if len(infos) > MAX_WHEEL_MEMBERS:
                raise UsageError(
                    f"{wheel}: {len(infos)} members, over the {MAX_WHEEL_MEMBERS} cap for a wheel "
                    "(MAX_WHEEL_MEMBERS)",
                    tip="A wheel this large is not scanned; unpack it yourself and scan the folder.",
                )
            total = 0
            for info in infos:
                name = info.filename
                parts = name.split("/")
                keep = (
                    NATIVE_SUFFIX.search(name)
                    or is_executable_name(name)
                    or (
                        len(parts) == 2
                        and parts[0].endswith(".dist-info")
                        and parts[1] in ("RECORD", "WHEEL")
                    )
                )
                if info.is_dir() or not keep:
                    continue
                if deadline is not None:
                    deadline.check(f"extracting {wheel.name}", done=f"{native} of its native files written")
                problem = _member_name_problem(name)
                if problem is not None:
                    skip(name, "member-name", problem)
                    continue
                native += 1
                if native > max_members:
                    cap = f"past the {max_members} files a wheel may bring (MAX_NATIVE_MEMBERS)"
                    skip(name, "member-cap", cap)
                    continue
                declared = info.file_size
                if declared > MAX_MEMBER_BYTES:
                    skip(name, "member-cap", f"expands to {declared} bytes, over the {MAX_MEMBER_BYTES} cap")
                    continue
                ratio = declared / max(info.compress_size, 1)
                if declared > RATIO_FLOOR_BYTES and ratio > MAX_RATIO:
                    skip(
                        name,
                        "member-cap",
                        f"expands to {declared} bytes from {info.compress_size} ({ratio:.0f}:1), "
                        f"over the {MAX_RATIO}:1 ratio cap",
                    )
                    continue
                if total + declared > allowed:
                    skip(
                        name,
                        "member-cap",
                        f"expands to {declared} bytes, past the {allowed}-byte cap on what this wheel "
                        f"writes (the lesser of {MAX_RATIO} times its size and {max_total}, what the command "
                        "may still write)",
                    )
                    continue
                why = _extract_member(zf, info, into)
                if why is not None:
                    skip(name, "member-corrupt", why)
                    continue
                total += declared
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, NotImplementedError) as e:
        raise UsageError(f"{wheel} is not a readable wheel: {e}") from e
    except OSError as e:
        raise UsageError(f"cannot read {wheel}: {e.strerror or e}") from e
    if unlisted:
        skipped.append(
            RefusedFile(
                path=f"{unlisted} more members",
                owner="wheel",
                kind="member-cap",
                reason=f"refused too; only the first {MAX_REFUSED_LISTED} refusals are listed",
            )
        )
    return skipped


def _extract_member(zf: zipfile.ZipFile, info: zipfile.ZipInfo, into: str) -> str | None:
    """Write one member under ``into``, never more bytes than the zip declares (a lying header is cut off)
    and never through an existing file or link (``O_EXCL | O_NOFOLLOW``). Returns why it was not written."""
    target = os.path.join(into, *info.filename.split("/"))
    try:
        os.makedirs(os.path.dirname(target), exist_ok=True)
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
    except OSError as e:
        return f"cannot be written ({e.strerror or e}): a duplicate or clashing member name"
    left = info.file_size
    try:
        with os.fdopen(fd, "wb") as out, zf.open(info) as src:
            while chunk := src.read(min(_CHUNK, left + 1)):
                if len(chunk) > left:
                    raise _Oversize
                out.write(chunk)
                left -= len(chunk)
    except _Oversize:
        os.unlink(target)
        return f"holds more than the {info.file_size} bytes its header declares"
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:  # bad CRC, truncated data
        os.unlink(target)
        return f"cannot be extracted: {e}"
    return None


class _Oversize(Exception):
    """A member's data decompresses past the size its header declares."""


def _records(
    root: str, refused: list[RefusedFile], display: Callable[[str], str], *, every_row_inside: bool
) -> Iterator[tuple[str, str, str | None]]:
    """``(distribution, RECORD path, sha256 hex)`` for the native files of each ``*.dist-info/RECORD``.

    A RECORD is opened only if it is a regular file inside ``root``, and read up to ``MAX_RECORD_BYTES``;
    one that cannot be read is appended to ``refused`` with the reason. With ``every_row_inside`` (a
    wheel, whose RECORD never leaves it: data files go to ``<name>.data/``), any row naming a path outside
    ``root`` is appended too (``record-escape``); in a site-packages folder, scripts in ``../../../bin`` are
    normal, and only native rows are checked (by ``scan_folder``)."""
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return
    for entry in entries:
        if not entry.endswith(".dist-info"):
            continue
        record = os.path.join(root, entry, "RECORD")
        dist = entry[: -len(".dist-info")].split("-")[0]
        try:
            fd = open_regular(record, inside=(os.path.realpath(root),))
        except FileNotFoundError:
            continue
        except NotOpened as e:
            refused.append(RefusedFile(path=display(record), owner=dist, kind=e.kind, reason=e.reason))  # type: ignore[arg-type]
            continue
        except OSError:
            continue
        with os.fdopen(fd, "rb") as f:
            raw = f.read(MAX_RECORD_BYTES + 1)
        if len(raw) > MAX_RECORD_BYTES:
            refused.append(
                RefusedFile(
                    path=display(record),
                    owner=dist,
                    kind="member-cap",
                    reason=f"over the {MAX_RECORD_BYTES}-byte cap for a RECORD: not read",
                )
            )
            continue
        text = raw.decode("utf-8", errors="replace")
        if every_row_inside:
            refused += _escaping_rows(root, dist, text)
        for native in parse_record_natives(text):
            yield dist, native["path"], native["sha256"]
        yield from _record_executables(dist, text)


def _record_executables(dist: str, text: str) -> Iterator[tuple[str, str, str | None]]:
    """The programs a RECORD lists inside the tree (``torch/bin/torch_shm_manager``): candidates, kept
    only if they are binaries. Console scripts installed outside it (``../../../bin/torchrun``) are not."""
    import base64
    import csv

    for row in csv.reader(text.splitlines()):
        path = row[0].replace("\\", "/") if row else ""
        if not path or NATIVE_SUFFIX.search(path) or not is_executable_name(path):
            continue
        if path.startswith("/") or ".." in path.split("/"):
            continue
        digest = None
        if len(row) > 1 and row[1].startswith("sha256="):
            raw = row[1][len("sha256=") :]
            try:
                digest = base64.urlsafe_b64decode(raw + "=" * (-len(raw) % 4)).hex()
            except ValueError:
                digest = None
        yield dist, path, digest


def _leaves(root: str, rel: str) -> bool:
    full = os.path.normpath(os.path.join(root, rel))
    return os.path.isabs(rel) or not is_inside(os.path.normcase(full), [os.path.normcase(root)])


def _escaping_rows(root: str, dist: str, text: str) -> list[RefusedFile]:
    """The rows of a wheel's RECORD naming a path outside the wheel, none of them read."""
    import csv

    out = []
    for row in csv.reader(text.splitlines()):
        if row and _leaves(root, row[0].replace("\\", "/")):
            out.append(
                RefusedFile(
                    path=row[0],
                    owner=dist,
                    kind="record-escape",
                    reason="RECORD names a path outside the wheel: not read",
                )
            )
    return out


def scan_folder(
    root: str,
    *,
    display_root: str | None,
    refused: Sequence[RefusedFile] = (),
    wheel: bool = False,
    deadline: Deadline | None = None,
) -> NativeSection:
    """The tree of every native file under ``root`` (RECORD-owned ones keyed by their distribution).

    Only regular files whose real path stays inside ``root`` are opened; a RECORD entry naming a path
    outside ``root`` is refused (``record-escape``) and never read; ``refused`` (wheel members skipped by
    the extraction) is carried into the section. ``deadline``: checked while the tree is listed and before
    each file is read (``DeadlineExpired``)."""
    root = os.path.abspath(root)
    catalog = Catalog(site_dirs=[os.path.normcase(root)])
    if display_root is not None:
        base = os.path.abspath(display_root)
        catalog.display = lambda p: os.path.relpath(p, base).replace(os.sep, "/")
    skipped = list(refused)
    roots: dict[str, RootFile] = {}
    # A member the extraction skipped is reported once, with its cap, not again as "not on disk".
    not_extracted = {r.path for r in refused if r.kind in _NOT_EXTRACTED}
    for dist, rel, sha in _records(root, skipped, catalog.display, every_row_inside=wheel):
        if rel in not_extracted:
            continue
        full = os.path.normpath(os.path.join(root, rel))
        if _leaves(root, rel):
            if wheel:
                continue  # already refused with every other row of the wheel's RECORD
            skipped.append(
                RefusedFile(
                    path=rel,
                    owner=dist,
                    kind="record-escape",
                    reason="RECORD names a path outside the scanned tree: not read",
                )
            )
            continue
        r = RootFile(path=full, key=f"{dist}:{rel}", owner=dist, role=_role(full), record_sha256=sha)
        catalog.add(r)
        roots.setdefault(os.path.normcase(full), r)
    # No RECORD at all: an unpacked tree (owner "tree"); else a file no RECORD lists was added by hand.
    owned_tree = not any(e.endswith(".dist-info") for e in os.listdir(root))
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        if deadline is not None:
            deadline.check("listing the tree", f"{len(roots)} native files found")
        for name in sorted(filenames):
            full = os.path.join(dirpath, name)
            rel = os.path.relpath(full, root).replace(os.sep, "/")
            if not (NATIVE_SUFFIX.search(name) or is_executable_name(rel)) or os.path.normcase(full) in roots:
                continue
            r = RootFile(
                path=full,
                key=f"tree:{rel}" if owned_tree else f"unowned:{rel}",
                owner="tree" if owned_tree else "unowned",
                role=_role(full),
                foreign=not owned_tree,
            )
            catalog.add(r)
            roots[os.path.normcase(full)] = r
    walker = Walker(catalog, {}, host=False, scan_root=root, refused=skipped)
    walker.resolvers = _scan_resolvers(root, walker)
    return walker.walk(list(roots.values()), verify_files=False, deadline=deadline)


def _role(path: str) -> Role:
    if is_extension(path):
        return "extension"
    return "library" if NATIVE_SUFFIX.search(path) else "executable"


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
        "pe": WindowsResolver(
            host=False,
            probe=walker.probe,
            dll_directories=sorted(dll_dirs),
            torch_path=sorted(d for d in dll_dirs if not d.endswith(".libs")),
        ),
        "macho": MacosResolver(host=False, probe=walker.probe),
    }


def format_text(section: NativeSection, target: str) -> str:
    """The readable report of a scan: the tree, what the machine must provide, what is missing, and what
    was never opened. Every string from the scanned files (names, sonames, paths, reasons quoting them) is
    escaped for the terminal (``report.escape.one_line``): a DLL name may carry terminal escapes."""
    lines = [f"native tree of {esc(target)} ({section.loader or 'no binaries'})", ""]
    nodes = section.nodes or []
    for n in nodes:
        if n.owner == "system":
            continue
        head = f"{esc(n.key)}  [{n.format or '?'} {esc(n.machine or '')}]".rstrip()
        if n.error:
            lines.append(f"{head}  UNREADABLE: {esc(n.error)}")
            continue
        lines.append(head)
        for d in n.dependencies or ():
            where = d.target or ("MISSING" if d.how == "missing" else d.how)
            extra = " (delay-load)" if d.delay_load else ""
            lines.append(f"    {esc(d.name)} -> {esc(where)} [{d.kind}, {d.how}]{extra}")
    lines.append("")
    requires = section.requires or []
    lines.append("the target machine must provide:")
    if not requires:
        lines.append("    nothing outside the tree")
    for r in requires:
        label = f" - {r.runtime}" if r.runtime else ""
        who = f": needed by {', '.join(map(esc, r.needed_by))}" if r.needed_by else f" ({r.count} files)"
        lines.append(f"    {esc(r.name)} [{r.kind}]{label}{who}")
    external = sorted({(d.name, n.key) for n in nodes for d in n.dependencies or () if d.kind == "external"})
    if external:
        lines.append("")
        lines.append("expected from other packages (outside the scanned tree):")
        lines += [f"    {esc(name)} (needed by {esc(key)})" for name, key in external]
    if section.openmp:
        lines.append("")
        lines.append("OpenMP runtimes:")
        lines += [f"    {o.family}: {esc(o.key)}" for o in section.openmp]
    lines.append("")
    imports = [c for c in section.missing or [] if c.from_extension]
    plugins = [c for c in section.missing or [] if not c.from_extension]
    if imports:
        lines.append("MISSING inside the tree (these imports will fail):")
        lines += [f"    {esc(c.text)}" for c in imports]
    else:
        lines.append("nothing an extension module imports is missing inside the tree")
    if plugins:
        lines.append("")
        lines.append("MISSING for libraries no extension module links (plugins opened on demand):")
        lines += [f"    {esc(c.text)}" for c in plugins]
    broken = [n for n in nodes if n.error]
    if broken:
        lines.append("")
        lines.append("files that could not be read:")
        lines += [f"    {esc(n.key)}: {esc(n.error or '')}" for n in broken]
    escapes = [r for r in section.refused or [] if r.kind == "record-escape"]
    if escapes:
        lines.append("")
        lines.append("RECORD entries that leave the tree (never read):")
        lines += [f"    {esc(r.owner)}: {esc(r.path)}" for r in escapes]
    shown = {n.path for n in nodes if n.error}
    unopened = [r for r in section.refused or [] if r.kind in _UNOPENED and r.path not in shown]
    if unopened:
        lines.append("")
        lines.append("files not opened:")
        lines += [f"    {esc(r.path)}: {esc(r.reason)}" for r in unopened]
    capped = [r for r in section.refused or [] if r.kind == "walk-cap"]
    if capped:
        lines.append("")
        lines.append(
            f"files whose needed libraries were not followed ({len(capped)}: the walk's budget was spent):"
        )
        lines += [f"    {esc(r.path)}: {esc(r.reason)}" for r in capped[:20]]
        if len(capped) > 20:
            lines.append(f"    … and {len(capped) - 20} more")
    members = [r for r in section.refused or [] if r.kind in _NOT_EXTRACTED]
    if members:
        lines.append("")
        lines.append("wheel members not extracted:")
        lines += [f"    {esc(r.path)}: {esc(r.reason)}" for r in members]
    return "\n".join(lines) + "\n"


_UNOPENED = ("not-regular", "link-outside", "link-loop")
_NOT_EXTRACTED = ("member-name", "member-cap", "member-corrupt")


def is_broken(section: NativeSection) -> bool:
    """Whether ``envcheck scan`` exits 1: ``missing_inside``, or something of the tree was refused (a RECORD
    entry leaving it, a wheel member over a cap or with a name leaving the wheel, a device or a link out of
    the tree named like a native file): the report is then of a tree that is not what it claims to be."""
    return missing_inside(section) or bool(section.refused)


def missing_inside(section: NativeSection) -> bool:
    """Whether the scanned tree is broken: an extension module's import will fail (a chain from it ends
    MISSING or UNREADABLE), or a native file of the tree cannot be read. A missing library of a plugin no
    extension loads (nvshmem's optional transports, opened with dlopen on demand) is reported, not fatal."""
    if any(chain.from_extension for chain in section.missing or []):
        return True
    return any(n.error is not None for n in section.nodes or [] if n.owner != "system")
