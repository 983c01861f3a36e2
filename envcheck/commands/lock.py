"""``envcheck lock``: write a pip-tools requirements lock from a manifest, or ``--check`` one."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors, report_findings, say_told, write_output
from envcheck.commands.options import (
    ExtraIndexUrlOption,
    FailOnOption,
    FindLinksOption,
    FormatOption,
    IndexUrlOption,
    JunitOption,
    NoPolicyOption,
    PolicyOption,
    PythonOption,
    QuietOption,
    TimeoutOption,
    VerboseOption,
    report_options,
)
from envcheck.commands.progress import progress
from envcheck.core.errors import UsageError
from envcheck.core.escape import one_line
from envcheck.core.outputs import destination
from envcheck.report.formats import FormatName

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
    index_url: IndexUrlOption = None,
    extra_index_url: ExtraIndexUrlOption = None,
    find_links: FindLinksOption = None,
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
    fmt: FormatOption = FormatName.text,
    junit: JunitOption = None,
    fail_on: FailOnOption = "error",
    policy: PolicyOption = None,
    no_policy: NoPolicyOption = False,
    verbose: VerboseOption = False,
    timeout: TimeoutOption = 600.0,
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
        _refuse(ctx, WRITING_ONLY, mode="--check")
        options = report_options(
            fmt, output, fail_on=fail_on, junit=junit, verbose=verbose, nothing_found=MATCHES
        )
        rules_policy = api.load_policy(policy, disabled=no_policy)
        with progress("lock --check", quiet=quiet) as step:
            checked = api.check_lock(
                path, python=python, policy=rules_policy, timeout=timeout, progress=step, tell=say_told
            )
        report_findings(checked.report, options)
        return
    _refuse(ctx, CHECKING_ONLY, mode="writing a lock (they go with --check)")
    target = destination(output)  # a bad -o fails now, not after pip-compile's seconds
    with progress("lock", quiet=quiet) as step:
        written = api.lock(
            path,
            hashes=hashes,
            index_url=index_url,
            extra_index_urls=extra_index_url or (),
            find_links=find_links or (),
            allow_unlocked=allow_unlocked,
            trust_manifest_index=trust_manifest_index,
            timeout=timeout,
            warn=lambda line: _say(f"warning: {line}"),
            progress=step,
        )
    for left in written.unlocked:
        _say(f"left out: {left.name}=={left.version}: {left.reason}")
    for added in written.added:
        _say(f"added: {added.name}=={added.version}: {added.why}")
    write_output(written.text, target)


# The options of one mode, refused in the other.
WRITING_ONLY = (
    "hashes",
    "index_url",
    "extra_index_url",
    "find_links",
    "allow_unlocked",
    "trust_manifest_index",
)
CHECKING_ONLY = ("python", "fmt", "junit", "fail_on", "policy", "no_policy", "verbose")


def _refuse(ctx: typer.Context, params: tuple[str, ...], *, mode: str) -> None:
    """Refuse the options of the other mode given on the command line. One set in the environment
    (``ENVCHECK_PYTHON``, ``ENVCHECK_FORMAT`` in a CI job) is meant for the commands it applies to."""
    used = []
    for param in ctx.command.params:
        source = ctx.get_parameter_source(param.name) if param.name in params else None
        if source is not None and source.name == "COMMANDLINE":
            used.append(param.opts[0] if param.opts else str(param.name))
    if used:
        raise UsageError(f"{', '.join(used)} cannot be used when {mode}", tip="See `envcheck lock --help`.")


def _say(line: str) -> None:
    """One line on stderr, escaped for the terminal (its values come from the manifest, pip or the lock)."""
    typer.echo(one_line(line), err=True)
