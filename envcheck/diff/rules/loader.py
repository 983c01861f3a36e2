"""The loader-query library the rule families share: where each native file of an environment sits
(``placed``, ``aligned`` across two environments), why the loader took another file (a variant or version
change, a preloaded or loader-path folder: ``loader_cause``) and what to do about it (``loader_fix``),
which distributions ship a library (``shipped_by``) and how to put one back (``reinstall_actions``).

It registers no rule: ``native``, ``platform`` and ``windows`` import it, so that no rule family imports
another's helpers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from envcheck.core.remedy import Action, Install, Manual, make
from envcheck.manifest.identity import Aliases, aliases, canonical, folder_entries
from envcheck.manifest.model import Distribution, LoadedLibrary, Manifest
from envcheck.manifest.provenance import source
from envcheck.manifest.query import VENDORED_HASH, canon, library_key, pkg
from envcheck.manifest.remedy import install_action, remedy_text


@dataclass(frozen=True, slots=True)
class Placed:
    """A loaded library as compared: its key, where it came from relative to its root, its identity, and
    its folder as an absolute path with the manifest's aliases applied (``folder``)."""

    key: str
    owner: str
    where: str
    identity: str | None
    folder: str = ""


def _norm(path: str, windows: bool) -> str:
    """Forward slashes, no trailing slash; case-folded where the file system ignores case (Windows)."""
    out = path.replace("\\", "/").rstrip("/")
    return out.lower() if windows else out


def _roots(m: Manifest, windows: bool, table: Aliases) -> list[tuple[str, str]]:
    py = m.python
    roots = [("{prefix}", py.prefix), ("{base_prefix}", py.base_prefix)]
    roots += [("{exec_prefix}", py.exec_prefix), ("{base_exec_prefix}", py.base_exec_prefix)]
    # Longest first: a venv inside another prefix is matched by the more specific root.
    return sorted(((n, _norm(canonical(r, table), windows)) for n, r in roots if r), key=lambda x: -len(x[1]))


_PLACED: dict[int, tuple[Manifest, dict[str, Placed]]] = {}


def placed(m: Manifest) -> dict[str, Placed]:
    """Loaded libraries by key, located relative to their owner or to the interpreter's prefixes (cached
    for the last manifests: four rules ask)."""
    hit = _PLACED.get(id(m))
    if hit is not None and hit[0] is m:
        return hit[1]
    out = _placed(m)
    if len(_PLACED) >= 16:
        _PLACED.clear()
    _PLACED[id(m)] = (m, out)
    return out


def _placed(m: Manifest) -> dict[str, Placed]:
    if m.runtimes is None:
        return {}
    windows = m.platform is not None and m.platform.system == "Windows"
    table = aliases(m)
    locations = {
        canon(d.name): _norm(canonical(d.location, table), windows) for d in m.packages if not d.shadowed
    }
    roots = _roots(m, windows, table)
    # torch's files without its metadata (ENV-TORCH-NO-METADATA): no distribution owns them, and the
    # probe calls them "system"; they are still torch's own, in torch's own place.
    orphan = None
    static = m.torch.static
    if static is not None and static.location and "torch" not in locations:
        orphan = _norm(canonical(static.location, table), windows)
        locations["torch"] = orphan.rsplit("/", 1)[0]
    out: dict[str, Placed] = {}
    for lib in m.runtimes.loaded:
        if (
            orphan
            and not is_wheel(lib.owner)
            and _norm(canonical(lib.path, table), windows).startswith(orphan + "/")
        ):
            lib = replace(lib, owner="torch")  # noqa: PLW2901
        placed_lib = _place(lib, locations, roots, windows, table)
        out.setdefault(placed_lib.key, placed_lib)
    return out


