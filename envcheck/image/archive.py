"""Reading a container image statically: an OCI image layout folder, an OCI archive (a tar of one) or a
``docker save`` tarball. No daemon is asked and nothing from the image runs.

What it promises (docs/guarantees.md's hostile-input rules):

- **Every blob is checked.** A blob is read only through its descriptor: its size is compared with the
  file's own size (``fstat`` of the opened descriptor, or the member's size in the outer tar) before a
  byte is read, and its sha256 with the descriptor's digest once the last byte is read. A mismatch refuses
  the image with an ``ImageError`` naming the blob. A ``docker save`` tarball without an OCI index names
  its layers by path: each ``layer.tar`` is checked against the config's ``rootfs.diff_ids``, and the
  config against the digest its name carries.
- **Names come only from digests.** A blob of a layout is found at ``blobs/sha256/<64 hex>``, built from a
  digest that matched ``sha256:<64 hex>``; anything else (another algorithm, ``sha256:../../etc``) is
  refused. A ``docker save`` path is only ever looked up by name among the outer tar's members (links
  between members resolved inside the tar, at most ``MAX_TAR_LINK_HOPS`` of them); nothing is extracted.
- **Documents are capped.** The index, manifest and config are at most ``MAX_DOCUMENT_BYTES`` each: refused
  by their declared size before they are opened, and read with a cap in case the size lies.
- **Bounded structure.** Indexes nest at most ``MAX_INDEX_DEPTH`` deep and ``MAX_INDEX_ENTRIES`` entries
  are walked in all; an outer tar holds at most ``MAX_ARCHIVE_MEMBERS`` members; a tar's extended headers
  (pax, GNU long names) are at most ``MAX_TAR_HEADER_BYTES`` (``CappedTarInfo``: tarfile would read one
  of any size into memory), and GNU sparse members are refused.
- **One deadline.** Listing the outer tar and walking the indexes check the caller's ``Deadline``.
"""

# ruff: noqa: PTH116, PTH118
# Paths stay strings (os.path / posixpath) where they meet open_regular, which takes strings; the members of
# an archive are POSIX paths whatever the host.

from __future__ import annotations

import hashlib
import json
import os
import posixpath
import re
import stat
import tarfile
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Literal, Protocol

from envcheck.core.deadline import Deadline
from envcheck.core.errors import ImageError, UsageError
from envcheck.core.escape import one_line as esc
from envcheck.core.files import NotOpened, open_regular

# An image index, manifest or config: real ones are a few KiB (a config with a long history ~100 KiB).
MAX_DOCUMENT_BYTES = 4 * 1024**2
# index -> index -> manifest is the deepest real tools write (a docker save of a multi-platform image).
MAX_INDEX_DEPTH = 4
# Entries walked in all the indexes of one image (a multi-platform image lists ~10 plus attestations).
MAX_INDEX_ENTRIES = 4_096
# Layers in one manifest: Docker stops at 127, overlayfs at ~500.
MAX_LAYERS = 1_000
# Members of an OCI archive or a docker save tarball (blobs, a few documents per layer).
MAX_ARCHIVE_MEMBERS = 100_000
MAX_TAR_LINK_HOPS = 8
# A pax header or GNU long name: real ones are a few hundred bytes.
MAX_TAR_HEADER_BYTES = 1024**2
_CHUNK = 1024**2

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_CONFIG = "application/vnd.docker.container.image.v1+json"
DOCKER_LAYER_TAR = "application/vnd.docker.image.rootfs.diff.tar"
_INDEX_TYPES = frozenset({OCI_INDEX, DOCKER_LIST})
_MANIFEST_TYPES = frozenset({OCI_MANIFEST, DOCKER_MANIFEST})
_CONFIG_TYPES = frozenset({OCI_CONFIG, DOCKER_CONFIG})
_SCHEMA1 = (
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)
_DIGEST = re.compile(r"sha256:([0-9a-f]{64})\Z")
_HEX_NAME = re.compile(r"(?:.*/)?([0-9a-f]{64})(?:\.json)?\Z")
_PLATFORM_PART = re.compile(r"[A-Za-z0-9_.-]+\Z")
_ARCH_ALIASES = {"x86_64": "amd64", "x86-64": "amd64", "aarch64": "arm64"}
# Annotations that name an image (a tag) in an index, and the one that marks BuildKit's attestations.
_REF_NAMES = ("org.opencontainers.image.ref.name", "io.containerd.image.name")
_ATTESTATION = ("vnd.docker.reference.type", "attestation-manifest")
DEFAULT_PLATFORM = "linux/amd64"

