"""Applying an image's layers into one folder, as overlayfs would show them, without trusting any member.

``flatten(image, dest)`` streams each layer (``tarfile`` in ``r|*`` mode: a layer is never read whole into
memory, and tarfile's list of members is emptied as it goes) and writes its members into ``dest`` with
the OCI layer rules:

- ``.wh.NAME`` removes ``NAME`` left by earlier layers, ``.wh..wh..opq`` empties its folder of what
  earlier layers put there; what the same layer writes stays (the OCI spec: a whiteout hides only lower
  layers), whatever the order of the members in the tar. Other ``.wh..wh.`` names (aufs bookkeeping) are
  skipped. A whiteout naming ``..``, ``.`` or nothing refuses the image.
- Member names are normalised (``./usr/bin``, ``/usr/bin`` and ``usr/bin`` are one path); a name with a
  ``..`` component or a NUL byte refuses the image (``ImageError`` naming the layer and the member).
- Regular files, folders, symbolic and hard links are written; devices and FIFOs are counted and never
  created (nor are unknown member types); what they replace is removed, as their layer hides it.
- **Nothing is written through a link.** Every folder on a member's way is opened relative to its parent
  with ``O_NOFOLLOW``; a symbolic link or a file there (from an earlier layer, or earlier in the same
  layer) is replaced by a real folder: an upper layer's folder hides a lower non-folder, as overlayfs does
  (Docker's overlay2 applies a layer the same way; a runtime that extracts through the merged view would
  follow the link instead, which no real image relies on). Files are created with
  ``O_CREAT|O_EXCL|O_NOFOLLOW`` after whatever was there is removed: an existing inode (a hard link's
  other name) is never written into.
- **Links stay inside.** A symbolic link is written relative, so that it resolves inside ``dest`` on the
  host: an absolute target ``/usr/lib/x`` becomes the path from the link's folder to ``usr/lib/x``, and a
  relative one that climbs above the root is clamped there (chroot semantics), both normalised lexically
  (``a/../b`` is ``b`` even when ``a`` is a link: the rare difference is the price of containment).
  ``Flattened.link_targets`` keeps each link's original target text. A hard link must name a file or
  link that an earlier member left inside the root (a folder, or nothing, refuses the image); it is made
  with ``link(2)``, or copied where the file system refuses.
- **No privileges.** Permission bits are kept, plus owner read and write (and search, on folders), so the
  tree can always be read and removed; setuid, setgid and sticky bits and owners are dropped.
- **Bounded.** ``Limits``: bytes in all (declared sizes checked before a member is read), bytes a file,
  members, path length and depth, and for a compressed layer a ratio cap (its tar bytes against its
  compressed bytes read so far) once past a floor; the deadline is checked every ``check_members``
  members and every ``check_bytes`` bytes. Past one: ``ImageError`` naming the limit.

A layer is checked against its digest once its tar ends (``BlobStream.finish``): a mismatch refuses the
image after its members were written, so on any ``ImageError`` the caller discards ``dest``.

``resolve_in_root(root, path)`` then resolves a path as the image would: links followed inside ``root``
with ``..`` clamped at it, ``None`` for a missing path or a loop.
"""

# ruff: noqa: PTH115, PTH208
# The tree is walked through folder descriptors (``dir_fd``, ``os.listdir(fd)``), which pathlib cannot do.

from __future__ import annotations

import errno
import os
import stat
import tarfile
import zlib
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from envcheck.core.deadline import Deadline
from envcheck.core.errors import ImageError
from envcheck.core.escape import one_line as esc
from envcheck.image.archive import BlobStream, CappedTarInfo, Image

_CHUNK = 1024**2
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SPECIAL_EXAMPLES = 20
WHITEOUT = ".wh."
OPAQUE = ".wh..wh..opq"


