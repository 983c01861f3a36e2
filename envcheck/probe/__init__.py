"""Code that runs inside the target interpreter (``target.py``, stdlib only) and the runner that starts it."""

from envcheck.probe.runner import TargetRun, run_target, start_target

__all__ = ["TargetRun", "run_target", "start_target"]
