"""Every option type of the command line, in one place, and ``report_options``: the parsed report options
as the one ``ReportOptions`` value the report layer takes::

    from envcheck.commands.options import FailOnOption, FormatOption, OutputOption, report_options

    def doctor(..., fmt: FormatOption = FormatName.text, output: OutputOption = None,
               fail_on: FailOnOption = "error", ...) -> None:
        options = report_options(fmt, output, fail_on=fail_on, junit=junit, verbose=verbose)

``--fail-on`` parses straight into a ``Severity`` (``error|warning|info``, any case).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any

import typer

from envcheck.api import checked_timeout
from envcheck.core.errors import EnvcheckError, UsageError
from envcheck.core.findings import Severity
from envcheck.core.outputs import destination
from envcheck.report.formats import FormatName
from envcheck.report.options import ReportOptions, decide

try:  # typer 0.22+ carries its own copy of click
    from typer._click.globals import get_current_context
except ImportError:  # pragma: no cover - older typer: click itself
    from click import get_current_context  # type: ignore[no-redef]

FormatOption = Annotated[
    FormatName,
    typer.Option("--format", "-f", help="Report format.", envvar="ENVCHECK_FORMAT", case_sensitive=False),
]
OutputOption = Annotated[
    str | None,
    typer.Option(
        "--output",
        "-o",
        help="Write the report to this file (default: stdout). Without --format, a .json, .md, .html or "
        ".xml (JUnit) suffix picks the format.",
        show_default=False,
    ),
]
FailOnOption = Annotated[
    Severity,
    typer.Option(
        "--fail-on",
        help="Exit 1 when a finding at or above this severity exists (intended ones never fail).",
        envvar="ENVCHECK_FAIL_ON",
        case_sensitive=False,
    ),
]
PolicyOption = Annotated[
    Path | None,
    typer.Option(
        "--policy",
        help="Policy TOML (ignore / severity / intended). Default: [tool.envcheck] in ./pyproject.toml.",
        envvar="ENVCHECK_POLICY",
        show_default=False,
    ),
]
NoPolicyOption = Annotated[
    bool,
    typer.Option(
        "--no-policy",
        help="Apply no policy: neither --policy nor [tool.envcheck] in ./pyproject.toml.",
    ),
]
VerboseOption = Annotated[
    bool,
    typer.Option(
        "--verbose",
        "-v",
        help="Show every finding in full (the text report otherwise fits about one screen: root causes "
        "first, a few of their consequences each).",
    ),
]
QuietOption = Annotated[
    bool,
    typer.Option("--quiet", "-q", help="No progress line on stderr (it shows only on a terminal anyway)."),
]
JunitOption = Annotated[
    Path | None,
    typer.Option("--junit", help="Also write a JUnit XML report to this file.", show_default=False),
]
RemediesOption = Annotated[
    Path | None,
    typer.Option(
        "--remedies",
        help="Also write the root causes' remedies as one script for this environment: FILE.sh (POSIX "
        "shell) or FILE.ps1 (PowerShell). Read it, then run it: envcheck never does.",
        show_default=False,
    ),
]
PythonOption = Annotated[
    str | None,
    typer.Option(
        "--python",
        help="Interpreter to inspect (default: this one). envcheck need not be installed there.",
        envvar="ENVCHECK_PYTHON",
        show_default=False,
    ),
]


def timeout_in_range(low: float = 0.0) -> Callable[[float], float]:
    """The callback of a ``--timeout`` option: refuses at parse, in one line, seconds that are not a
    finite number from ``low`` (0: more than 0) to ``MAX_TIMEOUT_S`` (``envcheck.api._common``): ``inf``,
    ``nan``, ``1e12``, a negative number. Every command's ``--timeout`` takes it."""

    def check(value: float) -> float:
        try:
            return checked_timeout(value, "", low=low)
        except EnvcheckError as e:
            raise typer.BadParameter(str(e).strip()) from None

    return check


TimeoutOption = Annotated[
    float,
    typer.Option(
        "--timeout",
        callback=timeout_in_range(1.0),
        help="A hard deadline in seconds for the whole command: all its work in the target (whose process "
        "session is killed at it), every pip, uv or pip-compile run, download and scan, and its own hashing "
        "and rules. At it the command stops, names what it was doing and exits 2.",
        envvar="ENVCHECK_TIMEOUT",
    ),
]

# lock and predict: where distributions come from, as pip's own options.
IndexUrlOption = Annotated[
    str | None,
    typer.Option(
        "--index-url", help="The package index to use instead of pip's configured one.", show_default=False
    ),
]
ExtraIndexUrlOption = Annotated[
    list[str] | None,
    typer.Option(
        "--extra-index-url",
        help="Another index to search (repeatable): e.g. the PyTorch wheel index of a +cpu or +cu130 build.",
        show_default=False,
    ),
]
FindLinksOption = Annotated[
    list[str] | None,
    typer.Option("--find-links", help="A folder or page of wheels (repeatable).", show_default=False),
]