@dataclass(frozen=True, kw_only=True, slots=True)
class Limits:
    """What one flatten may write. The defaults fit the largest real CUDA images (~20 GB, ~500,000 files)
    with room; tests pass small ones."""

    total_bytes: int = 24 * 1024**3
    file_bytes: int = 16 * 1024**3
    members: int = 2_000_000
    # A compressed layer whose tar passes ``ratio_floor_bytes`` may not expand more than this (real layers:
    # 2-10x; a gzip of zeros: ~1000x).
    ratio: int = 200
    ratio_floor_bytes: int = 1024**2
    path_bytes: int = 4096
    depth: int = 256
    check_members: int = 1024
    check_bytes: int = 16 * 1024**2


@dataclass(frozen=True, kw_only=True, slots=True)
class Flattened:
    """What ``flatten`` wrote: ``root`` (``dest``), the layers applied, the members read, the bytes
    written, the devices / FIFOs / unknown members skipped (``skipped_special``, the first few named in
    ``special_examples``), the whiteouts applied (opaque markers included), and each symbolic link still in
    the tree by its image path (``usr/lib/x``) with its original target text."""

    root: Path
    layers: int
    members: int
    bytes_written: int
    skipped_special: int
    special_examples: tuple[str, ...]
    whiteouts: int
    link_targets: Mapping[str, str]


def flatten(image: Image, dest: Path, *, deadline: Deadline, limits: Limits = Limits()) -> Flattened:
    """Apply ``image``'s layers, lowest first, into the empty folder ``dest`` (see the module's rules).

    Raises ``ImageError`` (one line naming the layer, the member and the rule or limit), or
    ``DeadlineExpired``; either way ``dest`` holds a partial tree, inside ``dest`` only, for the caller to
    remove. ``ValueError`` if ``dest`` is not an empty real folder."""
    try:
        root_fd = os.open(dest, _DIR_FLAGS)
    except OSError as e:
        raise ValueError(f"{dest}: not a folder envcheck can write: {e.strerror or e}") from e
    try:
        if os.listdir(root_fd):
            raise ValueError(f"{dest}: not empty")
        applier = _Applier(root_fd, limits, deadline)
        for index in range(len(image.layers)):
            applier.apply(image, index)
        links = {path: target for path, target in applier.links.items() if applier.is_link(path)}
        return Flattened(
            root=dest,
            layers=len(image.layers),
            members=applier.members,
            bytes_written=applier.total,
            skipped_special=applier.special,
            special_examples=tuple(applier.examples),
            whiteouts=applier.whiteouts,
            link_targets=links,
        )
    finally:
        os.close(root_fd)


def contained_target(link_path: str, target: str) -> str:
    """The relative text for a link at image path ``link_path`` (``usr/bin/python``) pointing at
    ``target``, normalised lexically with ``..`` clamped at the root: it never resolves above the folder the
    tree is written in. ``.`` when it names the link's own folder."""
    link_dir = link_path.split("/")[:-1]
    parts = [] if target.startswith("/") else list(link_dir)
    for comp in target.split("/"):
        if comp in ("", "."):
            continue
        if comp == "..":
            if parts:
                parts.pop()
            continue
        parts.append(comp)
    common = 0
    while common < min(len(parts), len(link_dir)) and parts[common] == link_dir[common]:
        common += 1
    return "/".join([".."] * (len(link_dir) - common) + parts[common:]) or "."


def resolve_in_root(root: Path, image_path: str, *, max_links: int = 40) -> Path | None:
    """Where ``image_path`` (``/usr/bin/python3``) leads inside ``root``, as the image would resolve it: each
    link followed inside ``root`` (an absolute target from ``root``, ``..`` clamped at it), the last
    component too. ``None`` if a component is missing or not a folder, or past ``max_links`` links (a loop
    ends there: ELOOP). Raises nothing for a hostile tree."""
    todo = deque(image_path.split("/"))
    resolved: list[str] = []
    followed = 0
    while todo:
        comp = todo.popleft()
        if comp in ("", "."):
            continue
        if comp == "..":
            if resolved:
                resolved.pop()
            continue
        host = root.joinpath(*resolved, comp)
        try:
            mode = os.lstat(host).st_mode
            if stat.S_ISLNK(mode):
                followed += 1
                if followed > max_links:
                    return None
                text = os.readlink(host)
                if text.startswith("/"):
                    resolved = []
                todo.extendleft(reversed(text.split("/")))
                continue
        except (OSError, ValueError):
            return None
        resolved.append(comp)
    return root.joinpath(*resolved)