def _place(
    lib: LoadedLibrary,
    locations: dict[str, str],
    roots: list[tuple[str, str]],
    windows: bool,
    table: Aliases,
) -> Placed:
    path = _norm(canonical(lib.path, table), windows)
    folder = path.rsplit("/", 1)[0]
    location = locations.get(canon(lib.owner))
    where = folder
    if location and folder.startswith(location + "/"):
        where = f"{{{lib.owner}}}" + VENDORED_HASH.sub("", folder[len(location) :])
    else:
        for name, root in roots:
            if folder == root or folder.startswith(root + "/"):
                where = name + folder[len(root) :]
                break
    return Placed(library_key(path), lib.owner, where, lib.identity, folder)


def _stem(key: str) -> str | None:
    """``libgomp.so`` of ``libgomp.so.1`` and of ``libgomp.so.1.0.0``; None for names without ``.so``."""
    head, sep, _ = key.partition(".so")
    return head + sep if sep else None


def aligned(base: Manifest, target: Manifest) -> tuple[dict[str, Placed], dict[str, Placed]]:
    """Both sides' loaded libraries by key, where a library one side names by its soname
    (``libgomp.so.1``, the wheel's file) and the other by its real file name (``libgomp.so.1.0.0``, what
    /proc/self/maps shows for the system's link) is keyed by the shorter name on both: it is one library
    in two places, not one lost and another added."""
    b, t = placed(base), placed(target)
    only_b = [k for k in b if k not in t]
    only_t = [k for k in t if k not in b]
    if not only_b or not only_t:
        return b, t
    stems_b: dict[str, list[str]] = {}
    for k in only_b:
        stem = _stem(k)
        if stem:
            stems_b.setdefault(stem, []).append(k)
    renames_b: dict[str, str] = {}
    renames_t: dict[str, str] = {}
    for k in only_t:
        stem = _stem(k)
        candidates = stems_b.get(stem or "", [])
        if len(candidates) != 1:
            continue
        other = candidates[0]
        short, long = sorted((k, other), key=len)
        if long.startswith(short + "."):
            renames_t[k] = short
            renames_b[other] = short
    if not renames_t:
        return b, t

    def renamed(side: dict[str, Placed], renames: dict[str, str]) -> dict[str, Placed]:
        return {renames.get(k, k): v for k, v in side.items()}

    return renamed(b, renames_b), renamed(t, renames_t)


# Distributions a torch build brings with it: its own wheel and the CUDA / ROCm stack it pins.
_TORCH_STACK = ("torch", "nvidia-", "triton", "pytorch-triton", "cuda-", "rocm")


def variant_cause(base: Manifest, target: Manifest, owners: list[str]) -> str | None:
    """``ENV-TORCH-VARIANT:torch`` when the torch build variant differs and every one of ``owners``
    belongs to the stack a torch build brings (torch itself, nvidia-*, triton): the libraries come and go
    with the build. None otherwise."""
    b = base.torch.static.variant if base.torch.static is not None else None
    t = target.torch.static.variant if target.torch.static is not None else None
    if b is None or t is None or b == t or not owners:
        return None
    if all(canon(o).startswith(_TORCH_STACK) for o in owners):
        return "ENV-TORCH-VARIANT:torch"
    return None


def version_cause(base: Manifest, target: Manifest, owner: str) -> str | None:
    """The key of the finding that reports ``owner``'s version change (``ENV-PKG-VERSION:six``,
    ``ENV-NUMPY-MAJOR:numpy``, ``ENV-TORCH-VERSION:torch``) when the distribution is installed on both
    sides at different versions: another release ships, loads and places other libraries (numpy 2 moved
    its extension modules from ``numpy/core`` to ``numpy/_core``). None otherwise; a key whose finding is
    absent is dropped when causes are linked."""
    b, t = pkg(base, owner), pkg(target, owner)
    if b is None or t is None or b.version == t.version:
        return None
    name = canon(owner)
    if name == "torch":
        return "ENV-TORCH-VERSION:torch"
    return "ENV-NUMPY-MAJOR:numpy" if name == "numpy" else f"ENV-PKG-VERSION:{t.name}"


