"""The pytest plugin: ``pytest --envcheck=MANIFEST`` adds the deployment gate's checks to a test run.

Registered as the ``envcheck`` entry point of the ``pytest11`` group, so every pytest run in an environment
with envcheck installed loads it (``-p no:envcheck`` keeps it out). Without ``--envcheck`` it adds options
and nothing else: this package's ``__init__`` (the hooks) imports only pytest at load time; the gate
(``envcheck.pytest_plugin.gate``, which speaks only to ``envcheck.api``) loads once the option is given.

With ``--envcheck=MANIFEST`` the run gets, in front of its own tests:

- ``envcheck::family::<name>``, one item per rule family of the catalog (packages, torch, native, ...): it
  fails when a finding of that family is at or above ``--envcheck-fail-on``, showing each finding's message
  and remedy;
- ``envcheck::check::<name>``, one item per smoke check the manifest holds a golden for: it fails like a
  family item, and is skipped, with the reason, when the check was skipped here;
- ``envcheck::smoke-suite``: what belongs to no single check (a manifest without goldens, a check that has
  no golden), so that every finding of the gate lands in exactly one item.

The gate runs once, when the first of these items runs (``--collect-only`` runs nothing): the same flow as
``envcheck gate MANIFEST --python PY`` (a live snapshot and the smoke suite, side by side, then
``envcheck.app.flows.gate``). A manifest or policy that cannot be read is a usage error before any test runs.
Under pytest-xdist each worker runs the gate once for the items it receives.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from envcheck.pytest_plugin.gate import Gate  # noqa: F401 (the stash key's type, named as a string)

FAIL_ON = ("error", "warning", "info")


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("envcheck", "envcheck deployment gate")
    group.addoption(
        "--envcheck",
        metavar="MANIFEST",
        default=None,
        help="Add the deployment gate's checks (envcheck gate MANIFEST) as test items: one per rule family "
        "and one per smoke check.",
    )
    group.addoption(
        "--envcheck-python",
        metavar="PY",
        default=None,
        help="The interpreter whose environment is gated (default: the one running pytest).",
    )
    group.addoption(
        "--envcheck-fail-on",
        metavar="SEVERITY",
        choices=FAIL_ON,
        default="error",
        help="The lowest severity of a finding that fails its item: error (default), warning or info.",
    )
    group.addoption(
        "--envcheck-policy",
        metavar="FILE",
        default=None,
        help="A policy file (TOML) as for `envcheck gate --policy` (default: [tool.envcheck] of "
        "./pyproject.toml, if any).",
    )
    group.addoption(
        "--envcheck-timeout",
        metavar="SECONDS",
        type=float,
        default=120.0,
        help="A hard deadline for all work in the gated interpreter, as `envcheck gate --timeout`.",
    )


_GATE = pytest.StashKey["Gate"]()


def pytest_configure(config: pytest.Config) -> None:
    manifest = config.getoption("envcheck")
    if manifest is None:
        return
    # Lazy: pytest loads this plugin in every session; envcheck only once --envcheck is given.
    from envcheck.pytest_plugin.gate import Gate

    config.stash[_GATE] = Gate.prepare(
        Path(manifest),
        python=config.getoption("envcheck_python"),
        fail_on=config.getoption("envcheck_fail_on"),
        policy=config.getoption("envcheck_policy"),
        timeout=config.getoption("envcheck_timeout"),
    )


@pytest.hookimpl(tryfirst=True)  # before -k / -m / --deselect filter the items
def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list[Any]) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None:
        items[:0] = gate.items(session)


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    gate = config.stash.get(_GATE, None)
    if gate is not None and gate.summary is not None:
        terminalreporter.write_line(gate.summary)
