"""``envcheck verify`` and ``envcheck gate``."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from envcheck.commands import slips
from envcheck.commands._common import handles_errors, report_findings, snapshot_this_machine
from envcheck.commands.diff import NO_PROBLEMS, load_rules_policy, name
from envcheck.commands.options import (
    ChecksOption,
    CompileOption,
    FailOnOption,
    FormatOption,
    ImportOption,
    JunitOption,
    NoImportsOption,
    NoPolicyOption,
    OutputOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    StrictOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.core.errors import ProbeError, UsageError
from envcheck.report.formats import FormatName

if TYPE_CHECKING:
    from envcheck.app.flows import Report
    from envcheck.commands.progress import Step
    from envcheck.core.deadline import Deadline
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection
    from envcheck.verify.imports import AppImports
    from envcheck.verify.runner import RuntimeProbe


def app_modules(*sources: tuple[str, Sequence[str] | None]) -> list[str]:
    """The application's entry modules from each ``(where, names)`` source in order (the manifest's
    recorded ones, the policy's, --import's), each once. Raises ``UsageError`` naming a bad name."""
    from envcheck.verify.imports import check_module_names

    out: list[str] = []
    for where, names in sources:
        problems = check_module_names(list(names or ()), where)
        if problems:
            raise UsageError(problems[0], tip="Name a module as Python imports it: --import myapp.main")
        out += [n for n in names or () if n not in out]
    return out


def _run(
    python: str | None,
    timeout: float,
    checks: Path | None,
    compile_: bool,
    progress: Step | None,
    imports: tuple[Sequence[str], Sequence[str]] | None = None,
    imports_progress: Step | None = None,
    runtime_probe: RuntimeProbe | None = None,
    deadline: Deadline | None = None,
) -> tuple[VerifySection, AppImports | None]:
    """The suite's results and, unless ``imports`` is None, the application's imports (``(modules,
    not_imported)``, ``envcheck.verify.imports``) run beside it (told to ``imports_progress``). Raises
    ``UsageError`` (file:line) when the checks file could not be loaded. ``runtime_probe``: run by the
    suite's process first (``run_suite``). ``deadline``: the command's, for the suite and the imports."""
    from concurrent.futures import ThreadPoolExecutor

    from envcheck.verify.checks_file import raise_load_failure
    from envcheck.verify.runner import run_suite

    if imports is None:
        section = run_suite(
            python,
            timeout=timeout,
            checks_file=checks,
            progress=progress,
            compile=compile_,
            runtime_probe=runtime_probe,
            deadline=deadline,
        )
        found = None
    else:
        from envcheck.verify.imports import run_imports

        modules, not_imported = imports
        with ThreadPoolExecutor(1) as pool:
            job = pool.submit(
                run_imports,
                python,
                timeout=timeout,
                modules=modules,
                not_imported=not_imported,
                progress=imports_progress,
                # The suite's first check imports torch alone, in a process of its own.
                alone_elsewhere={"torch": "the smoke suite's import_torch check"},
                deadline=deadline,
            )
            section = run_suite(
                python,
                timeout=timeout,
                checks_file=checks,
                progress=progress,
                compile=compile_,
                runtime_probe=runtime_probe,
                deadline=deadline,
            )
            found = job.result()
    if checks is not None:
        raise_load_failure(section, checks)
    return section, found


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


def _say_counts(
    golden: VerifySection | None, current: VerifySection, report: Report, imports: AppImports | None = None
) -> None:
    """On stderr: how the checks ended (the same checks the report's VERIFY findings are about), how the
    application's imports ended, and how many outputs matched the goldens."""
    from envcheck.verify.compare import output_counts

    typer.echo(_tally(current, golden), err=True)
    if imports is not None:
        from envcheck.verify.imports import tally

        typer.echo(tally(imports), err=True)
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
    --import (and `imports = [...]` in the policy), each imported alone in a fresh process, then all in
    one process (two OpenMP runtimes are named with the import that loaded each); --no-imports skips them.

    Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck.app import flows
    from envcheck.commands.progress import progress
    from envcheck.manifest.io import load
    from envcheck.verify.checks_file import compile_checks_file

    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=NO_PROBLEMS
    )
    rules_policy = load_rules_policy(policy, no_policy)
    if checks is not None:
        compile_checks_file(checks)  # a syntax error is an input error before anything runs
    modules = app_modules(("policy imports", rules_policy.imports), ("--import", import_))
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
    if against is not None and reference.verify is not None:
        recorded = app_modules((f"{against}: verify.imports", reference.verify.imports))
        modules = list(dict.fromkeys([*recorded, *modules]))
    imports = None if no_imports else (modules, rules_policy.not_imported)
    with progress("verify", quiet=quiet) as step:
        current, found = _run(
            python,
            timeout,
            checks,
            compile_,
            step if imports is None else _prefixed(step, "smoke suite: "),
            imports,
            _prefixed(step, "imports: "),
        )
    report = flows.verify(against_name, golden, current, rules_policy, strict=strict, imports=found)
    executable = slips.interpreter_path(python)
    title = f"envcheck verify: {slips.live_name(executable)}"
    report = dataclasses.replace(report, title=title + (f" against {against_name}" if against_name else ""))
    slip = None
    if against is not None and slips.suite_lacks_torch(current):
        slip = slips.wrong_interpreter(
            python=python,
            executable=executable,
            reference=str(against_name),
            reference_torch=reference.torch.static.version if reference.torch.static else None,
            has_torch=False,
        )
    if slip is not None:
        slip.say()
        report = slip.titled(report)
    _say_counts(golden, current, report, found)
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
    python: PythonOption = None,
    timeout: TimeoutOption = 120.0,
    verbose: VerboseOption = False,
    quiet: QuietOption = False,
) -> None:
    """The deployment gate: diff this machine against MANIFEST and verify against its goldens, one report.

    The application's imports are part of it: every installed module with native code, then the modules
    MANIFEST recorded (`snapshot --import`), the policy's `imports` and --import's, each imported alone,
    then all in one process (--no-imports skips them).

    Findings are ranked errors first, so the top of the report is what to fix first. Exit codes: 0 clean,
    1 findings at or above --fail-on, 2 usage or input error.
    """
    from envcheck.app import flows
    from envcheck.commands.progress import progress
    from envcheck.manifest.io import load
    from envcheck.verify.checks_file import compile_checks_file

    nothing_found = "No differences that matter, and no problems found."
    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=nothing_found
    )
    rules_policy = load_rules_policy(policy, no_policy)
    if checks is not None:
        compile_checks_file(checks)  # a syntax error is an input error before anything runs
    base = load(manifest)
    found_slips: list[slips.WrongInterpreter] = []
    with progress("gate", quiet=quiet) as step:
        report, current, found = run_gate(
            manifest,
            base,
            rules_policy,
            python,
            timeout,
            checks=checks,
            compile_=compile_,
            strict=strict,
            step=step,
            imports=import_ or (),
            app_imports=not no_imports,
            slips_found=found_slips,
        )
    for slip in found_slips:  # now that the progress line is gone: before every other line
        slip.say()
    _say_counts(flows.goldens(base), current, report, found)
    report_findings(report, options)


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
    imports: Sequence[str] = (),
    app_imports: bool = True,
    slips_found: list[slips.WrongInterpreter] | None = None,
) -> tuple[Report, VerifySection, AppImports | None]:
    """The gate's work, for ``envcheck gate`` and the pytest plugin: this machine's snapshot, the smoke
    suite and the application's imports (target processes run side by side; the snapshot's runtime probe
    runs first in the suite's process, one ``import torch`` for both), then the one gate flow. The
    application's entry modules come after the manifest's recorded ones and the policy's
    (``imports``). Returns the report, the suite's results and the imports' own results (None:
    ``app_imports`` off). Raises ``UsageError`` for a module name that is not one (the manifest's
    included).

    The title names the interpreter's path; an interpreter without torch against a manifest with torch
    is named probably the wrong one there (and added to ``slips_found``, for the caller to say)."""
    from concurrent.futures import ThreadPoolExecutor

    from envcheck.app import flows
    from envcheck.core.deadline import Deadline
    from envcheck.verify.runner import RuntimeProbe

    recorded = base.verify.imports if base.verify is not None else None
    modules = app_modules(
        (f"{manifest}: verify.imports", recorded), ("policy imports", policy.imports), ("--import", imports)
    )
    wanted = (modules, policy.not_imported) if app_imports else None
    deadline = Deadline.after(timeout)  # one for the gate's snapshot, suite, imports and rules
    runtime = RuntimeProbe()
    with ThreadPoolExecutor(1) as pool:
        live_job = pool.submit(
            snapshot_this_machine, python, timeout, _prefixed(step, "snapshot: "), runtime, deadline
        )
        try:
            current, found = _run(
                python,
                timeout,
                checks,
                compile_,
                _prefixed(step, "smoke suite: "),
                wanted,
                _prefixed(step, "imports: "),
                runtime,
                deadline,
            )
        finally:  # the snapshot never waits for a probe that will not come
            runtime.fail(ProbeError("the gate's smoke suite did not start"))
        if step is not None and not live_job.done():
            step("snapshot: finishing")
        live = live_job.result()
    live_name = slips.live_name(live.python.executable)
    base_name = name(manifest, base)
    report = flows.gate(
        base_name,
        base,
        live,
        current,
        policy,
        strict=strict,
        live_name=live_name,
        imports=found,
        deadline=deadline.for_own_work(),  # the rules after a hang still report it
    )
    slip = slips.live_against(python, base_name, base, live)
    if slip is not None:
        if slips_found is not None:
            slips_found.append(slip)
        report = slip.titled(report)
    return report, current, found


def _prefixed(step: Step | None, prefix: str) -> Step | None:
    """``step`` with ``prefix`` on each line: gate's snapshot and suite share one progress line."""
    if step is None:
        return None
    return lambda line: step(prefix + line)
