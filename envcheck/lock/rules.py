"""The ``LOCK-*`` rules: what ``envcheck lock --check`` reports, registered in the one catalog
(``envcheck.core.findings``) so that ``envcheck rules LOCK-VERSION`` explains them and a policy can name them.

They are emitted by the lock comparison (``envcheck.lock.check``), not by the diff engine: like the smoke
suite's ``VERIFY-*`` rules they have no check the engine runs, which the catalog calls kind ``verify``.
"""

from __future__ import annotations

from envcheck.core.findings import registrar

FAMILY = "lock"


_lock = registrar("lock", FAMILY)


_SYNC = "Rebuild the environment from the lock: `pip-sync LOCK --python-executable PYTHON`."

LOCK_MISSING = _lock(
    "LOCK-MISSING",
    "error",
    "A distribution the lock pins is not installed",
    "The lock is what the environment was built and tested from: code that imports the missing "
    "distribution fails, and a companion of torch that is absent fails at its first use.",
    _SYNC,
    ("FM-07",),
    fixes=("install",),
)
LOCK_VERSION = _lock(
    "LOCK-VERSION",
    "error",
    "A distribution is installed at another version or build than the lock pins",
    "Versions are compared in full, local label included: `torch==2.13.0` is met by `+cpu` and `+cu130` "
    "alike under PEP 440, yet they are different programs (one has no CUDA at all), and a companion "
    "built for another torch fails to load its extension.",
    _SYNC,
    ("FM-01", "FM-07"),
    fixes=("install",),
)
LOCK_EXTRA = _lock(
    "LOCK-EXTRA",
    "error",
    "A distribution is installed that the lock does not list",
    "What the lock does not list was not tested with it: an extra distribution can shadow a module, "
    "load a second native runtime, or be imported by a plugin entry point.",
    _SYNC,
    ("FM-07",),
    fixes=("uninstall",),
)

LOCK_SOURCE = _lock(
    "LOCK-SOURCE",
    "error",
    "A distribution the lock pins as an index release is installed from a checkout, a path or a VCS",
    "An editable or local install runs whatever its folder holds: a patched checkout keeps the released "
    "version number, so the versions match while the code is not what the lock was tested with.",
    _SYNC,
    ("FM-07",),
    fixes=("install",),
)

RULE_IDS = (LOCK_MISSING.id, LOCK_VERSION.id, LOCK_EXTRA.id, LOCK_SOURCE.id)
