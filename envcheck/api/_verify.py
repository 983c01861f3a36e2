"""``envcheck.api.verify`` and ``envcheck.api.gate``: the import-and-verify smoke suite in the target
interpreter (compared with a manifest's goldens), and the deployment gate: this machine diffed against a
manifest and verified against its goldens, one report."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import (
    interpreter_path,
    live_against,
    live_name,
    name,
    prefixed,
    public,
    slipped,
    suite_lacks_torch,
    wrong_interpreter,
)
from envcheck.api._snapshot import app_modules, snapshot_this_machine
from envcheck.app import flows
from envcheck.core.deadline import Deadline
from envcheck.core.errors import ProbeError, UsageError
from envcheck.diff.policy import Policy
from envcheck.manifest.io import load
from envcheck.process import awake, sessions
from envcheck.report import Report
from envcheck.verify.checks_file import compile_checks_file, raise_load_failure
from envcheck.verify.compare import output_counts
from envcheck.verify.imports import AppImports, Beside, run_imports, tally
from envcheck.verify.runner import RuntimeProbe, run_suite

if TYPE_CHECKING:
    from envcheck.api._common import Progress
    from envcheck.manifest.model import Manifest
    from envcheck.manifest.verify import VerifySection

__all__ = ["GateRun", "SuiteOptions", "app_modules", "gate", "run_gate", "verify"]


@dataclass(frozen=True, kw_only=True, slots=True)
class SuiteOptions:
    """How verify and gate run the smoke suite: in ``python`` (default: this interpreter), under one
    ``timeout`` (seconds: every check, import and rerun; the gate's snapshot and rules too), with your own
    ``checks`` file and the torch.compile check (``torch_compile``) when asked; unless ``app_imports`` is
    off, the application's imports beside it (every installed module with native code, then the recorded
    modules, the policy's ``imports`` and ``imports``); ``strict``: a skipped check is an error."""

    python: str | None = None
    timeout: float = 120.0
    checks: Path | None = None
    torch_compile: bool = False
    imports: Sequence[str] = ()
    app_imports: bool = True
    strict: bool = False


@public
def verify(
    *,
    against: Path | str | None = None,
    options: SuiteOptions = SuiteOptions(),
    policy: Policy | None = None,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> Report:
    """The smoke suite as ``options`` say (``SuiteOptions``: the interpreter, your checks, the
    application's imports...), each check in its own process, compared with the goldens ``against`` holds
    when given (and the modules it recorded imported too).

    ``tell`` is told what is said before the report (a probably wrong interpreter, how the checks ended);
    ``progress`` each step. Raises ``UsageError`` for a checks file that does not compile, a bad module
    name, or an ``against`` without goldens."""
    policy = policy if policy is not None else Policy()
    python, checks = options.python, options.checks
    if checks is not None:
        compile_checks_file(checks)  # a syntax error is an input error before anything runs
    modules = app_modules(("policy imports", policy.imports), ("--import", options.imports))
    golden = None
    against_name = None
    reference = None
    if against is not None:
        reference = load(against)
        against_name = name(against, reference)
        golden = flows.goldens(reference)
        if golden is None:
            raise UsageError(
                f"{against} holds no verify goldens",
                tip="Record them with `envcheck snapshot` (without --no-verify) on the reference machine.",
            )
        if reference.verify is not None:
            recorded = app_modules((f"{against}: verify.imports", reference.verify.imports))
            modules = list(dict.fromkeys([*recorded, *modules]))
    wanted = (modules, policy.not_imported) if options.app_imports else None
    current, found = _run(
        options,
        progress if wanted is None else prefixed(progress, "smoke suite: "),
        wanted,
        prefixed(progress, "imports: "),
    )
    report = flows.verify(against_name, golden, current, policy, strict=options.strict, imports=found)
    executable = interpreter_path(python)
    title = f"envcheck verify: {live_name(executable)}"
    report = dataclasses.replace(report, title=title + (f" against {against_name}" if against_name else ""))
    slip = None
    if reference is not None and suite_lacks_torch(current):
        slip = wrong_interpreter(
            python=python,
            executable=executable,
            reference=str(against_name),
            reference_torch=reference.torch.static.version if reference.torch.static else None,
            has_torch=False,
        )
    report = slipped(report, slip, tell)
    _tell_counts(tell, golden, current, report, found)
    return report


@dataclass(frozen=True, kw_only=True, slots=True)
class GateRun:
    """What a gate found: the report, the smoke suite's own results (``suite``) and the application's
    imports' (``imports``: None when they were not run)."""

    report: Report
    suite: VerifySection
    imports: AppImports | None


@public
def gate(
    manifest: Path | str,
    *,
    options: SuiteOptions = SuiteOptions(),
    policy: Policy | None = None,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> Report:
    """The deployment gate: this machine (``python``'s environment, default this interpreter) diffed
    against ``manifest`` and its smoke suite compared with the manifest's goldens, with the application's
    imports (the manifest's recorded modules, the policy's and ``options.imports``), one report, errors
    first. The options are ``verify``'s; see ``run_gate`` for the suite's own results."""
    if options.checks is not None:
        compile_checks_file(options.checks)  # a syntax error is an input error before anything runs
    return run_gate(manifest, options=options, policy=policy, progress=progress, tell=tell).report


@public
def run_gate(
    manifest: Path | str,
    *,
    base: Manifest | None = None,
    options: SuiteOptions = SuiteOptions(),
    policy: Policy | None = None,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> GateRun:
    """The gate's work, for ``gate`` and the pytest plugin: this machine's snapshot, the smoke suite and
    the application's imports (target processes run side by side; the snapshot's runtime probe runs
    first in the suite's process, one ``import torch`` for both), then the one gate flow. ``base``: the
    manifest already loaded from ``manifest``. The title names the interpreter's path; an interpreter
    without torch against a manifest with torch is named probably the wrong one there and told to
    ``tell``, before how the checks ended. Raises ``UsageError`` for a module name that is not one (the
    manifest's included) or a checks file that cannot be loaded (``gate`` refuses one that does not
    compile before anything starts)."""
    policy = policy if policy is not None else Policy()
    base = base if base is not None else load(manifest)
    recorded = base.verify.imports if base.verify is not None else None
    modules = app_modules(
        (f"{manifest}: verify.imports", recorded),
        ("policy imports", policy.imports),
        ("--import", options.imports),
    )
    wanted = (modules, policy.not_imported) if options.app_imports else None
    python, timeout = options.python, options.timeout
    deadline = Deadline.after(timeout)  # one for the gate's snapshot, suite, imports and rules
    runtime = RuntimeProbe()
    with awake.Pool(1) as pool:
        live_job = pool.submit(
            snapshot_this_machine,
            python,
            timeout=timeout,
            progress=prefixed(progress, "snapshot: "),
            runtime=runtime,
            deadline=deadline,
        )
        try:
            current, found = _run(
                options,
                prefixed(progress, "smoke suite: "),
                wanted,
                prefixed(progress, "imports: "),
                runtime,
                deadline,
            )
        finally:  # the snapshot never waits for a probe that will not come
            runtime.fail(ProbeError("the gate's smoke suite did not start"))
        if progress is not None and not live_job.done():
            progress("snapshot: finishing")
        live = awake.result(live_job)
    base_name = name(manifest, base)
    report = flows.gate(
        base_name,
        base,
        live,
        current,
        policy,
        strict=options.strict,
        live_name=live_name(live.python.executable),
        imports=found,
        deadline=deadline.for_own_work(),  # the rules after a hang still report it
    )
    report = slipped(report, live_against(python, base_name, base, live), tell)
    _tell_counts(tell, flows.goldens(base), current, report, found)
    return GateRun(report=report, suite=current, imports=found)


def _run(
    options: SuiteOptions,
    progress: Progress | None,
    imports: tuple[Sequence[str], Sequence[str]] | None = None,
    imports_progress: Progress | None = None,
    runtime_probe: RuntimeProbe | None = None,
    deadline: Deadline | None = None,
) -> tuple[VerifySection, AppImports | None]:
    """The suite's results and, unless ``imports`` is None, the application's imports (``(modules,
    not_imported)``, ``envcheck.verify.imports``) run beside it (told to ``imports_progress``). Raises
    ``UsageError`` (file:line) when the checks file could not be loaded. ``runtime_probe``: run by the
    suite's process first (``run_suite``). ``deadline``: the caller's, for the suite and the imports."""
    python, timeout, checks = options.python, options.timeout, options.checks

    def suite(beside: Beside | None = None) -> VerifySection:
        return run_suite(
            python,
            timeout=timeout,
            checks_file=checks,
            progress=progress,
            compile=options.torch_compile,
            runtime_probe=runtime_probe,
            deadline=deadline,
            together=beside,
        )

    if imports is None:
        section, found = suite(), None
    else:
        modules, not_imported = imports
        # The imports together run beside the suite, forked from its process after its `import torch`.
        with sessions.temporary_folder("envcheck-together-") as folder, awake.Pool(1) as pool:
            beside = Beside(Path(folder))
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
                beside=beside,
            )
            try:
                section = suite(beside)
            finally:
                beside.ended()  # the imports never wait on a suite that did not run
            found = awake.result(job)
    if checks is not None:
        raise_load_failure(section, checks)
    return section, found


def tally_line(section: VerifySection, golden: VerifySection | None = None) -> str:
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


def _tell_counts(
    tell: Progress | None,
    golden: VerifySection | None,
    current: VerifySection,
    report: Report,
    imports: AppImports | None = None,
) -> None:
    """Tell how the checks ended (the same checks the report's VERIFY findings are about), how the
    application's imports ended, and how many outputs matched the goldens."""
    if tell is None:
        return
    tell(tally_line(current, golden))
    if imports is not None:
        for line in tally(imports).splitlines():  # a told line is one line: each is escaped as one
            tell(line)
    if golden is not None:
        n = output_counts(golden, current, list(report.findings))
        tell(
            f"{n['compared']} outputs compared with the goldens: {n['identical']} identical, "
            f"{n['within']} within tolerance, {n['beyond']} beyond"
        )
