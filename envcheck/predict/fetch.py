"""Wheels of a resolution, fetched once into the user's cache and scanned with the native scanner.

The cache is ``${XDG_CACHE_HOME:-~/.cache}/envcheck/wheels/<sha256>/<file name>``, keyed by the sha256
pip's report gives for the wheel. pip itself downloads (its configuration, certificates, proxies and
credentials apply) into a temporary folder beside the cache; a file enters the cache only once its
sha256 matches, by a rename, so an interrupted or corrupt download never leaves an entry that looks
whole. ``trees/<key>.json`` holds the native tree of a set of wheels installed together (keyed by their
sha256s), written the same way: a warm run reads neither the wheels nor their members again.
"""

# pip runs from envcheck's own interpreter with an argument list (no shell).

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import stat
import sys
import time
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import unquote, urlsplit

from envcheck import __version__
from envcheck.core.deadline import Deadline
from envcheck.core.errors import ManifestError, UsageError
from envcheck.inside.torch_static import read_version_file
from envcheck.manifest.codec import decode, encode
from envcheck.manifest.native import NativeSection
from envcheck.native.binary import BinaryError
from envcheck.native.macho import check_layout
from envcheck.native.scan import directory_problem, extract_native, scan_folder
from envcheck.predict import pip_entry
from envcheck.predict.resolve import IndexOptions, ResolvedWheel, run_pip
from envcheck.predict.target import PredictTarget
from envcheck.process import sessions

_SHA256 = re.compile(r"[0-9a-f]{64}")
# A wheel with code for no platform (``py3-none-any``) holds no native file: it is neither fetched nor
# scanned.
_PURE = re.compile(r"-none-any\.whl$", re.I)
# Temporary download folders older than this were left by a killed run: removed on the next one, and only
# envcheck's own of this user (``_tmp_prefix``: the prefix names the user, and the folder must be theirs).
_STALE_S = 3600.0
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIRECTORY = getattr(os, "O_DIRECTORY", 0)


def _tmp_prefix() -> str:
    """The name every temporary folder of this user's envcheck in the cache starts with."""
    geteuid = getattr(os, "geteuid", None)
    return f".tmp-envcheck-{geteuid()}-" if geteuid is not None else ".tmp-envcheck-"


# The cache is bounded: past this many bytes of wheels the least recently used go (a CUDA set is ~4 GB),
# and past this many stored trees the oldest.
MAX_CACHE_BYTES = 32 * 1024**3
MAX_TREES = 256
# A stored tree larger than this is not read (it is scanned again): the largest real one, torch's CUDA set,
# is a few MB.
MAX_SCAN_BYTES = 32 * 1024**2
_SCAN_FORMAT = f"envcheck-scan/{__version__}/4"  # 3: PE linker versions, the Windows load model; 4: programs


