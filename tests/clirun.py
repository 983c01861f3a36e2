"""The CLI run in this process (typer's ``CliRunner``): one helper for the tests that read its exit code,
stdout and stderr. An exception the CLI did not turn into an exit code is raised, never read as exit 1."""

from __future__ import annotations

from typer.testing import CliRunner

from envcheck.cli import app


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str, str]:
    """``envcheck ARGS`` with ``env`` added to the environment: exit code, stdout, stderr."""
    result = CliRunner().invoke(app, list(args), env=env)
    if result.exception and not isinstance(result.exception, SystemExit):
        raise result.exception
    return result.exit_code, result.stdout, result.stderr