Compression = Literal["none", "gzip", "zstd"]
SourceFormat = Literal["oci-layout", "oci-archive", "docker-save"]
DigestKind = Literal["manifest", "config"]


def zstd_available() -> bool:
    """Whether zstd layers can be read (the optional ``zstandard`` module is importable)."""
    try:
        # Lazy: an optional third-party module, needed only for zstd layers.
        import zstandard  # type: ignore[import-not-found,unused-ignore]  # noqa: F401
    except ImportError:
        return False
    return True


# ----------------------------------------------------------------------------- tar headers, capped


class CappedTarInfo(tarfile.TarInfo):
    """A ``TarInfo`` that refuses an extended header (pax, GNU long name or link) over
    ``MAX_TAR_HEADER_BYTES`` before tarfile reads it into memory, and GNU sparse members (whose maps tarfile
    reads without a bound). Pass it as ``tarfile.open(..., tarinfo=CappedTarInfo)``."""

    def _proc_member(self, tarfile_: tarfile.TarFile) -> tarfile.TarInfo:
        if self.type in _EXTENDED_HEADERS and self.size > MAX_TAR_HEADER_BYTES:
            raise ImageError(
                f"a tar extended header of {self.size} bytes (more than {MAX_TAR_HEADER_BYTES}): refused"
            )
        if self.type == tarfile.GNUTYPE_SPARSE:
            raise ImageError(f"a GNU sparse tar member ({esc(self.name)}): refused")
        result: tarfile.TarInfo = super()._proc_member(tarfile_)  # type: ignore[misc]
        return result

    def _proc_gnusparse_10(self, next_: tarfile.TarInfo, pax_headers: object, tarfile_: object) -> None:
        raise ImageError(f"a GNU sparse tar member ({esc(self.name)}): refused")


_EXTENDED_HEADERS = frozenset(
    {
        tarfile.GNUTYPE_LONGNAME,
        tarfile.GNUTYPE_LONGLINK,
        tarfile.XHDTYPE,
        tarfile.XGLTYPE,
        tarfile.SOLARIS_XHDTYPE,
    }
)


# ----------------------------------------------------------------------------- blob streams


class BlobStream:
    """A read-only stream over one blob that checks it: at most its declared size is read, and once its
    last byte is read its size and sha256 are compared with the descriptor's (``ImageError`` naming the
    blob on a mismatch). ``bytes_read`` counts what was read so far (for a layer: compressed bytes).

    ``finish()`` reads what is left (a tar's trailing padding) and checks the blob; a layer is trusted only
    once it returns. Close it (or use it as a context manager)."""

    def __init__(self, fd: int, *, size: int, digest: str | None, what: str) -> None:
        self._fd: int | None = fd
        self._size = size
        self._digest = digest
        self._what = what
        self._hash = hashlib.sha256()
        self._read = 0
        self._checked = False

    @property
    def bytes_read(self) -> int:
        return self._read

    @property
    def size(self) -> int:
        return self._size

    def sha256(self) -> str:
        """``sha256:<hex>`` of what was read so far (all of it once ``finish()`` returned)."""
        return "sha256:" + self._hash.hexdigest()

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        if self._fd is None:
            raise ValueError("read of a closed blob stream")
        left = self._size - self._read
        want = min(_CHUNK if n is None or n < 0 else n, left)
        chunk = os.read(self._fd, want) if want > 0 else b""
        if not chunk:
            self._check()
            return b""
        self._read += len(chunk)
        self._hash.update(chunk)
        if self._read == self._size:
            self._check()
        return chunk

    def finish(self, deadline: Deadline | None = None, step: str = "reading an image blob") -> None:
        """Read the rest of the blob (checking ``deadline`` every MiB) and check its size and digest."""
        while self.read(_CHUNK):
            if deadline is not None:
                deadline.check(step)
        self._check()

    def _check(self) -> None:
        if self._checked:
            return
        self._checked = True
        if self._read != self._size:
            raise ImageError(
                f"{self._what}: ended after {self._read} bytes, its descriptor says {self._size}: "
                "the image is damaged or was changed"
            )
        if self._digest is not None and self.sha256() != self._digest:
            raise ImageError(
                f"{self._what}: its content does not match its digest {self._digest} "
                f"(it is {self.sha256()}): the image is damaged or was changed"
            )

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None

    def __enter__(self) -> BlobStream:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, value: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# ----------------------------------------------------------------------------- where the files are


