"""One rank's work, and rank 0's gathering. The sequence (every step bounded by ``--timeout``, T):

1. Start the snapshot (envcheck's own probes, in subprocesses of this interpreter: a broken torch still
   yields a static snapshot) and, unless ``--no-verify``, the smoke suite on this rank's device; while
   they run, import torch and connect to the job's store (``envcheck.cluster.store``). A rank whose torch
   cannot be imported connects with the standard-library client instead.
2. Announce ``started/<rank>`` (host, pid, stage), first before ``import torch`` (standard-library
   client, so a rank that hangs or dies in the import is known too), then at each stage (``snapshot``,
   ``collectives``): for a rank that never reports, rank 0 can tell whether its process is gone,
   stopped or still running (on rank 0's own node: ``/proc``), and where it was.
3. Once the snapshot is done, announce ``ready/<rank>`` (``1``; ``0`` for a rank without torch). Rank 0
   waits for every rank until ``collectives_at`` (T minus what the collectives may take), then publishes
   ``members``: the ranks that will run the collectives. A hung or dead rank is left out, so the
   collectives never wait for a rank already known to be missing.
4. The members run the collective checks (``envcheck.cluster.collectives``) on a process group of their
   own over the same store, each call under its timeout.
5. Each rank puts its payload (redacted manifest as encoded JSON, its collective results, what failed)
   in ``result/<rank>``. Ranks other than 0 exit 0 then: the job's status is rank 0's.
6. Rank 0 reads the results as they come, until every rank has sent one or is known dead, or T.

If the launcher stops the job (torchrun sends SIGTERM to every rank once one has failed), rank 0 reports
what it has received so far. A watchdog ends any rank ``WATCHDOG_GRACE`` seconds after T, whatever it is
blocked in, so the job never waits forever.

Fault injection for the tests (a wrapper sets it on one rank): ``ENVCHECK_CLUSTER_FAULT`` = ``kill``
(SIGKILL itself), ``hang`` (block forever) or ``stop`` (SIGSTOP itself), right after step 2, or with
``@collectives`` (``hang@collectives``) once it is a member, as the collectives start; ``pad:BYTES`` adds
BYTES characters to the payload the rank sends (past the store's 8 MiB value limit, or rank 0's 48 MiB).
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envcheck.cluster import collectives
from envcheck.cluster.report import Environments, JobView, RankProblem, absent_problem
from envcheck.cluster.store import RawStoreClient, Rendezvous, Store, torch_store
from envcheck.collect.launch import SnapshotOptions
from envcheck.collect.snapshot import take_snapshot
from envcheck.core.errors import EnvcheckError
from envcheck.core.escape import one_line
from envcheck.core.redact import redact_json, redact_text
from envcheck.manifest.codec import encode
from envcheck.manifest.verify import VerifySection
from envcheck.native import scan_for_snapshot
from envcheck.process import awake, sessions
from envcheck.verify.runner import run_suite

FAULT_VARIABLE = "ENVCHECK_CLUSTER_FAULT"
WATCHDOG_GRACE = 20.0
POLL_S = 0.2
# A payload bigger than this is refused by rank 0 (a manifest is a few MB; see MAX_MANIFEST_BYTES).
MAX_PAYLOAD_BYTES = 48 * 1024 * 1024
# torch's TCPStore server drops a value over 8 MiB (it closes the client's connection and prints a C++
# stack trace): a payload travels in parts of at most this many bytes, ``result/<rank>/<i>``, and then
# ``result/<rank>`` says how many parts and bytes there are.
PART_BYTES = 4 * 1024 * 1024
# The JSON values a payload may hold: a manifest's (``envcheck.manifest.io.MAX_JSON_VALUES``) and room for
# the rank's own fields and measurements.
MAX_PAYLOAD_VALUES = 1_000_000 + 10_000


@dataclass(frozen=True, kw_only=True, slots=True)
class RankOptions:
    """``timeout``: T, the deadline of the whole job's work in seconds; ``verify``: run the smoke suite."""

    timeout: float
    verify: bool = True

    @property
    def collective_timeout(self) -> float:
        return max(5.0, min(60.0, self.timeout * 0.15))

    @property
    def collectives_at(self) -> float:
        """Seconds after the start by which rank 0 decides who runs the collectives."""
        return self.timeout - 2 * self.collective_timeout - 5.0

    @property
    def snapshot_timeout(self) -> float:
        return max(5.0, self.collectives_at - 2.0)


