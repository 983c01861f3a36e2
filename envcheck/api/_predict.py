"""``envcheck.api.predict``: what a manifest's environment will install, need and lack on other
platforms, resolved and scanned from here."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import Progress, name, public
from envcheck.app import flows
from envcheck.core.deadline import Deadline
from envcheck.core.errors import ManifestError, UsageError
from envcheck.core.redact import redact_text
from envcheck.diff.policy import Policy
from envcheck.manifest.io import dumps, load, loads, write_atomic
from envcheck.predict import IndexOptions, Prediction, parse_target
from envcheck.predict import predict as run_prediction
from envcheck.predict.fetch import WheelCache

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest
    from envcheck.report import Report

__all__ = ["Predicted", "predict", "saved_text"]

RESOLVERS = ("pip", "uv", "auto")


@dataclass(frozen=True, kw_only=True, slots=True)
class Predicted:
    """What ``predict`` found: the ``report`` (each predicted manifest diffed with the source; several
    platforms: one group per platform), each target's ``predictions`` (resolution, predicted manifest,
    timings) and the files ``save`` wrote (``saved``)."""

    report: Report
    predictions: tuple[Prediction, ...]
    saved: tuple[Path, ...] = ()

    @property
    def manifests(self) -> tuple[tuple[str, Manifest], ...]:
        """``(platform, predicted manifest)`` for each target, in the order given."""
        return tuple((p.resolution.target.platform, p.manifest) for p in self.predictions)


@public
def predict(
    manifest: Path | str,
    *,
    platforms: Sequence[str],
    python_version: str | None = None,
    implementation: str = "cp",
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    resolver: str = "auto",
    save: Path | str | None = None,
    timeout: float = 600.0,
    policy: Policy | None = None,
    progress: Progress | None = None,
) -> Predicted:
    """Predict ``manifest``'s environment for each wheel platform tag of ``platforms`` (``envcheck
    predict``): resolved by pip or uv (``resolver``: pip, uv or auto) for ``python_version`` (X.Y, default
    the manifest's) against pip's configured indexes plus the ones given, the wheels fetched into the
    user's cache and scanned, each predicted manifest diffed with ``manifest`` under ``policy``.
    ``save``: write the predicted manifests there (several platforms: ``name.PLATFORM.json``).
    ``timeout``: one deadline for every resolution, download and scan. ``progress`` is told each step.

    Raises ``UsageError`` for a bad option, an unknown platform tag or an unreachable index,
    ``ManifestError`` for a manifest that does not load, ``DeadlineExpired`` at the deadline (each an
    ``EnvcheckError``); the network is used only through pip or uv."""
    if resolver not in RESOLVERS:
        raise UsageError(f"--resolver {resolver[:20]!a}: use pip, uv or auto")
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give a positive number of seconds")
    deadline = Deadline.after(timeout)
    source = load(manifest)
    version = python_version or ".".join(source.python.version.split(".")[:2])
    targets = [parse_target(p, version, implementation) for p in dict.fromkeys(platforms)]
    options = IndexOptions(
        index_url=index_url,
        extra_index_urls=tuple(extra_index_urls),
        find_links=tuple(find_links),
        timeout=timeout,
        resolver=resolver,
        deadline=deadline,
    )
    predictions = run_prediction(
        source, targets, options, cache=WheelCache(deadline=deadline), progress=progress
    )
    deadline.check("writing the report", done="every target resolved, fetched and scanned")
    predicted = [(p.resolution.target.platform, p.manifest) for p in predictions]
    saved = _save(Path(save), predicted) if save is not None else ()
    shown = ", ".join(t.platform for t in targets)
    title = f"envcheck predict: {name(manifest, source)} → {shown} (Python {version})"
    return Predicted(
        report=flows.predict(title, source, predicted, policy or Policy()),
        predictions=tuple(predictions),
        saved=saved,
    )


def _save(save: Path, predicted: Sequence[tuple[str, Manifest]]) -> tuple[Path, ...]:
    """Write each predicted manifest (``save``, or ``save``'s name with ``.PLATFORM`` before its suffix
    when there are several); every text is checked before the first file is written."""
    texts = [(platform, saved_text(m, platform)) for platform, m in predicted]
    written: list[Path] = []
    for platform, text in texts:
        path = save.with_name(f"{save.stem}.{platform}{save.suffix}") if len(predicted) > 1 else save
        write_atomic(path, text)
        written.append(path)
    return tuple(written)


def saved_text(manifest: Manifest, platform: str) -> str:
    """The predicted manifest as ``save`` writes it: through the redactor (the wheels' requirement lines
    and URLs come from indexes and may carry credentials), and only if ``envcheck`` can load it back (its
    size and item limits); else ``UsageError`` and nothing is written."""
    source = f"the predicted manifest for {platform}"
    try:
        text = redact_text(dumps(manifest, source=source))
        loads(text, source=source)
    except ManifestError as e:
        raise UsageError(
            f"the predicted manifest for {platform} is not written: it would not load back ({e})",
            tip="The wheels it holds are past envcheck's limits for a manifest; check where they come from.",
        ) from e
    return text