class _Source(Protocol):
    @property
    def location(self) -> str: ...

    def open(self, name: str, *, size: int | None, digest: str | None, what: str) -> BlobStream: ...

    def has(self, name: str) -> bool: ...


def _checked_name(name: str) -> str:
    """A member path of an outer tar or a layout, normalised (``./a//b`` is ``a/b``); ``ImageError`` for
    one that is absolute after normalisation, climbs (``..``) or holds a NUL."""
    parts = [p for p in name.split("/") if p not in ("", ".")]
    if "\x00" in name or ".." in parts or not parts:
        raise ImageError(f"a path inside the image that is not a plain relative path: {esc(name)!r}")
    return "/".join(parts)


def _open_stream(fd: int, real_size: int, *, size: int | None, digest: str | None, what: str) -> BlobStream:
    if size is not None and real_size != size:
        os.close(fd)
        raise ImageError(
            f"{what}: is {real_size} bytes, its descriptor says {size}: the image is damaged or was changed"
        )
    return BlobStream(fd, size=real_size, digest=digest, what=what)


@dataclass(frozen=True)
class _FolderSource:
    """An OCI image layout folder: files are opened only as regular files inside it."""

    root: str
    location: str

    def has(self, name: str) -> bool:
        return os.path.lexists(os.path.join(self.root, _checked_name(name)))

    def open(self, name: str, *, size: int | None, digest: str | None, what: str) -> BlobStream:
        path = os.path.join(self.root, _checked_name(name))
        try:
            fd = open_regular(path, inside=[self.root])
        except NotOpened as e:
            raise ImageError(f"{what}: {name} {e.reason}") from e
        except FileNotFoundError as e:
            raise ImageError(f"{what}: {name} is missing from {self.location}") from e
        except OSError as e:
            raise ImageError(f"{what}: cannot read {name}: {e.strerror or e}") from e
        return _open_stream(fd, os.fstat(fd).st_size, size=size, digest=digest, what=what)


@dataclass(frozen=True)
class _TarSource:
    """An OCI archive or a docker save tarball, read in place: ``members`` maps each regular member's
    normalised name to its data's offset and size, ``links`` each link member to (target, is_symlink)."""

    path: str
    location: str
    members: Mapping[str, tuple[int, int]]
    links: Mapping[str, tuple[str, bool]]

    def has(self, name: str) -> bool:
        try:
            self._resolve(name)
        except ImageError:
            return False
        return True

    def _resolve(self, name: str) -> tuple[int, int]:
        """The offset and size of the regular member ``name`` names, through at most ``MAX_TAR_LINK_HOPS``
        link members (a symbolic link's target is relative to its folder; neither may leave the tar)."""
        current = _checked_name(name)
        for _ in range(MAX_TAR_LINK_HOPS + 1):
            if current in self.members:
                return self.members[current]
            if current not in self.links:
                raise ImageError(f"{esc(name)} is missing from {self.location}")
            target, symbolic = self.links[current]
            joined = posixpath.join(posixpath.dirname(current), target) if symbolic else target
            current = _checked_name(posixpath.normpath(joined))
        raise ImageError(f"{esc(name)} in {self.location}: more than {MAX_TAR_LINK_HOPS} links deep")

    def size_of(self, name: str) -> int:
        return self._resolve(name)[1]

    def open(self, name: str, *, size: int | None, digest: str | None, what: str) -> BlobStream:
        offset, real_size = self._resolve(name)
        try:
            fd = open_regular(self.path)
        except (NotOpened, OSError) as e:
            raise ImageError(f"{self.location}: cannot read it again: {e}") from e
        os.lseek(fd, offset, os.SEEK_SET)
        return _open_stream(fd, real_size, size=size, digest=digest, what=what)