@dataclass(kw_only=True, slots=True)
class Gathered:
    """Rank 0's view as results arrive: each manifest goes into its environment at once (one kept per
    environment, whatever the number of ranks), the rest of each payload is small."""

    world_size: int
    host: str
    environments: Environments = field(default_factory=Environments)
    problems: list[RankProblem] = field(default_factory=list)
    collectives: dict[int, tuple[str, dict[str, Any]]] = field(default_factory=dict)
    received: set[int] = field(default_factory=set)
    stopped: bool = False
    members: list[int] = field(default_factory=list)

    def view(self) -> JobView:
        return JobView(
            world_size=self.world_size,
            environments=self.environments,
            problems=tuple(self.problems),
            collectives=self.collectives,
            members=tuple(self.members),
            stopped=self.stopped,
        )


class _Stopped(BaseException):
    """SIGTERM on rank 0: the launcher is ending the job."""


def _say(rank: int, line: str) -> None:
    sys.stderr.write(one_line(redact_text(f"envcheck cluster: rank {rank}: {line}")) + "\n")
    sys.stderr.flush()


def _watchdog(rank: int, after: float, code: int) -> None:
    def fire() -> None:
        _say(
            rank, f"still working {after:.0f} s after the start (--timeout + {WATCHDOG_GRACE:.0f} s): exiting"
        )
        sessions.kill_all()
        os._exit(code)

    timer = threading.Timer(after, fire)
    timer.daemon = True
    timer.start()


class _Background:
    """A function run on a daemon thread (one that a stopped job need not wait for)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.value: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(fn,), daemon=True)
        self._thread.start()

    def _run(self, fn: Callable[[], Any]) -> None:
        try:
            self.value = fn()
        except BaseException as e:  # handed to the waiter as data
            self.error = e

    def wait(self, timeout: float) -> bool:
        # In slices: torchrun's SIGTERM may land in any thread, and rank 0's handler runs in this one.
        return awake.join(self._thread, timeout)


def _snapshot(options: RankOptions) -> Any:
    """The rank's manifest (``envcheck.collect``: the probes run in subprocesses of this interpreter)."""
    return take_snapshot(SnapshotOptions(timeout=options.snapshot_timeout), native=scan_for_snapshot)


def _suite(options: RankOptions, env: dict[str, str] | None) -> Any:
    """The smoke suite on this rank's device: its results are the manifest's goldens."""
    return run_suite(None, timeout=options.snapshot_timeout, env=env)


def _with_goldens(manifest: Any, goldens: Any) -> Any:
    """The manifest with the suite's results as its goldens (as ``envcheck snapshot`` records them)."""
    if goldens is None:
        goldens = VerifySection(skipped="the smoke suite was not run")
    elif not manifest.torch.trees:
        goldens = VerifySection(skipped="torch is not installed in the target")
    return manifest.replace(verify=goldens)


def _device(local_rank: int) -> tuple[str | None, dict[str, str] | None]:
    """This rank's CUDA device for NCCL (``cuda:N``) and the environment that shows the smoke suite only
    that GPU (``CUDA_VISIBLE_DEVICES``: the LOCAL_RANK-th of the visible ones). (None, None) without CUDA.
    Only the suite gets the variable: the snapshot records the rank's environment as it is."""
    import torch

    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        return None, None
    count = torch.cuda.device_count()
    index = local_rank % count
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [v.strip() for v in visible.split(",")] if visible else [str(i) for i in range(count)]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": ids[index % len(ids)]}
    return f"cuda:{index}", env


def _fault(rank: int, stage: str) -> None:
    spec = os.environ.get(FAULT_VARIABLE)
    if not spec:
        return
    fault, _, at = spec.partition("@")
    if (at or "start") != stage:
        return
    _say(rank, f"{FAULT_VARIABLE}={spec}: injecting the fault")
    if fault == "kill":
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault == "stop":
        os.kill(os.getpid(), signal.SIGSTOP)
    elif fault == "hang":
        threading.Event().wait()