class _Applier:
    """The state of one flatten: counters, this layer's written paths (for whiteouts), the links' targets,
    and the last parent folder opened (members come folder by folder)."""

    def __init__(self, root_fd: int, limits: Limits, deadline: Deadline) -> None:
        self.root_fd = root_fd
        self.limits = limits
        self.deadline = deadline
        self.members = 0
        self.total = 0
        self.special = 0
        self.whiteouts = 0
        self.examples: list[str] = []
        self.links: dict[str, str] = {}
        self.created: set[str] = set()
        self._cache: tuple[str, int] | None = None
        # Descriptors of cached folders dropped while a caller may still hold them: closed after the member.
        self._stale: list[int] = []
        self._unchecked_bytes = 0
        self.where = ""
        self._stream: BlobStream | None = None
        self._compressed = False

    # ------------------------------------------------------------------ one layer

    def apply(self, image: Image, index: int) -> None:
        layer = image.layers[index]
        self.where = f"layer {index + 1} of {len(image.layers)} ({layer.digest})"
        self.deadline.check(f"flattening {self.where}", f"{self.members} members")
        if layer.size > self.limits.total_bytes:
            self._limit(f"{layer.size} bytes compressed, more than {self.limits.total_bytes} (total_bytes)")
        self.created = set()
        self._drop_cache()
        self._compressed = layer.compression != "none"
        with image.open_layer(index) as stream:
            self._stream = stream
            source: IO[bytes] = stream  # type: ignore[assignment]
            if layer.compression == "zstd":
                # Lazy: optional, and needed only for zstd layers (archive.py refused them without it).
                import zstandard  # type: ignore[import-not-found,unused-ignore]

                source = zstandard.ZstdDecompressor().stream_reader(stream, closefd=False)
            member = ""
            try:
                with tarfile.open(fileobj=source, mode="r|*", tarinfo=CappedTarInfo) as tf:
                    while (info := tf.next()) is not None:
                        tf.members.clear()  # type: ignore[attr-defined,unused-ignore]  # a streamed tar lists them all
                        member = info.name
                        self._member(tf, info)
                stream.finish(self.deadline, f"checking {self.where}")
            except ImageError as e:
                if str(e).startswith("layer "):
                    raise
                shown = f" member '{esc(member)[:300]}':" if member else ""
                raise ImageError(f"{self.where}:{shown} {e}", tip=e.tip) from e
            except (tarfile.TarError, EOFError, zlib.error, ValueError, UnicodeError) as e:
                raise ImageError(f"{self.where}: not a readable tar: {esc(str(e))[:200]}") from e
            except OSError as e:
                shown = f"member '{esc(member)[:300]}'" if member else "its tar"
                raise ImageError(f"{self.where}: {shown}: cannot write: {e.strerror or e}") from e
            finally:
                self._stream = None
                self._drop_cache()
                self._close_stale()

    def _refuse(self, info: tarfile.TarInfo, problem: str) -> ImageError:
        return ImageError(f"{self.where}: member '{esc(info.name)[:300]}': {problem}: the image is refused")

    def _limit(self, problem: str, info: tarfile.TarInfo | None = None) -> None:
        member = f" member '{esc(info.name)[:300]}':" if info is not None else ""
        raise ImageError(f"{self.where}:{member} {problem}: refused")

    def _path(self, info: tarfile.TarInfo, name: str) -> list[str]:
        if "\x00" in name:
            raise self._refuse(info, "a NUL byte in a path")
        parts = [p for p in name.split("/") if p not in ("", ".")]
        if ".." in parts:
            raise self._refuse(info, f"'{esc(name)[:300]}' climbs out of the root ('..')")
        if len(parts) > self.limits.depth:
            self._limit(f"{len(parts)} folders deep, more than {self.limits.depth} (depth)", info)
        if len(os.fsencode("/".join(parts))) > self.limits.path_bytes:
            self._limit(f"a path longer than {self.limits.path_bytes} bytes (path_bytes)", info)
        return parts

    def _member(self, tf: tarfile.TarFile, info: tarfile.TarInfo) -> None:
        try:
            self._apply_member(tf, info)
        finally:
            self._close_stale()

    def _apply_member(self, tf: tarfile.TarFile, info: tarfile.TarInfo) -> None:
        self.members += 1
        if self.members > self.limits.members:
            self._limit(f"more than {self.limits.members} members (members)", info)
        if self.members % self.limits.check_members == 0:
            self.deadline.check(f"flattening {self.where}", f"{self.members} members")
        self._check_ratio(info.offset_data, info)
        parts = self._path(info, info.name)
        has_data = info.isreg() or info.type not in tarfile.SUPPORTED_TYPES
        if parts and parts[-1].startswith(WHITEOUT):
            self._copy(tf, info, None)
            self._whiteout(info, parts)
        elif not parts:  # the root's own entry: its mode and owner are not the image's to set
            self._copy(tf, info, None)
        elif info.isdir():
            self._folder(info, parts)
        elif info.isreg():
            self._file(tf, info, parts)
        elif info.issym():
            self._symlink(info, parts)
        elif info.islnk():
            self._hardlink(info, parts)
        else:  # a device, a FIFO, or a type envcheck does not know: hidden below, never created
            if has_data:
                self._copy(tf, info, None)
            self._clear(self._parents(parts[:-1]), parts[-1])
            self.created.add("/".join(parts))
            self.special += 1
            if len(self.examples) < _SPECIAL_EXAMPLES:
                self.examples.append("/".join(parts))

    # ------------------------------------------------------------------ data

    def _check_ratio(self, uncompressed: int, info: tarfile.TarInfo) -> None:
        if not self._compressed or self._stream is None or uncompressed <= self.limits.ratio_floor_bytes:
            return
        compressed = max(1, self._stream.bytes_read)
        if uncompressed > self.limits.ratio * compressed:
            self._limit(
                f"expands {uncompressed // compressed}x (more than {self.limits.ratio}x, ratio): "
                "a decompression bomb",
                info,
            )

    def _copy(self, tf: tarfile.TarFile, info: tarfile.TarInfo, fd: int | None) -> None:
        """Read the member's data (into ``fd``, or nowhere), counting it against the limits."""
        if info.size <= 0:
            return
        if info.size > self.limits.file_bytes:
            self._limit(f"{info.size} bytes, more than {self.limits.file_bytes} a file (file_bytes)", info)
        if self.total + info.size > self.limits.total_bytes:
            self._limit(f"past {self.limits.total_bytes} bytes in all (total_bytes)", info)
        source = tf.extractfile(info)
        if source is None:
            return
        done = 0
        while done < info.size:
            chunk = source.read(min(_CHUNK, info.size - done))
            if not chunk:
                raise self._refuse(info, "its data ends early")
            done += len(chunk)
            self.total += len(chunk)
            if fd is not None:
                view = memoryview(chunk)
                while view:
                    view = view[os.write(fd, view) :]
            self._check_ratio(info.offset_data + done, info)
            self._unchecked_bytes += len(chunk)
            if self._unchecked_bytes >= self.limits.check_bytes:
                self._unchecked_bytes = 0
                self.deadline.check(f"flattening {self.where}", f"{self.members} members")

    # ------------------------------------------------------------------ the tree

    def _drop_cache(self) -> None:
        """Forget the cached folder; its descriptor is closed once the member is done (``_close_stale``),
        since the caller may still be using it."""
        if self._cache is not None:
            self._stale.append(self._cache[1])
            self._cache = None

    def _close_stale(self) -> None:
        while self._stale:
            os.close(self._stale.pop())

    def _parents(self, parts: list[str]) -> int:
        """A descriptor on the folder ``parts`` (owned by the cache), every folder on the way made real:
        missing ones made, links and files replaced by folders, none followed."""
        key = "/".join(parts)
        if self._cache is not None and self._cache[0] == key:
            return self._cache[1]
        self._drop_cache()
        fd = os.dup(self.root_fd)
        try:
            for i, comp in enumerate(parts):
                self.created.add("/".join(parts[: i + 1]))
                try:
                    st = os.lstat(comp, dir_fd=fd)
                except FileNotFoundError:
                    os.mkdir(comp, 0o755, dir_fd=fd)
                else:
                    if not stat.S_ISDIR(st.st_mode):
                        self._remove(fd, comp, st)
                        os.mkdir(comp, 0o755, dir_fd=fd)
                inner = os.open(comp, _DIR_FLAGS, dir_fd=fd)
                os.close(fd)
                fd = inner
        except BaseException:
            os.close(fd)
            raise
        self._cache = (key, fd)
        return fd

    def _open_existing(self, parts: list[str]) -> int | None:
        """A descriptor on the real folder ``parts`` (the caller closes it), or ``None`` where a component
        is missing or not a real folder. Nothing is made or followed."""
        fd = os.dup(self.root_fd)
        for comp in parts:
            try:
                inner = os.open(comp, _DIR_FLAGS, dir_fd=fd)
            except OSError:
                os.close(fd)
                return None
            os.close(fd)
            fd = inner
        return fd

    def is_link(self, path: str) -> bool:
        parts = path.split("/")
        fd = self._open_existing(parts[:-1])
        if fd is None:
            return False
        try:
            return stat.S_ISLNK(os.lstat(parts[-1], dir_fd=fd).st_mode)
        except OSError:
            return False
        finally:
            os.close(fd)

    def _remove(self, dir_fd: int, name: str, st: os.stat_result) -> None:
        """Remove ``name`` (a folder with all it holds), never following a link."""
        if stat.S_ISDIR(st.st_mode):
            self._drop_cache()  # the cached folder may be inside: the caller opens it again
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                for child in os.listdir(fd):
                    self._remove(fd, child, os.lstat(child, dir_fd=fd))
            finally:
                os.close(fd)
            os.rmdir(name, dir_fd=dir_fd)
        else:
            os.unlink(name, dir_fd=dir_fd)

    def _clear(self, dir_fd: int, name: str) -> None:
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        self._remove(dir_fd, name, st)

    def _remove_lower(self, dir_fd: int, name: str, path: str) -> None:
        """Remove what earlier layers left at ``path``; keep what this layer wrote (inside a folder it
        wrote into, only that)."""
        try:
            st = os.lstat(name, dir_fd=dir_fd)
        except FileNotFoundError:
            return
        if path not in self.created:
            self._remove(dir_fd, name, st)
        elif stat.S_ISDIR(st.st_mode):
            fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
            try:
                for child in os.listdir(fd):
                    self._remove_lower(fd, child, f"{path}/{child}")
            finally:
                os.close(fd)

    def _whiteout(self, info: tarfile.TarInfo, parts: list[str]) -> None:
        name = parts[-1]
        folder = parts[:-1]
        if name == OPAQUE:
            fd = self._parents(folder)
            prefix = "/".join(folder)
            for child in os.listdir(fd):
                fd = self._parents(folder)  # a removal below may have dropped the cached descriptor
                self._remove_lower(fd, child, f"{prefix}/{child}" if prefix else child)
            self.whiteouts += 1
            return
        if name.startswith(WHITEOUT + WHITEOUT):
            return  # aufs bookkeeping (.wh..wh.plnk, .wh..wh.aufs): nothing to apply
        target = name[len(WHITEOUT) :]
        if target in ("", ".", "..") or "\x00" in target:
            raise self._refuse(info, "a whiteout naming no file inside the root")
        fd = self._parents(folder)
        self._remove_lower(fd, target, "/".join([*folder, target]))
        self.whiteouts += 1

    def _folder(self, info: tarfile.TarInfo, parts: list[str]) -> None:
        parent = self._parents(parts[:-1])
        name = parts[-1]
        try:
            st = os.lstat(name, dir_fd=parent)
        except FileNotFoundError:
            os.mkdir(name, 0o700, dir_fd=parent)
        else:
            if not stat.S_ISDIR(st.st_mode):
                self._remove(parent, name, st)
                parent = self._parents(parts[:-1])
                os.mkdir(name, 0o700, dir_fd=parent)
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent)
        try:
            os.fchmod(fd, (info.mode & 0o777) | 0o700)
        finally:
            os.close(fd)
        self.created.add("/".join(parts))

    def _file(self, tf: tarfile.TarFile, info: tarfile.TarInfo, parts: list[str]) -> None:
        parent = self._parents(parts[:-1])
        name = parts[-1]
        self._clear(parent, name)
        parent = self._parents(parts[:-1])
        fd = os.open(name, _NEW_FILE, 0o600, dir_fd=parent)
        try:
            self._copy(tf, info, fd)
            os.fchmod(fd, (info.mode & 0o777) | 0o600)
        finally:
            os.close(fd)
        path = "/".join(parts)
        self.created.add(path)
        self.links.pop(path, None)

    def _symlink(self, info: tarfile.TarInfo, parts: list[str]) -> None:
        target = info.linkname
        if "\x00" in target or not target:
            raise self._refuse(info, "a symbolic link with an empty target or a NUL byte")
        if len(os.fsencode(target)) > self.limits.path_bytes:
            self._limit(f"a link target longer than {self.limits.path_bytes} bytes (path_bytes)", info)
        path = "/".join(parts)
        parent = self._parents(parts[:-1])
        self._clear(parent, parts[-1])
        parent = self._parents(parts[:-1])
        os.symlink(contained_target(path, target), parts[-1], dir_fd=parent)
        self.created.add(path)
        self.links[path] = target

    def _hardlink(self, info: tarfile.TarInfo, parts: list[str]) -> None:
        target_parts = self._path(info, info.linkname)
        path = "/".join(parts)
        target = "/".join(target_parts)
        if not target_parts:
            raise self._refuse(info, "a hard link to the root folder")
        if target == path:
            raise self._refuse(info, "a hard link to itself")
        parent = self._parents(parts[:-1])
        source = self._open_existing(target_parts[:-1])
        try:
            st = os.lstat(target_parts[-1], dir_fd=source) if source is not None else None
        except FileNotFoundError:
            st = None
        if source is None or st is None:
            if source is not None:
                os.close(source)
            raise self._refuse(info, f"a hard link to '{esc(target)[:300]}', which no earlier member wrote")
        try:
            if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
                raise self._refuse(info, f"a hard link to '{esc(target)[:300]}', which is a folder")
            self._clear(parent, parts[-1])
            parent = self._parents(parts[:-1])
            try:
                os.link(
                    target_parts[-1], parts[-1], src_dir_fd=source, dst_dir_fd=parent, follow_symlinks=False
                )
            except OSError as e:
                if e.errno not in (errno.EPERM, errno.EMLINK, errno.EXDEV, errno.EACCES, errno.ENOTSUP):
                    raise
                self._copy_entry(source, target_parts[-1], parent, parts[-1], st)
        finally:
            if source is not None:
                os.close(source)
        self.created.add(path)
        if stat.S_ISLNK(st.st_mode):
            self.links[path] = self.links.get(target, os.readlink(parts[-1], dir_fd=parent))
        else:
            self.links.pop(path, None)

    def _copy_entry(self, src_dir: int, src: str, dst_dir: int, dst: str, st: os.stat_result) -> None:
        """A copy where ``link(2)`` is refused: a link's text, or a file's bytes (already counted)."""
        if stat.S_ISLNK(st.st_mode):
            os.symlink(os.readlink(src, dir_fd=src_dir), dst, dir_fd=dst_dir)
            return
        rfd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC, dir_fd=src_dir)
        try:
            wfd = os.open(dst, _NEW_FILE, 0o600, dir_fd=dst_dir)
            try:
                while chunk := os.read(rfd, _CHUNK):
                    view = memoryview(chunk)
                    while view:
                        view = view[os.write(wfd, view) :]
                os.fchmod(wfd, stat.S_IMODE(st.st_mode))
            finally:
                os.close(wfd)
        finally:
            os.close(rfd)
