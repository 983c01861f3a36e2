"""Where each copy of a distribution comes from.

Two facts of a manifest say it: a distribution's source, from the ``direct_url.json`` pip writes for a
direct install (PEP 610: an editable checkout, a local folder or archive, a VCS commit, an archive URL; an
install from an index or a find-links folder writes none), and how the ``sys.path`` entry it lives in got
there (``python.path_origins``: PYTHONPATH, the user site, a ``.pth`` file, the environment's own or the
base interpreter's site-packages). Pure: the rules that report them read these helpers, never a file.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from envcheck.core.redact import redact_text
from envcheck.core.remedy import Action, EditFile, Manual, Remedy, SetVariable, make
from envcheck.manifest.identity import aliases, canonical
from envcheck.manifest.model import Distribution, Manifest, PathEntry
from envcheck.manifest.query import view, windows
from envcheck.manifest.remedy import remedy_text

# Sources whose code is a published release: what an index serves (no direct_url.json) or an archive URL.
RELEASED = frozenset({"release", "url"})


@dataclass(frozen=True, slots=True)
class Source:
    """A distribution's source: ``kind`` (``release``, ``url``, ``editable``, ``local``, ``vcs``), how a
    person reads it (credentials redacted), and the VCS commit."""

    kind: str
    shown: str
    commit: str | None = None
    wheel: bool = False  # a wheel file from a local path: the release's own file, or one built locally

    @property
    def released(self) -> bool:
        return self.kind in RELEASED

    @property
    def built_here(self) -> bool:
        """Code that is certainly not a release's wheel: a checkout, a folder, a VCS commit, an sdist."""
        return not self.released and not self.wheel


def _text(value: object, limit: int = 300) -> str:
    """A string of a manifest, bounded and with credentials redacted (reports escape it for their
    medium); "" for anything else."""
    return redact_text(value[:limit]) if isinstance(value, str) else ""


def _file_path(url: str) -> str:
    """The local path of a ``file:`` URL (``file:///srv/pkg`` → ``/srv/pkg``; ``file:///C:/x`` → ``C:/x``)."""
    path = unquote(urlsplit(url).path) if url.startswith("file:") else url
    return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" else path


def source(dist: Distribution) -> Source:
    """Where ``dist`` was installed from, read from its ``direct_url.json`` (untrusted: any shape)."""
    direct = dist.direct_url
    if not isinstance(direct, dict):
        installer = (dist.installer or "").strip().lower()
        if installer and installer not in ("pip", "uv"):
            return Source("release", f"a release installed by {_text(dist.installer, 40)}")
        return Source("release", "a release from an index")
    raw = direct.get("url")
    url = _text(raw)
    vcs = direct.get("vcs_info")
    if isinstance(vcs, dict):
        tool = _text(vcs.get("vcs"), 20) or "vcs"
        commit = _text(vcs.get("commit_id"), 80) or None
        return Source("vcs", f"vcs: {tool}+{url} @ {commit or 'an unrecorded commit'}", commit)
    info = direct.get("dir_info")
    if isinstance(info, dict):
        if info.get("editable") is True:
            return Source("editable", f"editable: {_file_path(url)}")
        return Source("local", f"local: {url}")
    if url.startswith("file:"):
        wheel = urlsplit(url).path.lower().endswith(".whl")
        return Source("local", f"local: {url}", wheel=wheel)
    if not url:
        return Source("local", "a direct reference (its direct_url.json names no URL)")
    return Source("url", f"url: {url}")


# --- sys.path origins ---------------------------------------------------------------------------------------


def origins(m: Manifest) -> dict[str, PathEntry]:
    """The recorded origin of each ``sys.path`` entry of ``m`` by canonical folder (the first entry of a
    folder wins, as Python's import does); empty when the manifest recorded none."""
    return view(m).memo("path-origins", lambda: _origins(m))  # type: ignore[return-value]


def _origins(m: Manifest) -> dict[str, PathEntry]:
    table = aliases(m)
    out: dict[str, PathEntry] = {}
    for entry in m.python.path_origins or ():
        out.setdefault(canonical(entry.path, table), entry)
    return out


def origin(m: Manifest, folder: str) -> PathEntry | None:
    """How ``folder`` (a distribution's location, a torch tree's parent) got onto ``sys.path``, or None
    when not recorded."""
    return origins(m).get(canonical(folder, aliases(m)))


def same_folder(m: Manifest, a: str, b: str) -> bool:
    """Whether ``a`` and ``b`` name one folder of ``m`` (spelling, a trailing slash, recorded links)."""
    table = aliases(m)
    return canonical(a, table) == canonical(b, table)


_OTHER = "code run at start-up (an `import` line of a .pth file, sitecustomize) or by the program"


def describe(entry: PathEntry | None) -> str:
    """How a folder got onto sys.path, for people (empty when not recorded)."""
    if entry is None:
        return ""
    return {
        "pythonpath": "PYTHONPATH",
        "user-site": "the user site",
        "site": "the environment's own site-packages",
        "base-site": "the base interpreter's site-packages (a venv made with --system-site-packages)",
        "pth": f"the .pth file {_text(entry.pth)}",
        "stdlib": "the standard library's folders",
    }.get(entry.origin, _OTHER)