def tree_names(m: Manifest) -> frozenset[str]:
    """File names and sonames of the native tree's nodes: the libraries some wheel's file needs."""
    if m.native is None or not m.native.nodes:
        return frozenset()
    names: set[str] = set()
    for n in m.native.nodes:
        names.add(library_key(n.path))
        if n.soname:
            names.add(library_key(n.soname))
    return frozenset(names)


def preloaded_files(m: Manifest) -> set[str]:
    """The files LD_PRELOAD makes the loader map on ``m``, canonical: an entry that is a link counts as the
    file it resolves to (recorded by the probe, ``python.startup.preload``), which is what the process's
    loaded-library list shows."""
    table = aliases(m)
    resolved = m.python.startup.preload if m.python.startup is not None else {}
    entries = (m.env.get("LD_PRELOAD") or "").replace(":", " ").split()
    return {canonical(resolved.get(e, e), table) for e in entries if e}


def loader_cause(m: Manifest, folder: str, path: str, other: Manifest | None = None) -> str | None:
    """The key of the variable finding that explains a library coming from ``folder`` (``path``) on
    ``m``: ``ENV-VAR-CHANGED:LD_PRELOAD`` when LD_PRELOAD names the file, ``…:LD_LIBRARY_PATH`` when
    LD_LIBRARY_PATH names the folder; with ``other`` (the base), only when its value did not name it
    too. None when no variable explains it."""
    table = aliases(m)
    other_table = aliases(other) if other is not None else ()
    preload = m.env.get("LD_PRELOAD")
    if preload:
        files = preloaded_files(m)
        was = preloaded_files(other) if other is not None else set()
        if path in files and path not in was:
            return "ENV-VAR-CHANGED:LD_PRELOAD"
    folders = folder_entries(m.env.get("LD_LIBRARY_PATH"), table)
    if folder in folders:
        if other is not None and folder in folder_entries(other.env.get("LD_LIBRARY_PATH"), other_table):
            return None
        return "ENV-VAR-CHANGED:LD_LIBRARY_PATH"
    return None


def is_wheel(owner: str) -> bool:
    return owner not in ("system", "unknown", "")


