"""Remedies a user can paste: pip commands and requirement words quoted for the shell of the machine a
manifest describes (POSIX or PowerShell, ``envcheck.core.escape.shell_word``), reusing the index or wheel
URL the manifest recorded where there is one (and saying so: a recorded URL is the manifest's word).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from envcheck.core import escape
from envcheck.core.remedy import Action, Install, Target, UnsafeValue, checked_path, inline, make
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


def recorded_index(source: Manifest, label: str) -> str | None:
    """An index URL the source machine's pip was configured with that serves ``label`` (its path ends in
    ``/<label>``, the PyTorch index's convention), unless redaction made it unusable."""
    found = _recorded_index_var(source, label)
    return found[1] if found is not None else None


def _recorded_index_var(source: Manifest, label: str) -> tuple[str, str] | None:
    """``(variable, URL)`` of ``recorded_index``."""
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


def install_action(
    pins: Iterable[tuple[str, str]],
    *,
    source: Manifest | None = None,
    force: bool = False,
    no_deps: bool = False,
) -> Action:
    """An ``Install`` of exact ``(name, version)`` pins, full versions with their local labels, from where
    that build comes from: the wheel ``direct_url.json`` recorded (one pin), the index ``source``'s pip was
    configured with for a labelled torch build, or else PyTorch's public index for that label
    (``pytorch_index``); plain versions from the default index. A value that fails its check
    (``envcheck.core.remedy``) gives a manual step that says so, never an argument."""
    pins = list(pins)
    labels = sorted({label for _, v in pins if (label := torch_index_label(v))})
    wheel = _recorded_wheel(source, *pins[0]) if len(pins) == 1 and source is not None and labels else None
    index = None
    if labels and wheel is None:
        recorded = _recorded_index_var(source, labels[0]) if source is not None else None
        index = recorded[1] if recorded is not None else pytorch_index(labels[0])
    what = "install " + ", ".join(f"{n}=={v}" for n, v in pins)
    return make(
        lambda: Install(pins=tuple(pins), index_url=index, wheel_url=wheel, force=force, no_deps=no_deps),
        what,
    )


def remedy_text(actions: Iterable[Action], m: Manifest | None, *, note: str = "") -> str:
    """``actions`` as a remedy's sentence for ``m``'s shell (``envcheck.core.remedy.inline``)."""
    return inline(actions, "powershell" if m is not None and windows(m) else "posix", note=note)


def _provenance_note(action: Action, source: Manifest | None) -> str:
    if not isinstance(action, Install) or source is None:
        return ""
    if action.wheel_url is not None:
        return (
            " (the wheel's URL as the manifest's direct_url.json recorded it: check that you trust it before "
            "running)"
        )
    if action.index_url is not None:
        for var in ("PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL"):
            if action.index_url in (source.env.get(var) or "").split():
                return (
                    f" (the index URL as the manifest recorded it in {var}: check that you trust it before "
                    "running)"
                )
    return ""


def pip_install(
    pins: Iterable[tuple[str, str]],
    *,
    source: Manifest | None = None,
    on: Manifest | None = None,
    options: str = "",
) -> str:
    """``install_action``'s command as a remedy's text for ``on``'s shell, with a note where a recorded
    URL is used (a recorded URL is the manifest's word). ``options``: ``--force-reinstall`` and/or
    ``--no-deps``."""
    action = install_action(
        pins, source=source, force="--force-reinstall" in options, no_deps="--no-deps" in options
    )
    return remedy_text([action], on) + _provenance_note(action, source)


# PyTorch's own wheel indexes, one per build label (cpu, cu126, cu130, rocm6.4, xpu): the public URLs its
# install selector gives. A remedy names the one that serves its build: a placeholder the user must look up
# is not a remedy.
PYTORCH_INDEX = "https://download.pytorch.org/whl/"


def pytorch_index(label: str) -> str:
    """The public URL of PyTorch's wheel index for builds labelled ``label`` (``cpu``, ``cu130``)."""
    return PYTORCH_INDEX + label


def requirement_action(requirement: str) -> Action:
    """An ``Install`` of one requirement (``pillow!=8.3.*,>=5.3.0``) from the default index."""
    return make(lambda: Install(requirements=(requirement,)), f"install {requirement}")


def pip_requirement(requirement: str, *, on: Manifest | None = None) -> str:
    """``requirement_action``'s command as a remedy's text for ``on``'s shell."""
    return remedy_text([requirement_action(requirement)], on)


def remedy_target(m: Manifest) -> Target | None:
    """The environment ``m`` describes, as a script of remedies names it (``None`` without an interpreter
    path: a predicted manifest)."""
    try:
        python, prefix = checked_path(m.python.executable), checked_path(m.python.prefix)
    except (UnsafeValue, AttributeError):
        return None
    return Target(python=python, prefix=prefix, shell="powershell" if windows(m) else "posix")
