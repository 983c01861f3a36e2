"""``envcheck lock``: write a pip-tools requirements lock from a manifest, or ``--check`` one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck.commands._common import check_outputs, handles_errors, report_findings
from envcheck.commands.options import (
    FailOnOption,
    FormatOption,
    JunitOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    VerboseOption,
    report_options,
)
from envcheck.core.errors import UsageError
from envcheck.core.findings import Severity
from envcheck.report.formats import FormatName as ReportFormatChoice

MATCHES = "The environment matches the lock."


@handles_errors
def lock(
    ctx: typer.Context,
    path: Annotated[
        Path,
        typer.Argument(
            metavar="MANIFEST|LOCK",
            help="The manifest to lock (`envcheck snapshot`), or with --check the requirements lock to check "
            "against.",
        ),
    ],
    output: Annotated[
        str | None,
        typer.Option(
            "-o",
            "--output",
            help="The requirements lock to write (default: stdout); with --check, the report.",
            show_default=False,
        ),
    ] = None,
    hashes: Annotated[
        bool, typer.Option("--hashes", help="Add each file's sha256 (pip-compile --generate-hashes).")
    ] = False,
    index_url: Annotated[
        str | None,
        typer.Option(
            "--index-url", help="The package index to lock from, instead of pip's.", show_default=False
        ),
    ] = None,
    extra_index_url: Annotated[
        list[str] | None,
        typer.Option(
            "--extra-index-url",
            help="Another index (repeatable): e.g. the PyTorch wheel index for a +cpu or +cu130 build.",
            show_default=False,
        ),
    ] = None,
    find_links: Annotated[
        list[str] | None,
        typer.Option("--find-links", help="A folder or page of wheels (repeatable).", show_default=False),
    ] = None,
    allow_unlocked: Annotated[
        bool,
        typer.Option(
            "--allow-unlocked",
            help="Lock what can be locked; list what cannot (a path or VCS install, a distribution no "
            "source serves) in the lock's comments and on stderr.",
        ),
    ] = False,
    trust_manifest_index: Annotated[
        bool,
        typer.Option(
            "--trust-manifest-index",
            help="Use the index the manifest's pip was configured with for a +cpu or +cu130 torch build "
            "(a manifest is untrusted input: without this, that index is named on stderr and not used).",
        ),
    ] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Check an environment (--python, default this one) against the lock: exit 0 when it "
            "matches exactly, 1 with each difference.",
        ),
    ] = False,
    python: PythonOption = None,
    fmt: FormatOption = ReportFormatChoice.text,
    junit: JunitOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: Annotated[bool, typer.Option("--no-policy", help="Apply no policy (with --check).")] = False,
    verbose: VerboseOption = False,
    timeout: Annotated[
        float,
        typer.Option(
            "--timeout",
            min=1.0,
            help="Seconds the whole command may take, every pip-compile run together (with --check: the "
            "snapshot of the interpreter).",
            envvar="ENVCHECK_TIMEOUT",
        ),
    ] = 600.0,
    quiet: QuietOption = False,
) -> None:
    """Write a requirements lock that rebuilds MANIFEST's environment, compiled by pip-tools.

    Every distribution at its exact version, local label kept (torch==2.13.0+cpu); the distributions
    nothing else requires are the requirements, the rest are pins that `# via` explains; pip, setuptools,
    wheel are pip-tools' "unsafe" packages. pip's own configuration (find-links, indexes) is honoured. A
    labelled torch build needs its PyTorch wheel index: --extra-index-url, else (with
    --trust-manifest-index) the one the manifest's pip was configured with, else pip's configuration if
    it serves the build, else the lock names ${TORCH_INDEX_URL}. Install with `pip install -r LOCK` or
    `pip-sync LOCK`. What pip-compile adds that the environment lacked is named on stderr.

    With --check, LOCK is compared with the environment of --python: names, full versions with local
    labels, nothing missing, nothing extra (LOCK-* rules, in the report formats); what a lock written
    with --allow-unlocked lists as left out is compared by name and version, never reported as extra.
    Remedies quote every value of the lock for the shell, and force the exact build where pip would
    take another for it (torch==2.13.0 with 2.13.0+cpu installed).

    Exit codes: 0 written / matches, 1 differences (--check), 2 usage or input error (a malformed lock, a
    manifest without distributions, a distribution no reachable source serves).
    """
    if check:
        _refuse(
            ctx,
            "hashes",
            "index_url",
            "extra_index_url",
            "find_links",
            "allow_unlocked",
            "trust_manifest_index",
            mode="--check",
        )
        _check(path, python, fmt, output, junit, fail_on, policy, no_policy, verbose, timeout, quiet)
        return
    _refuse(
        ctx,
        "python",
        "fmt",
        "junit",
        "fail_on",
        "policy",
        "no_policy",
        "verbose",
        mode="writing a lock (they go with --check)",
    )
    _write(
        path,
        output,
        hashes,
        index_url,
        extra_index_url,
        find_links,
        allow_unlocked,
        timeout,
        quiet,
        trust_manifest_index=trust_manifest_index,
    )


def _refuse(ctx: typer.Context, *params: str, mode: str) -> None:
    """Refuse the options of the other mode given on the command line. One set in the environment
    (``ENVCHECK_PYTHON``, ``ENVCHECK_FORMAT`` in a CI job) is meant for the commands it applies to."""
    used = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name in params else None
        if source is not None and source.name == "COMMANDLINE":
            used.append(param.opts[0] if param.opts else str(param.name))
    if used:
        raise UsageError(f"{', '.join(used)} cannot be used when {mode}", tip="See `envcheck lock --help`.")


def _write(
    path: Path,
    output: str | None,
    hashes: bool,
    index_url: str | None,
    extra_index_url: list[str] | None,
    find_links: list[str] | None,
    allow_unlocked: bool,
    timeout: float,
    quiet: bool = False,
    *,
    trust_manifest_index: bool = False,
) -> None:
    from envcheck.commands._common import write_output
    from envcheck.core.escape import one_line
    from envcheck.core.outputs import destination
    from envcheck.lock.compile import LockOptions
    from envcheck.lock.compile import lock as compile_lock
    from envcheck.manifest.io import load

    target = destination(output)  # a bad -o fails now, not after pip-compile's seconds
    options = LockOptions(
        hashes=hashes,
        index_url=index_url,
        extra_index_urls=tuple(extra_index_url or ()),
        find_links=tuple(find_links or ()),
        allow_unlocked=allow_unlocked,
        trust_manifest_index=trust_manifest_index,
        timeout=timeout,
    )
    from envcheck.commands.progress import progress

    manifest = load(path)
    with progress("lock", quiet=quiet) as step:
        if step is not None:
            step("pip-compile")
        result = compile_lock(
            manifest, str(path), options, warn=lambda line: typer.echo(one_line(f"warning: {line}"), err=True)
        )
    for left in result.unlocked:
        typer.echo(one_line(f"left out: {left.name}=={left.version}: {left.reason}"), err=True)
    for added in result.added:
        typer.echo(one_line(f"added: {added.name}=={added.version}: {added.why}"), err=True)
    write_output(result.text, target)


def _check(
    path: Path,
    python: str | None,
    fmt: ReportFormatChoice,
    output: str | None,
    junit: Path | None,
    fail_on: Severity,
    policy: Path | None,
    no_policy: bool,
    verbose: bool,
    timeout: float,
    quiet: bool = False,
) -> None:
    from envcheck.app import flows
    from envcheck.collect.launch import SnapshotOptions
    from envcheck.collect.snapshot import take_snapshot
    from envcheck.commands import slips
    from envcheck.commands.diff import load_rules_policy
    from envcheck.commands.progress import progress
    from envcheck.lock.check import compare, parse_lock, read_lock
    from envcheck.lock.rules import RULE_IDS
    from envcheck.manifest.requirements import marker_environment

    check_outputs(output, junit)
    rules_policy = load_rules_policy(policy, no_policy)
    parsed = parse_lock(read_lock(str(path)), str(path))  # a bad lock is refused before the target starts
    # The static part is enough: names and versions are read from the metadata, nothing is imported.
    with progress("lock --check", quiet=quiet) as step:
        live = take_snapshot(
            SnapshotOptions(python=python, probe=False, verify=False, timeout=min(timeout, 120)),
            progress=step,
        )
    locked = parsed.for_interpreter(marker_environment(live))
    title = f"envcheck lock --check: {slips.live_name(live.python.executable)} against {path}"
    report = flows.finish(title, compare(locked, live, python=python), rules_policy, rules=RULE_IDS)
    torch_pin = next((pin for pin in locked.pins if pin.name == "torch"), None)
    slip = slips.wrong_interpreter(
        python=python,
        executable=live.python.executable,
        reference=str(path),
        reference_torch=(torch_pin.version or "(a direct reference)") if torch_pin else None,
        has_torch=any(d.name.lower() == "torch" for d in live.packages),
    )
    if slip is not None:
        slip.say()
        report = slip.titled(report)
    options = report_options(
        fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=MATCHES
    )
    report_findings(report, options)
