"""``envcheck.api.cluster_check``: every rank of a torchrun job checked, one report on rank 0."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import name, public
from envcheck.cluster import rank
from envcheck.cluster.report import build
from envcheck.cluster.store import Rendezvous
from envcheck.core.errors import UsageError
from envcheck.diff.policy import Policy
from envcheck.manifest.io import load

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest
    from envcheck.report import Report

__all__ = ["cluster_check", "rank_of_job"]


def rank_of_job(environ: Mapping[str, str] | None = None) -> int:
    """This process's rank in the distributed job torchrun started (``RANK``, ``WORLD_SIZE``,
    ``MASTER_ADDR``...); ``UsageError`` outside one."""
    try:
        return Rendezvous.from_environ(dict(environ) if environ is not None else None).rank
    except ValueError as e:
        raise UsageError(
            f"not a rank of a distributed job: {e}",
            tip="Launch it with torchrun: `torchrun --nproc-per-node=2 -m envcheck.cluster`.",
        ) from e


@public
def cluster_check(
    *,
    against: Path | str | None = None,
    verify: bool = True,
    timeout: float = 300.0,
    policy: Policy | Callable[[], Policy] | None = None,
) -> Report | None:
    """Check this rank of a torchrun job (``envcheck cluster``): it snapshots its environment, runs the
    smoke suite on its device (``verify``) and the collectives, and sends everything to rank 0. Rank 0
    returns the job's report (each environment diffed against ``against`` or the majority, ranks that
    died, hung or lack torch); every other rank returns ``None`` once its results are sent.

    ``policy`` is rank 0's: a callable is called on rank 0 only, before any work starts (a command checks
    its outputs and reads its policy file there), as is ``against`` loaded. ``timeout``: the job's
    deadline in seconds. Raises ``UsageError`` outside a distributed job, ``ManifestError`` for an
    ``against`` that does not load, on rank 0 (each an ``EnvcheckError``)."""
    reference: tuple[str, Manifest] | None = None
    rules_policy: Policy | None = None
    if rank_of_job() == 0:
        rules_policy = policy() if callable(policy) else policy or Policy()
        if against is not None:
            base = load(against)
            reference = (name(against, base), base)
    gathered = rank.run(rank.RankOptions(timeout=timeout, verify=verify))
    if gathered is None or rules_policy is None:
        return None
    return build(gathered.view(), reference, rules_policy)
