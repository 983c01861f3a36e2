"""What a report's remedies may do, once its findings are linked (``envcheck.diff.causes``).

- **One remedy per cause.** A consequence carries no remedy of its own: its root's remedy is the one to
  run, and the consequence's says so. Two remedies for one breakage compete (a reinstall of torch for an
  import that fails because a ``.pth`` file put another torch first).
- **The installer that owns it.** A distribution another tool installed (its ``INSTALLER`` file says
  ``conda``, or a system package manager's name) is reinstalled or removed by that tool: pip would
  uninstall files the other tool's records still list, or refuse. pip and uv install alike (both write a
  RECORD), so their distributions keep pip's commands.
- **Nothing outside the environment.** ``pip install`` and ``pip uninstall`` act on the copy of a
  distribution that ``sys.path`` finds first; when that copy lives outside the environment's prefix (a
  folder a ``.pth`` file, ``PYTHONPATH`` or the user site added), they would change that folder: a
  team-shared one, another application's. Such an action is not offered; the remedy says to take the
  folder off the path first (the finding that names it is the root cause).
"""

from __future__ import annotations

import dataclasses
import posixpath
from collections.abc import Sequence
from typing import TYPE_CHECKING

from envcheck.core.escape import one_line
from envcheck.core.remedy import Action, Install, Manual, Rebuild, Uninstall
from envcheck.manifest.query import pkg, views, windows
from envcheck.manifest.remedy import remedy_text

if TYPE_CHECKING:
    from envcheck.core.findings import Finding
    from envcheck.manifest.model import Manifest


def defer_to_roots(findings: Sequence[Finding]) -> list[Finding]:
    """Each consequence's remedy replaced by a pointer to its root's, its actions dropped."""
    out = []
    for f in findings:
        if f.caused_by is not None:
            root = f.caused_by.split("@", 1)[0]
            rule, _, subject = root.partition(":")
            remedy = f"Follows from {rule} ({subject}): the remedy there fixes this too."
            out.append(dataclasses.replace(f, remedy=remedy, actions=()))
        else:
            out.append(f)
    return out


def _inside(folder: str, prefix: str, on_windows: bool) -> bool:
    def norm(path: str) -> str:
        return posixpath.normpath(path.replace("\\", "/")).lower() if on_windows else posixpath.normpath(path)

    folder, prefix = norm(folder), norm(prefix)
    return folder == prefix or folder.startswith(prefix.rstrip("/") + "/")


def outside(m: Manifest, name: str) -> str | None:
    """The folder of ``name``'s installed copy when it lies outside ``m``'s environment, else ``None``."""
    dist = pkg(m, name)
    if dist is None or not dist.location or not m.python.prefix:
        return None
    on_windows = windows(m)
    prefixes = {m.python.prefix, m.python.exec_prefix}
    if any(_inside(dist.location, p, on_windows) for p in prefixes if p):
        return None
    return dist.location


def _touches(action: Action) -> list[str]:
    if isinstance(action, Install):
        from packaging.requirements import Requirement

        return [n for n, _ in action.pins] + [Requirement(r).name for r in action.requirements]
    if isinstance(action, Uninstall):
        return list(action.names)
    if isinstance(action, Rebuild):
        return [action.name]
    return []


# Installers whose distributions pip may reinstall and uninstall (each writes a RECORD pip reads).
PIP_COMPATIBLE = frozenset({"pip", "uv", "poetry", "pdm", "pipenv", "hatch"})


def foreign_installer(m: Manifest, name: str) -> str | None:
    """The installer of ``name``'s live copy when it is one whose files pip must not manage (conda, a
    system package manager), else ``None``."""
    dist = pkg(m, name)
    installer = (dist.installer or "").strip().lower() if dist is not None else ""
    return installer if installer and installer not in PIP_COMPATIBLE else None


def confine(findings: Sequence[Finding], m: Manifest) -> list[Finding]:
    """Findings whose remedy would install or uninstall a distribution whose live copy lies outside
    ``m``'s environment, or belongs to another installer: that action is replaced by a manual step naming
    the folder or the installer."""
    with views(m):  # one name index for every finding: 10,000 findings once built 10,000 (80 s)
        findings = [_by_installer(f, m) for f in findings]
        out = []
        for f in findings:
            foreign = {
                name: folder for a in f.actions for name in _touches(a) if (folder := outside(m, name))
            }
            if foreign:
                name, folder = next(iter(foreign.items()))
                step = (
                    f"{name} is installed in {folder}, outside this environment ({m.python.prefix}): a pip "
                    "command here would change that folder. Take the folder off sys.path first (the .pth "
                    "file, PYTHONPATH or user site that adds it), then run envcheck again."
                )
                out.append(dataclasses.replace(f, actions=(Manual(text=step),), remedy=step))
            else:
                out.append(f)
        return out


def _by_installer(f: Finding, m: Manifest) -> Finding:
    """``f`` with each pip action on a distribution another installer owns replaced by a manual step."""
    changed, actions = False, []
    for action in f.actions:
        owned = {name: installer for name in _touches(action) if (installer := foreign_installer(m, name))}
        if not owned:
            actions.append(action)
            continue
        changed = True
        name, installer = next(iter(owned.items()))
        dist = pkg(m, name)
        version = dist.version if dist is not None else ""
        tool = f"conda (conda install {name}={version})" if installer == "conda" else installer
        text = (
            f"{name} {version} was installed by {installer} (its INSTALLER file): reinstall or remove it "
            f"with {tool}, not pip, whose uninstall would delete files {installer} still lists"
        )
        # Prose, never a command: values from the manifest, inert (no backtick, one line).
        actions.append(Manual(text=one_line(text).replace("`", "'")))
    if not changed:
        return f
    # The text is rewritten from the actions: the old one named the pip command.
    return dataclasses.replace(f, actions=tuple(actions), remedy=remedy_text(actions, m))
