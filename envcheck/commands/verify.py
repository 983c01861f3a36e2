"""``envcheck verify`` and ``envcheck gate``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envcheck.commands._common import (
    PythonOption,
    TimeoutOption,
    check_outputs,
    handles_errors,
    report_findings,
    snapshot_this_machine,
)
from envcheck.commands.diff import NO_PROBLEMS, NoPolicyOption, load_rules_policy, name
from envcheck.errors import UsageError
from envcheck.report.options import (
    FailOnOption,
    FormatOption,
    JunitOption,
    OutputOption,
    PolicyOption,
    QuietOption,
    ReportFormatChoice,
    SeverityChoice,
    VerboseOption,
)

if TYPE_CHECKING:
    from envcheck.commands.progress import Step
    from envcheck.diff.policy import Policy
    from envcheck.flows import Report
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection

ChecksOption = Annotated[
    Path | None,
    typer.Option(
        "--checks",
        help="A Python file of your own check_* functions (e.g. your model's forward pass on a fixed input).",
        envvar="ENVCHECK_CHECKS",
        show_default=False,
    ),
]
StrictOption = Annotated[
    bool,
    typer.Option(
        "--strict", help="A skipped check counts as an error (e.g. a GPU box whose CUDA checks skip)."
    ),
]
CompileOption = Annotated[
    bool,
    typer.Option("--compile", help="Also run the torch.compile check (15-35 s on 2 cores: opt-in)."),
]


def _run(
    python: str | None, timeout: float, checks: Path | None, compile_: bool, progress: Step | None
) -> VerifySection:
    """The suite's results. Raises ``UsageError`` (file:line) when the checks file could not be loaded."""
    from envcheck.verify.checks_file import raise_load_failure
    from envcheck.verify.runner import run_suite

    section = run_suite(python, timeout=timeout, checks_file=checks, progress=progress, compile=compile_)
    if checks is not None:
        raise_load_failure(section, checks)
    return section


def _tally(section: VerifySection, golden: VerifySection | None = None) -> str:
    """How the checks the report speaks of ended: every check run here by outcome, plus the checks that
    passed on the golden machine and did not run here (each is a VERIFY-SKIPPED finding of the report)."""
    counts: dict[str, int] = {}
    for r in section.results:
        counts[r.status] = counts.get(r.status, 0) + 1
    parts = [f"{n} {status}" for status, n in sorted(counts.items())]
    ran = {r.name for r in section.results}
    absent = (
        0 if golden is None else sum(1 for r in golden.results if r.status == "passed" and r.name not in ran)
    )
    if absent:
        parts.append(f"{absent} not run here (passed on the golden machine)")
    wall = f" in {section.wall_s:.1f} s" if section.wall_s is not None else ""
    return f"{len(section.results) + absent} checks{wall}: {', '.join(parts)}"


def _say_counts(golden: VerifySection | None, current: VerifySection, report: Report) -> None:
    """On stderr: how the checks ended (the same checks the report's VERIFY findings are about), and how
    many outputs matched the goldens."""
    from envcheck.verify.compare import output_counts

    typer.echo(_tally(current, golden), err=True)
    if golden is not None:
        n = output_counts(golden, current, list(report.findings))
        typer.echo(
            f"{n['compared']} outputs compared with the goldens: {n['identical']} identical, "
            f"{n['within']} within tolerance, {n['beyond']} beyond",
            err=True,
        )


@handles_errors
def verify(
    against: Annotated[
        Path | None,
        typer.Option(
            "--against", help="Compare with the goldens stored in this manifest.", show_default=False
        ),
    ] = None,
    checks: ChecksOption = None,
    compile_: CompileOption = False,
    strict: StrictOption = False,
    fmt: FormatOption = ReportFormatChoice.text,
    output: OutputOption = None,
    fail_on: FailOnOption = SeverityChoice.error,
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

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck import flows
    from envcheck.commands.progress import progress
    from envcheck.manifest.io import load
    from envcheck.verify.checks_file import compile_checks_file

    check_outputs(output, junit)
    rules_policy = load_rules_policy(policy, no_policy)
    if checks is not None:
        compile_checks_file(checks)  # a syntax error is an input error before anything runs
    golden = None
    against_name = None
    if against is not None:
        reference = load(against)
        against_name = name(against, reference)
        golden = flows.goldens(reference)
        if golden is None:
            raise UsageError(
                f"{against} holds no verify goldens",
                tip="Record them with `envcheck snapshot` (without --no-verify) on the reference machine.",
            )
    with progress("verify", quiet=quiet) as step:
        current = _run(python, timeout, checks, compile_, step)
    report = flows.verify(against_name, golden, current, rules_policy, strict=strict)
    _say_counts(golden, current, report)
    report_findings(
        report,
        fmt=fmt,
        output=output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found=NO_PROBLEMS,
    )


@handles_errors
def gate(
    manifest: Annotated[
        Path, typer.Argument(help="The lockfile manifest recorded on the reference machine.")
    ],
    checks: ChecksOption = None,
    compile_: CompileOption = False,
    strict: StrictOption = False,
    fmt: FormatOption = ReportFormatChoice.text,
    output: OutputOption = None,
    fail_on: FailOnOption = SeverityChoice.error,
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    junit: JunitOption = None,
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """The deployment gate: diff this machine against MANIFEST and verify against its goldens, one report.

    Findings are ranked errors first, so the top of the report is what to fix first. Exit codes: 0 clean,
    1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck import flows
    from envcheck.commands.progress import progress
    from envcheck.manifest.io import load
    from envcheck.verify.checks_file import compile_checks_file

    check_outputs(output, junit)
    rules_policy = load_rules_policy(policy, no_policy)
    if checks is not None:
        compile_checks_file(checks)  # a syntax error is an input error before anything runs
    base = load(manifest)
    with progress("gate", quiet=quiet) as step:
        report, current = run_gate(
            manifest,
            base,
            rules_policy,
            python,
            timeout,
            checks=checks,
            compile_=compile_,
            strict=strict,
            step=step,
        )
    _say_counts(flows.goldens(base), current, report)
    report_findings(
        report,
        fmt=fmt,
        output=output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found="No differences that matter, and no problems found.",
    )


def run_gate(
    manifest: Path,
    base: Manifest,
    policy: Policy,
    python: str | None,
    timeout: float,
    *,
    checks: Path | None = None,
    compile_: bool = False,
    strict: bool = False,
    step: Step | None = None,
) -> tuple[Report, VerifySection]:
    """The gate's work, for ``envcheck gate`` and the pytest plugin: this machine's snapshot and the smoke
    suite (separate target processes, run side by side), then the one gate flow. Returns the report and
    the suite's results."""
    from concurrent.futures import ThreadPoolExecutor

    from envcheck import flows

    with ThreadPoolExecutor(1) as pool:
        live_job = pool.submit(snapshot_this_machine, python, timeout, _prefixed(step, "snapshot: "))
        current = _run(python, timeout, checks, compile_, _prefixed(step, "smoke suite: "))
        if step is not None and not live_job.done():
            step("snapshot: finishing")
        live = live_job.result()
    live_name = f"this machine ({python})" if python else "this machine"
    report = flows.gate(name(manifest, base), base, live, current, policy, strict=strict, live_name=live_name)
    return report, current


def _prefixed(step: Step | None, prefix: str) -> Step | None:
    """``step`` with ``prefix`` on each line: gate's snapshot and suite share one progress line."""
    if step is None:
        return None
    return lambda line: step(prefix + line)
