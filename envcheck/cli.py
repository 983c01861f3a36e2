"""The command line. Each command lives in ``envcheck.commands.*``: parse, call the core, format, exit code.

Heavy imports (the native parsers, rich tables) happen inside the commands, so ``envcheck --version`` and
the start of ``envcheck snapshot`` stay fast.
"""

from __future__ import annotations

from typing import Annotated

import typer

from envcheck import __version__
from envcheck.commands import cluster as cluster_commands
from envcheck.commands import diff as diff_commands
from envcheck.commands import export as export_commands
from envcheck.commands import lock as lock_commands
from envcheck.commands import predict as predict_commands
from envcheck.commands import scan as scan_commands
from envcheck.commands import snapshot as snapshot_commands
from envcheck.commands import verify as verify_commands

app = typer.Typer(
    name="envcheck",
    help="Stop PyTorch deployments from breaking on machines that differ from the dev box.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envcheck {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error."""


app.command("snapshot")(snapshot_commands.snapshot)
app.command("show")(snapshot_commands.show)
app.command("scan")(scan_commands.scan)
app.command("diff")(diff_commands.diff)
app.command("doctor")(diff_commands.doctor)
app.command("rules")(diff_commands.rules)
app.command("verify")(verify_commands.verify)
app.command("gate")(verify_commands.gate)
app.command("lock")(lock_commands.lock)
app.command("predict")(predict_commands.predict)
app.command("cluster")(cluster_commands.cluster)
app.command("export")(export_commands.export)


def main() -> None:
    """The console script. Once the command has finished and its output is flushed, the interpreter's
    teardown only frees objects (two decoded manifests in a diff): skip it, as the exit code is known.

    Ctrl-C and SIGTERM end every target process and remove every registered temp folder at once (see
    ``envcheck.probe.sessions``), then print ``interrupted`` and exit 130. On Linux envcheck is the
    subreaper of its targets' descendants, so even a daemon that left a target's session ends with it.
    A manifest is only written at the very end, atomically, so an interrupt leaves the previous one as it
    was.
    """
    import os
    import sys

    from envcheck.probe import sessions

    sessions.install_interrupt_handlers()
    sessions.adopt_orphans()
    try:
        app()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if isinstance(e.code, str):
            sys.stderr.write(e.code + "\n")
    except sessions.Interrupted:
        # Already done by the handler; again for anything registered while the main thread unwound.
        sessions.kill_all()
        sys.stderr.write("interrupted\n")
        code = sessions.EXIT_INTERRUPTED
    # A target still registered here, or a daemon one left behind, would outlive envcheck: none may.
    sessions.kill_all()
    sessions.kill_orphans()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `envcheck rules | head`: the reader left, nothing more to say
        pass
    os._exit(code)
