"""The collective checks, in the job's own interpreter: the one place of envcheck that imports torch in its
own process (docs/architecture.md), because here ``torch.distributed`` is what is being checked and the
transport.

For each back-end (Gloo on the CPU always; NCCL between the GPUs where the ranks have them):
- an ``all_reduce`` whose result is verified exactly: rank ``i`` contributes ``(i + 1) * (j % 7 + 1)`` at
  index ``j``; the sum, ``W (W + 1) / 2 * (j % 7 + 1)``, is an integer far inside float32's exact range
  (2**24) for any job of fewer than a thousand ranks, so any other value is corruption, not rounding;
- the round trip of a barrier (median of a few);
- the bandwidth of an all-reduce of a few MB (bus bandwidth, as nccl-tests define it).

Every call runs under the process group's timeout: a peer that died makes Gloo fail at once, one that hangs
makes it fail at the timeout. NCCL's own watchdog may instead end the process at its timeout
(``TORCH_NCCL_ASYNC_ERROR_HANDLING``): rank 0 then reports that rank as gone. The results are plain data
for the payload; a failure is data too.
"""

from __future__ import annotations

import contextlib
import datetime
import statistics
import time
from typing import Any

BANDWIDTH_BYTES = 4 * 1024 * 1024
BANDWIDTH_ITERATIONS = 5
BARRIER_ROUNDS = 5
# (W (W + 1) / 2) * 7 must stay below 2**24 for the sum to be exact in float32.
MAX_EXACT_RANKS = 2000


def run(
    store: Any, *, prefix: str, rank: int, members: list[int], timeout: float, device: str | None
) -> dict[str, Any]:
    """The checks among ``members`` (global ranks; this rank is one of them), on a process group built
    on ``store`` under ``prefix``. ``device``: this rank's CUDA device (``cuda:N``) for NCCL, or None.
    Returns ``{backend: result}``; never raises for a failed collective (the result says so)."""
    import torch.distributed as dist

    group_rank = members.index(rank)
    if device is not None:
        import torch

        # NCCL builds its communicator on the current device: each rank on its own GPU, not all on 0.
        torch.cuda.set_device(device)
    size = len(members)
    results: dict[str, Any] = {}
    try:
        dist.init_process_group(
            "gloo",
            store=dist.PrefixStore(prefix + "/gloo", store),  # type: ignore[attr-defined]
            rank=group_rank,
            world_size=size,
            timeout=datetime.timedelta(seconds=timeout),
        )
    except Exception as e:  # a peer that never came, a network interface Gloo cannot use
        return {"gloo": {"error": _error(e)}}
    try:
        results["gloo"] = _checks(None, "cpu", group_rank, size)
        if device is None:
            results["nccl"] = {"skipped": "no CUDA device on this rank"}
        elif not dist.is_nccl_available():
            results["nccl"] = {"error": "this torch has no NCCL"}
        else:
            try:
                group = dist.new_group(backend="nccl", timeout=datetime.timedelta(seconds=timeout))
                results["nccl"] = _checks(group, device, group_rank, size)
            except Exception as e:
                results["nccl"] = {"error": _error(e)}
    finally:
        # A group already broken by a dead peer: nothing left to release.
        with contextlib.suppress(Exception):
            dist.destroy_process_group()
    return results


def _error(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"[:2000]


def _sync(device: str) -> None:
    if device.startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def _checks(group: Any, device: str, rank: int, size: int) -> dict[str, Any]:
    import torch
    import torch.distributed as dist

    out: dict[str, Any] = {"ranks": size, "device": device}
    try:
        pattern = torch.arange(1024, dtype=torch.float32, device=device).remainder(7).add(1)
        mine = pattern * float(rank + 1)
        dist.all_reduce(mine, group=group)
        expected = pattern * float(size * (size + 1) // 2)
        _sync(device)
        exact = size <= MAX_EXACT_RANKS and bool(torch.equal(mine, expected))
        wrong = int((mine != expected).sum().item())
        out["allreduce"] = {
            "exact": exact,
            "wrong_elements": wrong,
            "first_expected": float(expected[0].item()),
            "first_got": float(mine[0].item()),
        }
        rounds = []
        small = torch.zeros(1, device=device)
        for _ in range(BARRIER_ROUNDS):
            started = time.perf_counter()
            if device == "cpu":
                dist.barrier(group=group)
            else:  # a barrier on NCCL is an all-reduce of one element: time that, synchronised
                dist.all_reduce(small, group=group)
                _sync(device)
            rounds.append(time.perf_counter() - started)
        out["barrier_ms"] = round(statistics.median(rounds) * 1000, 3)
        payload = torch.ones(BANDWIDTH_BYTES // 4, dtype=torch.float32, device=device)
        dist.all_reduce(payload, group=group)  # warm-up: connections and buffers
        _sync(device)
        started = time.perf_counter()
        for _ in range(BANDWIDTH_ITERATIONS):
            dist.all_reduce(payload, group=group)
        _sync(device)
        elapsed = (time.perf_counter() - started) / BANDWIDTH_ITERATIONS
        algorithm = BANDWIDTH_BYTES / elapsed
        out["bandwidth_mb_s"] = round(algorithm * 2 * (size - 1) / size / 1e6, 1) if size > 1 else None
        out["allreduce_ms"] = round(elapsed * 1000, 3)
    except Exception as e:  # a peer that died or hung past the timeout mid-way
        out["error"] = _error(e)
    return out