def _list_tar(path: str, location: str, deadline: Deadline) -> _TarSource:
    """Index the outer tar's members by name (headers only: data is never read here)."""
    try:
        fd = open_regular(path)
    except NotOpened as e:
        raise ImageError(f"{location}: {e.reason}") from e
    except OSError as e:
        raise ImageError(f"{location}: cannot read: {e.strerror or e}") from e
    members: dict[str, tuple[int, int]] = {}
    links: dict[str, tuple[str, bool]] = {}
    with os.fdopen(fd, "rb") as f:
        magic = f.read(4)
        if magic[:2] == b"\x1f\x8b" or magic == b"\x28\xb5\x2f\xfd":
            raise ImageError(
                f"{location}: a compressed archive",
                tip="Decompress it first (gunzip / zstd -d): the image is read in place as a plain tar.",
            )
        f.seek(0)
        try:
            with tarfile.open(fileobj=f, mode="r:", tarinfo=CappedTarInfo) as tf:
                count = 0
                while (info := tf.next()) is not None:
                    tf.members.clear()  # type: ignore[attr-defined,unused-ignore]  # only the index below is kept
                    count += 1
                    if count > MAX_ARCHIVE_MEMBERS:
                        raise ImageError(f"{location}: more than {MAX_ARCHIVE_MEMBERS} members: refused")
                    if count % 1024 == 0:
                        deadline.check("listing the image archive", f"{count} members")
                    try:
                        name = _checked_name(info.name)
                    except ImageError:
                        continue  # never looked up: only documents and digests name members
                    members.pop(name, None)
                    links.pop(name, None)
                    if info.isreg():
                        members[name] = (info.offset_data, info.size)
                    elif info.issym() or info.islnk():
                        links[name] = (info.linkname, info.issym())
        except ImageError:
            raise
        except (tarfile.TarError, EOFError, OSError, ValueError) as e:
            raise ImageError(f"{location}: not a readable tar archive: {esc(str(e))}") from e
    return _TarSource(path=path, location=location, members=members, links=links)


# ----------------------------------------------------------------------------- the image


@dataclass(frozen=True, kw_only=True, slots=True)
class Layer:
    """One layer's descriptor, in the manifest's order. ``compression`` is read from ``media_type``."""

    digest: str
    media_type: str
    size: int
    compression: Compression


@dataclass(frozen=True, kw_only=True, slots=True)
class Platform:
    """``os/architecture[/variant]``, architectures named as OCI does (``amd64``, ``arm64``)."""

    os: str
    architecture: str
    variant: str | None = None

    def __str__(self) -> str:
        return "/".join(p for p in (self.os, self.architecture, self.variant) if p)

    def matches(self, other: Platform) -> bool:
        """Whether ``other`` (an image's platform) is this one (the wanted one): no wanted variant takes
        any, and arm64's ``v8`` is arm64 without a variant."""
        if (self.os, self.architecture) != (other.os, other.architecture):
            return False
        if self.variant is None:
            return True
        theirs = other.variant or ("v8" if other.architecture == "arm64" else None)
        return self.variant == theirs


def parse_platform(text: str) -> Platform:
    """``linux/amd64``, ``linux/arm64/v8`` ... as a ``Platform``; ``UsageError`` for anything else."""
    parts = text.split("/")
    if not 2 <= len(parts) <= 3 or not all(_PLATFORM_PART.match(p) for p in parts):
        raise UsageError(
            f"not a platform: {esc(text)!r}",
            tip="Give it as OS/ARCH[/VARIANT], e.g. linux/amd64 or linux/arm64.",
        )
    arch = _ARCH_ALIASES.get(parts[1].lower(), parts[1].lower())
    return Platform(
        os=parts[0].lower(), architecture=arch, variant=parts[2].lower() if len(parts) == 3 else None
    )


@dataclass(frozen=True, kw_only=True)
class Image:
    """A container image, read and checked up to its config; its layers are opened one at a time.

    ``digest`` is the image manifest's digest (``digest_kind == "manifest"``), or, for a ``docker save``
    tarball without an OCI index, the config's (``"config"``, what ``docker images`` calls the image ID).
    ``env`` is the config's ``Env`` split at each entry's first ``=`` (a later entry of the same name wins;
    an entry without ``=`` has the value ``""``). ``source_format`` is how the file was made: a ``docker
    save`` tarball is ``docker-save`` even when it also holds an OCI layout (read through its index.json)."""

    digest: str
    digest_kind: DigestKind
    config_digest: str
    layers: tuple[Layer, ...]
    os: str
    architecture: str
    variant: str | None
    env: dict[str, str]
    entrypoint: list[str]
    cmd: list[str]
    working_dir: str
    user: str
    source_format: SourceFormat
    source: Path
    _source: _Source = field(repr=False, compare=False)
    _layer_names: tuple[str, ...] = field(repr=False, compare=False)

    @property
    def platform(self) -> Platform:
        return Platform(os=self.os, architecture=self.architecture, variant=self.variant)

    def open_layer(self, index: int) -> BlobStream:
        """Layer ``index``'s blob (compressed as its ``compression`` says), checked as it is read: call
        ``finish()`` once the layer is applied, then close it. ``ImageError`` if it is missing, or its size
        differs from its descriptor's; a digest mismatch is raised by the stream at its end."""
        layer = self.layers[index]
        return self._source.open(
            self._layer_names[index],
            size=layer.size,
            digest=layer.digest,
            what=f"layer {index + 1} ({layer.digest})",
        )


