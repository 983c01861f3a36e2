"""``envcheck diff`` and ``envcheck doctor``: parse the options, call ``envcheck.api``, write the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, image_only, report_findings, say_told
from envcheck.commands.options import (
    NO_PROBLEMS,
    FailOnOption,
    FormatOption,
    ImageOption,
    ImagePlatformOption,
    ImagePythonOption,
    JunitOption,
    NoPolicyOption,
    OutputOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    RemediesOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.commands.progress import progress
from envcheck.core.errors import UsageError
from envcheck.report.formats import FormatName


@handles_errors
def diff(
    base: Annotated[
        Path,
        typer.Argument(
            metavar="BASE", help="The reference manifest (e.g. the dev box's envcheck.lock.json)."
        ),
    ],
    targets: Annotated[
        list[Path] | None,
        typer.Argument(
            metavar="[TARGET]...",
            help="Manifests to compare with BASE, folders of them (their *.json files) or quoted patterns "
            "('fleet/*.json') (default: a fresh snapshot of this machine).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    remedies: RemediesOption = None,
    python: PythonOption = None,
    image: ImageOption = None,
    image_python: ImagePythonOption = None,
    image_platform: ImagePlatformOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Explain every difference from BASE to each TARGET that matters, ranked, with a remedy.

    With --image, the target is a container image read statically (an OCI layout, an OCI archive or a
    `docker save` tarball): nothing in it runs, and what only a run knows is left out of the comparison.

    Runs the difference rules (BASE vs TARGET) and the TARGET's single-environment rules (as
    `envcheck doctor` would).

    Several targets, a folder or a pattern give one fleet report: machines whose manifests differ only
    in volatile fields (label, hostname, timestamps, timings) share an environment, diffed once on every
    CPU and reported once as a group ("N machines identical to the base; M machines in K groups"), each
    group with its findings and members (JSON lists every member). A manifest that cannot be read is
    named on stderr, the others are still reported, and the run exits 2. A policy entry that selects
    machines (`machine = "prod-*"`) matches each machine, never a group's name.

    Policy (--policy FILE, or [tool.envcheck] in ./pyproject.toml): `ignore = ["RULE", "RULE:subject"]`,
    `[severity] RULE = "warning"`, `[[intended]] rule = "..." reason = "..."` (reported, never failing).
    Every report names the policy applied and counts what it ignored or downgraded; --no-policy applies
    none. Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    options = report_options(fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, remedies=remedies)
    if remedies is not None and targets and (len(targets) > 1 or any(_many(t) for t in targets)):
        raise UsageError(
            f"--remedies {remedies} writes the fixes of one environment: a fleet has several",
            tip="Diff one target at a time for its remedies.",
        )
    rules_policy = api.load_policy(policy, disabled=no_policy)
    if image is not None:
        image_only(image, python=python, targets=targets)
        with progress("diff", quiet=quiet) as step:
            target = api.snapshot_image(
                image, python=image_python, platform=image_platform, timeout=timeout, progress=step
            )
        report_findings(api.diff(base, target, policy=rules_policy, timeout=timeout), options)
        return
    told: list[str] = []
    with progress("diff", quiet=quiet or bool(targets)) as step:
        found = api.diff_targets(
            base,
            targets or [],
            policy=rules_policy,
            python=python,
            timeout=timeout,
            progress=step,
            tell=told.append,
        )
    for line in told:  # now that the progress line is gone: before the report
        say_told(line)
    report_findings(found.report, options, errors=found.unreadable)


def _many(target: Path) -> bool:
    """Whether a diff target names several manifests (a folder, a pattern)."""
    return target.is_dir() or any(c in str(target) for c in "*?[")


@handles_errors
def doctor(
    manifest: Annotated[
        Path | None,
        typer.Argument(
            metavar="[MANIFEST]",
            help="A manifest to examine (default: a fresh snapshot of this machine).",
            show_default=False,
        ),
    ] = None,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    remedies: RemediesOption = None,
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Find the traps in one environment that need no baseline: two OpenMP runtimes, a driver older than
    torch's CUDA, a companion pinned to another torch, nvidia-* wheels off torch's pins, ...

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    options = report_options(
        fmt,
        output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found=NO_PROBLEMS,
        remedies=remedies,
    )
    rules_policy = api.load_policy(policy, disabled=no_policy)
    with progress("doctor", quiet=quiet or manifest is not None) as step:
        report = api.doctor(manifest, policy=rules_policy, python=python, timeout=timeout, progress=step)
    report_findings(report, options)
