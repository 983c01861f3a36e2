"""How the installation agrees with its own metadata (PEP 376, 427, 491; how pip and uv install).

Three facts, read from files (nothing is imported):

- **stashes**: entries of a site folder whose name starts with ``~``. pip's uninstall renames the old tree
  beside the new one (``torch`` -> ``~orch``, ``torch-2.12.0.dist-info`` -> ``~orch-2.12.0.dist-info``,
  ``pip/_internal/utils/temp_dir.py``: ``AdjacentTempDirectory``) and removes it once the install commits,
  so one that remains means an install was interrupted. ``distributions.distributions`` never reads one as
  a live distribution.
- **orphans**: files under a distribution's top-level package folders that no RECORD lists. Byte-code
  (``__pycache__``, ``.pyc``) is left out: the interpreter writes it at run time.
- **shared**: files that the RECORDs of two distributions both list with different content (two builds that
  overwrote each other: ``opencv-python`` beside ``opencv-python-headless``). The same bytes in both (the
  ``__init__.py`` of a pkgutil-style namespace package) is legal and left out.

Everything is bounded: files walked, RECORD bytes read, examples kept.
"""

import csv
import os

# A torch tree holds ~15,000 files, a large ML venv ~150,000; past this the walk stops and says so.
MAX_WALKED = 400000
MAX_RECORD_BYTES = 64 << 20
MAX_EXAMPLES = 5
MAX_GROUPS = 200
# What the interpreter or a loader takes as code: an orphan of these can be imported or loaded.
CODE_SUFFIXES = (".py", ".so", ".pyd", ".dll", ".dylib")


def _read(path, limit):
    try:
        with open(path, "rb") as f:
            data = f.read(limit + 1)
    except (OSError, ValueError):
        return None
    if len(data) > limit:
        return None
    return data.decode("utf-8", "replace")


def record_rows(metadata_dir):
    """``{relative path: sha256 field}`` of the RECORD in ``metadata_dir`` (paths relative to its folder,
    ``/``-separated, normalised; entries outside the folder, such as scripts, left out), or None when it has
    no RECORD."""
    text = _read(os.path.join(metadata_dir, "RECORD"), MAX_RECORD_BYTES)
    if text is None:
        return None
    rows = {}
    for line in text.splitlines():
        if not line:
            continue
        if line.startswith('"'):  # a path holding a comma or a quote: csv's job
            parsed = next(csv.reader([line]), None)
            if not parsed:
                continue
            path, digest = parsed[0], parsed[1] if len(parsed) > 1 else ""
        else:
            path, _, rest = line.partition(",")
            digest = rest.partition(",")[0]
        if not path:
            continue
        if "\\" in path:
            path = path.replace("\\", "/")
        if path.startswith("/") or ":" in path[:3]:
            continue
        if "./" in path or "//" in path or path.endswith("/."):
            path = os.path.normpath(path).replace(os.sep, "/")
            if path.startswith("../") or path == "..":
                continue
        rows[path] = digest
    return rows


def _skipped(relative):
    """Byte-code the interpreter writes at run time, and the metadata folders themselves."""
    return "__pycache__" in relative.split("/") or relative.endswith((".pyc", ".pyo"))


def _top(relative):
    head = relative.partition("/")[0]
    if head.endswith((".dist-info", ".egg-info", ".data")) or head in ("..", "__pycache__", "."):
        return None
    return head


def _metadata_text(folder, name):
    for file in ("METADATA", "PKG-INFO"):
        text = _read(os.path.join(folder, name, file), 1 << 20)
        if text:
            return text
    return None


def _name_version(text):
    name = version = None
    for line in (text or "").split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        key = key.strip().lower()
        if key == "name" and name is None:
            name = value.strip()
        elif key == "version" and version is None:
            version = value.strip()
    return name, version


class _Walk(object):
    def __init__(self):
        self.walked = 0
        self.truncated = False

    def files(self, root, prefix):
        """Relative paths (``prefix/...``) of the regular files under ``root``, links not followed."""
        stack = [(root, prefix)]
        while stack:
            folder, rel = stack.pop()
            try:
                entries = list(os.scandir(folder))
            except OSError:
                continue
            for entry in entries:
                if self.walked >= MAX_WALKED:
                    self.truncated = True
                    return
                name = entry.name
                relative = rel + "/" + name
                try:
                    if entry.is_dir(follow_symlinks=False):
                        if name != "__pycache__":
                            stack.append((entry.path, relative))
                        continue
                except OSError:
                    continue
                self.walked += 1
                yield relative


