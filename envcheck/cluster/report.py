"""Rank 0's report, a pure function of what it gathered: ranks grouped by environment, every environment
diffed once against the reference, the ranks that failed, and the collectives.

Grouping: the key of a rank's environment is the fleet diff's fingerprint of its manifest
(``envcheck.app.fleet.fingerprint``: a sha256 of the encoded manifest without its volatile fields), so
ranks that share one environment are decoded, diffed and reported once, as one group named by its ranks
(``node1:0-3``). The reference is ``--against MANIFEST`` or, by default, the job's majority environment
(a tie goes to a group whose ranks all imported torch and sent a snapshot, then to the lowest rank).
A variable that binds a rank to its own device (``CUDA_VISIBLE_DEVICES``, ...) differs between ranks by
design: it is compared by the number of devices it names.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from envcheck.app.catalog import get_rule, rule_ids
from envcheck.app.fleet import fingerprint
from envcheck.app.flows import finish, goldens, on_machine
from envcheck.core.errors import ManifestError
from envcheck.core.findings import Finding, MachineGroup
from envcheck.diff import engine
from envcheck.manifest.io import loads
from envcheck.manifest.query import views
from envcheck.verify.compare import compare, outcomes

if TYPE_CHECKING:
    from envcheck.app.flows import Report
    from envcheck.diff.policy import Policy
    from envcheck.manifest.model import Manifest


@dataclass(kw_only=True, slots=True)
class Environment:
    """Ranks sharing one environment: the manifest as compact JSON (decoded only once, at the end)."""

    fingerprint: str
    text: str
    ranks: list[tuple[str, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return ", ".join(rank_ranges(self.ranks))


@dataclass(kw_only=True, slots=True)
class Environments:
    """The environments seen so far, keyed by fingerprint: one manifest kept per environment, however
    many ranks share it."""

    by_key: dict[str, Environment] = field(default_factory=dict)

    def add(self, host: str, rank: int, manifest: Any) -> None:
        manifest = _per_rank_normalised(manifest)
        key = fingerprint(manifest)
        env = self.by_key.get(key)
        if env is None:
            text = json.dumps(manifest, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
            env = self.by_key[key] = Environment(fingerprint=key, text=text)
        env.ranks.append((host, rank))

    def ordered(self, troubled: Collection[int] = ()) -> list[Environment]:
        """Most ranks first; a tie goes to the environment none of whose ranks is ``troubled`` (could not
        import torch, ...), then to the one holding the lowest rank."""
        for env in self.by_key.values():
            env.ranks.sort(key=lambda hr: hr[1])
        return sorted(
            self.by_key.values(),
            key=lambda e: (-len(e.ranks), any(r in troubled for _, r in e.ranks), e.ranks[0][1]),
        )


# Launchers that bind each rank to its own GPU (SLURM --gpus-per-task, a wrapper per LOCAL_RANK) give every
# rank another value by design: what must agree between ranks is how many devices each one sees.
PER_RANK_VARIABLES = (
    "CUDA_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "ZE_AFFINITY_MASK",
)


def _per_rank_normalised(manifest: Any) -> Any:
    """The manifest with each per-rank device variable replaced by the number of devices it names."""
    env = manifest.get("env") if isinstance(manifest, dict) else None
    if not isinstance(env, dict) or not any(isinstance(env.get(k), str) for k in PER_RANK_VARIABLES):
        return manifest
    shown = dict(env)
    for name in PER_RANK_VARIABLES:
        value = env.get(name)
        if isinstance(value, str):
            count = len([v for v in value.split(",") if v.strip()])
            shown[name] = f"<{count} device{'s' if count != 1 else ''} per rank>"
    return {**manifest, "env": shown}


def rank_ranges(ranks: Iterable[tuple[str, int]]) -> list[str]:
    """``[("a", 0), ("a", 1), ("a", 2), ("a", 5), ("b", 3)]`` -> ``["a:0-2,5", "b:3"]`` (hosts in the order
    of their lowest rank)."""
    by_host: dict[str, list[int]] = {}
    for host, rank in sorted(ranks, key=lambda hr: hr[1]):
        by_host.setdefault(host, []).append(rank)
    out = []
    for host, numbers in by_host.items():
        runs: list[str] = []
        start = prev = numbers[0]
        for n in [*numbers[1:], None]:
            if n is not None and n == prev + 1:
                prev = n
                continue
            runs.append(str(start) if start == prev else f"{start}-{prev}")
            if n is not None:
                start = prev = n
        out.append(f"{host}:{','.join(runs)}")
    return out


@dataclass(frozen=True, kw_only=True, slots=True)
class RankProblem:
    """A rank that did not deliver a usable result: ``rule`` is a CLUSTER-* id."""

    rule: str
    host: str | None
    rank: int
    detail: str


@dataclass(frozen=True, kw_only=True, slots=True)
class JobView:
    """What rank 0 has at the end: the environments, the ranks' problems, the collectives of each rank
    (``{rank: (host, {backend: result})}``), the world size, and whether the launcher stopped the job."""

    world_size: int
    environments: Environments
    problems: tuple[RankProblem, ...]
    collectives: dict[int, tuple[str, dict[str, Any]]]
    members: tuple[int, ...]
    stopped: bool = False


def _cluster_finding(rule_id: str, subject: str, message: str, machine: str | None, **kw: Any) -> Finding:
    rule = get_rule(rule_id)
    assert rule is not None, rule_id
    return dataclasses.replace(
        rule.finding(subject, message, kw.pop("remedy", rule.remedy), **kw), machine=machine
    )


def build(job: JobView, against: tuple[str, Manifest] | None, policy: Policy) -> Report:
    """The job's report (``envcheck.app.flows.finish``: policy, ordering, causes), with a ``MachineGroup`` per
    environment. Environments are decoded one at a time, diffed, and dropped: memory holds the reference
    and one other, whatever the number of distinct environments. Manifests that do not decode become
    CLUSTER-RANK-SNAPSHOT findings of their ranks."""
    findings: list[Finding] = []
    ordered = job.environments.ordered({p.rank for p in job.problems})
    readable: list[Environment] = []
    manifest = None
    for env in ordered if against is None else ():  # the reference is the first that decodes
        manifest = _decoded(env, findings)
        if manifest is not None:
            readable.append(env)
            break
    reference_env = readable[0] if readable else None
    # "majority" only for an environment strictly larger than every other (not a tie, not a fallback).
    largest = bool(ordered) and reference_env is ordered[0]
    strict = largest and (len(ordered) == 1 or len(ordered[1].ranks) < len(ordered[0].ranks))
    chosen = "the majority environment" if strict else "the reference environment"
    reference = against or (
        (f"{chosen} ({reference_env.name})", manifest) if reference_env is not None and manifest else None
    )
    groups: list[MachineGroup] = []
    ref_name = "nothing (no rank sent an environment)"
    if reference is not None:
        ref_name, ref = reference
        found, differing, readable = _environment_findings(ref, ordered, reference_env, findings)
        findings += found
        groups = [
            MachineGroup(
                name=env.name,
                members=tuple(rank_ranges(env.ranks)),
                identical_to_base=env.name not in differing,
                machines=len(env.ranks),
            )
            for env in readable
        ]
    problems = _problem_findings(job)
    findings += problems
    findings += _collective_findings(job, _collective_cause(job, problems))
    ranks = sum(len(env.ranks) for env in readable)
    kinds = f"{len(readable)} environment{'s' if len(readable) != 1 else ''}"
    heard = "" if ranks == job.world_size else f" ({ranks} sent one)"
    title = f"envcheck cluster: {job.world_size} ranks in {kinds}{heard}, against {ref_name}"
    report = finish(title, findings, policy, rules=rule_ids())
    return dataclasses.replace(report, groups=tuple(groups), member="rank")


def _decoded(env: Environment, findings: list[Finding]) -> Manifest | None:
    """``env``'s manifest, or None after adding a CLUSTER-RANK-SNAPSHOT finding of its ranks."""
    try:
        return loads(env.text, source=f"the manifest of {env.name}")
    except ManifestError as e:
        findings.append(
            _cluster_finding(
                "CLUSTER-RANK-SNAPSHOT", "manifest", f"what the ranks sent does not decode: {e}", env.name
            )
        )
        return None


