"""``envcheck rules``: the rule catalog, or one rule explained."""

from __future__ import annotations

from difflib import get_close_matches
from typing import Annotated

import typer

from envcheck import api
from envcheck.commands._common import handles_errors
from envcheck.core.errors import UsageError
from envcheck.report.catalog import catalog_text, rule_text


@handles_errors
def rules(
    rule_id: Annotated[
        str | None, typer.Argument(metavar="[ID]", help="A rule id to explain (default: list them all).")
    ] = None,
) -> None:
    """The rule catalog (every id any command emits), or one rule explained with its evidence."""
    every = api.rules()
    if rule_id is None:
        typer.echo(catalog_text(every, api.FAMILY_MODULES))
        return
    rule = api.get_rule(rule_id)
    if rule is None:
        close = get_close_matches(rule_id.strip().upper(), [r.id for r in every], n=1)
        tip = f"Did you mean {close[0]}? " if close else ""
        raise UsageError(f"no rule {rule_id!r}", tip=tip + "`envcheck rules` lists every rule id.")
    typer.echo(rule_text(rule))