def _proc_state(pid: int) -> str:
    """``gone``, ``stopped`` or ``running``, from ``/proc/<pid>/stat`` (a zombie is gone)."""
    try:
        with Path(f"/proc/{pid}/stat").open("rb") as f:
            stat = f.read(4096)
    except OSError:
        return "gone"
    state = stat.rpartition(b")")[2].split()[:1]
    if state in ([b"Z"], [b"X"]):
        return "gone"
    return "stopped" if state in ([b"T"], [b"t"]) else "running"


def run(options: RankOptions, environ: dict[str, str] | None = None) -> Gathered | None:
    """This rank's work; rank 0 gets back what it gathered, the others None. Raises ``ValueError`` when
    the launcher's variables are missing or malformed (nothing was started then)."""
    rdzv = Rendezvous.from_environ(environ)
    started = time.monotonic()
    _watchdog(rdzv.rank, options.timeout + WATCHDOG_GRACE, 2 if rdzv.rank == 0 else 1)
    if rdzv.rank == 0:

        def stop(signum: int, frame: object) -> None:
            sessions.kill_all()
            raise _Stopped

        signal.signal(signal.SIGTERM, stop)
    host = socket.gethostname()
    gathered = Gathered(world_size=rdzv.world_size, host=host) if rdzv.rank == 0 else None
    store: Store | None = None
    try:
        # The static snapshot needs no torch: it starts first, while this process imports torch.
        snapshot = _Background(lambda: _snapshot(options))
        torch_error: str | None = None
        device: str | None = None
        suite_env: dict[str, str] | None = None
        early = None
        if rdzv.agent_store or rdzv.rank != 0:  # a store is up (or coming): say where this rank is
            early = _announce_early(rdzv, host)
        try:
            import torch  # noqa: F401  (the job's torch: the transport and what the collectives check)
        except Exception as e:
            torch_error = f"{type(e).__name__}: {e}"[:2000]
        if torch_error is None:
            try:
                device, suite_env = _device(rdzv.local_rank)
            except Exception as e:  # torch imports but CUDA cannot be asked: the suite and NCCL say more
                _say(rdzv.rank, f"cannot query CUDA devices ({type(e).__name__}: {e}); no NCCL check")
        suite = _Background(lambda: _suite(options, suite_env)) if options.verify else None
        store = _connect(rdzv, max(5.0, options.collectives_at), torch_error)
        if early is not None:
            awake.join(early, 5.0)  # its word must not land after this one
        _stage(store, rdzv, host, "snapshot")
        _fault(rdzv.rank, "start")
        return _work(options, rdzv, store, (snapshot, suite), started, host, device, torch_error, gathered)
    except _Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)  # one report, however many times torchrun asks
        assert gathered is not None
        gathered.stopped = True
        _say(0, "the launcher stopped the job: reporting what has arrived")
        if store is None:  # stopped before it connected (during import torch): the stdlib client
            try:
                store = RawStoreClient(rdzv.host, rdzv.port, 3.0)
            except OSError:
                return gathered
        _collect(store, rdzv, gathered, until=time.monotonic())
        return gathered


def _stage(store: Store, rdzv: Rendezvous, host: str, stage: str) -> None:
    """``started/<rank>``: this rank's host, pid and what it is doing now; rank 0 reads it for a rank
    that never sends its results (gone or hung, and where)."""
    store.set(rdzv.key("started", rdzv.rank), json.dumps({"host": host, "pid": os.getpid(), "stage": stage}))


def _announce_early(rdzv: Rendezvous, host: str) -> threading.Thread:
    """``started/<rank>`` at stage ``import torch``, from a daemon thread with the standard-library
    client, before this process imports torch: a rank whose import hangs or kills it is still known by
    host and pid. Best effort: a store not reachable yet only loses this early word."""

    def announce() -> None:
        try:
            client = RawStoreClient(rdzv.host, rdzv.port, 4.0)
            try:
                _stage(client, rdzv, host, "import torch")
                client.check([rdzv.key("started", rdzv.rank)])
            finally:
                client.close()
        except OSError:
            pass

    thread = threading.Thread(target=announce, daemon=True)
    thread.start()
    return thread