def _environment_findings(
    ref: Manifest,
    ordered: list[Environment],
    reference_env: Environment | None,
    problems: list[Finding],
) -> tuple[list[Finding], set[str], list[Environment]]:
    """Each environment against the reference (difference rules), alone (single rules), and its smoke
    suite against the reference's goldens; the reference group only alone. Returns the findings, the
    names of the environments that differ from the reference, and the environments that decoded (one
    that does not is added to ``problems``, once).

    Between the ranks of one job (no ``--against``) a difference the diff rates a warning is an error:
    ranks that load or compute differently diverge in silence, or hang in a collective. A finding that
    several environments share word for word (a check skipped everywhere) is reported once, naming all
    their ranks; a root cause and its consequences stay per environment, so they keep their link."""
    golden = goldens(ref)
    within_job = reference_env is not None
    per_env: list[tuple[Environment, list[Finding]]] = []
    differing: set[str] = set()
    readable: list[Environment] = []
    reported = {f.machine for f in problems if f.rule == "CLUSTER-RANK-SNAPSHOT"}
    for env in ordered:
        manifest = ref if env is reference_env else _decoded(env, [] if env.name in reported else problems)
        if manifest is None:
            continue
        readable.append(env)
        drift: list[Finding] = []
        if env is reference_env:
            found = engine.beside_a_base(engine.doctor(manifest))
        else:
            with views(ref, manifest):
                drift = engine.diff(ref, manifest)
                found = [_escalated(f) for f in drift] if within_job else drift
                found += engine.beside_a_base(engine.doctor(manifest))
        current = goldens(manifest)
        if current is not None:
            ran = outcomes(current) if golden is None or env is reference_env else compare(golden, current)
            found += ran
            if env is not reference_env and golden is not None and any(f.severity != "info" for f in ran):
                differing.add(env.name)
        if env is not reference_env and drift:
            differing.add(env.name)
        per_env.append((env, found))
    return _merged(per_env), differing, readable