@dataclass(frozen=True)
class _Candidate:
    descriptor: Mapping[str, Any]
    platform: Platform | None
    ref: str | None


def open_image(path: Path, *, deadline: Deadline, platform: str | None = None) -> Image:
    """Read the image at ``path`` (an OCI layout folder, an OCI archive or a ``docker save`` tarball) up to
    its config, every document checked against its digest.

    An index (nested or not) gives the manifest for ``platform`` (default ``linux/amd64``), or its only
    manifest whatever its platform when no platform was asked for; BuildKit's attestation manifests are
    never chosen. Several images that fit (two tags of different images) are refused, naming them. A
    platform asked for that the image's config contradicts is refused too. Raises ``ImageError`` (one line
    naming the file, blob or document), ``UsageError`` for a malformed ``platform``, ``DeadlineExpired``."""
    wanted = parse_platform(platform) if platform is not None else None
    location = str(path)
    deadline.check("reading the image")
    try:
        st = os.stat(path)
    except OSError as e:
        raise ImageError(f"{esc(location)}: cannot read: {e.strerror or e}") from e
    source: _Source
    if stat.S_ISDIR(st.st_mode):
        source = _FolderSource(root=os.path.realpath(path), location=esc(location))
        if not source.has("index.json"):
            raise ImageError(f"{esc(location)}: a folder without index.json: not an OCI image layout")
        image = _read_oci(source, "oci-layout", path, wanted, deadline)
    elif stat.S_ISREG(st.st_mode):
        tar = _list_tar(str(path), esc(location), deadline)
        if tar.has("index.json"):
            fmt: SourceFormat = "docker-save" if tar.has("manifest.json") else "oci-archive"
            image = _read_oci(tar, fmt, path, wanted, deadline)
        elif tar.has("manifest.json"):
            image = _read_docker(tar, path, wanted, deadline)
        else:
            raise ImageError(
                f"{esc(location)}: neither an OCI archive (no index.json) nor a docker save tarball "
                "(no manifest.json)"
            )
    else:
        raise ImageError(f"{esc(location)}: neither a folder nor a regular file")
    if wanted is not None and not wanted.matches(image.platform):
        raise ImageError(f"{esc(location)}: the image is {image.platform}, not {wanted}")
    return image


# ----------------------------------------------------------------------------- documents


def _read_json(
    source: _Source, name: str, *, size: int | None, digest: str | None, what: str
) -> tuple[Any, str]:
    """A JSON document of at most ``MAX_DOCUMENT_BYTES`` and its sha256: refused by its declared size
    unopened, by its real size before it is read, and read with a cap anyway; checked against ``digest``
    (and ``size``) when given."""
    if size is not None and size > MAX_DOCUMENT_BYTES:
        raise ImageError(f"{what}: {size} bytes, more than {MAX_DOCUMENT_BYTES}: refused unread")
    with source.open(name, size=size, digest=digest, what=what) as stream:
        if stream.size > MAX_DOCUMENT_BYTES:
            raise ImageError(f"{what}: {stream.size} bytes, more than {MAX_DOCUMENT_BYTES}: refused unread")
        chunks = []
        total = 0
        while chunk := stream.read(_CHUNK):
            total += len(chunk)
            if total > MAX_DOCUMENT_BYTES:
                raise ImageError(f"{what}: more than {MAX_DOCUMENT_BYTES} bytes: refused")
            chunks.append(chunk)
        stream.finish()
        sha = stream.sha256()
    try:
        return json.loads(b"".join(chunks)), sha
    except (ValueError, RecursionError) as e:
        raise ImageError(f"{what}: not JSON: {esc(str(e))[:200]}") from e


def _read_document(
    source: _Source, name: str, *, size: int | None, digest: str | None, what: str
) -> dict[str, Any]:
    """``_read_json``'s document, which must be a JSON object."""
    doc, _sha = _read_json(source, name, size=size, digest=digest, what=what)
    if not isinstance(doc, dict):
        raise ImageError(f"{what}: not a JSON object")
    return doc


