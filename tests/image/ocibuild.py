"""Writing real container images for tests: layer tars, OCI layout folders, OCI archives and ``docker save``
tarballs, with correct digests and sizes, and the knobs to damage them.

A layer is built from entries (``file``, ``folder``, ``symlink``, ``hardlink``, ``whiteout``, ``opaque``,
``fifo``, ``device``; any of them with a hostile raw name) or from a host folder (``entries_from_folder``),
plain or gzipped (``layer``). An image is a set of files (``Files``: relative path -> bytes, ``Zeros`` for
a sparse run of zeros that costs no disk, or ``Link``), written as a folder or a tar (``write_folder``,
``write_tar``). ``OciLayout`` puts blobs and documents in one; ``oci_image`` / ``docker_save`` build the
usual shapes in one call.

Damage: ``OciLayout.blob(..., digest=..., size=...)`` writes a descriptor that lies about the blob, and
``Zeros`` makes a 100 MB config that takes no disk; tests edit ``files`` directly for anything else.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import os
import stat
import tarfile
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar"
OCI_LAYER_GZIP = "application/vnd.oci.image.layer.v1.tar+gzip"
OCI_LAYER_ZSTD = "application/vnd.oci.image.layer.v1.tar+zstd"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_LAYER_GZIP = "application/vnd.docker.image.rootfs.diff.tar.gzip"
REF_NAME = "org.opencontainers.image.ref.name"


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# ----------------------------------------------------------------------------- layer entries


@dataclass(frozen=True)
class Entry:
    """One member of a layer tar. ``name`` is written exactly as given (``../x``, ``/abs``, a NUL through
    a pax header): the writer never cleans it."""

    name: str
    kind: str  # file | folder | symlink | hardlink | fifo | chr | blk
    data: bytes = b""
    mode: int = 0o644
    target: str = ""
    device: tuple[int, int] = (0, 0)


def file(name: str, data: bytes | str = b"", mode: int = 0o644) -> Entry:
    return Entry(name, "file", data.encode() if isinstance(data, str) else data, mode)


def folder(name: str, mode: int = 0o755) -> Entry:
    return Entry(name, "folder", mode=mode)


def symlink(name: str, target: str) -> Entry:
    return Entry(name, "symlink", mode=0o777, target=target)


def hardlink(name: str, target: str) -> Entry:
    return Entry(name, "hardlink", target=target)


def whiteout(name: str) -> Entry:
    """The marker that deletes ``name`` (left by lower layers): ``dir/.wh.base``."""
    head, _, base = name.rstrip("/").rpartition("/")
    return file(f"{head}/.wh.{base}" if head else f".wh.{base}")


def opaque(name: str) -> Entry:
    """The marker that makes folder ``name`` opaque: ``name/.wh..wh..opq``."""
    return file(f"{name.rstrip('/')}/.wh..wh..opq" if name.strip("/") else ".wh..wh..opq")


def fifo(name: str) -> Entry:
    return Entry(name, "fifo", mode=0o644)


def device(name: str, major: int = 1, minor: int = 5, *, char: bool = True) -> Entry:
    return Entry(name, "chr" if char else "blk", mode=0o666, device=(major, minor))


def entries_from_folder(root: Path) -> list[Entry]:
    """A folder's content as entries (files, folders, symlinks; hard links as files), sorted, names
    relative to ``root``."""
    found: list[Entry] = []
    for path in sorted(root.rglob("*")):
        name = path.relative_to(root).as_posix()
        st = path.lstat()
        if stat.S_ISLNK(st.st_mode):
            found.append(symlink(name, path.readlink().as_posix()))
        elif stat.S_ISDIR(st.st_mode):
            found.append(folder(name, stat.S_IMODE(st.st_mode)))
        elif stat.S_ISREG(st.st_mode):
            found.append(file(name, path.read_bytes(), stat.S_IMODE(st.st_mode)))
    return found


_KINDS = {
    "file": tarfile.REGTYPE,
    "folder": tarfile.DIRTYPE,
    "symlink": tarfile.SYMTYPE,
    "hardlink": tarfile.LNKTYPE,
    "fifo": tarfile.FIFOTYPE,
    "chr": tarfile.CHRTYPE,
    "blk": tarfile.BLKTYPE,
}


def layer_tar(entries: Iterable[Entry]) -> bytes:
    """An uncompressed layer tar (pax format) of ``entries``, names exactly as given. A name holding a NUL
    byte travels in a pax ``path`` record (a ustar field would end at it)."""
    out = io.BytesIO()
    with tarfile.open(fileobj=out, mode="w", format=tarfile.PAX_FORMAT) as tf:
        for entry in entries:
            info = tarfile.TarInfo(entry.name)
            info.type = _KINDS[entry.kind]
            info.mode = entry.mode
            info.mtime = 1_700_000_000
            info.uid = info.gid = 0
            info.uname = info.gname = "root"
            if "\x00" in entry.name:
                info.name = "placeholder"
                info.pax_headers = {"path": entry.name}
            if entry.kind in ("symlink", "hardlink"):
                info.linkname = entry.target
            if entry.kind in ("chr", "blk"):
                info.devmajor, info.devminor = entry.device
            if entry.kind == "file":
                info.size = len(entry.data)
                tf.addfile(info, io.BytesIO(entry.data))
            else:
                tf.addfile(info)
    return out.getvalue()


@dataclass(frozen=True)
class LayerBlob:
    """A layer as stored: ``data`` (compressed as ``media_type`` says) and ``diff_id`` (the sha256 of the
    uncompressed tar)."""

    data: bytes
    media_type: str
    diff_id: str

    @property
    def digest(self) -> str:
        return sha256(self.data)


def layer(entries: Iterable[Entry], *, compress: bool = True, media_type: str | None = None) -> LayerBlob:
    """A layer of ``entries``, gzipped (``tar+gzip``) or plain (``tar``)."""
    tar = layer_tar(entries)
    data = gzip.compress(tar, compresslevel=1, mtime=0) if compress else tar
    default = OCI_LAYER_GZIP if compress else OCI_LAYER
    return LayerBlob(data, media_type or default, sha256(tar))


def zero_bomb(member_bytes: int, *, name: str = "zeros") -> LayerBlob:
    """A gzipped layer holding one file of ``member_bytes`` zeros, compressed ~1000x, built a MiB at a time
    (never the whole tar in memory)."""
    info = tarfile.TarInfo(name)
    info.size = member_bytes
    header = info.tobuf(format=tarfile.PAX_FORMAT)
    tail = b"\0" * ((-member_bytes) % 512 + 1024)
    comp = zlib.compressobj(9, zlib.DEFLATED, 31)
    digest = hashlib.sha256(header)
    parts = [comp.compress(header)]
    chunk = b"\0" * (1 << 20)
    left = member_bytes
    while left:
        piece = chunk[: min(left, len(chunk))]
        digest.update(piece)
        parts.append(comp.compress(piece))
        left -= len(piece)
    digest.update(tail)
    parts.append(comp.compress(tail))
    parts.append(comp.flush())
    return LayerBlob(b"".join(parts), OCI_LAYER_GZIP, "sha256:" + digest.hexdigest())


def image_config(
    layers: Sequence[LayerBlob] = (),
    *,
    env: Sequence[str] = ("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",),
    entrypoint: Sequence[str] | None = None,
    cmd: Sequence[str] | None = ("python3",),
    working_dir: str = "",
    user: str = "",
    os_name: str = "linux",
    architecture: str = "amd64",
    variant: str | None = None,
) -> dict[str, Any]:
    """An image config (the OCI / Docker shape) whose ``rootfs.diff_ids`` are ``layers``'."""
    run: dict[str, Any] = {"Env": list(env), "WorkingDir": working_dir, "User": user}
    if entrypoint is not None:
        run["Entrypoint"] = list(entrypoint)
    if cmd is not None:
        run["Cmd"] = list(cmd)
    config: dict[str, Any] = {
        "architecture": architecture,
        "os": os_name,
        "config": run,
        "rootfs": {"type": "layers", "diff_ids": [blob.diff_id for blob in layers]},
        "history": [{"created_by": "ocibuild"} for _ in layers],
    }
    if variant is not None:
        config["variant"] = variant
    return config


