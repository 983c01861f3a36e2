"""The command line. Each command lives in ``envcheck.commands.*``: parse its options, call
``envcheck.api``, render, exit code.

A run imports the one command module it names (``COMMANDS``), and that module only what its job needs, so
``envcheck --version`` and the start of ``envcheck snapshot`` stay fast.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Collection
from typing import Annotated, Any

import typer
import typer.core

from envcheck import __version__
from envcheck.process import sessions

# Each command: its module in ``envcheck.commands`` and the function there. A run builds the app with the
# one command it names (typer turns every registered command's signature into click options: a tenth of
# a diff's time for all of them), and imports no other command's module; help and the tests get them all.
COMMANDS: dict[str, tuple[str, str]] = {
    "snapshot": ("snapshot", "snapshot"),
    "show": ("snapshot", "show"),
    "scan": ("scan", "scan"),
    "diff": ("diff", "diff"),
    "doctor": ("diff", "doctor"),
    "rules": ("rules", "rules"),
    "verify": ("verify", "verify"),
    "gate": ("verify", "gate"),
    "lock": ("lock", "lock"),
    "predict": ("predict", "predict"),
    "cluster": ("cluster", "cluster"),
    "export": ("export", "export"),
}

# The top-level help's one line per command: a whole sentence each, short enough not to wrap.
SHORT_HELP: dict[str, str] = {
    "snapshot": "Record an environment into a manifest (envcheck.lock.json).",
    "show": "Print a readable summary of a manifest.",
    "scan": "Resolve the native libraries of a wheel or a folder.",
    "diff": "Explain what differs from a base manifest, with remedies.",
    "doctor": "Find the traps in one environment that need no baseline.",
    "rules": "List the rules, or explain one.",
    "verify": "Run the smoke suite, or compare it with a manifest's goldens.",
    "gate": "Diff this environment against a manifest and verify it.",
    "lock": "Write a requirements lock from a manifest, or check one.",
    "predict": "Predict a manifest's environment on another platform.",
    "cluster": "Check every rank of a torchrun job.",
    "export": "Write a manifest as an SBOM (CycloneDX).",
}

# Every command takes -h as --help.
CONTEXT_SETTINGS: dict[str, Any] = {"help_option_names": ["-h", "--help"]}

# How an option's value is named in every --help, by the option's parameter name; any other option's
# value is its name in capitals, a choice's value its choices (text|json|...).
OPTION_METAVARS: dict[str, str] = {
    "python": "PYTHON",
    "output": "FILE",
    "junit": "FILE",
    "policy": "FILE",
    "checks": "FILE",
    "save": "FILE",
    "against": "MANIFEST",
    "timeout": "SECONDS",
    "import_": "MODULE",
    "index_url": "URL",
    "extra_index_url": "URL",
    "find_links": "PATH|URL",
    "platforms": "TAG",
    "python_version": "X.Y",
    "implementation": "NAME",
}


class Command(typer.core.TyperCommand):
    """A command whose --help names values one way: arguments in capitals (MANIFEST, LOCK, PATH), bare
    in the usage line ([MANIFEST] when optional), options as ``OPTION_METAVARS`` says."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for param in self.params:
            if isinstance(param, typer.core.TyperArgument):
                if param.metavar is None:
                    param.metavar = (param.name or "").upper() + ("..." if param.nargs != 1 else "")
            elif isinstance(param, typer.core.TyperOption) and not param.is_flag and param.metavar is None:
                choices = getattr(param.type, "choices", None)
                if choices:
                    param.metavar = "|".join(str(getattr(c, "value", c)) for c in choices)
                else:
                    param.metavar = OPTION_METAVARS.get(param.name or "", (param.name or "").upper())

    def collect_usage_pieces(self, ctx: Any) -> list[str]:
        pieces: list[str] = super().collect_usage_pieces(ctx)
        return [p[1:-1] if p.startswith("{") and p.endswith("}") else p for p in pieces]


def _version(value: bool) -> None:
    if value:
        typer.echo(f"envcheck {__version__}")
        raise typer.Exit(0)


def _root(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    """Exit codes: 0 clean, 1 findings at or above --fail-on, 2 usage or input error."""


def build(names: Collection[str] | None = None) -> typer.Typer:
    """The command line with the commands ``names`` (default: all of them, in their order)."""
    app = typer.Typer(
        name="envcheck",
        help="Stop PyTorch deployments from breaking on machines that differ from the dev box.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings=CONTEXT_SETTINGS,
    )
    app.callback()(_root)
    for name, (module, function) in COMMANDS.items():
        if names is None or name in names:
            app.command(name, cls=Command, short_help=SHORT_HELP[name], context_settings=CONTEXT_SETTINGS)(
                getattr(importlib.import_module(f"envcheck.commands.{module}"), function)
            )
    return app


def __getattr__(name: str) -> Any:
    """``envcheck.cli.app``: the whole command line, built on first use."""
    if name == "app":
        app = globals()["app"] = build()
        return app
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def main() -> None:
    """The console script. Once the command has finished and its output is flushed, the interpreter's
    teardown only frees objects (two decoded manifests in a diff): skip it, as the exit code is known.

    Ctrl-C and SIGTERM end every target process and remove every registered temp folder at once (see
    ``envcheck.process.sessions``), then print ``interrupted`` and exit 130. The command is one job
    (``sessions.job``): on Linux envcheck is the subreaper of its targets' descendants and, at the end,
    kills every process still below it, so even a daemon that left a target's session ends with it.
    A manifest is only written at the very end, atomically, so an interrupt leaves the previous one as it
    was.
    """
    sessions.install_interrupt_handlers()
    command = sys.argv[1:2]
    # The whole process is envcheck's: whatever its targets and tools left below it ends with the job.
    with sessions.job(everything=True):
        try:
            # ``envcheck --version`` needs no command at all; ``--help`` and the unknown need every one.
            wanted = (
                () if command == ["--version"] else command if command and command[0] in COMMANDS else None
            )
            build(wanted)()
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
        # A target still registered here would outlive envcheck: none may.
        sessions.kill_all()
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except BrokenPipeError:  # `envcheck rules | head`: the reader left, nothing more to say
        pass
    os._exit(code)