def _escalated(finding: Finding) -> Finding:
    return dataclasses.replace(finding, severity="error") if finding.severity == "warning" else finding


def _merged(per_env: list[tuple[Environment, list[Finding]]]) -> list[Finding]:
    shared: dict[Finding, list[Environment]] = {}
    out: list[Finding] = []
    for env, found in per_env:
        causes = {f.caused_by for f in found if f.caused_by}
        for f in found:
            if f.caused_by is None and f.key not in causes:
                shared.setdefault(f, []).append(env)
            else:
                out.append(on_machine(f, env.name))
    for f, envs in shared.items():
        ranks = [hr for env in envs for hr in env.ranks]
        out.append(on_machine(f, envs[0].name if len(envs) == 1 else ", ".join(rank_ranges(ranks))))
    return out


_STATES = {
    "gone": ("CLUSTER-RANK-FAILED", "its process is gone (killed, crashed or exited) and it sent no results"),
    "never": (
        "CLUSTER-RANK-FAILED",
        "it never reached the rendezvous store (it died, or hung before it could)",
    ),
    "stopped": (
        "CLUSTER-RANK-TIMEOUT",
        "its process is stopped (SIGSTOP) and sent no results before the deadline",
    ),
    "running": (
        "CLUSTER-RANK-TIMEOUT",
        "its process was still running at the deadline without sending results",
    ),
    "unknown": (
        "CLUSTER-RANK-TIMEOUT",
        "it sent no results before the deadline (on another node: the launcher's log says whether it died)",
    ),
}


def absent_problem(
    rank: int, host: str | None, state: str, *, stopped: bool, stage: str | None = None
) -> RankProblem:
    """A rank rank 0 has no result of, by what is known of its process and the last stage it announced
    (``import torch``, ``snapshot``, ``collectives``)."""
    rule, detail = _STATES.get(state, _STATES["unknown"])
    if stage is not None:
        detail += f" (last stage: {stage})"
    if stopped and state in ("running", "unknown"):
        # Not a hang of its own: the launcher ended it (CLUSTER-JOB-STOPPED names it).
        return RankProblem(rule="CLUSTER-JOB-STOPPED", host=host, rank=rank, detail="")
    return RankProblem(rule=rule, host=host, rank=rank, detail=detail)


def _problem_findings(job: JobView) -> list[Finding]:
    """One finding per (rule, what happened), naming every rank it happened to as ranges."""
    by_cause: dict[tuple[str, str], list[tuple[str, int]]] = {}
    ended = [(p.host or "?", p.rank) for p in job.problems if p.rule == "CLUSTER-JOB-STOPPED"]
    for p in job.problems:
        if p.rule != "CLUSTER-JOB-STOPPED":
            by_cause.setdefault((p.rule, p.detail), []).append((p.host or "?", p.rank))
    findings = []
    for (rule, detail), ranks in sorted(by_cause.items()):
        who = ", ".join(rank_ranges(ranks))
        noun = "rank" if len(ranks) == 1 else f"{len(ranks)} ranks"
        findings.append(_cluster_finding(rule, "rank", f"{noun} {who}: {detail}", who))
    if job.stopped:
        silent = {rank for p in job.problems for rank in [p.rank] if p.rule != "CLUSTER-RANK-NO-TORCH"}
        heard = job.world_size - len(silent)
        ended_note = f"; still at work then: {', '.join(rank_ranges(ended))}" if ended else ""
        findings.append(
            _cluster_finding(
                "CLUSTER-JOB-STOPPED",
                "job",
                f"the launcher stopped the job (SIGTERM) with results from {heard} of {job.world_size} "
                f"ranks{ended_note}",
                None,
            )
        )
    return findings


