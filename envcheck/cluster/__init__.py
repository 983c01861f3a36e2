"""The cluster check: ``torchrun ... -m envcheck.cluster`` (or ``envcheck cluster``) on every rank of a job.

Each rank snapshots its environment and runs the smoke suite on its device with envcheck's own machinery
(probes in subprocesses: a broken torch still yields a static snapshot), runs the collective checks over
``torch.distributed`` (Gloo; NCCL between GPUs), and sends it all to rank 0 through the job's rendezvous
store. Rank 0 groups the ranks by environment, diffs each environment once against the reference and
writes one report. ``rank`` holds the sequence and its timeouts, ``store`` the transport, ``collectives``
the checks, ``report`` the pure part, ``rules`` the CLUSTER-* rules.
"""
