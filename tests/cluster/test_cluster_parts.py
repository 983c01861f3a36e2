"""The cluster check's parts without a job: the store's wire protocol against torch's real ``TCPStore``
server, rank 0's handling of hostile payloads, grouping, and the command outside torchrun."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from envcheck.cluster import rank as rank_module
from envcheck.cluster.rank import (
    MAX_PAYLOAD_BYTES,
    PART_BYTES,
    Gathered,
    _proc_state,
    _receive,
    outgoing,
    receive_result,
    send_result,
)
from envcheck.cluster.report import (
    Environments,
    JobView,
    RankProblem,
    absent_problem,
    build,
    fingerprint,
    rank_ranges,
)
from envcheck.cluster.store import RawStoreClient, Rendezvous
from envcheck.diff.policy import Policy
from envcheck.manifest.codec import encode
from envcheck.manifest.io import load

EXAMPLES = Path(__file__).parent.parent.parent / "manifests" / "examples"


def _example() -> dict[str, object]:
    manifests = sorted(EXAMPLES.glob("*.json"))
    assert manifests, "no example manifests"
    encoded: dict[str, object] = encode(load(manifests[0]))
    return encoded


def test_rank_ranges() -> None:
    ranks = [("a", 2), ("a", 0), ("a", 1), ("a", 5), ("b", 3), ("b", 4), ("a", 7)]
    assert rank_ranges(ranks) == ["a:0-2,5,7", "b:3-4"]
    assert rank_ranges([("h", 0)]) == ["h:0"]


def test_the_fingerprint_ignores_volatile_fields_only() -> None:
    manifest = _example()
    meta = dict(manifest["meta"])  # type: ignore[call-overload]
    platform = dict(manifest["platform"])  # type: ignore[call-overload]
    later = {**manifest, "meta": {**meta, "created": "2030-01-01T00:00:00+00:00", "duration_s": 99.0}}
    other_host = {**manifest, "platform": {**platform, "hostname": "node-7"}}
    assert fingerprint(later) == fingerprint(manifest) == fingerprint(other_host)
    env = dict(manifest["env"])  # type: ignore[call-overload]
    drifted = {**manifest, "env": {**env, "OMP_NUM_THREADS": "3"}}
    assert fingerprint(drifted) != fingerprint(manifest)


def test_ranks_sharing_an_environment_are_one_group_and_the_majority_is_the_reference() -> None:
    manifest = _example()
    env = dict(manifest["env"])  # type: ignore[call-overload]
    drifted = {**manifest, "env": {**env, "OMP_NUM_THREADS": "3"}}
    environments = Environments()
    for rank in (0, 1, 3):
        environments.add("n1", rank, manifest)
    environments.add("n1", 2, drifted)
    job = JobView(
        world_size=5,
        environments=environments,
        problems=(absent_problem(4, "n2", "unknown", stopped=False),),
        collectives={},
        members=(0, 1, 2, 3),
    )
    report = build(job, None, Policy())
    assert [(g.name, g.identical_to_base) for g in report.groups] == [("n1:0-1,3", True), ("n1:2", False)]
    (omp,) = [f for f in report.findings if f.rule == "ENV-VAR-CHANGED" and f.subject == "OMP_NUM_THREADS"]
    assert omp.machine == "n1:2" and omp.severity == "error"
    (absent,) = [f for f in report.findings if f.rule == "CLUSTER-RANK-TIMEOUT"]
    assert absent.machine == "n2:4" and "another node" in absent.message
    assert report.title == (
        "envcheck cluster: 5 ranks in 2 environments (4 sent one), "
        "against the majority environment (n1:0-1,3)"
    )


def test_against_a_manifest_keeps_the_diffs_severities() -> None:
    manifest = _example()
    env = dict(manifest["env"])  # type: ignore[call-overload]
    environments = Environments()
    environments.add("n1", 0, {**manifest, "env": {**env, "OMP_NUM_THREADS": "3"}})
    job = JobView(world_size=1, environments=environments, problems=(), collectives={}, members=(0,))
    base = load(sorted(EXAMPLES.glob("*.json"))[0])
    report = build(job, ("base.json", base), Policy())
    (omp,) = [f for f in report.findings if f.subject == "OMP_NUM_THREADS"]
    assert omp.severity == "warning"  # as `envcheck diff` rates it, outside one job
    assert [g.identical_to_base for g in report.groups] == [False]


def test_a_wrong_all_reduce_is_an_error_naming_the_rank() -> None:
    wrong = {"gloo": {"ranks": 2, "allreduce": {"exact": False, "wrong_elements": 3}, "barrier_ms": 0.4}}
    good = {"gloo": {"ranks": 2, "allreduce": {"exact": True, "wrong_elements": 0}, "barrier_ms": 0.5}}
    failed = {"nccl": {"error": "DistBackendError: NCCL error: unhandled system error"}}
    job = JobView(
        world_size=3,
        environments=Environments(),
        problems=(),
        collectives={0: ("h", good), 1: ("h", wrong), 2: ("h", {**good, **failed})},
        members=(0, 1, 2),
    )
    report = build(job, None, Policy())
    by_subject = {f.subject: f for f in report.findings if f.rule == "CLUSTER-ALLREDUCE"}
    assert by_subject["gloo"].machine == "h:1" and "3 of 1024 elements wrong" in by_subject["gloo"].message
    assert by_subject["nccl"].machine == "h:2" and "unhandled system error" in by_subject["nccl"].message
    (summary,) = [f for f in report.findings if f.rule == "CLUSTER-COLLECTIVES" and f.subject == "gloo"]
    assert "exact on 2 of 3 ranks" in summary.message


@pytest.mark.parametrize(
    ("raw", "why"),
    [
        (b"{not json", "not JSON"),
        (json.dumps({"rank": 9, "host": "h"}).encode(), "not a payload of this rank"),
        (json.dumps([1, 2]).encode(), "not a payload of this rank"),
        (json.dumps({"rank": 1, "host": 7}).encode(), "not a payload of this rank"),
        (json.dumps({"rank": 1, "host": "h"}).encode(), "it sent no manifest"),
        (b"[" * 100_000 + b"]" * 100_000, "not JSON"),
    ],
)
def test_a_hostile_payload_is_a_finding_of_its_rank(raw: bytes, why: str) -> None:
    gathered = Gathered(world_size=2, host="h")
    _receive(1, raw, gathered)
    (problem,) = gathered.problems
    assert problem.rule == "CLUSTER-RANK-SNAPSHOT" and problem.rank == 1 and why in problem.detail
    assert not gathered.environments.by_key


def test_an_oversized_payload_is_refused_unread() -> None:
    gathered = Gathered(world_size=2, host="h")
    _receive(1, b" " * (MAX_PAYLOAD_BYTES + 1), gathered)
    assert "more than" in gathered.problems[0].detail


def test_a_payload_of_more_values_than_a_manifest_holds_is_refused_unparsed() -> None:
    from envcheck.cluster.rank import MAX_PAYLOAD_VALUES
    from envcheck.manifest.io import MAX_JSON_VALUES

    assert MAX_PAYLOAD_VALUES > MAX_JSON_VALUES
    gathered = Gathered(world_size=2, host="h")
    _receive(1, b"[" + b"0," * MAX_PAYLOAD_VALUES + b"0]", gathered)
    (problem,) = gathered.problems
    assert f"more than {MAX_PAYLOAD_VALUES}: not parsed" in problem.detail


def test_a_manifest_that_does_not_decode_is_a_finding_of_its_ranks() -> None:
    environments = Environments()
    environments.add("h", 0, {"schema_version": 1, "meta": "nonsense"})
    job = JobView(world_size=1, environments=environments, problems=(), collectives={}, members=())
    report = build(job, None, Policy())
    (bad,) = [f for f in report.findings if f.rule == "CLUSTER-RANK-SNAPSHOT"]
    assert bad.machine == "h:0" and "does not decode" in bad.message


def test_the_stdlib_client_speaks_to_torchs_store_server() -> None:
    import datetime

    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    server = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    client = RawStoreClient("127.0.0.1", server.port, 10)
    try:
        value = os.urandom(3 * 1024 * 1024)
        client.set("envcheck/cluster/0/result/1", value)
        assert client.check(["envcheck/cluster/0/result/1"])
        assert not client.check(["envcheck/cluster/0/result/2"])
        assert server.get("envcheck/cluster/0/result/1") == value
        server.set("envcheck/cluster/0/members", "[0, 1]")
        assert client.get("envcheck/cluster/0/members") == b"[0, 1]"
    finally:
        client.close()


@pytest.mark.slow
def test_the_stdlib_client_gives_up_on_a_closed_port() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    with pytest.raises(OSError):
        RawStoreClient("127.0.0.1", port, 1)


@pytest.mark.parametrize(
    ("env", "problem"),
    [
        ({}, "RANK is not set"),
        ({"RANK": "x", "WORLD_SIZE": "2", "MASTER_PORT": "1", "MASTER_ADDR": "h"}, "RANK is not a number"),
        ({"RANK": "2", "WORLD_SIZE": "2", "MASTER_PORT": "1", "MASTER_ADDR": "h"}, "outside WORLD_SIZE"),
        ({"RANK": "0", "WORLD_SIZE": "2", "MASTER_PORT": "1"}, "MASTER_ADDR is not set"),
    ],
)
def test_the_launchers_variables_are_checked(env: dict[str, str], problem: str) -> None:
    with pytest.raises(ValueError, match=problem):
        Rendezvous.from_environ(env)


def test_outside_a_job_the_command_says_how_to_launch_it() -> None:
    env = {
        k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT")
    }
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck.cluster"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.splitlines()[0] == "error: not a rank of a distributed job: RANK is not set"
    assert "torchrun" in proc.stderr and "Traceback" not in proc.stderr


def test_the_process_states_rank_0_tells_apart() -> None:
    assert _proc_state(os.getpid()) == "running"
    child = subprocess.Popen([sys.executable, "-c", "pass"])
    child.wait(timeout=60)
    assert _proc_state(child.pid) == "gone"


def test_a_stopped_job_names_the_ranks_still_at_work() -> None:
    job = JobView(
        world_size=3,
        environments=Environments(),
        problems=(
            absent_problem(0, "h", "running", stopped=True),
            absent_problem(1, "h", "gone", stopped=True),
            absent_problem(2, "h", "running", stopped=True),
        ),
        collectives={},
        members=(),
        stopped=True,
    )
    report = build(job, None, Policy())
    rules = {f.rule: f for f in report.findings}
    assert rules["CLUSTER-RANK-FAILED"].machine == "h:1"
    assert "results from 0 of 3 ranks; still at work then: h:0,2" in rules["CLUSTER-JOB-STOPPED"].message
    assert dataclasses.replace(rules["CLUSTER-JOB-STOPPED"]).severity == "error"


def test_per_rank_device_variables_compare_by_count() -> None:
    manifest = _example()
    env = dict(manifest["env"])  # type: ignore[call-overload]
    environments = Environments()
    environments.add("h", 0, {**manifest, "env": {**env, "CUDA_VISIBLE_DEVICES": "0"}})
    environments.add("h", 1, {**manifest, "env": {**env, "CUDA_VISIBLE_DEVICES": "1"}})
    environments.add("h", 2, {**manifest, "env": {**env, "CUDA_VISIBLE_DEVICES": "2,3"}})
    job = JobView(world_size=3, environments=environments, problems=(), collectives={}, members=())
    report = build(job, None, Policy())
    assert [g.name for g in report.groups] == ["h:0-1", "h:2"]
    (visible,) = [f for f in report.findings if f.subject == "CUDA_VISIBLE_DEVICES"]
    assert visible.machine == "h:2"
    assert (visible.base, visible.target) == ("'<1 device per rank>'", "'<2 devices per rank>'")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--against", "{missing}"], "error: "),
        (["--against", "{bad}"], "error: "),
        (["--output", "{tmp}/no/such/folder/report.json"], "error: "),
        (["--timeout", "5"], "error: --timeout 5: a job's deadline is at least 30 s"),
    ],
)
def test_rank_0_refuses_bad_options_before_any_work(tmp_path: Path, args: list[str], message: str) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"schema_version": 1, "meta": 7}', encoding="utf-8")
    shown = [a.format(missing=tmp_path / "missing.json", bad=bad, tmp=tmp_path) for a in args]
    # A rank 0 of a one-rank job whose store does not exist: refused options never get that far.
    env = {**os.environ, "RANK": "0", "WORLD_SIZE": "1", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": "1"}
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck.cluster", *shown],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, proc.stderr
    assert message in proc.stderr and "Traceback" not in proc.stderr


def test_a_tie_goes_to_the_environment_whose_ranks_have_torch() -> None:
    manifest = _example()
    env = dict(manifest["env"])  # type: ignore[call-overload]
    environments = Environments()
    environments.add("h", 0, {**manifest, "env": {**env, "PYTHONPATH": "/broken"}})
    environments.add("h", 1, manifest)
    no_torch = RankProblem(rule="CLUSTER-RANK-NO-TORCH", host="h", rank=0, detail="import torch failed: x")
    job = JobView(world_size=2, environments=environments, problems=(no_torch,), collectives={}, members=(1,))
    report = build(job, None, Policy())
    assert report.title.endswith("against the reference environment (h:1)")
    (pythonpath,) = [f for f in report.findings if f.subject == "PYTHONPATH"]
    assert pythonpath.machine == "h:0" and pythonpath.target == "'/broken'"


@pytest.mark.slow
def test_a_rank_that_cannot_reach_the_store_says_so_in_one_line() -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port)}
    proc = subprocess.run(
        [sys.executable, "-m", "envcheck.cluster", "--timeout", "30", "--no-verify"],
        check=False,
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert proc.returncode == 2
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error: ")]
    assert errors == [errors[0]] and "cannot reach the job's rendezvous store" in errors[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_secrets_in_what_a_rank_sends_stay_out_of_the_report() -> None:
    token = "hf_" + "A" * 34
    payload = {
        "rank": 1,
        "host": "h",
        "manifest": None,
        "torch_error": f"OSError: https://user:{token}@index.invalid/simple refused HF_TOKEN={token}",
        "snapshot_error": None,
        "collectives": {"gloo": {"error": f"RuntimeError: HF_TOKEN={token}"}},
    }
    gathered = Gathered(world_size=2, host="h")
    _receive(1, json.dumps(payload).encode(), gathered)
    report = build(gathered.view(), None, Policy())
    shown = json.dumps([dataclasses.asdict(f) for f in report.findings])
    assert token not in shown
    (no_torch,) = [f for f in report.findings if f.rule == "CLUSTER-RANK-NO-TORCH"]
    assert "index.invalid" in no_torch.message  # the rest of the error is kept
    (allreduce,) = [f for f in report.findings if f.rule == "CLUSTER-ALLREDUCE"]
    assert "HF_TOKEN=" in allreduce.message


def test_what_a_rank_sends_keeps_its_manifest_as_recorded() -> None:
    token = "hf_" + "B" * 34
    manifest = _example()
    payload = {
        "rank": 0,
        "host": "h",
        "manifest": manifest,
        "torch_error": f"ImportError: HF_TOKEN={token}",
        "snapshot_error": None,
        "collectives": None,
    }
    sent = json.loads(outgoing(payload))
    assert sent["manifest"] == manifest  # paths and names as recorded (the probe redacted it already)
    assert token not in sent["torch_error"]


def test_an_undecodable_majority_leaves_the_reference_to_the_next_environment() -> None:
    manifest = _example()
    environments = Environments()
    for rank in (0, 1):
        environments.add("h", rank, {"schema_version": 1, "meta": "nonsense"})
    environments.add("h", 2, manifest)
    job = JobView(world_size=3, environments=environments, problems=(), collectives={}, members=())
    report = build(job, None, Policy())
    (bad,) = [f for f in report.findings if f.rule == "CLUSTER-RANK-SNAPSHOT"]
    assert bad.machine == "h:0-1"
    assert [g.name for g in report.groups] == ["h:2"]
    assert report.title.endswith("against the reference environment (h:2)")


def _rendezvous(rank: int) -> Rendezvous:
    return Rendezvous(
        host="127.0.0.1", port=0, rank=rank, world_size=2, local_rank=rank, agent_store=False, prefix="p/0"
    )


def _gather_from(store: object, rank: int) -> Gathered:
    """Rank 0's reading of ``rank``'s result as ``_collect`` does it."""
    gathered = Gathered(world_size=2, host="h")
    received = receive_result(store, rank, _rendezvous(rank).key("result", rank))  # type: ignore[arg-type]
    if isinstance(received, str):
        gathered.problems.append(
            RankProblem(rule="CLUSTER-RANK-SNAPSHOT", host=None, rank=rank, detail=received)
        )
    else:
        _receive(rank, received, gathered)
    return gathered


@pytest.mark.slow
@pytest.mark.parametrize("client", ["torch", "stdlib"])
def test_a_payload_over_the_stores_8_mib_limit_arrives_in_parts(client: str) -> None:
    """torch's store server drops a value over 8 MiB, closing the connection with a C++ stack trace; the
    rank was then reported as having sent no results. A 20 MiB payload now arrives whole."""
    import datetime

    from torch.distributed import TCPStore  # type: ignore[attr-defined]

    server = TCPStore("127.0.0.1", 0, 1, True, timeout=datetime.timedelta(seconds=10))
    sender: Any = (
        TCPStore("127.0.0.1", server.port, None, False, timeout=datetime.timedelta(seconds=10))
        if client == "torch"
        else RawStoreClient("127.0.0.1", server.port, 10)
    )
    payload = {"rank": 1, "host": "h", "manifest": _example(), "padding": "x" * (20 * 1024 * 1024)}
    text = outgoing(payload)
    assert 8 * 1024 * 1024 < len(text) < MAX_PAYLOAD_BYTES
    try:
        send_result(sender, _rendezvous(1), text)
    finally:
        if isinstance(sender, RawStoreClient):
            sender.close()
    gathered = _gather_from(server, 1)
    assert gathered.problems == []
    assert len(gathered.environments.by_key) == 1
    assert len(server.get("p/0/result/1/0")) == PART_BYTES


def test_a_payload_over_what_rank_0_reads_is_reported_with_its_size(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rank_module, "MAX_PAYLOAD_BYTES", 1024)
    store = _DictStore()
    text = outgoing({"rank": 1, "host": "h", "manifest": _example()})
    send_result(store, _rendezvous(1), text)
    assert max(len(v) for v in store.values.values()) < 1024  # what is sent instead is small
    (problem,) = _gather_from(store, 1).problems
    assert problem.rule == "CLUSTER-RANK-SNAPSHOT" and problem.host == "h"
    assert f"{len(text.encode())} bytes, more than the 1024 rank 0 reads: not sent" in problem.detail


class _DictStore:
    """A store in memory, to plant what a hostile rank could put on the real one."""

    def __init__(self, values: dict[str, bytes] | None = None) -> None:
        self.values = dict(values or {})

    def set(self, key: str, value: str | bytes) -> None:
        self.values[key] = value.encode() if isinstance(value, str) else value

    def get(self, key: str) -> bytes:
        return self.values[key]

    def check(self, keys: list[str]) -> bool:
        return all(k in self.values for k in keys)


def _header(parts: object, size: object) -> bytes:
    return json.dumps({"parts": parts, "bytes": size}).encode()


@pytest.mark.parametrize(
    ("values", "why"),
    [
        ({"p/0/result/1": b"{nope"}, "its header is not JSON"),
        ({"p/0/result/1": b"[1]"}, "not one of a payload in parts"),
        ({"p/0/result/1": _header(True, 10)}, "not one of a payload in parts"),
        ({"p/0/result/1": _header(1, PART_BYTES + 1)}, "not one of a payload in parts"),
        ({"p/0/result/1": _header(10**12, 10**15)}, f"more than {MAX_PAYLOAD_BYTES}"),
        ({"p/0/result/1": _header(10**9, 10)}, "1000000000 parts for 10 bytes"),
        ({"p/0/result/1": _header(2, PART_BYTES + 1), "p/0/result/1/0": b"x"}, "part 1 of 2 is missing"),
        (
            {"p/0/result/1": _header(1, 3), "p/0/result/1/0": b"x" * (PART_BYTES + 1)},
            f"more than {PART_BYTES}",
        ),
        ({"p/0/result/1": _header(1, 3), "p/0/result/1/0": b"{}"}, "2 bytes in its parts, not the 3"),
    ],
)
def test_a_hostile_header_or_part_is_a_finding_of_its_rank(values: dict[str, bytes], why: str) -> None:
    (problem,) = _gather_from(_DictStore(values), 1).problems
    assert problem.rule == "CLUSTER-RANK-SNAPSHOT" and why in problem.detail