def _collective_cause(job: JobView, problems: list[Finding]) -> str | None:
    """The finding of a member rank that died or hung: the collectives of the others failed because of
    it (a peer gone makes Gloo fail at once, a hung one at the timeout)."""
    missing = {p.rank for p in job.problems if p.rule in ("CLUSTER-RANK-FAILED", "CLUSTER-RANK-TIMEOUT")}
    if not missing & set(job.members):
        return None
    return next((f.key for f in problems if f.rule in ("CLUSTER-RANK-FAILED", "CLUSTER-RANK-TIMEOUT")), None)


def _collective_findings(job: JobView, cause: str | None = None) -> list[Finding]:
    findings: list[Finding] = []
    by_backend: dict[str, list[tuple[str, int, dict[str, Any]]]] = {}
    for rank, (host, results) in sorted(job.collectives.items()):
        for backend, result in sorted(results.items()):
            if isinstance(result, dict):
                by_backend.setdefault(str(backend), []).append((host, rank, result))
    for backend, rows in sorted(by_backend.items()):
        skipped = [(h, r, res) for h, r, res in rows if "skipped" in res]
        ran = [(h, r, res) for h, r, res in rows if "skipped" not in res]
        wrong: dict[str, list[tuple[str, int]]] = {}
        for host, rank, res in ran:
            allreduce = res.get("allreduce") if isinstance(res.get("allreduce"), dict) else None
            if res.get("error") and allreduce is None:
                wrong.setdefault(f"failed: {str(res['error'])[:300]}", []).append((host, rank))
            elif allreduce is None or allreduce.get("exact") is not True:
                got = (
                    "?" if allreduce is None else f"{allreduce.get('wrong_elements')} of 1024 elements wrong"
                )
                wrong.setdefault(f"wrong result: {got}", []).append((host, rank))
            elif res.get("error"):
                wrong.setdefault(f"failed after the exact all-reduce: {str(res['error'])[:300]}", []).append(
                    (host, rank)
                )
        for what, ranks in sorted(wrong.items()):
            who = ", ".join(rank_ranges(ranks))
            findings.append(
                _cluster_finding(
                    "CLUSTER-ALLREDUCE",
                    backend,
                    f"all-reduce over {backend} on {who}: {what}",
                    who,
                    caused_by=cause,
                )
            )
        exact = len(ran) - sum(len(v) for v in wrong.values())
        parts = [f"all-reduce exact on {exact} of {_ranks(len(ran))}"] if ran else []
        barrier = [res["barrier_ms"] for _, _, res in ran if isinstance(res.get("barrier_ms"), int | float)]
        if barrier:
            parts.append(f"barrier round trip {_span(barrier)} ms (median per rank)")
        bandwidth = [
            res["bandwidth_mb_s"] for _, _, res in ran if isinstance(res.get("bandwidth_mb_s"), int | float)
        ]
        if bandwidth:
            parts.append(f"all-reduce bus bandwidth {_span(bandwidth)} MB/s (4 MB)")
        if skipped:
            reasons = sorted({str(res["skipped"]) for _, _, res in skipped})
            parts.append(f"not run on {_ranks(len(skipped))}: {'; '.join(reasons)}")
        if parts:
            findings.append(
                _cluster_finding(
                    "CLUSTER-COLLECTIVES",
                    backend,
                    f"{backend}: " + "; ".join(parts),
                    None,
                    target=f"exact on {exact} of {_ranks(len(ran))}" if ran else "not run",
                )
            )
    return findings


def _ranks(n: int) -> str:
    return "1 rank" if n == 1 else f"{n} ranks"


def _span(values: list[float]) -> str:
    low, high = min(values), max(values)
    return f"{low:.4g}" if low == high else f"{low:.4g}-{high:.4g}"
