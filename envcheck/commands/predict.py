"""``envcheck predict``: what a manifest's environment will install, need and lack on another platform."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envcheck.commands._common import check_outputs, handles_errors, report_findings
from envcheck.commands.options import (
    FailOnOption,
    FormatOption,
    JunitOption,
    OutputOption,
    PolicyOption,
    QuietOption,
    VerboseOption,
    report_options,
)
from envcheck.core.deadline import Deadline
from envcheck.core.errors import UsageError
from envcheck.report.formats import FormatName as ReportFormatChoice

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest


@handles_errors
def predict(
    manifest: Annotated[Path, typer.Argument(metavar="MANIFEST", help="The dev box's manifest.")],
    platforms: Annotated[
        list[str],
        typer.Option(
            "--platform",
            help="A wheel platform tag to predict for (win_amd64, macosx_11_0_arm64, "
            "manylinux_2_28_x86_64, ...). Repeat for several: one fleet-style report.",
        ),
    ],
    python_version: Annotated[
        str | None,
        typer.Option("--python-version", help="The target's Python, X.Y (default: the manifest's)."),
    ] = None,
    implementation: Annotated[
        str,
        typer.Option(
            "--implementation", help="The target's Python implementation: cp (CPython) or pp (PyPy)."
        ),
    ] = "cp",
    index_url: Annotated[
        str | None, typer.Option("--index-url", help="Replace pip's configured index (as pip's option).")
    ] = None,
    extra_index_url: Annotated[
        list[str] | None, typer.Option("--extra-index-url", help="Another index to search (repeatable).")
    ] = None,
    find_links: Annotated[
        list[str] | None, typer.Option("--find-links", help="A folder or page of wheels (repeatable).")
    ] = None,
    resolver: Annotated[
        str,
        typer.Option(
            "--resolver",
            help="`pip`, `uv` or `auto`: uv where it is installed (envcheck[uv], or on PATH) and can name "
            "the target's platform, else pip.",
        ),
    ] = "auto",
    save: Annotated[
        Path | None,
        typer.Option(
            "--save",
            help="Write the predicted manifest here (several platforms: PLATFORM is added before the "
            "suffix, predicted.win_amd64.json).",
        ),
    ] = None,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            help="Seconds the whole command may take: every pip or uv run, download and scan gets what is "
            "left; at the deadline it stops, names the step and exits 2.",
            envvar="ENVCHECK_TIMEOUT",
        ),
    ] = 600.0,
    fmt: FormatOption = ReportFormatChoice.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: Annotated[bool, typer.Option("--no-policy", help="Apply no policy.")] = False,
    junit: JunitOption = None,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Predict what MANIFEST's environment installs, needs and lacks on another platform, from here.

    pip's own resolver, in report mode, resolves the environment for each --platform (the roots of the
    requirement graph pinned exactly, everything else as constraints; markers evaluated for the target),
    against the indexes pip is configured with plus the ones given. The platform wheels are downloaded
    once into ${XDG_CACHE_HOME:-~/.cache}/envcheck/wheels (verified by the sha256 of pip's report) and
    scanned with the native scanner; the predicted manifest (--save) is diffed with MANIFEST by the same
    engine. Reported: distributions without a wheel for the target (with the versions and platforms that
    have one), a torch variant the indexes do not serve there, runtimes the machine must provide (the VC++
    2015-2022 redistributable with its minimum version, OpenMP, the NVIDIA driver), OpenMP / BLAS family
    changes, a Python version change, and distributions installed from a path (left out).

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error (unknown platform tag,
    unreachable index, unreadable manifest).
    """
    from envcheck.app import flows
    from envcheck.commands.diff import load_rules_policy
    from envcheck.commands.progress import progress
    from envcheck.manifest.io import load, write_atomic
    from envcheck.predict import IndexOptions, parse_target
    from envcheck.predict import predict as run_prediction
    from envcheck.predict.fetch import WheelCache

    if resolver not in ("pip", "uv", "auto"):
        raise UsageError(f"--resolver {resolver[:20]!a}: use pip, uv or auto")
    if not timeout > 0:
        raise UsageError(f"--timeout {timeout}: give a positive number of seconds")
    deadline = Deadline.after(timeout)
    check_outputs(output, junit)
    rules_policy = load_rules_policy(policy, no_policy)
    source = load(manifest)
    version = python_version or ".".join(source.python.version.split(".")[:2])
    targets = [parse_target(p, version, implementation) for p in dict.fromkeys(platforms)]
    options = IndexOptions(
        index_url=index_url,
        extra_index_urls=tuple(extra_index_url or ()),
        find_links=tuple(find_links or ()),
        timeout=timeout,
        resolver=resolver,
        deadline=deadline,
    )
    with progress("predict", quiet=quiet) as step:
        predictions = run_prediction(
            source, targets, options, cache=WheelCache(deadline=deadline), progress=step
        )
    deadline.check("writing the report", done="every target resolved, fetched and scanned")
    predicted = [(p.resolution.target.platform, p.manifest) for p in predictions]
    if save is not None:
        texts = [(platform, saved_text(m, platform)) for platform, m in predicted]
        for platform, text in texts:
            several = len(predicted) > 1
            path = save.with_name(f"{save.stem}.{platform}{save.suffix}") if several else save
            write_atomic(path, text)
    name = str(source.meta.label or manifest)
    shown = ", ".join(t.platform for t in targets)
    report = flows.predict(
        f"envcheck predict: {name} → {shown} (Python {version})", source, predicted, rules_policy
    )
    shown_as = report_options(
        fmt,
        output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found="Nothing differs that matters.",
    )
    report_findings(report, shown_as)


def saved_text(manifest: Manifest, platform: str) -> str:
    """The predicted manifest as ``--save`` writes it: through the redactor (the wheels' requirement lines
    and URLs come from indexes and may carry credentials), and only if ``envcheck`` can load it back (its
    size and item limits); else ``UsageError`` and nothing is written."""
    from envcheck.core.errors import ManifestError
    from envcheck.core.redact import redact_text
    from envcheck.manifest.io import dumps, loads

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
