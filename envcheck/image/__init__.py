"""Container images read statically: no daemon, nothing from the image runs.

Public API:

- ``open_image(path, deadline=..., platform=None)``: an OCI image layout folder, an OCI archive or a
  ``docker save`` tarball read up to its config (``Image``: digests, layers, Env, Entrypoint, Cmd...),
  every document checked against its digest (``envcheck/image/archive.py``);
- ``flatten(image, dest, deadline=..., limits=Limits())``: its layers applied into an empty folder with
  overlay / OCI whiteout semantics, nothing written or linked outside it (``Flattened``);
- ``resolve_in_root(root, path)``: a path of the flattened tree resolved as the image would, links kept
  inside the root (``envcheck/image/rootfs.py``).

Every refusal is an ``envcheck.core.errors.ImageError``: one line naming the blob, layer or member.
"""

from __future__ import annotations

from envcheck.image.archive import (
    DEFAULT_PLATFORM,
    MAX_DOCUMENT_BYTES,
    BlobStream,
    Image,
    Layer,
    Platform,
    open_image,
    parse_platform,
)
from envcheck.image.rootfs import Flattened, Limits, contained_target, flatten, resolve_in_root

__all__ = [
    "DEFAULT_PLATFORM",
    "MAX_DOCUMENT_BYTES",
    "BlobStream",
    "Flattened",
    "Image",
    "Layer",
    "Limits",
    "Platform",
    "contained_target",
    "flatten",
    "open_image",
    "parse_platform",
    "resolve_in_root",
]
