"""What runs at start-up before the application: ``sitecustomize`` / ``usercustomize`` modules (``site``
imports them when the interpreter starts) and the files LD_PRELOAD names.

Nothing is executed: a customize module is found with ``importlib.machinery.PathFinder.find_spec``, which
looks at ``sys.path`` without importing (a module already imported by ``site`` gives its ``__file__``), and
its source is read as text, at most ``MAX_BYTES``, for the names of the calls that change torch's numerics
or threads. An LD_PRELOAD entry that is a link is recorded with the file it resolves to, which is what the
loader maps (and ``/proc/self/maps`` lists).
"""

import os
import stat
import sys

MAX_BYTES = 256 * 1024
MAX_PRELOAD = 64
# What a start-up module may do to torch, as named in its source (plain text search).
MENTIONS = (
    "torch",
    "set_flush_denormal",
    "set_default_dtype",
    "set_num_threads",
    "allow_tf32",
    "use_deterministic_algorithms",
)
NAMES = ("sitecustomize", "usercustomize")


def startup_facts():
    # type: () -> dict
    return {"customize": customize_files(), "preload": preload_targets()}


def customize_files():
    # type: () -> list
    out = []
    # site imports usercustomize only where the user site is enabled (never in a plain venv).
    user_site = getattr(sys.modules.get("site"), "ENABLE_USER_SITE", False) is True
    for name in NAMES:
        if name == "usercustomize" and not user_site:
            continue
        path = _find(name)
        if path is None:
            continue
        text, truncated = _read(path)
        out.append(
            {
                "name": name,
                "path": path,
                "mentions": [m for m in MENTIONS if m in text] if text is not None else [],
                "read": text is not None,
                "truncated": truncated,
            }
        )
    return out


def _find(name):
    # type: (str) -> str | None
    module = sys.modules.get(name)
    path = getattr(module, "__file__", None) if module is not None else None
    if isinstance(path, str) and path:
        return os.path.abspath(path)
    try:
        import importlib.machinery

        spec = importlib.machinery.PathFinder.find_spec(name)  # sys.path only: nothing is imported
    except (ImportError, ValueError, OSError):
        return None
    origin = getattr(spec, "origin", None) if spec is not None else None
    if not isinstance(origin, str) or not origin.endswith(".py"):
        return None  # a compiled or namespace module: no source to read
    return os.path.abspath(origin)


def _read(path):
    # type: (str) -> tuple
    """The file's first ``MAX_BYTES`` as text and whether there was more; (None, False) for anything but
    a regular file (a FIFO would block the read, a device never end) or a file that cannot be read."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None, False
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None, False
        with os.fdopen(fd, "rb") as f:
            fd = -1
            data = f.read(MAX_BYTES + 1)
    except OSError:
        return None, False
    finally:
        if fd >= 0:
            os.close(fd)
    return data[:MAX_BYTES].decode("utf-8", "replace"), len(data) > MAX_BYTES


def preload_targets():
    # type: () -> dict
    """LD_PRELOAD entry -> the file it resolves to, for the entries that are links (or relative)."""
    value = os.environ.get("LD_PRELOAD") or ""
    out = {}
    for entry in [e for e in value.replace(":", " ").split() if e][:MAX_PRELOAD]:
        if "/" not in entry:
            continue  # a bare name: the loader searches its folders; nothing to resolve here
        try:
            real = os.path.realpath(entry)
        except (OSError, ValueError):
            continue
        if real != entry:
            out[entry] = real
    return out