def _package_folders(folder, names):
    """The entries of ``folder`` that are importable package folders (an identifier holding an
    ``__init__.py`` or an extension module at its top), not metadata, caches or stashes."""
    out = []
    for name in names:
        if not name.isidentifier() or name == "__pycache__":
            continue
        path = os.path.join(folder, name)
        if not _is_dir(path):
            continue
        try:
            entries = os.listdir(path)
        except OSError:
            continue
        if any(e == "__init__.py" or _compiled(e) for e in entries):
            out.append(name)
    return out


def _compiled(relative):
    return relative.endswith((".so", ".pyd", ".dll", ".dylib")) or ".so." in relative


def _is_dir(path):
    return os.path.isdir(path) and not os.path.islink(path)


def _stash_of(stash_name, live_names):
    """The live name a ``~`` stash stands for: pip replaces the name's first characters with ``~`` and
    filler (``-~.=%0123456789``), keeping the rest."""
    rest = stash_name.lstrip("~-.=%0123456789")
    for live in sorted(live_names):
        if rest and live.endswith(rest) and len(live) == len(stash_name):
            return live
    return None


def _folders(packages):
    """The site folders that hold distributions, in ``sys.path`` order, each once."""
    seen = []
    for dist in packages:
        location = dist.get("location") or ""
        if location and location not in seen:
            seen.append(location)
    return seen


def install_facts(packages):
    # type: (list) -> dict
    """The installation facts of the folders that hold ``packages`` (the probe's distributions)."""
    walk = _Walk()
    out = {"stashes": [], "orphans": [], "shared": [], "missing": [], "sources_missing": []}
    by_folder = {}
    for dist in packages:
        by_folder.setdefault(dist.get("location") or "", []).append(dist)
    records_elsewhere = []  # the RECORD paths of the folders already read: {relative path: claims}
    for folder in _folders(packages):
        _one_folder(folder, by_folder.get(folder, []), walk, out, records_elsewhere)
        if len(out["orphans"]) >= MAX_GROUPS or walk.truncated:
            break
    out["sources_missing"] = editable_sources(packages)
    out["walked"] = walk.walked
    out["truncated"] = walk.truncated
    return out


def _missing(candidates, seen, claims_of, out):
    """The files of ``candidates`` (RECORD entries under one top-level folder that the walk did not find) that
    count as missing, grouped by distribution (``claims_of(path)``: the metadata folders listing it).
    Byte-code (the interpreter rewrites it) and native files (``ENV-NATIVE-FILE-MISSING``'s, with their
    hashes) are left out."""
    by_owner = {}
    for path in candidates:
        if _skipped(path) or _compiled(path):
            continue
        if path.endswith(".py") and path + "c" in seen:
            continue  # compiled in place (`compileall -b`) and the source dropped: the module still imports
        for mdir in claims_of(path):
            by_owner.setdefault(mdir, []).append(path)
    for mdir, paths in sorted(by_owner.items()):
        paths.sort(key=lambda rel: (not rel.endswith(".py") or _test_file(rel), rel))
        found = next((m for m in out["missing"] if m["owner"] == mdir), None)
        if found is None:
            if len(out["missing"]) >= MAX_GROUPS:
                return
            found = {"owner": mdir, "count": 0, "examples": [], "modules": 0}
            out["missing"].append(found)
        found["count"] += len(paths)
        found["modules"] += sum(1 for rel in paths if rel.endswith(".py") and not _test_file(rel))
        found["examples"] = (found["examples"] + paths)[:MAX_EXAMPLES]


# What slimmed images delete on purpose: a package's own tests, which nothing imports at run time.
TEST_FOLDERS = frozenset({"tests", "test", "testing"})


def _test_file(relative):
    parts = relative.split("/")
    name = parts[-1]
    return bool(TEST_FOLDERS.intersection(parts[:-1])) or name.startswith("test_") or name == "conftest.py"


