"""The installation agrees with its own metadata (PEP 376, 427, 491; how pip and uv install): one dist-info
per project name in a folder, every file owned by one RECORD, no interrupted install left behind, a
package's own version file agreeing with its dist-info.

Each rule states one invariant that a correct installation keeps, whatever broke it: an interrupted
upgrade, ``pip install --ignore-installed``, two installers writing one folder, a tree copied by hand. The
facts come from ``envcheck/inside/install_facts.py`` (stashes, orphans, files two RECORDs claim) and the
distributions' own metadata; the questions are ``envcheck/manifest/installation.py``'s, which the native
rules and the cause linker ask too, so the mechanism (a file that fails its RECORD, an import that fails)
folds under the invariant it comes from.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Iterator
from urllib.parse import unquote, urlsplit

from envcheck.core.escape import one_line
from envcheck.core.findings import Finding, Rule
from envcheck.core.remedy import (
    Action,
    Install,
    Manual,
    Rebuild,
    RemoveFiles,
    Uninstall,
    UnsafeValue,
    checked_name,
    checked_path,
    make,
)
from envcheck.diff.rules.base import single_rule
from envcheck.manifest.installation import (
    duplicates,
    orphan_groups,
    shared_is_duplicate,
    shared_names,
    shared_subject,
    stash_groups,
    stashed_project,
)
from envcheck.manifest.model import Distribution, Manifest, OrphanFiles, Stash
from envcheck.manifest.provenance import source
from envcheck.manifest.query import canon, local_label, pkg, public, torch_index_label
from envcheck.manifest.remedy import install_action, remedy_text

FAMILY = "installation"
FM = ("FM-27",)
# What a remedy of this family does: delete what no RECORD should hold (stashes, orphans, a second
# dist-info), uninstall every copy, reinstall a build from where it came, or build it again from its source
# folder when no index serves it.
REINSTALL = ("remove", "install", "rebuild")


def _folder(path: str) -> str:
    return posixpath.dirname(path.replace("\\", "/").rstrip("/"))


def _dist(m: Manifest, name: str, version: str) -> Distribution | None:
    """The installed distribution ``name`` ``version`` (any spelling of the name)."""
    wanted = canon(name)
    return next((d for d in m.packages if canon(d.name) == wanted and d.version == version), None)


def _local_path(url: str) -> str:
    """The path of a ``file:`` URL (``file:///srv/pkg`` → ``/srv/pkg``; ``file:///C:/x`` → ``C:/x``)."""
    path = unquote(urlsplit(url).path)
    return path[1:] if len(path) > 2 and path[0] == "/" and path[2] == ":" else path


def _reinstall(m: Manifest, dist: Distribution) -> Action:
    """``dist`` installed again, every file of its RECORD rewritten (``--force-reinstall --no-deps``), from
    where it came: its index (PyTorch's for a labelled torch build, ``install_action``), the wheel or
    archive its ``direct_url.json`` names, or its source folder built again (a local build no index
    serves). An editable checkout or a VCS commit is a manual step that names it: pip would install
    another build from there."""
    origin = source(dist)
    pin = (dist.name, dist.version)
    what = f"reinstall {dist.name}=={dist.version}"
    if origin.kind == "release":
        return install_action([pin], source=m, force=True, no_deps=True)
    direct = dist.direct_url if isinstance(dist.direct_url, dict) else {}
    url = direct.get("url")
    url = url if isinstance(url, str) else ""
    if origin.kind == "editable":
        path = _local_path(url)
        return make(
            lambda: _manual(
                f"reinstall {dist.name} {dist.version} editable from its checkout {checked_path(path)} "
                "(pip install --force-reinstall --no-deps -e with that folder)"
            ),
            what,
        )
    if origin.kind == "vcs" or not url:
        return _manual(f"{what} from where it came ({origin.shown})")
    if urlsplit(url).path.lower().endswith(".whl"):
        return make(lambda: Install(pins=(pin,), wheel_url=url, force=True, no_deps=True), what)
    # A source folder or a source archive: built again from it, as pip built it then.
    built = _local_path(url) if url.startswith("file:") else url
    return make(lambda: Rebuild(name=dist.name, version=dist.version, source=built), what)


def _reinstall_pins(m: Manifest, pins: Iterable[tuple[str, str]]) -> list[Action]:
    """``_reinstall`` of each installed ``(name, version)``, each once; a pin no distribution of ``m``
    matches is installed from its index."""
    out: list[Action] = []
    for name, version in dict.fromkeys(pins):
        dist = _dist(m, name, version)
        action = (
            _reinstall(m, dist)
            if dist is not None
            else install_action([(name, version)], source=m, force=True, no_deps=True)
        )
        if action not in out:
            out.append(action)
    return out


def _manual(text: str) -> Manual:
    """A manual step whose sentence holds values of the manifest: on one line, with no backtick to open a
    command span in the remedy's text."""
    line = one_line(text).replace("\u2028", "\\u2028").replace("\u2029", "\\u2029")
    return Manual(text=line.replace("`", "'"))


def _uninstall(name: str) -> Action:
    """``pip uninstall -y name``: the copy of ``name`` pip meets first, with every file its RECORD lists."""
    return make(lambda: Uninstall(names=(name,)), f"uninstall {name}")


def _trust(actions: Iterable[Action]) -> str:
    """What to check before running a command that uses a URL the manifest recorded."""
    if any(isinstance(a, Install) and a.wheel_url is not None for a in actions):
        return (
            "(The wheel's URL is the one its direct_url.json recorded: check that you trust it before "
            "running.)"
        )
    if any(isinstance(a, Rebuild) and a.source is not None for a in actions):
        return "(Built again from the source its direct_url.json recorded, as it was installed.)"
    return ""


@single_rule(
    "ENV-DIST-DUPLICATE",
    family=FAMILY,
    severity="error",
    title="one project has two dist-info folders in one sys.path folder",
    why=(
        "Invariant: a sys.path folder holds one .dist-info per project name (PEP 376: one installed "
        "distribution per name). With two, which version importlib.metadata and pip report is an accident "
        "of directory order, and the files of both (C extensions of the old release among them) stay on "
        "disk and importable. `pip install --ignore-installed`, two installers writing one folder, or a "
        "copied tree leave it. Two copies of one release (a distributor's .egg-info beside its "
        ".dist-info) mix nothing: a warning."
    ),
    fm=FM,
    fixes=("remove", "uninstall", "install", "rebuild"),
    evidence=("python/cpython#100666", "python/importlib_metadata#291", "pypa/pip#3089"),
    static_facts=True,
)
def dist_duplicate(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for duplicate in duplicates(m):
        versions = [d.version for d in duplicate.dists]
        keep = duplicate.newest
        display = duplicate.dists[0].name
        # One release twice (a distributor's .egg-info beside its .dist-info, a reinstall with
        # --ignore-installed of the same version): the same files, so nothing mixes; tools still see the
        # project twice.
        same = len(set(versions)) == 1
        remedy, actions = _duplicate_remedy(m, duplicate.dists, keep, display)
        yield rule.finding(
            duplicate.subject,
            f"{display} is installed {len(versions)} times in {duplicate.location} "
            f"({', '.join(versions)}): "
            + (
                "one release, so the files agree, but pip and importlib.metadata see two distributions "
                "and an uninstall of one removes files the other lists."
                if same
                else f"importlib.metadata reports {versions[0]}, and the files of every copy are on disk, so "
                "what `import` loads mixes releases."
            ),
            remedy,
            target=", ".join(versions),
            actions=actions,
            severity="warning" if same else "error",
        )


def _duplicate_remedy(
    m: Manifest, copies: Iterable[Distribution], keep: Distribution, name: str
) -> tuple[str, tuple[Action, ...]]:
    """Every copy removed with the files its own RECORD lists, then ``keep`` installed again. A reinstall
    over the copies would leave the files only the others list (C extensions of the other release,
    importable, no RECORD owning them): so one ``pip uninstall`` per copy, each removing the copy pip meets
    first with its RECORD's files. A copy pip cannot uninstall by RECORD (an ``.egg-info``, a distributor's
    metadata) is deleted first, so that pip never meets it."""
    copies = list(copies)
    recordless = [d.metadata_dir for d in copies if not d.metadata_dir.rstrip("/\\").endswith(".dist-info")]
    actions: list[Action] = []
    if recordless:
        actions.append(make(lambda: RemoveFiles(paths=tuple(recordless)), f"delete {', '.join(recordless)}"))
    actions += [_uninstall(name)] * (len(copies) - len(recordless))
    actions.append(_reinstall(m, keep))
    note = " ".join(
        n
        for n in (
            f"(pip cannot remove the files of {' and '.join(recordless)} by a RECORD: envcheck doctor "
            "names any of them left as ENV-FILE-ORPHAN.)"
            if recordless
            else "",
            _trust(actions),
        )
        if n
    )
    return (
        f"Remove every copy with the files its own RECORD lists, then install the one you want "
        f"({keep.version} here, or the reference's): " + remedy_text(actions, m, note=note),
        tuple(actions),
    )


@single_rule(
    "ENV-INSTALL-INTERRUPTED",
    family=FAMILY,
    severity="error",
    title="an install was interrupted: pip's stash of the old tree is still there",
    why=(
        "Invariant: pip's uninstall stashes (the old tree renamed to `~orch`, `~orch-2.12.0.dist-info`) "
        "exist only while pip runs; pip removes them when the install commits and puts them back when it "
        "fails. One left behind means pip was killed mid-install (a CI timeout, the OOM killer, a closed "
        "terminal): the live tree beside it is another build, partly installed, not a tampered one."
    ),
    fm=FM,
    fixes=REINSTALL,
    evidence=("pypa/pip#11849", "pypa/pip#12077", "astral-sh/uv#2304"),
)
def install_interrupted(rule: Rule, m: Manifest) -> Iterator[Finding]:
    for subject, stashes in sorted(stash_groups(m).items()):
        meta = next((s for s in stashes if s.kind == "dist-info"), None)
        live = pkg(m, subject)
        before = f"{meta.name} {meta.version}" if meta is not None and meta.version else subject
        partial = [o for o in (m.install.orphans if m.install else []) if stashed_project(o) == subject]
        half = sum(o.count for o in partial)
        now = (
            f"{live.name} {live.version} is installed beside it"
            if live is not None
            else f"no dist-info of {subject} is installed, and {half:,} files of another build are, partly"
            if half
            else f"no dist-info of {subject} is installed"
        )
        stash_list = ", ".join(s.path for s in stashes)
        version = live.version if live is not None else (meta.version if meta and meta.version else None)
        name = live.name if live is not None else (meta.name if meta and meta.name else subject)
        remedy, actions = _interrupted_remedy(m, stashes, partial, live, name, version)
        yield rule.finding(
            subject,
            f"An install of {subject} was interrupted: pip's stash of {before} ({stash_list}) is still "
            f"there, and {now}. What imports is neither the old build nor the new one.",
            remedy,
            base=before,
            target=live.version if live is not None else ("partial" if half else "absent"),
            actions=actions,
        )


def _interrupted_remedy(
    m: Manifest,
    stashes: list[Stash],
    partial: list[OrphanFiles],
    live: Distribution | None,
    name: str,
    version: str | None,
) -> tuple[str, tuple[Action, ...]]:
    """The stashes and every folder of the partial tree deleted (a reinstall over them leaves the files no
    RECORD lists: the other build's, importable), then the project installed again from its index, and
    every other distribution whose RECORD listed files in those folders with it."""
    folders = sorted({s.path for s in stashes} | {o.folder for o in partial})
    actions: list[Action] = [make(lambda: RemoveFiles(paths=tuple(folders)), f"delete {', '.join(folders)}")]
    if live is not None:
        actions.append(_reinstall(m, live))
    elif version is not None:
        actions.append(install_action([(name, version)], source=m, force=True, no_deps=True))
    elif _is_name(name):
        actions.append(
            make(lambda: Install(requirements=(name,), force=True, no_deps=True), f"install {name}")
        )
    owners = [o.split("==", 1) for group in partial for o in group.owners if "==" in o]
    others = [(n, v) for n, v in owners if live is None or canon(n) != canon(live.name)]
    for action in _reinstall_pins(m, others):
        if action not in actions:
            actions.append(action)
    wanted = version or "the version you need"
    text = (
        f"Remove pip's stash{' and the partial tree' if partial else ''}, then install the build you want "
        f"(the reference's, or {wanted}): " + remedy_text(actions, m, note=_trust(actions))
    )
    return text, tuple(actions)


def _is_name(name: str) -> bool:
    """Whether ``name`` is a distribution name (a stash nothing names is called by its folder, ``~orch``)."""
    try:
        checked_name(name)
    except UnsafeValue:
        return False
    return True


@single_rule(
    "ENV-FILE-ORPHAN",
    family=FAMILY,
    severity="error",
    title="files under an installed package that no RECORD lists",
    why=(
        "Invariant: every file under a distribution's top-level package folders is listed by exactly one "
        "RECORD (PEP 376/627): that is how pip uninstalls and upgrades it. A file no RECORD lists is a "
        "leftover of another release, a half-done install or a hand copy; pip never removes it, and a "
        "module or library among them is imported or loaded beside the installed release. An error when "
        "code is among them, a warning for data files only."
    ),
    fm=FM,
    fixes=REINSTALL,
    evidence=("numpy/numpy#12736", "numpy/numpy#12976", "nautobot/nautobot-docker-compose#126"),
)
def file_orphan(rule: Rule, m: Manifest) -> Iterator[Finding]:
    stashed = set(stash_groups(m))
    for subject, group in orphan_groups(m).items():
        project = stashed_project(group[0])
        cause = f"ENV-INSTALL-INTERRUPTED:{project}" if project in stashed else None
        count = sum(o.count for o in group)
        code = sum(o.modules for o in group)
        examples = [e for o in group for e in o.examples]
        shown = ", ".join(examples[:5]) + (" …" if count > len(examples[:5]) else "")
        folders = [o.folder for o in group]
        where = (
            f"an interrupted install of {project} (another build, partly installed)"
            if project is not None
            else "another release, a half-done install or a hand copy"
            if group[0].likely == "unknown"
            else "no distribution: a package copied in without its metadata, its dist-info deleted, or an "
            "install killed before it wrote its dist-info"
            if group[0].likely == "no distribution"
            else group[0].likely
        )
        code_text = f"{code:,} of them code" if code else "none of them code"
        remedy, actions = _orphan_remedy(m, group, folders, project if cause else None, examples)
        yield rule.finding(
            subject,
            f"{count:,} files under {' and '.join(folders)} are listed by no RECORD ({code_text}): {shown}. "
            f"Most likely from: {where}.",
            remedy,
            base="owned by one RECORD",
            target=f"{count} unowned",
            severity="error" if code else "warning",
            caused_by=cause,
            actions=actions,
        )


def _orphan_remedy(
    m: Manifest, group: list[OrphanFiles], folders: list[str], stashed: str | None, examples: list[str]
) -> tuple[str, tuple[Action, ...]]:
    """The folders deleted whole and the distributions whose RECORDs list files there installed again:
    what remains is exactly their RECORDs' files. pip never removes a file no RECORD lists, so a reinstall
    alone leaves them."""
    shown = " and ".join(folders)
    remove = make(lambda: RemoveFiles(paths=tuple(folders)), f"delete {shown}")
    if stashed is not None:
        # A partial tree of an interrupted install: its remedy reinstalls the project.
        actions: tuple[Action, ...] = (remove,)
        note = f"ENV-INSTALL-INTERRUPTED's remedy for {stashed} then installs it again."
        return f"Remove the partial tree: {remedy_text(actions, m, note=note)}", actions
    owners = [o.split("==", 1) for g in group for o in g.owners if "==" in o]
    if owners:
        actions = (remove, *_reinstall_pins(m, [(n, v) for n, v in owners]))
        return (
            f"Remove {'the folder' if len(folders) == 1 else 'the folders'} and reinstall what owns them, so "
            "only their RECORDs' files remain: " + remedy_text(actions, m, note=_trust(actions)),
            actions,
        )
    static = m.torch.static
    if (
        group[0].likely == "no distribution"
        and static is not None
        and static.version
        and pkg(m, "torch") is None
        and any(posixpath.normpath(f) == posixpath.normpath(static.location) for f in folders)
    ):
        # torch's tree without its dist-info (an uninstall that died after deleting it): its version file
        # names the build, which its index serves.
        actions = (remove, install_action([("torch", static.version)], source=m, force=True, no_deps=True))
        return (
            f"Remove the tree and install the build its version file names ({static.version}), which writes "
            "its files with their RECORD: " + remedy_text(actions, m),
            actions,
        )
    if group[0].likely == "no distribution":
        step = _manual(
            f"reinstall the distribution that ships {shown} (its dist-info is gone: the reference names "
            "it) with pip install --force-reinstall, which writes its files with their RECORD; or delete "
            f"{shown} if nothing imports it"
        )
        return remedy_text([step], m), (step,)
    step = _manual(
        f"delete the files no RECORD lists under {shown}" + (f" (such as {examples[0]})" if examples else "")
    )
    return remedy_text([step], m), (step,)


@single_rule(
    "ENV-FILE-SHARED",
    family=FAMILY,
    severity="error",
    title="files two distributions' RECORDs both claim, with different content",
    why=(
        "Invariant: each file belongs to one distribution's RECORD. When two distributions list the same "
        "file with different hashes (opencv-python beside opencv-python-headless, a fork beside the "
        "original), the one installed last overwrote the other's files, the other's RECORD no longer "
        "matches, and uninstalling either deletes files the other needs. The same bytes in both (a "
        "pkgutil namespace package's __init__.py) is legal and not reported."
    ),
    fm=FM,
    fixes=("uninstall", "install", "rebuild"),
    evidence=("roboflow/supervision#351", "ltdrdata/ComfyUI-Impact-Pack#395"),
)
def file_shared(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    for shared in m.install.shared:
        if shared_is_duplicate(m, shared):
            continue  # one project twice: ENV-DIST-DUPLICATE says it
        names = shared_names(m, shared)
        shown = ", ".join(shared.examples) + (" …" if shared.count > len(shared.examples) else "")
        remedy, actions = _shared_remedy(m, shared.owners)
        yield rule.finding(
            shared_subject(m, shared),
            f"{' and '.join(names)} both install {shared.count:,} of the same files with different content "
            f"({shown}): the last one installed overwrote the other's, and removing either breaks the "
            "other.",
            remedy,
            target=", ".join(names),
            actions=actions,
        )


def _shared_remedy(m: Manifest, owners: list[str]) -> tuple[str, tuple[Action, ...]]:
    """Every claimant uninstalled (each with the files its RECORD lists: the shared ones go with the first),
    then the last one installed again from where it came: one owner per file."""
    by_dir = {d.metadata_dir: d for d in m.packages}
    claimants = [by_dir[o] for o in owners if o in by_dir]
    unknown = [o for o in owners if o not in by_dir]
    actions: list[Action] = [_uninstall(d.name) for d in claimants]
    actions += [_manual(f"delete {o} and the files its RECORD lists") for o in unknown]
    keep = claimants[-1] if claimants else None
    if keep is not None:
        actions.append(_reinstall(m, keep))
    other = " or ".join(d.name for d in claimants[:-1])
    instead = f" (or {other} instead, if that is the one you need)" if other else ""
    return (
        f"Keep one of them: uninstall every one, then install {keep.name if keep else 'the one you need'} "
        f"again{instead}: " + remedy_text(actions, m, note=_trust(actions)),
        tuple(actions),
    )


@single_rule(
    "ENV-VERSION-FILE",
    family=FAMILY,
    severity="error",
    title="torch's own version file disagrees with its dist-info",
    why=(
        "Invariant: what a package says of its own version agrees with its dist-info. torch/version.py "
        "(`__version__`, `cuda`, `hip`) is written by the same build as the wheel's METADATA; when they "
        "disagree, the metadata (what pip, the resolver and envcheck's lock read) describes another build "
        "than the one that imports: a tree copied or half-installed over another."
    ),
    fm=FM,
    fixes=REINSTALL,
    evidence=("huggingface/transformers#29022",),
    static_facts=True,
)
def version_file(rule: Rule, m: Manifest) -> Iterator[Finding]:
    static, dist = m.torch.static, pkg(m, "torch")
    if static is None or dist is None or static.version is None:
        return
    folder = _folder(static.location) if static.location.endswith(("/torch", "\\torch")) else static.location
    if dist.location and folder and posixpath.normpath(folder) != posixpath.normpath(dist.location):
        return  # another tree first on sys.path: ENV-TORCH-TREES says it
    # A wheel from the default index has no local label in its METADATA while its version.py has one
    # (``2.14.1`` beside ``2.14.1+cu130``): only a label both state can disagree.
    label, file_label = local_label(dist.version), local_label(static.version)
    variant = "cuda" if static.cuda else "rocm" if static.hip else "cpu"
    prefix = {"cuda": "cu", "rocm": "rocm", "cpu": "cpu"}[variant]
    wrong_label = (
        label is not None and torch_index_label(dist.version) is not None and not label.startswith(prefix)
    )
    other_label = label is not None and file_label is not None and label != file_label
    if public(static.version) == public(dist.version) and not wrong_label and not other_label:
        return
    said = (
        f"{static.version} ({variant}{' ' + (static.cuda or static.hip or '') if variant != 'cpu' else ''})"
    )
    # The tree is another build's: deleted whole, so that only the reinstalled build's files remain (a
    # reinstall over it leaves the other build's files its RECORD does not list).
    tree = static.location if static.location.endswith(("/torch", "\\torch")) else None
    actions = (
        *([make(lambda: RemoveFiles(paths=(static.location,)), f"delete {tree}")] if tree else []),
        _reinstall(m, dist),
    )
    yield rule.finding(
        "torch",
        f"torch/version.py says {said}, its dist-info says {dist.version}: the files that import are "
        "another build than the metadata pip and envcheck read.",
        f"{'Remove the tree and reinstall' if tree else 'Reinstall'} the exact build its dist-info names: "
        + remedy_text(actions, m, note=_trust(actions)),
        target=f"{static.version} (dist-info {dist.version})",
        actions=actions,
    )


@single_rule(
    "ENV-FILE-GONE",
    family=FAMILY,
    severity="error",
    title="files a distribution's RECORD lists are not on disk",
    why=(
        "Invariant: every file a RECORD lists is installed (PEP 376: RECORD is the list of what the "
        "install wrote). A module gone (a cleanup script, a half-done uninstall, a COPY that missed it) "
        "fails the import that needs it: an error, and the gate's imports that fail for it fold under it. "
        "Only a package's own tests or data gone (what slimmed images drop on purpose) is a warning. "
        "A live snapshot's native files are ENV-NATIVE-FILE-MISSING's; in a container image they count here "
        "too (a layer deleted them), and the native tree's findings about them fold under this one; "
        "byte-code is rewritten."
    ),
    fm=FM,
    fixes=("install", "rebuild"),
    evidence=("nautobot/nautobot-docker-compose#126",),
)
def file_gone(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    by_dir = {d.metadata_dir: d for d in m.packages}
    for gone in m.install.missing:
        dist = by_dir.get(gone.owner)
        if dist is None:
            continue
        shown = ", ".join(gone.examples) + (" …" if gone.count > len(gone.examples) else "")
        modules = (
            f"{gone.natives:,} of them native code that imports load"
            if gone.natives
            else f"{gone.modules:,} of them modules"
            if gone.modules
            else "no module outside its tests among them"
        )
        actions = (_reinstall(m, dist),)
        yield rule.finding(
            dist.name,
            f"{gone.count:,} {'file' if gone.count == 1 else 'files'} that {dist.name} {dist.version}'s "
            f"RECORD lists {'is' if gone.count == 1 else 'are'} not on disk "
            f"({modules}): {shown}. An import that needs one of them fails.",
            "Reinstall it from where it came, so that every file its RECORD lists is there again: "
            + remedy_text(actions, m, note=_trust(actions)),
            base="installed",
            target=f"{gone.count} missing",
            severity="error" if gone.modules or gone.natives else "warning",
            actions=actions,
        )


@single_rule(
    "ENV-SOURCE-GONE",
    family=FAMILY,
    severity="error",
    title="an editable install's source folder does not exist",
    why=(
        "Invariant: an editable install (PEP 660) imports its code from the folder its direct_url.json "
        "names; the metadata stays when that checkout is moved or deleted (an image that installed with "
        "`pip install -e` and then copied only site-packages), and the import fails while pip still lists "
        "the distribution."
    ),
    fm=FM,
    fixes=("manual",),
)
def source_gone(rule: Rule, m: Manifest) -> Iterator[Finding]:
    if m.install is None:
        return
    for gone in m.install.sources_missing:
        # No index serves a checkout's build (a release of that name, if any, is other code): the checkout
        # itself is the remedy, put back where the install points, or installed editable from where it is.
        step = _manual(
            f"put the checkout of {gone.name} {gone.version} back at {gone.path}, where its editable "
            f"install points; if the checkout now lives elsewhere, reinstall {gone.name} editable from "
            "there (pip install --no-deps -e with that folder), and if nothing imports it, uninstall it "
            f"(pip uninstall {gone.name})"
        )
        yield rule.finding(
            gone.name,
            f"{gone.name} {gone.version} is installed editable from {gone.path}, which does not exist here: "
            f"`import` of it fails, while pip and importlib.metadata still list {gone.name} {gone.version}.",
            remedy_text([step], m),
            base="editable source",
            target=f"{gone.path} missing",
            actions=(step,),
        )
