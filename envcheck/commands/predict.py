"""``envcheck predict``: what a manifest's environment will install, need and lack on another platform."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, report_findings
from envcheck.commands.options import (
    ExtraIndexUrlOption,
    FailOnOption,
    FindLinksOption,
    FormatOption,
    IndexUrlOption,
    JunitOption,
    NoPolicyOption,
    OutputOption,
    PolicyOption,
    QuietOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.commands.progress import progress
from envcheck.report.formats import FormatName

NOTHING_DIFFERS = "Nothing differs that matters."


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
    index_url: IndexUrlOption = None,
    extra_index_url: ExtraIndexUrlOption = None,
    find_links: FindLinksOption = None,
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
    timeout: TimeoutOption = 600.0,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
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
    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=NOTHING_DIFFERS
    )
    rules_policy = api.load_policy(policy, disabled=no_policy)
    with progress("predict", quiet=quiet) as step:
        predicted = api.predict(
            manifest,
            platforms=platforms,
            python_version=python_version,
            implementation=implementation,
            index_url=index_url,
            extra_index_urls=extra_index_url or (),
            find_links=find_links or (),
            resolver=resolver,
            save=save,
            timeout=timeout,
            policy=rules_policy,
            progress=step,
        )
    report_findings(predicted.report, options)