def _connect(rdzv: Rendezvous, timeout: float, torch_error: str | None) -> Store:
    """The job's store: torch's client, or the standard-library one without torch. Raises
    ``EnvcheckError`` (exit 2, one line) when it cannot be reached within ``timeout``."""
    try:
        if torch_error is None:
            store: Store = torch_store(rdzv, timeout)
            return store
        _say(rdzv.rank, f"cannot import torch ({torch_error}); sending the static snapshot by the store")
        return RawStoreClient(rdzv.host, rdzv.port, timeout)
    except Exception as e:  # torch's DistNetworkError / DistStoreError, or OSError: all one failure here
        first = str(e).strip().splitlines()[0][:300] if str(e).strip() else ""
        raise EnvcheckError(
            f"rank {rdzv.rank}: cannot reach the job's rendezvous store at {rdzv.host}:{rdzv.port} within "
            f"{timeout:.0f} s: {type(e).__name__}: {first}",
            tip="Launch with torchrun, or set MASTER_ADDR and MASTER_PORT to where rank 0 listens.",
        ) from e


def _work(
    options: RankOptions,
    rdzv: Rendezvous,
    store: Store,
    jobs: tuple[_Background, _Background | None],
    started: float,
    host: str,
    device: str | None,
    torch_error: str | None,
    gathered: Gathered | None,
) -> Gathered | None:
    snapshot, suite = jobs
    until = started + options.snapshot_timeout + 5.0
    done = snapshot.wait(until - time.monotonic())
    if suite is not None:
        done = suite.wait(until - time.monotonic()) and done
    payload: dict[str, Any] = {
        "rank": rdzv.rank,
        "host": host,
        "local_rank": rdzv.local_rank,
        "torch_error": torch_error,
        "snapshot_error": None,
        "manifest": None,
        "collectives": None,
    }
    if not done:
        payload["snapshot_error"] = f"the snapshot did not finish within {options.snapshot_timeout:.0f} s"
    elif snapshot.error is not None or (suite is not None and suite.error is not None):
        error = snapshot.error or (suite.error if suite is not None else None)
        payload["snapshot_error"] = f"{type(error).__name__}: {error}"[:2000]
    else:
        payload["manifest"] = encode(_with_goldens(snapshot.value, suite.value if suite else None))
    store.set(rdzv.key("ready", rdzv.rank), "0" if torch_error else "1")
    # A rank without torch runs no collectives: it need not wait to hear who does.
    joins = torch_error is None or gathered is not None
    members = _members(options, rdzv, store, started, gathered) if joins else None
    if members is not None and rdzv.rank in members and torch_error is None:
        _stage(store, rdzv, host, "collectives")
        _fault(rdzv.rank, "collectives")
        payload["collectives"] = collectives.run(
            store,
            prefix=rdzv.key("pg"),
            rank=rdzv.rank,
            members=members,
            timeout=options.collective_timeout,
            device=device,
        )
    spec = os.environ.get(FAULT_VARIABLE, "")
    if spec.startswith("pad:") and spec[4:].isdigit():
        payload["padding"] = "x" * int(spec[4:])
    send_result(store, rdzv, outgoing(payload))
    if gathered is None:
        return None
    gathered.members = members or []
    _collect(store, rdzv, gathered, until=started + options.timeout)
    return gathered


def outgoing(payload: dict[str, Any]) -> str:
    """The payload as sent: the rank's own error texts and measurements redacted. The manifest was
    redacted in the probe and is left as it is (redact_json on a manifest would take the file names it
    keys by path, ``.../tokenizer.so``, for secret names)."""
    sent = dict(payload)
    for name in ("torch_error", "snapshot_error", "collectives"):
        sent[name] = redact_json(sent.get(name))
    return json.dumps(sent)


