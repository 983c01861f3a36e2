"""Running code in the target interpreter: the runner that starts ``envcheck.target``'s modules there
under a deadline, and the registry of live sessions that an interrupt kills."""

from envcheck.probe.runner import TargetRun, run_target, start_target

__all__ = ["TargetRun", "run_target", "start_target"]