def json_bytes(document: Any) -> bytes:
    return json.dumps(document, separators=(",", ":"), sort_keys=True).encode()


# ----------------------------------------------------------------------------- files of an image


@dataclass(frozen=True)
class Zeros:
    """``size`` zero bytes, written sparse (a hole in a folder, a seek in a tar): a 100 MB blob for free."""

    size: int


@dataclass(frozen=True)
class Link:
    """A symbolic link member (``target`` relative to the link's folder), as older ``docker save`` wrote
    for a layer shared by two images."""

    target: str


Content = bytes | Zeros | Link


@dataclass
class Files:
    """An image as files: relative path -> content, in the order they are written."""

    files: dict[str, Content] = field(default_factory=dict)

    def write_folder(self, dest: Path) -> Path:
        dest.mkdir(parents=True, exist_ok=True)
        for name, content in self.files.items():
            path = dest / name
            path.parent.mkdir(parents=True, exist_ok=True)
            if isinstance(content, Link):
                path.symlink_to(content.target)
            elif isinstance(content, Zeros):
                with path.open("wb") as f:
                    f.truncate(content.size)
            else:
                path.write_bytes(content)
        return dest

    def write_tar(self, path: Path) -> Path:
        """A plain tar of the files (``Zeros`` as holes: the tar is sparse on disk)."""
        with path.open("wb") as f:
            for name, content in self.files.items():
                info = tarfile.TarInfo(name)
                info.mtime = 1_700_000_000
                if isinstance(content, Link):
                    info.type = tarfile.SYMTYPE
                    info.linkname = content.target
                    f.write(info.tobuf(format=tarfile.PAX_FORMAT))
                    continue
                info.size = content.size if isinstance(content, Zeros) else len(content)
                f.write(info.tobuf(format=tarfile.PAX_FORMAT))
                if isinstance(content, Zeros):
                    f.seek(content.size, os.SEEK_CUR)
                else:
                    f.write(content)
                pad = (-info.size) % 512
                if pad:
                    f.seek(pad - 1, os.SEEK_CUR)
                    f.write(b"\0")
            f.write(b"\0" * 1024)
        return path


