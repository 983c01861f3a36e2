"""The import-and-verify smoke suite: ``run_suite`` runs it in the target interpreter, ``compare`` checks
its results against goldens recorded in a manifest, ``outcomes`` reports a run on its own."""

from __future__ import annotations

from envcheck.verify.compare import compare, outcomes
from envcheck.verify.runner import run_suite

__all__ = ["compare", "outcomes", "run_suite"]
