"""``image_manifest``: the manifest of the Python environment inside a container image, read statically.

The image is read up to its config and checked against its digests (``archive.open_image``), its layers
are applied into a private temporary folder (``rootfs.flatten``: whiteouts, links kept inside the root,
every read capped), and the interpreter the image starts is read there as the facts probe would read a
live one (``static.image_facts``). Nothing in the image runs, and no container runtime is needed.

The manifest says that it was read statically: ``meta.kind`` is ``image``, ``Manifest.image`` names the
image by digest, and ``meta.absent`` lists the facts only a run knows (the runtime probe, the libraries a
process maps, the CPU, the smoke suite's goldens). The diff engine sets those aside on the other side
(``diff.engine``), so an image diffs against a live snapshot on what both hold. The native tree is there,
resolved by the image's own loader inside the unpacked root (``envcheck.native.scan_image``).
"""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from envcheck import __version__
from envcheck.collect import facts
from envcheck.core.deadline import Deadline
from envcheck.core.errors import ManifestError, UsageError
from envcheck.image.archive import Image, open_image
from envcheck.image.rootfs import Limits, flatten
from envcheck.image.static import image_facts
from envcheck.manifest.model import ImageSource, Manifest, Meta, ProbeOutcome
from envcheck.native import scan_image

# What only a run of the image knows: marked absent, never guessed (``Meta.absent``).
ABSENT = (
    "gpu",
    "runtimes",
    "torch.runtime",
    "native.loaded",
    "native.hwcaps",
    "verify",
    "config_checks",
    "platform.cpu",
    "platform.kernel",
    "platform.release",
    "platform.shm_bytes",
    "platform.hostname",
    "platform.container",
    "python.loaded_library",
    "python.stdlib_errors",
    "python.build_version",
)
NOT_RUN = "read statically from a container image: nothing in it ran"

Progress = Callable[[str], None]


def _nothing(step: str) -> None:
    pass


def image_manifest(
    path: Path,
    *,
    image_python: str | None = None,
    platform: str | None = None,
    label: str | None = None,
    timeout: float = 120.0,
    limits: Limits | None = None,
    progress: Progress | None = None,
) -> Manifest:
    """The manifest of the image at ``path`` (an OCI layout folder, an OCI archive or a ``docker save``
    tarball), its interpreter ``image_python`` (a path inside the image) or the one its Entrypoint, Cmd or
    PATH names. ``platform`` (``linux/amd64``) picks one image of a multi-platform index.

    Raises ``ImageError`` for an image that is not one, is damaged or hostile, ``UsageError`` when no
    interpreter is found, ``DeadlineExpired`` past ``timeout``; the temporary tree is removed either way."""
    say = progress or _nothing
    started = time.monotonic()
    deadline = Deadline.after(timeout)
    say("reading the image")
    image = open_image(path, deadline=deadline, platform=platform)
    work = Path(tempfile.mkdtemp(prefix="envcheck-image-"))
    try:
        root = work / "root"
        root.mkdir()
        say(f"applying {len(image.layers)} layers")
        flatten(image, root, deadline=deadline, limits=limits or Limits())
        say("reading the interpreter and its packages")
        data = image_facts(root, image, image_python=image_python, deadline=deadline)
        try:
            found = facts.static_facts(data)
        except ManifestError as e:  # the reader's own output: a bug, said as one line with where
            raise UsageError(f"the image's facts did not decode: {'; '.join(e.problems[:3])}") from e
        python = found.python.executable
        chosen = "--image-python" if image_python else "the image's Entrypoint, Cmd or PATH"
        meta = Meta(
            envcheck_version=__version__,
            label=label,
            target=f"{path.name} ({image.digest[:19]}) {python}",
            probe=ProbeOutcome(status="not-run", stage=NOT_RUN),
            created=facts.utc_now(),
            kind="image",
            absent=list(ABSENT),
        )
        manifest = dataclasses.replace(
            found.manifest(meta),
            platform=dataclasses.replace(found.platform, container=[]),  # absent: only a run knows
            image=_source(image, python, chosen),
        )
        say("resolving the native libraries as the image's loader would")
        native = scan_image(manifest, str(root), deadline=deadline)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    meta = dataclasses.replace(manifest.meta, duration_s=round(time.monotonic() - started, 3))
    return dataclasses.replace(manifest, meta=meta, native=native)


def _source(image: Image, python: str, chosen: str) -> ImageSource:
    return ImageSource(
        digest=image.digest,
        digest_kind=image.digest_kind,
        config_digest=image.config_digest,
        source_format=image.source_format,
        platform=str(image.platform),
        layers=len(image.layers),
        python=python,
        python_from=chosen,
        entrypoint=list(image.entrypoint),
        cmd=list(image.cmd),
    )