def _blob_name(digest: object, what: str) -> str:
    if not isinstance(digest, str) or not (m := _DIGEST.match(digest)):
        shown = esc(str(digest))[:120]
        raise ImageError(f"{what}: the digest {shown!r} is not sha256:<64 hex digits>: refused")
    return f"blobs/sha256/{m.group(1)}"


def _descriptor(value: object, what: str) -> dict[str, Any]:
    """A descriptor with a sha256 digest and a size (its mediaType, when present, a string)."""
    if not isinstance(value, dict):
        raise ImageError(f"{what}: not a descriptor (a JSON object)")
    _blob_name(value.get("digest"), what)
    size = value.get("size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ImageError(f"{what}: its size is not a non-negative integer")
    if not isinstance(value.get("mediaType", ""), str):
        raise ImageError(f"{what}: its mediaType is not a string")
    return value


def _read_described(source: _Source, desc: Mapping[str, Any], what: str) -> dict[str, Any]:
    return _read_document(
        source, _blob_name(desc["digest"], what), size=desc["size"], digest=desc["digest"], what=what
    )


def _platform_of(desc: Mapping[str, Any]) -> Platform | None:
    value = desc.get("platform")
    if not isinstance(value, dict):
        return None
    os_, arch, variant = value.get("os"), value.get("architecture"), value.get("variant")
    if not isinstance(os_, str) or not isinstance(arch, str):
        return None
    arch = _ARCH_ALIASES.get(arch, arch)
    return Platform(
        os=os_, architecture=arch, variant=variant if isinstance(variant, str) and variant else None
    )


def _annotations(desc: Mapping[str, Any]) -> Mapping[str, Any]:
    value = desc.get("annotations")
    return value if isinstance(value, dict) else {}


def _walk_index(
    source: _Source,
    doc: Mapping[str, Any],
    what: str,
    depth: int,
    inherited: Platform | None,
    found: list[_Candidate],
    budget: list[int],
    deadline: Deadline,
) -> None:
    entries = doc.get("manifests")
    if not isinstance(entries, list):
        raise ImageError(f"{what}: no 'manifests' list: not an image index")
    for i, value in enumerate(entries):
        budget[0] -= 1
        if budget[0] < 0:
            raise ImageError(f"{what}: more than {MAX_INDEX_ENTRIES} index entries in all: refused")
        deadline.check("reading the image index")
        entry_what = f"{what} entry {i}"
        desc = _descriptor(value, entry_what)
        notes = _annotations(desc)
        plat = _platform_of(desc) or inherited
        if notes.get(_ATTESTATION[0]) == _ATTESTATION[1] or (plat is not None and plat.os == "unknown"):
            continue
        ref = next((v for k in _REF_NAMES if isinstance(v := notes.get(k), str)), None)
        media = desc.get("mediaType")
        child: dict[str, Any] | None = None
        if media is None:  # optional in an index: the document says what it is
            child = _read_described(source, desc, f"document {desc['digest']}")
            media = child.get("mediaType") or (OCI_INDEX if "manifests" in child else OCI_MANIFEST)
        if media in _INDEX_TYPES:
            if depth >= MAX_INDEX_DEPTH:
                raise ImageError(f"{what}: indexes nested more than {MAX_INDEX_DEPTH} deep: refused")
            child_what = f"image index {desc['digest']}"
            child = child or _read_described(source, desc, child_what)
            _walk_index(source, child, child_what, depth + 1, plat, found, budget, deadline)
        elif media in _MANIFEST_TYPES or media in _SCHEMA1:
            found.append(_Candidate(desc, plat, ref))
        # Anything else (a signature, an SBOM artifact) is not an image to run: not a candidate.


def _choose(candidates: list[_Candidate], wanted: Platform | None, location: str) -> _Candidate:
    unique = list({c.descriptor["digest"]: c for c in candidates}.values())
    if not unique:
        raise ImageError(f"{location}: the index names no image manifest")
    if len(unique) == 1:
        only = unique[0]
        if wanted is not None and only.platform is not None and not wanted.matches(only.platform):
            raise ImageError(f"{location}: the image is {only.platform}, not {wanted}")
        return only
    target = wanted or parse_platform(DEFAULT_PLATFORM)
    fits = [c for c in unique if c.platform is not None and target.matches(c.platform)]
    if len(fits) == 1:
        return fits[0]
    shown = ", ".join(
        sorted(
            f"{esc(c.ref or c.descriptor['digest'])} ({c.platform or 'platform not given'})" for c in unique
        )
    )
    if not fits:
        raise ImageError(
            f"{location}: no image for {target} among {len(unique)}: {shown}",
            tip="Choose one with --platform OS/ARCH[/VARIANT].",
        )
    raise ImageError(
        f"{location}: {len(fits)} images fit {target}, cannot choose: {shown}",
        tip="Give a layout or archive holding one image (skopeo copy can extract one by tag).",
    )


def _compression(media_type: str, what: str) -> Compression:
    if media_type.endswith(("+gzip", ".tar.gzip")):
        return "gzip"
    if media_type.endswith(("+zstd", ".tar.zstd")):
        if not zstd_available():
            raise ImageError(
                f"{what}: a zstd-compressed layer ({esc(media_type)}), and the zstandard module is missing",
                tip="pip install zstandard",
            )
        return "zstd"
    if media_type.endswith((".tar", "+tar", ".v1.tar")):
        return "none"
    raise ImageError(f"{what}: not a layer media type envcheck reads: {esc(media_type)!r}")


def _read_oci(
    source: _Source, fmt: SourceFormat, path: Path, wanted: Platform | None, deadline: Deadline
) -> Image:
    index = _read_document(
        source, "index.json", size=None, digest=None, what=f"{source.location}: index.json"
    )
    found: list[_Candidate] = []
    _walk_index(
        source, index, f"{source.location}: index.json", 1, None, found, [MAX_INDEX_ENTRIES], deadline
    )
    chosen = _choose(found, wanted, source.location)
    digest = chosen.descriptor["digest"]
    what = f"image manifest {digest}"
    manifest = _read_described(source, chosen.descriptor, what)
    media = manifest.get("mediaType", chosen.descriptor.get("mediaType"))
    if media in _SCHEMA1 or manifest.get("schemaVersion") == 1:
        raise ImageError(f"{what}: a Docker schema 1 manifest, which envcheck does not read")
    if media is not None and media not in _MANIFEST_TYPES:
        raise ImageError(f"{what}: not an image manifest (mediaType {esc(str(media))!r})")
    config_desc = _descriptor(manifest.get("config"), f"{what}: config")
    config_media = config_desc.get("mediaType", OCI_CONFIG)
    if config_media not in _CONFIG_TYPES:
        raise ImageError(f"{what}: not a container image (config mediaType {esc(str(config_media))!r})")
    raw_layers = manifest.get("layers")
    if not isinstance(raw_layers, list):
        raise ImageError(f"{what}: no 'layers' list")
    if len(raw_layers) > MAX_LAYERS:
        raise ImageError(f"{what}: {len(raw_layers)} layers, more than {MAX_LAYERS}: refused")
    layers: list[Layer] = []
    names: list[str] = []
    for i, value in enumerate(raw_layers):
        layer_what = f"{what}: layer {i + 1}"
        desc = _descriptor(value, layer_what)
        media_type = desc.get("mediaType")
        if not isinstance(media_type, str):
            raise ImageError(f"{layer_what}: no mediaType")
        layers.append(
            Layer(
                digest=desc["digest"],
                media_type=media_type,
                size=desc["size"],
                compression=_compression(media_type, layer_what),
            )
        )
        names.append(_blob_name(desc["digest"], layer_what))
    config = _read_described(source, config_desc, f"image config {config_desc['digest']}")
    return _image(
        config,
        digest=digest,
        digest_kind="manifest",
        config_digest=config_desc["digest"],
        layers=layers,
        names=names,
        fmt=fmt,
        path=path,
        source=source,
    )


def _read_docker(source: _TarSource, path: Path, wanted: Platform | None, deadline: Deadline) -> Image:
    """A ``docker save`` tarball without an OCI index: ``manifest.json`` lists each image's config and
    layer tars by path; the config's digest is its sha256, each layer's its ``rootfs.diff_ids`` entry."""
    what = f"{source.location}: manifest.json"
    entries, _sha = _read_json(source, "manifest.json", size=None, digest=None, what=what)
    if not isinstance(entries, list) or not entries or not all(isinstance(e, dict) for e in entries):
        raise ImageError(f"{what}: not a list of images")
    if len(entries) > MAX_INDEX_ENTRIES:
        raise ImageError(f"{what}: more than {MAX_INDEX_ENTRIES} images: refused")
    read: list[tuple[dict[str, Any], str, dict[str, Any]]] = []
    for i, entry in enumerate(entries):
        deadline.check("reading the image's manifest.json")
        config_name = entry.get("Config")
        if not isinstance(config_name, str):
            raise ImageError(f"{what}: image {i} has no Config path")
        config_what = f"image config {esc(config_name)}"
        config, config_digest = _read_json(source, config_name, size=None, digest=None, what=config_what)
        named = _HEX_NAME.match(config_name)
        if named and f"sha256:{named.group(1)}" != config_digest:
            raise ImageError(
                f"{config_what}: its content does not match the digest its name carries "
                f"(it is {config_digest}): the image is damaged or was changed"
            )
        if not isinstance(config, dict):
            raise ImageError(f"{config_what}: not a JSON object")
        read.append((entry, config_digest, config))
    if len(read) == 1:
        entry, config_digest, config = read[0]
    else:
        candidates = [
            _Candidate(
                {"digest": d},
                _platform_of({"platform": c}),
                ", ".join(t for t in e.get("RepoTags") or [] if isinstance(t, str)) or None,
            )
            for e, d, c in read
        ]
        chosen = _choose(candidates, wanted, source.location)
        entry, config_digest, config = next(r for r in read if r[1] == chosen.descriptor["digest"])
    layer_paths = entry.get("Layers")
    rootfs = config.get("rootfs")
    diff_ids = rootfs.get("diff_ids") if isinstance(rootfs, dict) else None
    if not isinstance(layer_paths, list) or not all(isinstance(p, str) for p in layer_paths):
        raise ImageError(f"{what}: the image's Layers is not a list of paths")
    if not isinstance(diff_ids, list) or len(diff_ids) != len(layer_paths):
        raise ImageError(f"image config {config_digest}: rootfs.diff_ids does not list one digest per layer")
    if len(layer_paths) > MAX_LAYERS:
        raise ImageError(f"{what}: {len(layer_paths)} layers, more than {MAX_LAYERS}: refused")
    layers = []
    for i, (layer_path, diff_id) in enumerate(zip(layer_paths, diff_ids, strict=True)):
        layer_what = f"image config {config_digest}: layer {i + 1}"
        _blob_name(diff_id, layer_what)
        size = source.size_of(layer_path)
        layers.append(Layer(digest=diff_id, media_type=DOCKER_LAYER_TAR, size=size, compression="none"))
    return _image(
        config,
        digest=config_digest,
        digest_kind="config",
        config_digest=config_digest,
        layers=layers,
        names=list(layer_paths),
        fmt="docker-save",
        path=path,
        source=source,
    )


def _strings(value: object, what: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ImageError(f"{what}: not a list of strings")
    return list(value)


def _string(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise ImageError(f"{what}: not a string")
    return value


def _image(
    config: Mapping[str, Any],
    *,
    digest: str,
    digest_kind: DigestKind,
    config_digest: str,
    layers: Sequence[Layer],
    names: Sequence[str],
    fmt: SourceFormat,
    path: Path,
    source: _Source,
) -> Image:
    what = f"image config {config_digest}"
    run = config.get("config") or {}
    if not isinstance(run, dict):
        raise ImageError(f"{what}: 'config' is not an object")
    env: dict[str, str] = {}
    for item in _strings(run.get("Env"), f"{what}: Env"):
        name, _, value = item.partition("=")
        env[name] = value
    os_ = _string(config.get("os"), f"{what}: os")
    arch = _string(config.get("architecture"), f"{what}: architecture")
    variant = _string(config.get("variant"), f"{what}: variant") or None
    return Image(
        digest=digest,
        digest_kind=digest_kind,
        config_digest=config_digest,
        layers=tuple(layers),
        os=os_,
        architecture=_ARCH_ALIASES.get(arch, arch),
        variant=variant,
        env=env,
        entrypoint=_strings(run.get("Entrypoint"), f"{what}: Entrypoint"),
        cmd=_strings(run.get("Cmd"), f"{what}: Cmd"),
        working_dir=_string(run.get("WorkingDir"), f"{what}: WorkingDir"),
        user=_string(run.get("User"), f"{what}: User"),
        source_format=fmt,
        source=path,
        _source=source,
        _layer_names=tuple(names),
    )