def cache_root() -> Path:
    """``$XDG_CACHE_HOME/envcheck/wheels`` (``~/.cache`` when unset or not absolute, per the XDG spec)."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    root = Path(base) if base and Path(base).is_absolute() else Path.home() / ".cache"
    return root / "envcheck" / "wheels"


def is_pure(wheel: ResolvedWheel) -> bool:
    return bool(_PURE.search(wheel.filename))


@dataclass(frozen=True, kw_only=True, slots=True)
class TreeScan:
    """The native tree of a resolution's platform wheels, installed together, and whether it came from
    the cache. ``torch_version``: the literal assignments of ``torch/version.py`` when a wheel has one."""

    section: NativeSection
    torch_version: dict[str, object] | None
    cached: bool
    # The highest macOS release a Mach-O file declares as its minimum (LC_BUILD_VERSION's ``minos``,
    # LC_VERSION_MIN_MACOSX on older builds), and the node key of that file; None without Mach-O files.
    macos_minimum: tuple[str, str] | None = None


class WheelCache:
    """The wheel cache at ``root``: ``path_of`` an entry, ``fetch`` what is missing, ``scan`` each."""

    def __init__(
        self, root: Path | None = None, *, max_bytes: int = MAX_CACHE_BYTES, deadline: Deadline | None = None
    ) -> None:
        self.root = root or cache_root()
        self.max_bytes = max_bytes
        self.deadline = deadline

    def entry(self, wheel: ResolvedWheel) -> Path | None:
        """Where ``wheel`` lies in the cache (whether or not it is there yet); None without a sha256."""
        if wheel.sha256 is None or not _SHA256.fullmatch(wheel.sha256) or not _safe_name(wheel.filename):
            return None
        return self.root / wheel.sha256 / wheel.filename

    def fetch(
        self,
        wheels: Sequence[ResolvedWheel],
        target: PredictTarget,
        options: IndexOptions,
        *,
        also: Sequence[ResolvedWheel] = (),
    ) -> None:
        """Download every platform wheel of ``wheels`` (and every wheel of ``also``, pure ones included:
        those whose requirements only their METADATA says) not yet cached, with one ``pip download`` run,
        then verify and move each into the cache. Raises ``UsageError`` when pip fails or a download
        does not match the sha256 of the report."""
        wanted = [w for w in wheels if not is_pure(w) and not _local_path(w.url)]
        wanted += [w for w in also if w not in wanted and not _local_path(w.url)]
        missing = [w for w in wanted if (e := self.entry(w)) is not None and not e.is_file()]
        in_use = {e.parent for w in wanted if (e := self.entry(w)) is not None}
        for folder in in_use:  # last use, for pruning the least recently used first
            with contextlib.suppress(OSError):
                os.utime(folder)
        unhashed = [w for w in wanted if self.entry(w) is None]
        if unhashed:
            names = ", ".join(w.filename or w.name for w in unhashed[:5])
            raise UsageError(f"pip's report gives no sha256 for {names}: cannot verify the download")
        if not missing:
            return
        self.root.mkdir(parents=True, exist_ok=True)
        self._remove_stale()

        # Beside the cache (one file system: the rename into it is atomic); an interrupt removes it.
        tmp = Path(sessions.make_folder(_tmp_prefix(), str(self.root)))
        try:
            urls = [f"{w.url.split('#', 1)[0]}#sha256={w.sha256}" for w in missing]
            result = run_pip(
                target,
                [
                    "download",
                    "--no-deps",
                    "-d",
                    str(tmp / "dl"),
                    *target.pip_options(),
                    *options.pip_args(),
                    *urls,
                ],
                tmp,
                report=None,
                timeout=options.remaining("downloading the wheels"),
                deadline=options.deadline,
            )
            if result.returncode != 0:
                last = [line for line in result.log.splitlines() if line.startswith("ERROR")][-1:]
                raise UsageError(f"pip could not download the wheels: {(last or ['pip failed'])[0][:300]}")
            for w in missing:
                self._admit(w, tmp / "dl" / w.filename)
        finally:
            sessions.remove_folder(str(tmp))
        self.prune(keep=in_use)

    def prune(self, *, keep: Collection[Path] = ()) -> list[Path]:
        """Remove the least recently used wheels until the cache holds at most ``max_bytes`` (never one
        in ``keep``, the entries of the current run), and the oldest trees beyond ``MAX_TREES``. Only
        files the ledger says envcheck wrote are removed, never through a link (a ``trees`` folder or an
        entry replaced by a link is left alone, and so is anything else found there). Returns what was
        removed. Never raises. A cache root that is itself a link (``wheels/`` pointing at a shared folder)
        is never pruned: what lies there is not this cache's to remove."""
        if not self._root_is_own_folder():
            return []
        ledger = self._ledger()
        entries = []
        with contextlib.suppress(OSError):
            for child in self.root.iterdir():
                if not _SHA256.fullmatch(child.name) or child.is_symlink() or not child.is_dir():
                    continue
                files = [f for f in child.iterdir() if self._written(f, ledger)]
                size = sum(f.lstat().st_size for f in files)
                entries.append((child.lstat().st_mtime, child, size, files))
        total = sum(size for _, _, size, _ in entries)
        removed: list[Path] = []
        for _, folder, size, files in sorted(entries, key=lambda e: (e[0], e[1])):
            if total <= self.max_bytes:
                break
            if folder in keep or not files:
                continue
            for f in files:
                with contextlib.suppress(OSError):
                    f.unlink()
            with contextlib.suppress(OSError):
                folder.rmdir()  # only once empty: a file envcheck did not write stays, with its folder
            total -= size
            removed.append(folder)
        trees = self.root / "trees"
        with contextlib.suppress(OSError):
            if not trees.is_symlink() and trees.is_dir():
                stored = [f for f in trees.iterdir() if f.suffix == ".json" and self._written(f, ledger)]
                stored.sort(key=lambda f: f.lstat().st_mtime)
                for f in stored[: max(0, len(stored) - MAX_TREES)]:
                    f.unlink()
                    removed.append(f)
        if removed:
            self._forget(removed)
        return removed

    # The ledger: every file envcheck wrote into the cache, one path (relative to the root) a line. Pruning
    # removes only what it lists.
    _LEDGER = "envcheck-written.txt"
    MAX_LEDGER_BYTES = 8 * 1024**2

    def record(self, path: Path) -> None:
        """Add ``path`` (a file this cache wrote) to the ledger. Never raises."""
        line = (path.relative_to(self.root).as_posix() + "\n").encode()
        flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0)
        with contextlib.suppress(OSError, ValueError):
            fd = os.open(self.root / self._LEDGER, flags, 0o600)
            try:
                os.write(fd, line)
            finally:
                os.close(fd)

    def _ledger(self) -> set[str]:
        try:
            fd = os.open(self.root / self._LEDGER, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK)
        except OSError:
            return set()
        with os.fdopen(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return set()
            raw = f.read(self.MAX_LEDGER_BYTES)
        return set(raw.decode("utf-8", "replace").splitlines())

    def _written(self, path: Path, ledger: set[str]) -> bool:
        """Whether ``path`` is a regular file (not a link) that the ledger lists."""
        try:
            rel = path.relative_to(self.root).as_posix()
            return rel in ledger and not path.is_symlink() and path.is_file()
        except (OSError, ValueError):
            return False

    def _forget(self, removed: Collection[Path]) -> None:
        gone = {p.relative_to(self.root).as_posix() for p in removed}
        kept = sorted(
            line for line in self._ledger() if line and line not in gone and line.split("/")[0] not in gone
        )
        _write_text(self.root / self._LEDGER, "".join(f"{line}\n" for line in kept))

    def _admit(self, wheel: ResolvedWheel, downloaded: Path) -> None:
        entry = self.entry(wheel)
        assert entry is not None
        if not downloaded.is_file():
            raise UsageError(f"pip did not download {wheel.filename}")
        digest = sha256_of(downloaded)
        if digest != wheel.sha256:
            raise UsageError(
                f"{wheel.filename} does not match the sha256 of pip's report ({digest} != {wheel.sha256})"
            )
        entry.parent.mkdir(parents=True, exist_ok=True)
        downloaded.replace(entry)
        self.record(entry)

    def _root_is_own_folder(self) -> bool:
        """Whether the cache root is a real folder, not a link to one (checked with ``lstat``)."""
        try:
            return stat.S_ISDIR(os.lstat(self.root).st_mode)
        except OSError:
            return False

    def _remove_stale(self) -> None:
        """Remove the temporary folders of this user's runs killed over ``_STALE_S`` ago. Never through a
        link: the root is opened with ``O_NOFOLLOW`` (a linked root, a shared folder, is left alone) and
        each folder is judged by ``lstat`` relative to it (a real folder, named ``_tmp_prefix()``, owned
        by this user) and removed relative to it. Never raises."""
        try:
            fd = os.open(self.root, os.O_RDONLY | _NOFOLLOW | _DIRECTORY)
        except OSError:
            return  # a link (ELOOP), not a folder, or gone
        try:
            if not stat.S_ISDIR(os.fstat(fd).st_mode):
                return
            prefix = _tmp_prefix()
            geteuid = getattr(os, "geteuid", None)
            now = time.time()
            with os.scandir(fd) as listing:
                names = [e.name for e in listing if e.name.startswith(prefix)]
            for name in names:
                try:
                    st = os.lstat(name, dir_fd=fd)
                except OSError:
                    continue
                if not stat.S_ISDIR(st.st_mode) or now - st.st_mtime <= _STALE_S:
                    continue
                if geteuid is not None and st.st_uid != geteuid():
                    continue
                _rmtree_at(fd, name, self.root)
        except OSError:
            return
        finally:
            os.close(fd)

    def wheel_path(self, wheel: ResolvedWheel) -> Path | None:
        """The file to read for ``wheel``: a local index's own file (verified), or the cache entry."""
        local = _local_path(wheel.url)
        if local is not None:
            return local
        entry = self.entry(wheel)
        return entry if entry is not None and entry.is_file() else None

    def scan_tree(self, wheels: Sequence[ResolvedWheel]) -> TreeScan:
        """The native tree of every platform wheel of ``wheels`` installed together, as the target's
        loader would resolve it (torch's ``$ORIGIN/../../nvidia/*/lib`` reaching the nvidia-* wheels).

        Each wheel's native members and ``.dist-info`` RECORD / WHEEL are extracted member by member,
        within the scanner's caps, into one temporary site-packages folder, which the native scanner
        walks; the result is kept in ``trees/<key>.json``, keyed by the wheels' sha256s, so a warm run
        reads no wheel at all. Raises ``UsageError`` when a wheel is missing or does not verify."""
        native = sorted((w for w in wheels if not is_pure(w)), key=lambda w: w.sha256 or "")
        if not native:
            return TreeScan(section=NativeSection(nodes=[]), torch_version=None, cached=True)
        key = hashlib.sha256(
            "\n".join([_SCAN_FORMAT, *(w.sha256 or w.url for w in native)]).encode()
        ).hexdigest()
        stored = self.root / "trees" / f"{key}.json"
        found = _read_scan(stored)
        if found is not None:
            with contextlib.suppress(OSError):
                os.utime(stored)  # last use, for pruning the oldest first
            return TreeScan(section=found[0], torch_version=found[1], cached=True, macos_minimum=found[2])
        paths = []
        for w in native:
            path = self.wheel_path(w)
            if path is None:
                raise UsageError(f"{w.filename} is not in the wheel cache")
            self.verify(w, path)
            paths.append(path)
        torch_version = None
        with sessions.temporary_folder("envcheck-predict-tree-") as folder:
            tree = str(folder)
            refused = []
            done: list[str] = []
            for path in paths:
                if self.deadline is not None:
                    self.deadline.check(f"scanning the wheels (before {path.name})", done=", ".join(done))
                # The scanner's own extraction (caps, zip-slip and ratio checks), into one site-packages,
                # within what the command may still write in all.
                written, files = _bytes_under(tree)
                refused += extract_native(
                    path,
                    tree,
                    max_total=max(0, MAX_WRITTEN_BYTES - written),
                    max_members=max(0, MAX_PREDICT_FILES - files),
                    deadline=self.deadline,
                )
                torch_version = torch_version or _torch_version(path)
                done.append(f"{path.name} scanned")
            section = scan_folder(tree, display_root=tree, refused=refused, wheel=True)
            macos = _macos_minimum(tree, section)
        if not stored.parent.is_symlink():
            stored.parent.mkdir(parents=True, exist_ok=True)
            _write_scan(stored, section, torch_version, macos)
            self.record(stored)
        return TreeScan(section=section, torch_version=torch_version, cached=False, macos_minimum=macos)

    def verify(self, wheel: ResolvedWheel, path: Path) -> None:
        """Check ``path`` against the sha256 of the resolver's report before it is read: the cache is not
        trusted. A cache entry that does not match is removed (the next run downloads it again); raises
        ``UsageError`` either way."""
        if wheel.sha256 is None and _local_path(wheel.url) is not None:
            return  # a local index's own file that the report gives no hash for: nothing to check against
        if wheel.sha256 is not None and sha256_of(path) == wheel.sha256:
            return
        if wheel.sha256 is not None and _local_path(wheel.url) is None and path == self.entry(wheel):
            with contextlib.suppress(OSError):
                path.unlink()
            raise UsageError(
                f"the cached {wheel.filename} does not match the sha256 of the resolver's report: removed",
                tip="Run the command again: it downloads the wheel anew.",
            )
        raise UsageError(f"{path} does not match the sha256 of the resolver's report")

    def requires_of(self, wheel: ResolvedWheel) -> tuple[str, ...]:
        """The ``Requires-Dist`` lines of ``wheel``'s METADATA, read from the cached (or local) file,
        within ``MAX_METADATA_BYTES``. Raises ``UsageError`` for a wheel that is missing, unreadable or
        whose METADATA is over the cap."""
        entry = self.entry(wheel)
        stored = entry.with_name(_REQUIRES_FILE) if entry is not None else None
        if stored is not None:
            found = _read_requires(stored)
            if found is not None:
                return found
        path = self.wheel_path(wheel)
        if path is None:
            raise UsageError(f"{wheel.filename} is not in the wheel cache")
        self.verify(wheel, path)
        requires = tuple(requires_dist(path))
        if stored is not None and stored.parent.is_dir():
            _write_json(stored, {"format": _SCAN_FORMAT, "requires": list(requires)})
            self.record(stored)
        return requires


# The most of a wheel's METADATA that envcheck reads (a real one, long description included, is well under
# 1 MB). pip's resolver, run by envcheck, refuses a larger one before reading it (``pip_entry``).
MAX_METADATA_BYTES = pip_entry.MAX_METADATA_BYTES


def requires_dist(wheel: Path) -> list[str]:
    """``Requires-Dist`` of the wheel's ``*.dist-info/METADATA``, refused past ``MAX_METADATA_BYTES``."""
    import zipfile
    from email.parser import BytesHeaderParser

    try:
        problem = directory_problem(wheel)
        if problem is not None:
            raise UsageError(f"{wheel.name}: {problem}: not read")
        with zipfile.ZipFile(wheel) as zf:
            names = [n for n in zf.namelist() if re.fullmatch(r"[^/]+\.dist-info/METADATA", n)]
            if len(names) != 1:
                raise UsageError(f"{wheel.name} has {len(names)} .dist-info/METADATA files, not one")
            info = zf.getinfo(names[0])
            if info.file_size > MAX_METADATA_BYTES:
                raise UsageError(
                    f"{wheel.name}: its METADATA is {info.file_size} bytes, over the "
                    f"{MAX_METADATA_BYTES}-byte cap (MAX_METADATA_BYTES): not read"
                )
            with zf.open(info) as f:
                raw = f.read(MAX_METADATA_BYTES + 1)
    except (zipfile.BadZipFile, OSError, EOFError, ValueError, NotImplementedError) as e:
        raise UsageError(f"cannot read the METADATA of {wheel.name}: {e}") from e
    message = BytesHeaderParser().parsebytes(raw[:MAX_METADATA_BYTES])
    return [str(v) for v in message.get_all("Requires-Dist") or []]


# Beside a cached wheel: its ``Requires-Dist``, read once from its METADATA (a warm run opens no wheel).
_REQUIRES_FILE = "requires.json"
MAX_REQUIRES_BYTES = 1024**2


def _read_requires(path: Path) -> tuple[str, ...] | None:
    """The stored requirements, or None when the file is missing, too large, or not what envcheck wrote."""
    data = _read_json(path, MAX_REQUIRES_BYTES)
    if not isinstance(data, dict) or data.get("format") != _SCAN_FORMAT:
        return None
    requires = data.get("requires")
    if not isinstance(requires, list) or not all(isinstance(r, str) and len(r) < 4096 for r in requires):
        return None
    return tuple(requires)


def _read_json(path: Path, cap: int) -> object:
    """``path``'s JSON, read only as a regular file (never through a link, a FIFO or a device) of at most
    ``cap`` bytes; None for anything else."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        with os.fdopen(fd, "rb") as f:
            st = os.fstat(f.fileno())
            if not stat.S_ISREG(st.st_mode) or st.st_size > cap:
                return None
            raw = f.read(cap + 1)
        if len(raw) > cap:
            return None
        return json.loads(raw)
    except (OSError, ValueError, RecursionError):
        return None


def _write_json(path: Path, data: object) -> None:
    """``data`` as JSON at ``path``: see ``_write_text``."""
    _write_text(path, json.dumps(data))


def _rmtree_at(fd: int, name: str, root: Path) -> None:
    """Remove the folder ``name`` of the folder open as ``fd`` (``root``), never following a link. Never
    raises."""
    import shutil

    if sys.version_info >= (3, 11) and shutil.rmtree.avoids_symlink_attacks:
        shutil.rmtree(name, ignore_errors=True, dir_fd=fd)
        return
    # Python 3.10 has no ``dir_fd`` here: by path, only while the path still names the folder open as fd.
    with contextlib.suppress(OSError):
        if os.path.samestat(os.fstat(fd), os.lstat(root)):
            shutil.rmtree(root / name, ignore_errors=True)


def _write_text(path: Path, text: str) -> None:
    """``text`` at ``path``, by a temporary file and a rename (a planted link is replaced, never written
    through); a cache that cannot be written is no error."""
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(text)
        tmp.replace(path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()


# The most one predict command writes when it extracts wheels, all targets' wheels together (torch's CUDA
# set writes ~7 GB of native files).
MAX_WRITTEN_BYTES = 16 * 1024**3


# The most files one predict command extracts, every wheel of every target together: each is a node of
# the predicted tree, which must stay within what a manifest may hold.
MAX_PREDICT_FILES = 20_000


def _bytes_under(folder: str) -> tuple[int, int]:
    """The bytes and the number of the files under ``folder`` (links not followed)."""
    total = count = 0
    for parent, _dirs, files in os.walk(folder):
        for name in files:
            count += 1
            with contextlib.suppress(OSError):
                total += os.lstat(os.path.join(parent, name)).st_size  # noqa: PTH118
    return total, count


def sha256_of(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1024 * 1024):
            h.update(chunk)
    return h.hexdigest()


def _safe_name(name: str) -> bool:
    return (
        bool(name)
        and name.endswith(".whl")
        and "/" not in name
        and "\\" not in name
        and not name.startswith(".")
    )


def _local_path(url: str) -> Path | None:
    """The file a ``file:`` URL names (a local index or ``--find-links`` folder), else None."""
    parts = urlsplit(url)
    if parts.scheme != "file":
        return None
    path = Path(unquote(parts.path))
    return path if path.is_file() else None


def _torch_version(wheel: Path) -> dict[str, object] | None:
    """``torch/version.py``'s literal values, read from the wheel's member (capped) without executing it."""
    import zipfile

    try:
        with zipfile.ZipFile(wheel) as zf:
            info = zf.getinfo("torch/version.py")
            if info.file_size > 64 * 1024:
                return None
            text = zf.read(info)
    except (KeyError, OSError, zipfile.BadZipFile, ValueError):
        return None
    with sessions.temporary_folder("envcheck-predict-") as tmp:
        path = tmp / "version.py"
        path.write_bytes(text)
        values = read_version_file(str(path))  # type: ignore[no-untyped-call]
    return {k: v for k, v in values.items() if isinstance(v, str | bool | None)}


def _macos_minimum(tree: str, section: NativeSection) -> tuple[str, str] | None:
    """The highest minimum macOS release the tree's Mach-O files declare, with the file's node key. Each
    file is read like the scanner reads it (``check_layout`` bounds what macholib builds first); one that
    cannot be read adds nothing."""
    import struct

    from macholib import mach_o
    from macholib.MachO import MachO

    best: tuple[tuple[int, int, int], str] | None = None
    for node in section.nodes or []:
        if node.format != "macho" or node.owner == "system" or node.error:
            continue
        path = str(Path(tree) / node.path)
        try:
            with open(path, "rb") as f:  # noqa: PTH123
                check_layout(f)
                f.seek(0)
                macho = MachO.__new__(MachO)
                macho.graphident = macho.filename = path
                macho.loader_path = str(Path(path).parent)
                macho.fat = None
                macho.headers = []
                macho.allow_unknown_load_commands = False
                macho.load(f)
        except (OSError, BinaryError, ValueError, KeyError, struct.error):
            continue
        for header in macho.headers:
            for load_cmd, cmd, _data in header.commands:
                if load_cmd.cmd == mach_o.LC_BUILD_VERSION:
                    packed = int(cmd.minos)
                elif load_cmd.cmd == mach_o.LC_VERSION_MIN_MACOSX:
                    packed = int(cmd.version)
                else:
                    continue
                # xxxx.yy.zz in nibbles: 0x000B0000 is 11.0.0 (mach-o/loader.h).
                version = (packed >> 16, (packed >> 8) & 0xFF, packed & 0xFF)
                if best is None or version > best[0]:
                    best = (version, node.key)
    if best is None:
        return None
    (major, minor, patch), key = best
    return (f"{major}.{minor}" + (f".{patch}" if patch else ""), key)


def _read_scan(path: Path) -> tuple[NativeSection, dict[str, object] | None, tuple[str, str] | None] | None:
    try:
        data = _read_json(path, MAX_SCAN_BYTES)
        if not isinstance(data, dict) or data.get("format") != _SCAN_FORMAT:
            return None
        torch_version = data.get("torch")
        section = decode(NativeSection, data.get("section"), source=str(path))
        macos = data.get("macos_minimum")
        pair = None
        if isinstance(macos, list) and len(macos) == 2 and all(isinstance(v, str) for v in macos):
            pair = (str(macos[0]), str(macos[1]))
        return section, torch_version if isinstance(torch_version, dict) else None, pair
    except (OSError, ValueError, ManifestError):
        return None  # a scan of another envcheck, or damaged: scanned again


def _write_scan(
    path: Path,
    section: NativeSection,
    torch_version: dict[str, object] | None,
    macos_minimum: tuple[str, str] | None,
) -> None:
    data = {
        "format": _SCAN_FORMAT,
        "section": encode(section),
        "torch": torch_version,
        "macos_minimum": macos_minimum,
    }
    _write_json(path, data)
