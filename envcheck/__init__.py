"""envcheck: stop PyTorch deployments from breaking on machines that differ from the dev box."""

__version__ = "0.1.0"
