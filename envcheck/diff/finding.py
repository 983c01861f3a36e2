"""Re-exports ``envcheck.findings`` (where ``Finding`` and ``Severity`` live, at the bottom layer)."""

from envcheck.findings import SEVERITY_RANK, Finding, Severity, at_or_above

__all__ = ["SEVERITY_RANK", "Finding", "Severity", "at_or_above"]
