"""``envcheck.api.load_policy``: the policy every report applies (``--policy FILE``, else
``[tool.envcheck]`` of ./pyproject.toml, else none)."""

from __future__ import annotations

from pathlib import Path

from envcheck.api._common import public
from envcheck.app.catalog import rule_ids
from envcheck.diff.policy import Policy
from envcheck.diff.policy import load_policy as read_policy

__all__ = ["Policy", "load_policy"]


@public
def load_policy(
    path: Path | str | None = None, *, disabled: bool = False, project: Path | None = None
) -> Policy:
    """The policy at ``path`` (a TOML file: ``ignore``, ``[severity]``, ``[[intended]]``, ``imports``...);
    without one, ``[tool.envcheck]`` of ``project``'s pyproject.toml (default: the current folder's);
    without that, the empty policy. ``disabled`` (``--no-policy``) reads nothing and returns a policy that
    says so in every report. Every rule id the policy names must be one of ``envcheck rules``.

    Raises ``UsageError`` naming the file (and the line or key) for a policy that cannot be read or holds
    a wrong entry, and for ``path`` given together with ``disabled``."""
    return read_policy(
        None if path is None else Path(path),
        Path.cwd() if project is None else project,
        disabled=disabled,
        known_rules=rule_ids(),
    )
