"""``envcheck.api.snapshot_image`` and ``gate_image``: a container image read statically (nothing in it
runs, no daemon), recorded as a manifest or gated against a reference."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import existing_manifest, name, public
from envcheck.app import flows
from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.diff.policy import Policy
from envcheck.image.snapshot import image_manifest
from envcheck.manifest.io import load

if TYPE_CHECKING:
    from envcheck.api._common import Progress
    from envcheck.manifest.model import Manifest
    from envcheck.report import Report

__all__ = ["gate_image", "snapshot_image"]


@public
def snapshot_image(
    image: Path | str,
    *,
    python: str | None = None,
    platform: str | None = None,
    label: str | None = None,
    timeout: float = 120.0,
    replaces: Path | str | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """The manifest of the Python environment inside the container image ``image`` (an OCI layout
    folder, an OCI archive or a ``docker save`` tarball), read statically: ``meta.kind`` is ``image``,
    ``Manifest.image`` names it by digest, and ``meta.absent`` lists what only a run knows (the runtime
    probe, the smoke suite). ``python``: the interpreter, a path inside the image (default: the one its
    Entrypoint, Cmd or PATH names); ``platform``: ``OS/ARCH`` of a multi-platform index.
    ``replaces``: the file the manifest will be written to; a file there that is not an image's manifest
    (a live environment's, or not a manifest) is refused with ``UsageError`` before the image is read.

    Raises ``ImageError`` for an image that cannot be read (damaged, hostile, past a limit),
    ``UsageError`` when no interpreter is found, ``DeadlineExpired`` past ``timeout``."""
    if replaces is not None:
        _refuse_to_replace(str(replaces))
    return image_manifest(
        Path(image), image_python=python, platform=platform, label=label, timeout=timeout, progress=progress
    )


@public
def gate_image(
    manifest: Path | str,
    image: Path | str,
    *,
    python: str | None = None,
    platform: str | None = None,
    policy: Policy | None = None,
    strict: bool = False,
    timeout: float = 120.0,
    progress: Progress | None = None,
) -> Report:
    """The gate of a container image before it ships: ``image`` read statically (``snapshot_image``)
    and diffed against ``manifest`` by every rule whose facts it holds, the environment's invariants
    included, with one ``VERIFY-NOT-RUN`` saying that no smoke suite ran (an error with ``strict``).
    ``timeout``: one deadline for reading the image and the rules."""
    deadline = Deadline.after(timeout)
    base = load(manifest)
    found = image_manifest(
        Path(image), image_python=python, platform=platform, timeout=timeout, progress=progress
    )
    return flows.gate_image(
        name(manifest, base),
        base,
        f"image {Path(image).name}",
        found,
        policy if policy is not None else Policy(),
        strict=strict,
        deadline=deadline.for_own_work(),
    )


def _refuse_to_replace(output: str) -> None:
    """``UsageError`` when ``output`` holds a file that an image's manifest must not replace: anything but
    another image's manifest (each build of an image has a new digest; a live environment's manifest, the
    dev box's reference, is another thing)."""
    existing = existing_manifest(output)
    if existing is None:
        return
    if existing.meta.kind != "image":
        raise UsageError(
            f"{output} holds the manifest of {existing.meta.target}, not of an image: not replaced",
            tip="Write the image's elsewhere with -o FILE (e.g. -o image.json), or replace that one with "
            "--force.",
        )
