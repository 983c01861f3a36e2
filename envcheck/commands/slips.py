"""The slips of a first hour now live in ``envcheck.api._common`` (what to say, and the report's title
note) and ``envcheck.commands._common.say`` (saying it). These names stay for lock --check until it calls
the API itself."""

from __future__ import annotations

import dataclasses

import typer

from envcheck.api._common import WrongInterpreter as Slip
from envcheck.api._common import interpreter_path, live_name
from envcheck.api._common import wrong_interpreter as find_slip

__all__ = ["WrongInterpreter", "interpreter_path", "live_name", "wrong_interpreter"]


@dataclasses.dataclass(frozen=True, kw_only=True, slots=True)
class WrongInterpreter(Slip):
    """``envcheck.api._common.WrongInterpreter`` that says itself on stderr."""

    def say(self) -> None:
        for line in self.lines:
            typer.echo(line, err=True)


def wrong_interpreter(
    *, python: str | None, executable: str, reference: str, reference_torch: str | None, has_torch: bool
) -> WrongInterpreter | None:
    slip = find_slip(
        python=python,
        executable=executable,
        reference=reference,
        reference_torch=reference_torch,
        has_torch=has_torch,
    )
    return (
        None
        if slip is None
        else WrongInterpreter(**{f.name: getattr(slip, f.name) for f in dataclasses.fields(slip)})
    )