class OciLayout(Files):
    """An OCI image layout being built: ``blob`` stores content under its digest and returns its
    descriptor; ``finish`` writes ``index.json`` and ``oci-layout``."""

    def __init__(self) -> None:
        super().__init__()
        self.files["oci-layout"] = json_bytes({"imageLayoutVersion": "1.0.0"})

    def blob(
        self,
        content: bytes | Zeros,
        media_type: str,
        *,
        digest: str | None = None,
        size: int | None = None,
        store_as: str | None = None,
    ) -> dict[str, Any]:
        """Store ``content`` at ``blobs/sha256/<its digest>`` (or ``store_as``'s) and return a descriptor;
        ``digest`` / ``size`` make the descriptor lie about it. ``Zeros``' digest is computed without
        holding them."""
        if isinstance(content, Zeros):
            h = hashlib.sha256()
            chunk = b"\0" * (1 << 20)
            left = content.size
            while left:
                h.update(chunk[: min(left, len(chunk))])
                left -= min(left, len(chunk))
            real, real_size = "sha256:" + h.hexdigest(), content.size
        else:
            real, real_size = sha256(content), len(content)
        where = store_as or real
        self.files[f"blobs/sha256/{where.removeprefix('sha256:')}"] = content
        return {
            "mediaType": media_type,
            "digest": digest if digest is not None else real,
            "size": size if size is not None else real_size,
        }

    def json_blob(self, document: Any, media_type: str, **lie: Any) -> dict[str, Any]:
        return self.blob(json_bytes(document), media_type, **lie)

    def manifest(
        self,
        layers: Sequence[LayerBlob],
        config: Mapping[str, Any] | dict[str, Any],
        *,
        config_descriptor: dict[str, Any] | None = None,
        media_type: str = OCI_MANIFEST,
        platform: str | None = None,
    ) -> dict[str, Any]:
        """Store the layers, the config and their manifest; return the manifest's descriptor, with
        ``platform`` (``linux/arm64/v8``) when given."""
        layer_descs = [self.blob(blob.data, blob.media_type) for blob in layers]
        config_desc = config_descriptor or self.json_blob(config, OCI_CONFIG)
        desc = self.json_blob(
            {"schemaVersion": 2, "mediaType": media_type, "config": config_desc, "layers": layer_descs},
            media_type,
        )
        if platform is not None:
            desc["platform"] = platform_dict(platform)
        return desc

    def index(self, descriptors: Sequence[dict[str, Any]], *, platform: str | None = None) -> dict[str, Any]:
        """A nested index blob listing ``descriptors``; its descriptor."""
        desc = self.json_blob(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": list(descriptors)}, OCI_INDEX
        )
        if platform is not None:
            desc["platform"] = platform_dict(platform)
        return desc

    def finish(self, descriptors: Sequence[dict[str, Any]], *, ref: str | None = None) -> OciLayout:
        """Write ``index.json`` listing ``descriptors`` (each tagged ``ref`` when given)."""
        entries = [dict(d) for d in descriptors]
        if ref is not None:
            for entry in entries:
                entry.setdefault("annotations", {})[REF_NAME] = ref
        self.files["index.json"] = json_bytes(
            {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
        )
        return self


def platform_dict(text: str) -> dict[str, str]:
    parts = text.split("/")
    found = {"os": parts[0], "architecture": parts[1]}
    if len(parts) == 3:
        found["variant"] = parts[2]
    return found


def attestation(layout: OciLayout, subject: dict[str, Any]) -> dict[str, Any]:
    """A BuildKit-style attestation manifest for ``subject`` (platform unknown/unknown)."""
    statement = layout.blob(b'{"_type":"https://in-toto.io/Statement/v0.1"}', "application/vnd.in-toto+json")
    desc = layout.json_blob(
        {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": layout.json_blob({}, OCI_CONFIG),
            "layers": [statement],
        },
        OCI_MANIFEST,
    )
    desc["platform"] = {"os": "unknown", "architecture": "unknown"}
    desc["annotations"] = {
        "vnd.docker.reference.type": "attestation-manifest",
        "vnd.docker.reference.digest": subject["digest"],
    }
    return desc


def oci_image(layers: Sequence[LayerBlob], config: dict[str, Any], *, ref: str = "test:latest") -> OciLayout:
    """The usual single-image layout: index.json -> manifest -> config + layers."""
    layout = OciLayout()
    return layout.finish([layout.manifest(layers, config)], ref=ref)


def docker_save(
    layers: Sequence[LayerBlob],
    config: dict[str, Any],
    *,
    oci_index: bool = False,
    repo_tags: Sequence[str] = ("test:latest",),
    shared_layer_link: bool = False,
) -> Files:
    """A ``docker save`` tarball's files. ``layers`` must be uncompressed (``layer(..., compress=False)``).

    Without ``oci_index``: the legacy shape (``<id>/layer.tar``, ``<config hex>.json``, ``manifest.json``,
    ``repositories``); ``shared_layer_link`` stores the last layer as a symbolic link to the first, as
    older Docker did for a repeated layer (the two must then be the same bytes). With it: Docker 25's shape,
    the same ``manifest.json`` naming ``blobs/sha256/...`` next to an OCI layout (``index.json``)."""
    config_bytes = json_bytes(config)
    config_hex = sha256(config_bytes).removeprefix("sha256:")
    if oci_index:
        layout = OciLayout()
        layer_descs = [layout.blob(blob.data, "application/vnd.oci.image.layer.v1.tar") for blob in layers]
        config_desc = layout.blob(config_bytes, OCI_CONFIG)
        manifest = layout.json_blob(
            {"schemaVersion": 2, "mediaType": OCI_MANIFEST, "config": config_desc, "layers": layer_descs},
            OCI_MANIFEST,
        )
        layout.finish([manifest], ref=repo_tags[0] if repo_tags else None)
        layout.files["manifest.json"] = json_bytes(
            [
                {
                    "Config": f"blobs/sha256/{config_hex}",
                    "RepoTags": list(repo_tags),
                    "Layers": [f"blobs/sha256/{d['digest'].removeprefix('sha256:')}" for d in layer_descs],
                }
            ]
        )
        return layout
    files = Files()
    paths = []
    for i, blob in enumerate(layers):
        layer_id = hashlib.sha256(f"layer {i} {blob.diff_id}".encode()).hexdigest()
        paths.append(f"{layer_id}/layer.tar")
        files.files[f"{layer_id}/VERSION"] = b"1.0"
        if shared_layer_link and i == len(layers) - 1 and i > 0:
            files.files[paths[-1]] = Link(f"../{paths[0]}")
        else:
            files.files[paths[-1]] = blob.data
    files.files[f"{config_hex}.json"] = config_bytes
    files.files["manifest.json"] = json_bytes(
        [{"Config": f"{config_hex}.json", "RepoTags": list(repo_tags), "Layers": paths}]
    )
    files.files["repositories"] = json_bytes({})
    return files
