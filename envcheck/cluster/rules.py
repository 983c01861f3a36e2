"""The cluster check's rules (``envcheck cluster`` / ``python -m envcheck.cluster`` under torchrun): a rank
that failed, hung or could not import torch, and the collectives checked in their own right. Registered in
the one catalog (``envcheck.core.findings``) so ``envcheck rules CLUSTER-ALLREDUCE`` explains them and a
policy can name them. This module imports only the registry: ``envcheck rules`` loads it without torch."""

from __future__ import annotations

from envcheck.core.findings import registrar

FAMILY = "cluster"


_cluster = registrar("cluster", FAMILY)


_cluster(
    "CLUSTER-RANK-FAILED",
    "error",
    "A rank of the job died before it sent its results",
    "The process of that rank is gone (killed by a signal, out of memory, a crash in a native library) or "
    "never reached the rendezvous store: a training job on this node would die the same way, and the "
    "other ranks would wait in their next collective until the timeout.",
    "Read that rank's log (torchrun prints its exit code or signal); run `envcheck doctor` on its node.",
    ("FM-04", "FM-15", "FM-16"),
)
_cluster(
    "CLUSTER-RANK-TIMEOUT",
    "error",
    "A rank of the job did not finish before the deadline",
    "The rank was still running (or stopped) at --timeout: a hang in import torch, in the driver, in a "
    "collective, or a node far slower than the others. In training, every other rank waits for it.",
    "Rerun with a larger --timeout to tell slow from hung; `py-spy dump --pid` on that node shows where "
    "it waits.",
    ("FM-16",),
)
_cluster(
    "CLUSTER-RANK-NO-TORCH",
    "error",
    "A rank could not import torch",
    "`import torch` fails in that rank's interpreter, so it cannot join a process group: the job cannot "
    "start on that node. Its static snapshot (files and metadata, read without torch) still came through "
    "the rendezvous store and is diffed like the others.",
    "Read the import error; `envcheck doctor` on that node names a missing or foreign library.",
    ("FM-02", "FM-07", "FM-13"),
)
_cluster(
    "CLUSTER-RANK-SNAPSHOT",
    "error",
    "A rank's snapshot could not be taken or read",
    "The rank ran, but its environment could not be recorded (the interpreter did not answer the facts "
    "probe) or what it sent could not be decoded: that node's environment is unknown.",
    "Run `envcheck snapshot` on that node to see the error.",
)
_cluster(
    "CLUSTER-ALLREDUCE",
    "error",
    "An all-reduce gave a wrong result or failed",
    "Every rank contributes integers whose sum is exactly representable in float32; any other result, or "
    "an error, means the back-end (Gloo on the CPU, NCCL between GPUs) corrupts or cannot carry the "
    "collectives the training depends on: P2P or IOMMU trouble, mixed NCCL versions, a broken network "
    "interface.",
    "Run with NCCL_DEBUG=INFO; keep driver and NCCL equal on every node; try NCCL_P2P_DISABLE=1 to tell a "
    "peer-to-peer problem.",
    ("FM-16",),
)
_cluster(
    "CLUSTER-COLLECTIVES",
    "info",
    "What the job's collectives measured",
    "The ranks that took part, whether the all-reduce was exact on each back-end, the round trip of a "
    "barrier and the bandwidth of an all-reduce of a few MB: a baseline to compare a slow job against.",
    "Nothing to do; compare with the same check on a healthy job.",
    ("FM-16",),
)
_cluster(
    "CLUSTER-JOB-STOPPED",
    "error",
    "The launcher stopped the job before every rank had reported",
    "torchrun ends all ranks (SIGTERM) as soon as one exits with an error: the report holds what rank 0 "
    "had received by then, and the ranks not heard from are named.",
    "Read the launcher's log for the first rank that failed; the report names the ranks rank 0 saw end.",
)
