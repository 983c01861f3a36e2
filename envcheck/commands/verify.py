"""``envcheck verify`` and ``envcheck gate``: parse the options, call ``envcheck.api``, write the report."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, image_only, report_findings, say_told
from envcheck.commands.options import (
    NO_PROBLEMS,
    NOTHING_FOUND,
    AgainstOption,
    ChecksOption,
    CompileOption,
    FailOnOption,
    FormatOption,
    ImageOption,
    ImagePlatformOption,
    ImagePythonOption,
    ImportOption,
    JunitOption,
    NoImportsOption,
    NoPolicyOption,
    OutputOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    RemediesOption,
    StrictOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.commands.progress import progress
from envcheck.report.formats import FormatName


@handles_errors
def verify(
    against: AgainstOption = None,
    checks: ChecksOption = None,
    compile_: CompileOption = False,
    import_: ImportOption = None,
    no_imports: NoImportsOption = False,
    strict: StrictOption = False,
    fmt: FormatOption = FormatName.text,
    output: OutputOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """Run the import-and-verify smoke suite in isolated processes; with --against, compare with goldens.

    Each check runs on seeded inputs; a crash, hang or exception in one is reported (crashed / timeout /
    error) and the others still run. Tolerances: envcheck/verify/compare.py.

    Your own checks (--checks FILE, or modules/functions registered in the `envcheck.checks` entry-point
    group): every top-level `check_NAME()` or `check_NAME(ctx)` function, run in the target interpreter.
    Return a tensor, a number, or a dict/list of them (or call `ctx.output(name, tensor)`); call
    `ctx.skip(reason)` when it cannot run. Optional attributes: `check_NAME.tolerance = {"rtol": ..,
    "atol": ..}`, `check_NAME.exact = True`. Goldens are recorded by `envcheck snapshot` like the rest.

    The application's imports: every installed module with native code, then the modules named with
    --import (and `imports = [...]` in the policy), all in one process (two OpenMP runtimes are named with
    the import that loaded each); the application's and those that link or require torch are imported
    alone first, each in a fresh process, and the others too when the process of them all fails;
    --no-imports skips them.

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=NO_PROBLEMS
    )
    rules_policy = api.load_policy(policy, disabled=no_policy)
    suite = api.SuiteOptions(
        python=python,
        timeout=timeout,
        checks=checks,
        torch_compile=compile_,
        imports=import_ or (),
        app_imports=not no_imports,
        strict=strict,
    )
    told: list[str] = []
    with progress("verify", quiet=quiet) as step:
        report = api.verify(
            against=against, options=suite, policy=rules_policy, progress=step, tell=told.append
        )
    for line in told:  # now that the progress line is gone: before the report
        say_told(line)
    report_findings(report, options)


@handles_errors
def gate(
    manifest: Annotated[
        Path, typer.Argument(help="The manifest recorded on the reference machine (`envcheck snapshot`).")
    ],
    checks: ChecksOption = None,
    compile_: CompileOption = False,
    import_: ImportOption = None,
    no_imports: NoImportsOption = False,
    strict: StrictOption = False,
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
    """The deployment gate: diff this machine against MANIFEST and verify against its goldens, one report.

    With --image, a container image instead of this machine, read statically (nothing in it runs): its
    environment is diffed against MANIFEST, its invariants checked, and the report says no smoke suite ran.

    The application's imports are part of it: every installed module with native code, then the modules
    MANIFEST recorded (`snapshot --import`), the policy's `imports` and --import's, all in one process,
    the application's and those that link or require torch alone first (--no-imports skips them).

    Findings are ranked errors first, so the top of the report is what to fix first. Exit codes: 0 clean,
    1 findings at or above --fail-on, 2 usage or input error.
    """
    options = report_options(
        fmt,
        output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found=NOTHING_FOUND,
        remedies=remedies,
    )
    rules_policy = api.load_policy(policy, disabled=no_policy)
    suite = api.SuiteOptions(
        python=python,
        timeout=timeout,
        checks=checks,
        torch_compile=compile_,
        imports=import_ or (),
        app_imports=not no_imports,
        strict=strict,
    )
    told: list[str] = []
    with progress("gate", quiet=quiet) as step:
        if image is not None:
            image_only(image, python=python, checks=checks, compile_=compile_, import_=import_)
            report = api.gate_image(
                manifest, image, python=image_python, platform=image_platform, policy=rules_policy,
                strict=strict, timeout=timeout, progress=step,
            )  # fmt: skip
        else:
            report = api.gate(manifest, options=suite, policy=rules_policy, progress=step, tell=told.append)
    for line in told:  # now that the progress line is gone: before the report
        say_told(line)
    report_findings(report, options)