def where(m: Manifest, folder: str) -> str:
    """``folder`` and how it got onto sys.path: ``/srv/lib (PYTHONPATH)``."""
    how = describe(origin(m, folder))
    return f"{folder} ({how})" if how else folder


def own(entry: PathEntry | None) -> bool:
    """Whether the folder is the environment's own site-packages (what its pip installs into)."""
    return entry is not None and entry.origin == "site"


def take_off_remedy(m: Manifest, folder: str, name: str, metadata_dir: str | None = None) -> Remedy | None:
    """How to take the copy of ``name`` in ``folder`` off ``sys.path``, by its origin, never touching that
    folder (a team-shared one, another application's: a pip command there would change it): the line of
    the environment's own ``.pth`` file that adds it deleted, ``PYTHONPATH`` set without it, the user site
    kept off. None when the origin is not recorded or is the environment's own (never a removal from the
    base interpreter)."""
    entry = origin(m, folder)
    if entry is None:
        return None
    if entry.origin == "pythonpath":
        return Remedy(actions=(_pythonpath_action(m, folder),))
    user_files = f" ({metadata_dir} and the files its RECORD lists)" if metadata_dir else ""

    def keep_user_site(what: str) -> str:
        return (
            f"where the application runs (or run `python -s`): {what} stays off this environment; or delete "
            f"the user site's copy of {name}{user_files} if nothing else uses it"
        )

    if entry.origin == "pth" and entry.pth:
        pth, home = entry.pth, origin(m, _folder_of(entry.pth))
        if own(home) and not _ahead_of(m, folder, _folder_of(pth)):
            # A path line, which site.py appends after the .pth file's folder, names the folder itself (as
            # tools write it: absolute); a line written otherwise (relative) is left as it is, and envcheck
            # run again still names it.
            edit = make(
                lambda: EditFile(
                    path=pth,
                    change=f"delete its line that adds {folder} (or the file, if that is all it does)",
                    remove_line=folder,
                ),
                f"edit {_text(pth)}: delete its line that adds {folder}",
            )
            return Remedy(actions=(edit,), note=f"(deletes the line of {_text(pth)} that adds {folder})")
        if own(home):
            # Ahead of the site folder: an ``import`` line put it there, whose text the manifest does not
            # hold: an edit by hand.
            change = f"delete its import line that puts {folder} on sys.path"
            return Remedy(actions=(make(lambda: EditFile(path=pth, change=change), f"edit {_text(pth)}"),))
        if home is not None and home.origin == "user-site":
            # A .pth file of the user site: every environment of the user reads it.
            return Remedy(
                actions=(SetVariable(name="PYTHONNOUSERSITE", value="1"),),
                note=keep_user_site(f"the user site, whose {_text(pth)} adds {folder},"),
            )
        return Remedy(
            actions=(
                Manual(
                    text=f"{_text(pth)} adds {folder} for every environment that reads it: delete its line "
                    "that adds the folder if none of them needs it"
                ),
            )
        )
    if entry.origin == "user-site":
        return Remedy(
            actions=(SetVariable(name="PYTHONNOUSERSITE", value="1"),), note=keep_user_site("the user site")
        )
    if entry.origin == "other":
        return Remedy(
            actions=(
                Manual(
                    text=f"find the code that adds {folder} to sys.path at start-up (sitecustomize, an "
                    "import line of a .pth file in site-packages) and remove it"
                ),
            )
        )
    return None


def take_off(m: Manifest, folder: str, name: str, metadata_dir: str | None = None) -> str | None:
    """``take_off_remedy`` as a remedy's sentence for ``m``'s shell (None where it gives none)."""
    remedy = take_off_remedy(m, folder, name, metadata_dir)
    return remedy_text(remedy.actions, m, note=remedy.note) if remedy is not None else None


def _folder_of(path: str) -> str:
    cut = max(path.rfind("/"), path.rfind("\\"))
    return path[:cut] if cut > 0 else path


def _ahead_of(m: Manifest, folder: str, other: str) -> bool:
    """Whether ``folder`` comes before ``other`` on ``m``'s recorded sys.path."""
    order = [entry.path for entry in m.python.path_origins or ()]
    first = next((i for i, p in enumerate(order) if same_folder(m, p, folder)), None)
    second = next((i for i, p in enumerate(order) if same_folder(m, p, other)), None)
    return first is not None and second is not None and first < second


def _pythonpath_action(m: Manifest, folder: str) -> Action:
    """``PYTHONPATH`` set without ``folder`` (unset when nothing is left), from the value the target
    recorded; a manual step when it did not record one."""
    value = m.env.get("PYTHONPATH")
    if value is None or "<redacted>" in value:
        return Manual(text=f"remove {folder} from PYTHONPATH where the application runs")
    separator = ";" if windows(m) else ":"
    kept = [p for p in value.split(separator) if p and not same_folder(m, p, folder)]
    return make(
        lambda: SetVariable(name="PYTHONPATH", value=separator.join(kept) if kept else None),
        f"remove {folder} from PYTHONPATH",
    )