def editable_sources(packages, is_dir=os.path.isdir):
    """Editable installs (PEP 660: ``direct_url.json`` with ``dir_info.editable``) whose source folder is
    gone: their import fails, whatever the metadata says. ``is_dir`` tells whether a folder exists (a
    container image's reader asks inside the image)."""
    gone = []
    for dist in packages:
        direct = dist.get("direct_url")
        if not isinstance(direct, dict) or not (direct.get("dir_info") or {}).get("editable"):
            continue
        url = direct.get("url")
        if not isinstance(url, str) or not url.startswith("file://"):
            continue
        try:
            from urllib.parse import unquote, urlparse

            path = unquote(urlparse(url).path)
        except (ValueError, TypeError):
            continue
        if os.name == "nt" and path[:1] == "/" and path[2:3] == ":":
            path = path[1:]
        if path and not is_dir(path):
            gone.append({"name": dist.get("name"), "version": dist.get("version"), "path": path})
    return gone


def _one_folder(folder, dists, walk, out, records_elsewhere):
    # The RECORDs of a torch venv list ~30,000 paths, and its package folders hold as many files: what is
    # done per path is set and dict operations, not statements (they were a third of the probe's time).
    def where(relative):
        """``dist-info NAME`` of a distribution in an earlier folder whose RECORD lists ``relative``."""
        for earlier in records_elsewhere:
            mdir = earlier.first_claim(relative)
            if mdir:
                return "dist-info " + mdir
        return None

    try:
        names = sorted(os.listdir(folder))
    except OSError:
        return
    records = []  # [(metadata dir, {relative path: hash field})] of the distributions here with a RECORD
    listed = set()  # every path they list
    contested = set()  # the paths two of them list
    tops = set()
    top_owners = {}  # top-level folder -> ["name==version"] of the distributions whose RECORD lists it
    unknown_tops = set()  # claimed by a distribution without a RECORD: its files cannot be judged
    recordless = False  # a distribution here has no RECORD (an egg-info, a distributor's package)
    for dist in dists:
        mdir = dist.get("metadata_dir") or ""
        rows = record_rows(mdir) if mdir else None
        if rows is None:
            recordless = True
            text = _read(os.path.join(mdir, "top_level.txt"), 1 << 16) if mdir else None
            unknown_tops.update(line.strip() for line in (text or "").splitlines() if line.strip())
            continue
        records.append((mdir, rows))
        contested.update(listed.intersection(rows))
        listed.update(rows)
        label = "%s==%s" % (dist.get("name"), dist.get("version"))
        for top in map(_top, {path.partition("/")[0] for path in rows if "/" in path}):
            if top is not None:
                tops.add(top)
                top_owners.setdefault(top, []).append(label)

    # pip's stashes: never live, named as an interrupted install. Metadata stashes first: their RECORDs
    # say which project a stashed package folder (``~orchgen``: torchgen) belongs to.
    stash_tops = {}  # top-level folder -> project whose stash (dist-info or package) stands for it
    stash_dirs = [n for n in names if n.startswith("~") and _is_dir(os.path.join(folder, n))]
    for name in stash_dirs:
        if not name.endswith(".dist-info"):
            continue
        path = os.path.join(folder, name)
        project, version = _name_version(_metadata_text(folder, name))
        rows = record_rows(path) or {}
        for relative in rows:
            head, slash, _ = relative.partition("/")
            top = _top(relative) if slash else None
            if top is not None and project:
                stash_tops.setdefault(top, project)
        out["stashes"].append(
            {"path": path, "kind": "dist-info", "name": project, "version": version, "files": len(rows)}
        )
    live_names = [n for n in names if not n.startswith("~")]
    for name in stash_dirs:
        if name.endswith(".dist-info"):
            continue
        path = os.path.join(folder, name)
        count = sum(1 for _ in _Walk().files(path, name)) if not walk.truncated else 0
        live = _stash_of(name, sorted(set(live_names) | set(stash_tops) | tops))
        project = stash_tops.get(live, live) if live is not None else None
        out["stashes"].append(
            {"path": path, "kind": "package", "name": project, "version": None, "files": count}
        )
        if live is not None:
            stash_tops.setdefault(live, project)
    # Files two RECORDs list with different content.
    shared = {}
    contested_claims = _claims(records, contested)
    for path in contested:
        if _skipped(path):
            continue
        claims = contested_claims[path]
        dirs = sorted({mdir for mdir, _ in claims})
        if len(dirs) < 2 or len({digest for _, digest in claims}) < 2:
            continue  # one distribution twice, or the same bytes (a shared namespace __init__.py)
        shared.setdefault(tuple(dirs), []).append(path)
    for dirs, paths in sorted(shared.items()):
        paths.sort()
        out["shared"].append({"owners": list(dirs), "count": len(paths), "examples": paths[:MAX_EXAMPLES]})
    # Files no RECORD lists, under the top-level folders some RECORD (or a stash) names, and, in a folder
    # whose every distribution has a RECORD (one pip or uv manages), a package folder no RECORD names at all:
    # a package copied in without its metadata, its dist-info deleted, an install killed before its
    # dist-info was written.
    walked_tops = (tops | set(stash_tops)) - unknown_tops
    if not recordless:
        walked_tops |= {n for n in _package_folders(folder, names) if n not in tops and n not in stash_tops}
    checked = []  # the top-level folders whose RECORD entries are checked for missing files, in order
    seen_here = set()  # every file the walk found under them
    for top in sorted(walked_tops):
        root = os.path.join(folder, top)
        if os.path.islink(root):
            continue
        if not os.path.isdir(root):
            if top in tops and not os.path.lexists(root):
                checked.append(top)  # the whole folder is gone
            continue
        seen = set(walk.files(root, top))
        seen_here |= seen
        if not walk.truncated and top in tops:
            checked.append(top)
        orphans = [rel for rel in seen.difference(listed) if not _skipped(rel)]
        if orphans:
            # Compiled code first: an extension module or a library left behind is what loads by mistake.
            orphans.sort(key=lambda rel: (not _compiled(rel), not rel.endswith(".py"), rel))
            if top in stash_tops:
                likely = "stash " + stash_tops[top]  # the project whose install was interrupted
            elif top not in tops:
                likely = "no distribution"
            else:
                likely = next((where(rel) for rel in orphans if where(rel)), "unknown")
            out["orphans"].append(
                {
                    "folder": root,
                    "count": len(orphans),
                    "examples": orphans[:MAX_EXAMPLES],
                    "modules": sum(1 for rel in orphans if rel.endswith(CODE_SUFFIXES) or ".so." in rel),
                    "likely": likely,
                    "owners": sorted(set(top_owners.get(top, []))),
                }
            )
        if walk.truncated:
            break
    # RECORD entries the walk did not find (none, in a healthy folder), under the folders checked.
    gone = {}
    for path in listed.difference(seen_here):
        head, slash, _ = path.partition("/")
        if slash:
            gone.setdefault(head, []).append(path)
    gone_claims = _claims(records, (path for top in checked for path in gone.get(top, ())))
    for top in checked:
        _missing(gone.get(top, ()), seen_here, lambda path: [mdir for mdir, _ in gone_claims[path]], out)
    records_elsewhere.append(_Records(records))


def _claims(records, paths):
    """``{path: [(metadata dir, hash field)]}`` of ``paths``, from every RECORD of ``records`` that lists it,
    in their order: one pass over the rows, whatever the number of paths and of RECORDs."""
    wanted = set(paths)
    out = {}
    if wanted:
        for mdir, rows in records:
            for path in rows.keys() & wanted:  # a keys view and a set: the smaller of the two is iterated
                out.setdefault(path, []).append((mdir, rows[path]))
    return out


class _Records(object):
    """The RECORDs of a folder already read, for the orphans of a later folder (``where``)."""

    def __init__(self, records):
        self.records = records
        self.first = None

    def first_claim(self, relative):
        """The metadata folder of the first RECORD listing ``relative`` (built on first use: most walks
        have one folder, or no orphan)."""
        if self.first is None:
            self.first = {}
            for mdir, rows in reversed(self.records):
                self.first.update(dict.fromkeys(rows, mdir))
        return self.first.get(relative)
