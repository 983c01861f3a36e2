"""Session fixtures: real container images, built once per run without a daemon (``build_images.py``).
A test module imports the ones it uses (a ``conftest.py`` here would shadow the top-level one that other
test modules import helpers from).

``real_images`` is the ``build_images.Built`` of the run: ``.images`` maps a name to a
``build_images.Image`` (its OCI layout folder, the healthy one's OCI archive and ``docker save`` tarball,
its layer tars and config, the flattened root its probes ran in, what is broken and how its probe failed
under chroot, and ``pip list``'s answer in it). One fixture per image returns it directly:

- ``healthy_image``: Debian bookworm, ``/app/.venv`` with torch 2.13.0 and numpy; works.
- ``venv_moved_image``: the venv built at ``/build/.venv``, copied to ``/app/.venv``: console scripts fail.
- ``numpy_cp312_image``: numpy replaced by its cp312 wheel in the 3.11 venv: ``import numpy`` fails.
- ``libgomp_whiteout_image``: a later layer whites out ``torch/lib/libgomp.so.1``: ``import torch`` fails.
- ``env_weights_only_image``: ``Env`` sets ``TORCH_FORCE_WEIGHTS_ONLY_LOAD=1``: ``torch.load(...,
  weights_only=False)`` of a checkpoint pickling an ``argparse.Namespace`` fails.
- ``base_bump_image`` (built only when a test asks, ~1 minute more): healthy's app layer on a Debian trixie
  base (Python 3.13): the venv's python is 3.13 and ``import torch`` fails.

The first run builds them (~3-5 minutes: mmdebstrap, two real pip installs of torch under chroot) into
``${XDG_CACHE_HOME:-~/.cache}/envcheck/test-images/<key>``; later runs of the same builder find them
there. Without root, mmdebstrap (``.ci/run`` installs it), a Debian mirror or the wheels, every test that
asks for one skips, saying why. The build's log is ``<cache>/last-build.log``.
"""

from __future__ import annotations

from collections.abc import Callable

import build_images
import pytest
from build_images import Built, Image

__all__ = [
    "base_bump_image",
    "env_weights_only_image",
    "healthy_image",
    "libgomp_whiteout_image",
    "numpy_cp312_image",
    "real_images",
    "venv_moved_image",
]


@pytest.fixture(scope="session")
def real_images() -> Built:
    """The images of ``build_images.build()``, built on the first use in a run (or found in the cache)."""
    reason = build_images.missing()
    if reason:
        pytest.skip(reason)
    log_path = build_images.cache_root() / "last-build.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("a", encoding="utf-8") as log:
        try:
            return build_images.build(log=lambda line: print(line, file=log, flush=True))
        except build_images.Unavailable as e:
            pytest.skip(f"the test images cannot be built here: {e}")


@pytest.fixture(scope="session")
def base_bump_image(real_images: Built) -> Image:
    """The ``base-bump`` image of ``build_images.build_bump()`` (built on first use, then cached)."""
    with (build_images.cache_root() / "last-build.log").open("a", encoding="utf-8") as log:
        try:
            return build_images.build_bump(log=lambda line: print(line, file=log, flush=True))
        except build_images.Unavailable as e:
            pytest.skip(f"the base-bump image cannot be built here: {e}")


def _image(name: str) -> Callable[[Built], Image]:
    def fixture(real_images: Built) -> Image:
        return real_images.images[name]

    fixture.__name__ = fixture.__qualname__ = name.replace("-", "_") + "_image"
    fixture.__doc__ = f"The ``{name}`` image of ``real_images``."
    return pytest.fixture(scope="session")(fixture)


healthy_image = _image("healthy")
venv_moved_image = _image("venv-moved")
numpy_cp312_image = _image("numpy-cp312")
libgomp_whiteout_image = _image("libgomp-whiteout")
env_weights_only_image = _image("env-weights-only")
