"""Small, failure-tolerant readers of the machine shared by the fact modules."""

import subprocess


def read_text(path, limit=1 << 20):
    # type: (str, int) -> str | None
    """At most ``limit`` characters of the text file ``path``, or None when it cannot be read."""
    try:
        with open(path, "r", encoding="utf-8", errors="replace") as f:
            return f.read(limit)
    except (OSError, ValueError):
        return None


def run_text(argv, timeout=5):
    # type: (list, float) -> str | None
    """The stripped stdout of ``argv`` when it exits 0 within ``timeout`` seconds, else None."""
    try:
        out = subprocess.run(
            argv, check=False, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, timeout=timeout
        )
    except (OSError, subprocess.SubprocessError):
        return None
    if out.returncode != 0:
        return None
    return out.stdout.decode("utf-8", "replace").strip()


def attempt(fn, default=None):
    """``fn()``, or ``default`` when it raises: one missing attribute of an older torch is not the end."""
    try:
        return fn()
    except Exception:
        return default
