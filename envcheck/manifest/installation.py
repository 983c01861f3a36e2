"""What the installation invariants ask of a manifest: the duplicated projects, pip's stashes, the files no
RECORD owns and those two RECORDs claim, and which of these explains a file or a module that misbehaves.

The rules (``envcheck/diff/rules/install.py``) report the violations; the native rules and the cause linker
(``envcheck/diff/causes.py``) ask ``install_cause`` which violation, if any, a file's or a module's trouble
is a consequence of, so that the invariant is the root cause and the mechanism folds under it.
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass

from envcheck.manifest.model import Distribution, Manifest, OrphanFiles, SharedFiles, Stash
from envcheck.manifest.query import canon, parse_version, view

# The rule ids, used as finding keys (``RULE:subject``) by the linker.
DUPLICATE = "ENV-DIST-DUPLICATE"
INTERRUPTED = "ENV-INSTALL-INTERRUPTED"
ORPHANS = "ENV-FILE-ORPHAN"
SHARED = "ENV-FILE-SHARED"
VERSION_FILE = "ENV-VERSION-FILE"


@dataclass(frozen=True, kw_only=True, slots=True)
class Duplicate:
    """One project with two dist-info folders (or more) in one ``sys.path`` folder: ``dists`` in the order
    ``importlib.metadata`` met them (the first is the one it reports)."""

    name: str
    location: str
    dists: tuple[Distribution, ...]

    @property
    def subject(self) -> str:
        return self.name

    @property
    def newest(self) -> Distribution:
        return max(
            self.dists, key=lambda d: (parse_version(d.version) is not None, parse_version(d.version) or 0)
        )


def duplicates(m: Manifest) -> list[Duplicate]:
    """The projects installed twice in one folder, by canonical name (stashes are never distributions)."""

    def compute() -> list[Duplicate]:
        seen: dict[tuple[str, str], list[Distribution]] = {}
        for dist in m.packages:
            seen.setdefault((dist.location, canon(dist.name)), []).append(dist)
        return [
            Duplicate(name=canon(dists[0].name), location=location, dists=tuple(dists))
            for (location, _), dists in sorted(seen.items())
            if len(dists) > 1
        ]

    return view(m).memo("install-duplicates", compute)  # type: ignore[return-value]


def stash_groups(m: Manifest) -> dict[str, list[Stash]]:
    """pip's stashes, grouped by the project (or folder) they stand for: the name a stash dist-info's
    METADATA gives, or the live folder a package stash was renamed from."""
    out: dict[str, list[Stash]] = {}
    if m.install is None:
        return out
    for stash in m.install.stashes:
        out.setdefault(stash_subject(m, stash), []).append(stash)
    return out


def stash_subject(m: Manifest, stash: Stash) -> str:
    """The subject of a stash's finding: the project it belongs to (``torch``, for ``~orch``, ``~orchgen``
    and ``~orch-2.13.0.dist-info`` alike), or the stash's own name when nothing tells."""
    if stash.name:
        return canon(stash.name)
    return posixpath.basename(stash.path.replace("\\", "/"))


def stashed_project(orphans: OrphanFiles) -> str | None:
    """The project whose interrupted install left ``orphans`` (``likely``: ``stash <project>``), or None."""
    if orphans.likely.startswith("stash "):
        return canon(orphans.likely.removeprefix("stash "))
    return None


def orphan_groups(m: Manifest) -> dict[str, list[OrphanFiles]]:
    """The orphaned folders, one group per set of distributions that own them (``numpy`` for
    ``numpy/`` and ``numpy.libs/``: one reinstall cleans both), keyed by the finding's subject: the owners'
    names, or the folder when no RECORD owns it (a partial tree of an interrupted install)."""
    out: dict[str, list[OrphanFiles]] = {}
    if m.install is None:
        return out
    for orphans in m.install.orphans:
        names = sorted({o.split("==", 1)[0] for o in orphans.owners})
        out.setdefault(", ".join(names) if names else orphans.folder, []).append(orphans)
    return out


def top_of(folder: str) -> str:
    """The top-level name of a package folder path (``numpy`` of ``/venv/.../site-packages/numpy``)."""
    return posixpath.basename(folder.replace("\\", "/").rstrip("/"))


def shared_names(m: Manifest, shared: SharedFiles) -> list[str]:
    """``name version`` of each distribution whose RECORD claims the shared files (the metadata folder's
    name when it is not a recorded distribution)."""
    by_dir = {d.metadata_dir: d for d in m.packages}
    out = []
    for owner in shared.owners:
        dist = by_dir.get(owner)
        out.append(f"{dist.name} {dist.version}" if dist else posixpath.basename(owner.replace("\\", "/")))
    return out


def shared_subject(m: Manifest, shared: SharedFiles) -> str:
    return ", ".join(sorted({name.split(" ", 1)[0] for name in shared_names(m, shared)}))


def shared_is_duplicate(m: Manifest, shared: SharedFiles) -> bool:
    """Whether the claimants are one project twice (``ENV-DIST-DUPLICATE`` says it)."""
    by_dir = {d.metadata_dir: d for d in m.packages}
    names = {canon(by_dir[o].name) for o in shared.owners if o in by_dir}
    return len(names) == 1 and len(shared.owners) == len([o for o in shared.owners if o in by_dir])


def install_cause(m: Manifest, owner: str, relative: str | None) -> str | None:
    """The key of the installation finding that explains trouble with the file ``relative`` (a path under a
    site folder, ``numpy/linalg/x.so``) owned by ``owner`` (a distribution's name, or ``unowned``), or with
    the module ``owner`` when ``relative`` is None: the project's second dist-info, an interrupted install
    of it, files of it that no RECORD owns, or files two RECORDs claim. None when no violation explains it.
    """
    top = relative.replace("\\", "/").split("/", 1)[0] if relative else canon(owner).replace("-", "_")
    wanted = canon(owner)
    for duplicate in duplicates(m):
        if len({d.version for d in duplicate.dists}) == 1:
            continue  # one release twice: the same files, which explain no file's trouble
        if duplicate.name == wanted:
            return f"{DUPLICATE}:{duplicate.subject}"
        if relative and any(f.path == relative for d in duplicate.dists for f in d.native_files):
            return f"{DUPLICATE}:{duplicate.subject}"
    if m.install is None:
        return None
    groups = stash_groups(m)
    for subject in groups:
        if subject == wanted or subject.replace("-", "_") == canon(top).replace("-", "_"):
            return f"{INTERRUPTED}:{subject}"
    for orphans in m.install.orphans:
        project = stashed_project(orphans)
        if project in groups and top_of(orphans.folder) == top:
            return f"{INTERRUPTED}:{project}"
    for shared in m.install.shared:
        if shared_is_duplicate(m, shared):
            continue
        tops = {e.split("/", 1)[0] for e in shared.examples}
        names = {canon(n.split(" ", 1)[0]) for n in shared_names(m, shared)}
        if top in tops or wanted in names:
            return f"{SHARED}:{shared_subject(m, shared)}"
    for subject, group in orphan_groups(m).items():
        for orphans in group:
            if top_of(orphans.folder) == top and (
                relative is None or relative in orphans.examples or owner == "unowned"
            ):
                return f"{ORPHANS}:{subject}"
    return None
