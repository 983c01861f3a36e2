"""``envcheck.api.lock`` and ``envcheck.api.check_lock``: write a requirements lock from a manifest, and
check an environment against one."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envcheck.api._common import Progress, live_name, public, slipped, wrong_interpreter
from envcheck.app import flows
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.diff.policy import Policy
from envcheck.lock.check import compare, parse_lock, read_lock
from envcheck.lock.compile import Lock, LockOptions
from envcheck.lock.compile import lock as compile_lock
from envcheck.lock.rules import RULE_IDS
from envcheck.manifest.io import load
from envcheck.manifest.requirements import marker_environment

if TYPE_CHECKING:
    from envcheck.lock.check import LockFile
    from envcheck.manifest.model import Manifest
    from envcheck.report import Report

__all__ = ["LockCheck", "check_lock", "lock"]


def _ignore(_line: str) -> None:
    """The callback that is told nothing: no warning or progress line is shown."""


@public
def lock(
    manifest: Path | str,
    *,
    hashes: bool = False,
    index_url: str | None = None,
    extra_index_urls: Sequence[str] = (),
    find_links: Sequence[str] = (),
    allow_unlocked: bool = False,
    trust_manifest_index: bool = False,
    timeout: float = 600.0,
    warn: Callable[[str], None] | None = None,
    progress: Progress | None = None,
) -> Lock:
    """The requirements lock that rebuilds ``manifest``'s environment, compiled by pip-tools
    (``envcheck lock``): ``Lock.text`` is the lock, ``unlocked`` what ``allow_unlocked`` left out,
    ``added`` what pip-compile added that the environment lacked. ``warn`` is told each problem that does
    not stop the lock (an unreachable index, a manifest of another platform); ``progress`` each step.
    ``timeout``: seconds for every pip-compile run together.

    Raises ``ManifestError`` for a manifest that does not load, ``LockError`` for one that cannot be
    locked, ``DeadlineExpired`` at the timeout (each an ``EnvcheckError``)."""
    options = LockOptions(
        hashes=hashes,
        index_url=index_url,
        extra_index_urls=tuple(extra_index_urls),
        find_links=tuple(find_links),
        allow_unlocked=allow_unlocked,
        trust_manifest_index=trust_manifest_index,
        timeout=timeout,
    )
    source = load(manifest)
    if progress is not None:
        progress("pip-compile")
    return compile_lock(source, str(manifest), options, warn=warn or _ignore)


@dataclass(frozen=True, kw_only=True, slots=True)
class LockCheck:
    """What ``check_lock`` found: the ``report`` (LOCK-* findings, the policy applied; its title notes an
    interpreter without torch checked against a lock with torch), the live
    environment's manifest (``live``, static part only), the lock's pins for its interpreter
    (``locked``), the version the lock pins torch at (``reference_torch``: ``None`` without torch, ``(a
    direct reference)`` for a URL pin), and how many findings each rule raised (``counts``)."""

    report: Report
    live: Manifest
    locked: LockFile
    reference_torch: str | None
    counts: dict[str, int]

    @property
    def matches(self) -> bool:
        """True when the environment is exactly the lock (no finding before the policy is applied)."""
        return not self.counts


@public
def check_lock(
    lock: Path | str,
    *,
    python: str | None = None,
    policy: Policy | None = None,
    timeout: float = 600.0,
    progress: Progress | None = None,
    tell: Progress | None = None,
) -> LockCheck:
    """Compare the environment of ``python`` (default: this interpreter) with the requirements ``lock``
    (``envcheck lock --check``): names, full versions with local labels, nothing missing, nothing extra.
    The lock is read and parsed before the interpreter starts; the snapshot is static (metadata only,
    nothing imported) and gets ``min(timeout, 120)`` seconds. ``policy`` (``load_policy``; None: none) is
    applied to the findings; ``counts`` are taken before it. An interpreter without torch checked against
    a lock with torch (most often envcheck's own, ``python`` forgotten) is noted in the report's title and
    told to ``tell``.

    Raises ``LockFileError`` for a lock that is missing, unreadable or not a lock, ``ProbeError`` and
    friends for an interpreter that cannot be inspected (each an ``EnvcheckError``)."""
    parsed = parse_lock(read_lock(str(lock)), str(lock))
    live = take_snapshot(
        SnapshotOptions(python=python, probe=False, verify=False, timeout=min(timeout, 120)),
        progress=progress,
    )
    locked = parsed.for_interpreter(marker_environment(live))
    found = compare(locked, live, python=python)
    title = f"envcheck lock --check: {live_name(live.python.executable)} against {lock}"
    torch_pin = next((pin for pin in locked.pins if pin.name == "torch"), None)
    reference_torch = (torch_pin.version or "(a direct reference)") if torch_pin else None
    slip = wrong_interpreter(
        python=python,
        executable=live.python.executable,
        reference=str(lock),
        reference_torch=reference_torch,
        has_torch=any(d.name.lower() == "torch" for d in live.packages),
    )
    return LockCheck(
        report=slipped(flows.finish(title, found, policy or Policy(), rules=RULE_IDS), slip, tell),
        live=live,
        locked=locked,
        reference_torch=reference_torch,
        counts=dict(Counter(f.rule for f in found)),
    )