def name_list(names: list[str], limit: int = 6) -> str:
    # Shared libraries first: they name the runtime (libcudnn), extension modules only the package.
    names = sorted(names, key=lambda n: (".cpython-" in n or n.endswith(".pyd"), n))
    shown = ", ".join(names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")


def loader_fix(m: Manifest, path: str, how: str | None = None) -> str:
    """What to do on ``m`` so that the loader stops taking ``path`` (a canonical library path), in words
    that fit a sentence ("remove … from LD_LIBRARY_PATH for this application"). Only a variable the machine
    sets is named: an LD_PRELOAD entry that loads the file, or the folder in the loader's search variable;
    otherwise the loader found it in the loader cache or a system folder, and the fix is there. ``how``:
    the static tree's ``ld-so-cache`` / ``default-dirs`` / ``ld-library-path`` when it knows."""
    folder = path.rsplit("/", 1)[0] or "/"
    variable = loader_variable(m)
    if is_windows(m):
        return f"remove {folder} from {variable} for this application"
    table = aliases(m)
    if path in preloaded_files(m):
        return f"take {path} (or the link to it) out of LD_PRELOAD for this application"
    if folder in folder_entries(m.env.get(variable), table):
        return f"remove {folder} from {variable} for this application"
    if how == "default-dirs" or folder in _DEFAULT_DIRS:
        return (
            f"the loader takes it from the system folder {folder}: uninstall the OS "
            "package that put it there if nothing else needs it, or make the wheel's copy load first"
        )
    return (
        f"the loader finds {folder} through its cache: delete the line that names {folder} from "
        "/etc/ld.so.conf or from the file of /etc/ld.so.conf.d that holds it, then run ldconfig as root"
    )


# The folders glibc's loader searches without being told (besides its cache).
_DEFAULT_DIRS = frozenset({"/lib", "/lib64", "/usr/lib", "/usr/lib64"}) | {
    f"{prefix}/{arch}-linux-gnu"
    for prefix in ("/lib", "/usr/lib")
    for arch in ("x86_64", "aarch64", "powerpc64le", "s390x", "i386", "arm")
}


def loader_variable(m: Manifest) -> str:
    """The variable that steers this platform's loader, for remedies."""
    system = m.platform.system if m.platform is not None else None
    return {"Windows": "PATH / os.add_dll_directory", "Darwin": "DYLD_LIBRARY_PATH"}.get(
        system or "", "LD_LIBRARY_PATH"
    )


def shipped_by(m: Manifest, names: list[str]) -> list[Distribution]:
    """The importable distributions whose files (their RECORD) include a library of ``names`` (by file
    name, case-insensitive), when every name is one of them; else [] (some name is no distribution's)."""
    wanted = {n.lower() for n in names}
    found: dict[str, Distribution] = {}
    covered: set[str] = set()
    for dist in m.packages:
        if dist.shadowed:
            continue
        for nf in dist.native_files:
            name = nf.path.replace("\\", "/").rsplit("/", 1)[-1].lower()
            if name in wanted:
                covered.add(name)
                found.setdefault(canon(dist.name), dist)
    return [found[k] for k in sorted(found)] if covered == wanted else []


def reinstall_actions(m: Manifest, dists: Iterable[Distribution]) -> tuple[Action, ...]:
    """``dists`` installed again at their exact builds (``--force-reinstall --no-deps``: their files as the
    wheel shipped them, their dependencies untouched), each from where that build comes from: the index
    of its label or the one its pip was configured with (``install_action``), or the wheel file its
    ``direct_url.json`` recorded. A build no index serves (an editable checkout, a VCS commit, a local
    folder) is a manual step naming its source: an index's release of that version is another build."""
    return tuple(_reinstall_action(m, d) for d in dists)


def _reinstall_action(m: Manifest, dist: Distribution) -> Action:
    found = source(dist)
    if found.released:
        return install_action([(dist.name, dist.version)], source=m, force=True, no_deps=True)
    url = dist.direct_url.get("url") if isinstance(dist.direct_url, dict) else None
    if found.wheel and isinstance(url, str):
        pins = ((dist.name, dist.version),)
        return make(
            lambda: Install(pins=pins, wheel_url=url, force=True, no_deps=True),
            f"reinstall {dist.name} {dist.version} from {found.shown}",
        )
    return Manual(
        text=f"Install {dist.name} {dist.version} again from where it came from ({found.shown}): no index "
        "serves that build."
    )


def reinstall(m: Manifest, dists: Iterable[Distribution]) -> str:
    """``reinstall_actions`` of ``dists`` as a remedy's words for ``m``'s shell."""
    return reinstall_text(m, reinstall_actions(m, dists))


def reinstall_text(m: Manifest, actions: tuple[Action, ...]) -> str:
    """``reinstall_actions``' steps as a remedy's words for ``m``'s shell, with a note where a recorded
    wheel URL is used (the manifest's word for where the build is)."""
    text = remedy_text(actions, m)
    if any(isinstance(a, Install) and a.wheel_url is not None for a in actions):
        text += " (the wheel's URL as its direct_url.json recorded it: check that you trust it first)"
    return text


def version_tuple(text: str | None) -> tuple[int, ...]:
    parts: list[int] = []
    for piece in (text or "").split("."):
        if not piece.isdigit():
            break
        parts.append(int(piece))
    return tuple(parts)


def is_windows(m: Manifest) -> bool:
    """Whether ``m``'s loader is Windows' (its native tree says, else its platform)."""
    if m.native is not None and m.native.loader is not None:
        return m.native.loader == "windows"
    return m.platform is not None and m.platform.system == "Windows"