def send_result(store: Store, rdzv: Rendezvous, text: str) -> None:
    """Put this rank's payload on the store in parts (``PART_BYTES``), then the header that tells rank 0
    it is all there. A payload over ``MAX_PAYLOAD_BYTES``, which rank 0 would refuse, is replaced by one
    that says its size (a CLUSTER-RANK-SNAPSHOT finding of this rank)."""
    data = text.encode("utf-8")
    if len(data) > MAX_PAYLOAD_BYTES:
        payload = json.loads(text)
        too_big = {name: payload.get(name) for name in ("rank", "host", "local_rank", "torch_error")}
        too_big["too_big_bytes"] = len(data)
        data = json.dumps(too_big).encode("utf-8")
    parts = [data[i : i + PART_BYTES] for i in range(0, len(data), PART_BYTES)]
    for number, part in enumerate(parts):
        store.set(rdzv.key("result", rdzv.rank) + f"/{number}", part)
    store.set(rdzv.key("result", rdzv.rank), json.dumps({"parts": len(parts), "bytes": len(data)}))
    store.check([rdzv.key("result", rdzv.rank)])  # answered in order: the server has it before we exit


def receive_result(store: Store, rank: int, key: str) -> bytes | str:
    """The payload ``send_result`` put under ``key`` (which ``check`` found), or why it cannot be read:
    a header that is not one, more bytes than ``MAX_PAYLOAD_BYTES``, a part missing or of the wrong
    size. Each part is read only once the header's claims are within bounds."""
    try:
        header = json.loads(store.get(key))
    except (ValueError, RecursionError):
        return "its header is not JSON"
    parts = header.get("parts") if isinstance(header, dict) else None
    size = header.get("bytes") if isinstance(header, dict) else None
    if type(parts) is not int or type(size) is not int or not 0 <= size <= parts * PART_BYTES:
        return "its header is not one of a payload in parts"
    if size > MAX_PAYLOAD_BYTES:
        return f"{size} bytes, more than {MAX_PAYLOAD_BYTES}"
    if parts > -(-size // PART_BYTES):
        return f"{parts} parts for {size} bytes"
    chunks: list[bytes] = []
    for number in range(parts):
        name = f"{key}/{number}"
        if not store.check([name]):
            return f"part {number} of {parts} is missing"
        chunk = store.get(name)
        if len(chunk) > PART_BYTES:
            return f"part {number} is {len(chunk)} bytes, more than {PART_BYTES}"
        chunks.append(chunk)
    data = b"".join(chunks)
    if len(data) != size:
        return f"{len(data)} bytes in its parts, not the {size} its header says"
    return data


def _members(
    options: RankOptions, rdzv: Rendezvous, store: Store, started: float, gathered: Gathered | None
) -> list[int] | None:
    """Rank 0: wait for every rank's ``ready`` until ``collectives_at``, publish who has torch and came.
    The others: wait for that list (None when it never comes: then no collectives)."""
    key = rdzv.key("members")
    if gathered is None:
        until = started + options.collectives_at + options.collective_timeout
        while time.monotonic() < until:
            if store.check([key]):
                value = json.loads(store.get(key))
                return [r for r in value if isinstance(r, int)]
            time.sleep(POLL_S)
        return None
    pending = set(range(rdzv.world_size))
    joined: list[int] = []
    until = started + options.collectives_at
    first = True  # one look at every key even past the decision time (rank 0 itself is ready by now)
    while pending and (first or time.monotonic() < until):
        first = False
        for r in sorted(pending):
            if store.check([rdzv.key("ready", r)]):
                pending.discard(r)
                if store.get(rdzv.key("ready", r)) == b"1":
                    joined.append(r)
        if pending:
            time.sleep(POLL_S)
    members = sorted(joined)
    store.set(key, json.dumps(members))
    return members


def _collect(store: Store, rdzv: Rendezvous, gathered: Gathered, *, until: float) -> None:
    """Rank 0 reads every ``result/<rank>`` until ``until``; a rank whose process is gone (seen on this
    node) is not waited for. What is missing at the end becomes a problem of that rank: gone, never
    started, stopped, still running, or not known (another node)."""
    pending = [r for r in range(rdzv.world_size) if r not in gathered.received]
    while True:
        for r in list(pending):
            if store.check([rdzv.key("result", r)]):
                pending.remove(r)
                received = receive_result(store, r, rdzv.key("result", r))
                if isinstance(received, str):
                    gathered.received.add(r)
                    gathered.problems.append(
                        RankProblem(
                            rule="CLUSTER-RANK-SNAPSHOT",
                            host=None,
                            rank=r,
                            detail=f"its results are unreadable: {received}",
                        )
                    )
                else:
                    _receive(r, received, gathered)
        if not pending or time.monotonic() >= until:
            break
        # Nothing more can come from a rank whose process is gone (one not started yet may still come).
        if all(_state(store, rdzv, r, gathered.host)[1] == "gone" for r in pending):
            break
        time.sleep(POLL_S)
    for r in pending:
        # Rank 0 itself is missing only when stopped before it sent: it was at work, not dead.
        host, state, stage = (
            (gathered.host, "running", None) if r == rdzv.rank else _state(store, rdzv, r, gathered.host)
        )
        gathered.problems.append(absent_problem(r, host, state, stopped=gathered.stopped, stage=stage))


def _state(store: Store, rdzv: Rendezvous, rank: int, here: str) -> tuple[str | None, str, str | None]:
    """Where ``rank`` is, what state its process is in (``gone``, ``stopped``, ``running`` on this node;
    ``unknown`` on another; ``never`` when it never reached the store) and its last stage."""
    key = rdzv.key("started", rank)
    if not store.check([key]):
        return None, "never", None
    try:
        started = json.loads(store.get(key))
        host, pid = str(started["host"])[:255], int(started["pid"])
        stage = started.get("stage")
    except (ValueError, KeyError, TypeError, AttributeError):
        return None, "unknown", None
    state = _proc_state(pid) if host == here else "unknown"
    return host, state, str(stage)[:40] if isinstance(stage, str) else None


def _receive(rank: int, raw: bytes, gathered: Gathered) -> None:
    """One rank's payload into ``gathered``; a payload that is not one (too big, not JSON, another
    rank's, fields of the wrong kind) is a CLUSTER-RANK-SNAPSHOT problem of that rank."""
    gathered.received.add(rank)

    def refuse(why: str, host: str | None = None) -> None:
        gathered.problems.append(
            RankProblem(
                rule="CLUSTER-RANK-SNAPSHOT",
                host=host,
                rank=rank,
                detail=f"its results are unreadable: {why}",
            )
        )

    if len(raw) > MAX_PAYLOAD_BYTES:
        refuse(f"{len(raw)} bytes, more than {MAX_PAYLOAD_BYTES}")
        return
    # 48 MiB of short JSON values would parse into ~6 M objects: bounded before parsing, as a manifest is.
    values = raw.count(b",") + raw.count(b"[") + raw.count(b"{")
    if values > MAX_PAYLOAD_VALUES:
        refuse(f"up to {values} JSON values, more than {MAX_PAYLOAD_VALUES}: not parsed")
        return
    try:
        payload = json.loads(raw)
    except (ValueError, RecursionError) as e:
        refuse(f"not JSON ({type(e).__name__})")
        return
    if (
        not isinstance(payload, dict)
        or payload.get("rank") != rank
        or not isinstance(payload.get("host"), str)
    ):
        refuse("not a payload of this rank")
        return
    host = payload["host"][:255]
    manifest = payload.get("manifest")
    if isinstance(manifest, dict):
        gathered.environments.add(host, rank, manifest)
    for key, rule in (("torch_error", "CLUSTER-RANK-NO-TORCH"), ("snapshot_error", "CLUSTER-RANK-SNAPSHOT")):
        error = payload.get(key)
        if error is not None:
            what = "import torch failed" if key == "torch_error" else "its snapshot failed"
            gathered.problems.append(
                RankProblem(
                    rule=rule, host=host, rank=rank, detail=f"{what}: {redact_text(str(error)[:2000])}"
                )
            )
    too_big = payload.get("too_big_bytes")
    if type(too_big) is int:
        refuse(f"{too_big} bytes, more than the {MAX_PAYLOAD_BYTES} rank 0 reads: not sent", host)
    elif manifest is None and payload.get("snapshot_error") is None:
        refuse("it sent no manifest", host)
    collectives = payload.get("collectives")
    if isinstance(collectives, dict):
        redacted = redact_json(collectives)
        if isinstance(redacted, dict):
            gathered.collectives[rank] = (host, redacted)
