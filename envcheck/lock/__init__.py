"""``envcheck lock``: a pip-tools requirements lock that rebuilds a manifest's environment, and
``envcheck lock --check``, the drift gate of a team that keeps only that lock.

- ``inputs``: what the lock is compiled from (pure: the manifest's requirement graph → roots, pins,
  markers, what cannot be locked);
- ``compile``: pip-compile in a subprocess, and its output made into the lock;
- ``requirements``: reading a lock back (``packaging``), the rebuild's exact pins;
- ``check``: a lock against an environment, as findings of the ``LOCK-*`` rules (``rules``).
"""