# verify and gate
ChecksOption = Annotated[
    Path | None,
    typer.Option(
        "--checks",
        help="A Python file of your own check_* functions (e.g. your model's forward pass on a fixed input): "
        "snapshot records their outputs as goldens, verify and gate compare with them.",
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
ImportOption = Annotated[
    list[str] | None,
    typer.Option(
        "--import",
        help="An entry module of your application (repeatable): snapshot records it in the manifest; verify "
        "and gate import it in the target, after every installed module with native code (its import runs "
        "your code).",
        show_default=False,
    ),
]
NoImportsOption = Annotated[
    bool,
    typer.Option(
        "--no-imports",
        help="Do not import the installed modules with native code nor the application's (--import).",
    ),
]

AgainstOption = Annotated[
    Path | None,
    typer.Option(
        "--against",
        help="The manifest to compare with: verify compares with its goldens; cluster diffs every rank "
        "against it (default: the job's majority environment).",
        show_default=False,
    ),
]

# snapshot
ManifestOutputOption = Annotated[
    str, typer.Option("-o", "--output", help="Manifest file to write, or - for stdout.")
]
ImageOption = Annotated[
    Path | None,
    typer.Option(
        "--image",
        help=(
            "A container image to read statically instead of an interpreter: an OCI layout folder, an OCI "
            "archive or a `docker save` tarball. Nothing in it runs; no daemon is needed."
        ),
        show_default=False,
    ),
]
ImagePythonOption = Annotated[
    str | None,
    typer.Option(
        "--image-python",
        help="With --image: the interpreter, a path inside the image (default: its Entrypoint, Cmd or PATH).",
        show_default=False,
    ),
]
ImagePlatformOption = Annotated[
    str | None,
    typer.Option(
        "--image-platform",
        help="With --image: which image of a multi-platform index, as OS/ARCH (default linux/amd64).",
        show_default=False,
    ),
]
LabelOption = Annotated[str | None, typer.Option(help="A name for this environment (dev, prod-eu, ...).")]
NoProbeOption = Annotated[
    bool,
    typer.Option(
        "--no-probe",
        help=(
            "Static facts only: the target is started but imports nothing (no torch, no smoke suite); a "
            "compiler that CC, CXX or CUDACXX names answers --version (2 s each, never compiles)."
        ),
    ),
]
RedactPathsOption = Annotated[
    bool, typer.Option("--redact-paths", help="Replace your home folder and user name in every path.")
]
VerifyFilesOption = Annotated[
    bool, typer.Option("--verify-files", help="Re-hash installed native files against their RECORD.")
]
NoVerifyOption = Annotated[
    bool,
    typer.Option(
        "--no-verify",
        help="Do not run the smoke suite (snapshot: the manifest holds no goldens; cluster: each rank's "
        "snapshot and the collectives only).",
    ),
]
ForceOption = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Replace the output file even when it holds another environment's manifest (another "
        "interpreter, host or label) or is not a manifest at all.",
    ),
]


# What an empty report says: about one environment (doctor, verify), and the gate's, which is both a diff
# and a doctor (a diff alone says "No differences that matter", the report layer's default).
NO_PROBLEMS = "No problems found."
NOTHING_FOUND = "No differences that matter, and no problems found."


def current_context() -> Any:
    """The click context of the command running now (``params``, ``get_parameter_source``), or None
    (called outside a command line)."""
    return get_current_context(silent=True)


def format_given() -> bool:
    """Whether --format / -f was on the command line of the command running now (not its default, not
    ``ENVCHECK_FORMAT``: a CI job's default that the file's suffix overrides)."""
    ctx = current_context()
    if ctx is None or "fmt" not in ctx.params:
        return False
    source = ctx.get_parameter_source("fmt")
    return source is not None and source.name == "COMMANDLINE"


def report_options(
    fmt: FormatName,
    output: str | None,
    *,
    fail_on: Severity = "error",
    junit: Path | None = None,
    verbose: bool = False,
    nothing_found: str | None = None,
    remedies: Path | None = None,
) -> ReportOptions:
    """The report's options from the parsed ones, checked now, before the seconds of work whose result
    they would receive: a --format that contradicts ``-o``'s suffix (``UsageError``), a bad ``-o`` or
    ``--junit`` (a missing folder, a folder, a socket...: ``OutputError``)."""
    options = decide(
        fmt,
        output,
        fail_on=fail_on,
        junit=junit,
        verbose=verbose,
        nothing_found=nothing_found,
        format_given=format_given(),
        remedies=remedies,
    )
    destination(output)
    if junit is not None:
        destination(junit)
        if output not in (None, "-") and _same_file(output, junit):
            raise UsageError(
                f"-o {output} and --junit {junit} name the same file: one report would replace the other",
                tip="Give the JUnit report a file of its own, e.g. --junit report.xml.",
            )
    if remedies is not None:
        # Lazy: the script's writer loads only for --remedies.
        from envcheck.report.remedies import script_shell

        script_shell(remedies)
        destination(remedies)
        for other, flag in ((output, "-o"), (junit, "--junit")):
            if other is not None and other != "-" and _same_file(other, remedies):
                raise UsageError(f"{flag} {other} and --remedies {remedies} name the same file")
    return options


def _same_file(a: str | Path, b: str | Path) -> bool:
    """Whether two output paths end at the same file: resolved, links included (an existing file also
    by device and inode: a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return Path(a).samefile(b)
    except OSError:
        return False
