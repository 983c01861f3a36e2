"""Remedies a user can paste: pip commands and requirement words quoted for the shell of the machine a
manifest describes (POSIX or PowerShell, ``envcheck.core.escape.shell_word``), reusing the index or wheel
URL the manifest recorded where there is one (and saying so: a recorded URL is the manifest's word).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from envcheck.core import escape
from envcheck.core.remedy import Target, UnsafeValue, checked_path
from envcheck.manifest.query import pkg, torch_index_label, windows

if TYPE_CHECKING:
    from envcheck.manifest.model import Manifest


def _quote(arg: str, on_windows: bool) -> str:
    # Values come from manifests: one literal word, expanded by neither shell (PowerShell, Windows' default
    # shell, expands `$(…)` inside double quotes: single quotes with each quote doubled).
    return escape.shell_word(arg, windows=on_windows)


def shell_word(value: str, m: Manifest | None) -> str:
    """``value`` (a name, a path, a requirement from a manifest) as one literal word of a command pasted on
    ``m``'s machine: POSIX single quotes, or PowerShell's on a Windows machine (``escape.shell_word``)."""
    return _quote(value, m is not None and windows(m))


def _recorded_index(source: Manifest, label: str) -> str | None:
    """An index URL the source machine's pip was configured with that serves ``label`` (its path ends in
    ``/<label>``, the PyTorch index's convention), unless redaction made it unusable."""
    found = _recorded_index_var(source, label)
    return found[1] if found is not None else None


def _recorded_index_var(source: Manifest, label: str) -> tuple[str, str] | None:
    """``(variable, URL)`` of ``_recorded_index``."""
    for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
        for url in (source.env.get(var) or "").split():
            if "<redacted>" in url or not url.startswith(("https://", "http://", "file://")):
                continue
            if url.rstrip("/").rsplit("/", 1)[-1] == label:
                return var, url
    return None


def _recorded_wheel(source: Manifest, name: str, version: str) -> str | None:
    """The wheel URL ``direct_url.json`` recorded for the distribution, when it is that version's wheel."""
    dist = pkg(source, name)
    if dist is None or dist.version != version or not isinstance(dist.direct_url, dict):
        return None
    url = dist.direct_url.get("url")
    if not isinstance(url, str) or "<redacted>" in url or not url.endswith(".whl"):
        return None
    from urllib.parse import unquote

    parts = unquote(url.rsplit("/", 1)[-1]).split("-")
    return url if len(parts) >= 5 and parts[1] == version else None


def pip_install(
    pins: Iterable[tuple[str, str]],
    *,
    source: Manifest | None = None,
    on: Manifest | None = None,
    options: str = "",
) -> str:
    """A pasteable ``pip install`` of exact ``(name, version)`` pins, full versions with their local labels.

    A labelled torch build (``+cpu``, ``+cu130``) is only on the PyTorch index for that label, so the
    command names it: the URL ``source``'s pip was configured with when it was recorded, the
    ``direct_url.json`` wheel, or else PyTorch's public index for that label (``pytorch_index``). ``on`` is
    the machine the command runs on (its shell's quoting); plain versions come from the default index and
    need no option. ``options`` go right after ``pip install`` (``--force-reinstall --no-deps``).
    """
    pins = list(pins)
    on_windows = on is not None and windows(on)
    labels = sorted({label for _, v in pins if (label := torch_index_label(v))})
    install = f"pip install {options} " if options else "pip install "
    if len(pins) == 1 and source is not None and labels:
        wheel = _recorded_wheel(source, *pins[0])
        if wheel is not None:
            return (
                f"`{install}{_quote(f'{pins[0][0]} @ {wheel}', on_windows)}` (the wheel's URL as the "
                "manifest's direct_url.json recorded it: check that you trust it before running)"
            )
    command = install + " ".join(_quote(f"{n}=={v}", on_windows) for n, v in pins)
    note = ""
    if labels:
        label = labels[0]  # one command installs from one index: the pins share torch's label
        recorded = _recorded_index_var(source, label) if source is not None else None
        if recorded is not None:
            var, url = recorded
            command += f" --index-url {_quote(url, on_windows)}"
            note = (
                f" (the index URL as the manifest recorded it in {var}: check that you trust it before "
                "running)"
            )
        else:
            command += f" --index-url {_quote(pytorch_index(label), on_windows)}"
    return f"`{command}`{note}"


# PyTorch's own wheel indexes, one per build label (cpu, cu126, cu130, rocm6.4, xpu): the public URLs its
# install selector gives. A remedy names the one that serves its build: a placeholder the user must look up
# is not a remedy.
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def pytorch_index(label: str) -> str:
    """The public URL of PyTorch's wheel index for builds labelled ``label`` (``cpu``, ``cu130``)."""
    return PYTORCH_INDEX + label


def pip_requirement(requirement: str, *, on: Manifest | None = None) -> str:
    """A pasteable ``pip install`` of one requirement (``pillow!=8.3.*,>=5.3.0``) from the default index."""
    return f"`pip install {_quote(requirement, on is not None and windows(on))}`"


def remedy_target(m: Manifest) -> Target | None:
    """The environment ``m`` describes, as a script of remedies names it (``None`` without an interpreter
    path: a predicted manifest)."""
    try:
        python, prefix = checked_path(m.python.executable), checked_path(m.python.prefix)
    except (UnsafeValue, AttributeError):
        return None
    return Target(python=python, prefix=prefix, shell="powershell" if windows(m) else "posix")
