"""``envcheck predict``'s core: the environment of a manifest, predicted for other platforms.

For each target: uv (``uv pip compile``, ``envcheck.predict.uv``) or pip's own resolver in report mode
decides what the target installs (``resolve``); the platform wheels are fetched once into the user's cache
and scanned member by member with the native scanner (``fetch``); a predicted manifest holds the packages,
the merged native tree and what the machine must provide (``build``), and the diff engine compares it with
the source manifest.

Network: only here (and in ``lock``), through pip or uv and the indexes pip is configured with
(docs/reference.md, ``envcheck predict``).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from envcheck.core.redact import redact_text
from envcheck.manifest.query import canon
from envcheck.predict import resolve
from envcheck.predict.build import predicted_manifest
from envcheck.predict.fetch import WheelCache, is_pure
from envcheck.predict.resolve import IndexOptions, Resolution, ResolvedWheel
from envcheck.predict.target import PredictTarget, parse_target
from envcheck.process import awake
from envcheck.process.sessions import temporary_folder

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest

__all__ = ["IndexOptions", "PredictTarget", "Prediction", "parse_target", "predict"]


@dataclass(frozen=True, kw_only=True, slots=True)
class Prediction:
    """One target's prediction: the resolution, the predicted manifest, and where the time went."""

    resolution: Resolution
    manifest: Manifest
    resolve_s: float
    fetch_s: float
    scan_s: float
    downloaded: int
    scanned: bool


def predict(
    source: Manifest,
    targets: Sequence[PredictTarget],
    options: IndexOptions,
    *,
    cache: WheelCache | None = None,
    progress: Callable[[str], None] | None = None,
) -> list[Prediction]:
    """Predict ``source``'s environment for every target: the resolutions run in parallel (pip, in
    subprocesses: resolution is the floor of the run), then each target's wheels are fetched and scanned.

    Raises ``UsageError`` for an unreachable index, a pip failure, or a download that does not verify.
    """
    import sysconfig

    # Before any thread: up to Python 3.11 the first get_config_vars() publishes its dictionary empty and
    # fills it after, so a second thread (uv's find_uv_bin, packaging's tags) can read it half filled.
    sysconfig.get_config_vars()
    cache = cache or WheelCache()
    say = progress or (lambda _step: None)
    say(
        "resolving with "
        + ("uv" if options.resolver == "uv" else "pip" if options.resolver == "pip" else "uv or pip")
    )
    with temporary_folder("envcheck-predict-") as work, awake.Pool(4) as pool:
        futures = [
            pool.submit(_resolve, source, t, options, work / f"{i}-{t.platform}")
            for i, t in enumerate(targets)
        ]
        resolutions = [awake.result(f) for f in futures]
    return [_finish(source, r, options, cache, say) for r in resolutions]


def _resolve(source: Manifest, target: PredictTarget, options: IndexOptions, folder: object) -> Resolution:
    from pathlib import Path

    assert isinstance(folder, Path)
    folder.mkdir(parents=True)
    return resolve.resolve(source, target, options, workdir=folder)


def _requires(
    w: ResolvedWheel, known: dict[tuple[str, str], tuple[str, ...]], cache: WheelCache
) -> tuple[str, ...]:
    key = (canon(w.name), w.version)
    return known[key] if key in known else cache.requires_of(w)


def _finish(
    source: Manifest,
    resolution: Resolution,
    options: IndexOptions,
    cache: WheelCache,
    say: Callable[[str], None],
) -> Prediction:
    target = resolution.target
    start = time.perf_counter()
    # A resolver that does not give the requirements (uv): the source's where it has the very same
    # version, else the wheel's own METADATA (the wheel is fetched for that, pure or not).
    known = {(canon(d.name), d.version): tuple(d.requires) for d in source.packages}
    unknown = [w for w in resolution.wheels if w.requires is None and (canon(w.name), w.version) not in known]
    missing = [w for w in resolution.wheels if not is_pure(w) and cache.wheel_path(w) is None]
    missing += [w for w in unknown if w not in missing and cache.wheel_path(w) is None]
    if missing:
        say(f"downloading {len(missing)} wheels for {target.platform}")
    cache.fetch(resolution.wheels, target, options, also=unknown)
    wheels = tuple(
        w if w.requires is not None else dataclasses.replace(w, requires=_requires(w, known, cache))
        for w in resolution.wheels
    )
    resolution = dataclasses.replace(resolution, wheels=wheels)
    fetched = time.perf_counter()
    say(f"scanning the wheels for {target.platform}")
    tree = cache.scan_tree(resolution.wheels)
    scanned = time.perf_counter()
    indexes = [redact_text(u) for u in (options.index_url, *options.extra_index_urls) if u]
    indexes += [redact_text(f) for f in options.find_links]
    manifest = predicted_manifest(
        source,
        resolution,
        tree,
        indexes=indexes or ["pip's configured indexes"],
        label=f"{source.meta.label or 'predicted'} → {target.platform}",
    )
    return Prediction(
        resolution=resolution,
        manifest=manifest,
        resolve_s=resolution.seconds,
        fetch_s=fetched - start,
        scan_s=scanned - fetched,
        downloaded=len(missing),
        scanned=not tree.cached,
    )
